"""The embedded default: every consumer and the gateway in one process (DESIGN.md section 8).

This module is the composition root: the only place that imports several services. It starts (or
connects to) a Kafka-protocol broker, opens the shared resources once (the embedded Qdrant engine
and chdb allow one handle per directory and process), registers every stage in its own consumer
group, serves the gateway on loopback and runs the eviction schedule. The code paths are the same
as in production; only the stores are local.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import uvicorn

from hindsight.brokers.admin import ensure_topics, wait_for_zero_lag
from hindsight.runtime import Resources, embedded_broker, make_broker, open_resources, run_background
from hindsight.settings import AllSettings, KafkaSettings
from hindsight.topology import STAGE_TOPICS
from schemas import Topic
from services.accesslog import app as accesslog_app
from services.evict import app as evict_app
from services.evict.job import EvictionJob
from services.evict.settings import EvictSettings
from services.gateway.app import build_asgi
from services.gateway.settings import GatewaySettings
from services.guard import app as guard_app
from services.ingest import app as ingest_app
from services.ingest.settings import IngestSettings
from services.reflect import app as reflect_app

log = logging.getLogger("hindsight.embedded")

CONSUMER_TOPICS = STAGE_TOPICS
"""Consumer group suffix -> topics (:data:`hindsight.topology.STAGE_TOPICS`, the one list; kept under
this name for callers of the embedded runner). What "caught up" means is what the stack subscribed:
:meth:`Stack.groups`."""


@dataclass
class Stack:
    """A running embedded Hindsight."""

    resources: Resources
    bootstrap: str
    gateway_url: str
    eviction: EvictionJob

    def groups(self, exclude: tuple[str, ...] = ()) -> dict[str, list[str]]:
        """Full consumer group id -> topics, of every stage the stack subscribed
        (``HINDSIGHT_INGEST_STAGES`` may leave reconcile out) except the group suffixes in ``exclude``."""
        kafka = self.resources.settings.kafka
        return {
            kafka.group(name): list(topics)
            for name, topics in self.resources.stage_topics.items()
            if name not in exclude
        }

    async def wait_caught_up(self, timeout_s: float = 600.0, *, exclude: tuple[str, ...] = ()) -> None:
        """Return when every consumer group (but ``exclude``) has lag 0 on its topics, twice in a row.

        Raises:
            TimeoutError: some group still lags after ``timeout_s`` (the message names it).
        """
        for _ in range(2):
            await wait_for_zero_lag(self.bootstrap, self.groups(exclude), timeout_s=timeout_s, poll_s=0.25)


async def _serve(
    app: object, host: str, port: int, keep_alive_s: int = 5
) -> tuple[uvicorn.Server, asyncio.Task[None], str]:
    config = uvicorn.Config(
        app,  # type: ignore[arg-type]
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        timeout_keep_alive=keep_alive_s,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(), name="gateway")
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError("gateway exited during start-up")
        await asyncio.sleep(0.05)
    bound = server.servers[0].sockets[0].getsockname()
    return server, task, f"http://{bound[0]}:{bound[1]}"


def tune_for_embedded_broker(kafka: KafkaSettings) -> None:
    """Consumer timings for the embedded Tansu broker, each unless set in the environment.

    - ``session_timeout_ms`` at most 3,000: Tansu holds a group join for about half the session
      timeout and the five groups join one after another (start-up ~30 s -> a few seconds);
    - ``fetch_max_wait_ms`` 25 and ``batch_timeout_ms`` 10: Tansu answers a fetch with no new records
      only when ``fetch_max_wait_ms`` expires (a new record does not wake it, unlike Kafka), so each
      hop could wait 500 ms. Measured (``hindsight bench scale``, 200-byte events at 2/s):
      ingest-to-searchable p95 376 -> 175 ms, for 0.23 instead of 0.04 cores of idle polling.
    """
    if "session_timeout_ms" not in kafka.model_fields_set:
        kafka.session_timeout_ms = min(kafka.session_timeout_ms, 3000)
    for name, fast in (("fetch_max_wait_ms", 25), ("batch_timeout_ms", 10)):
        if name not in kafka.model_fields_set:
            setattr(kafka, name, fast)


@asynccontextmanager
async def embedded_stack(
    settings: AllSettings | None = None,
    gateway: GatewaySettings | None = None,
    evict: EvictSettings | None = None,
    ingest: IngestSettings | None = None,
) -> AsyncIterator[Stack]:
    """Start everything; yield a :class:`Stack`; stop everything (gateway, consumers, broker) on exit.

    ``ingest`` overrides ``HINDSIGHT_INGEST_*`` (e.g. ``stages=("trigger", "embed")``: reconcile off).

    Raises:
        ConfigurationError: a store or broker cannot be started as configured.
    """
    cfg = settings or AllSettings()
    gw = gateway or GatewaySettings()
    if not cfg.kafka.bootstrap:
        tune_for_embedded_broker(cfg.kafka)
    with embedded_broker(cfg) as bootstrap:
        broker = make_broker(cfg.kafka, bootstrap)
        async with open_resources(cfg, broker) as resources:
            resources.bootstrap = bootstrap
            await ensure_topics(bootstrap, {str(t): cfg.kafka.partitions for t in Topic})
            await guard_app.register(resources)
            await ingest_app.register(resources, ingest)
            await reflect_app.register(resources)
            await accesslog_app.register(resources)
            job = evict_app.register(resources, evict)
            await broker.start()
            try:
                server, task, url = await _serve(build_asgi(resources, gw), gw.host, gw.port, gw.keep_alive_s)
                log.info("gateway on %s, broker %s", url, bootstrap)
                try:
                    async with run_background(resources):
                        yield Stack(resources, bootstrap, url, job)
                finally:
                    server.should_exit = True
                    await task
            finally:
                await broker.stop()
