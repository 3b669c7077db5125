"""The embedded default: every consumer and the gateway in one process (DESIGN.md section 8).

This module is the composition root: the only place that imports several services. It starts (or
connects to) a Kafka-protocol broker, opens the shared resources once (the embedded Qdrant engine
and chdb allow one handle per directory and process), registers every stage in its own consumer
group, serves the gateway on loopback and runs the eviction schedule. The code paths are the same
as in production; only the stores are local.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import AsyncIterator, Generator
from contextlib import asynccontextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from hindsight.brokers.admin import describe_group, ensure_topics, wait_for_zero_lag
from hindsight.brokers.embedded import EmbeddedBroker
from hindsight.runtime import Resources, make_broker, open_resources, run_background
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
PARKED_POLL_S = 0.25
"""Seconds between two looks at the reflection queue while closes are parked."""

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
        """Return when every consumer group (but ``exclude``) has lag 0 on its topics, twice in a row,
        and (unless ``reflect`` is excluded) no session close is parked.

        A close that overtakes its own turns is committed and parked; the reflect stage's sweeper
        reflects it once its turns are stored (or its grace period, 30 s, is over), and what that
        writes (the episode, lessons) goes through the pipeline again. So "caught up" is zero lag with
        nothing parked, and zero lag again after it.

        Raises:
            TimeoutError: some group still lags, or a close is still parked, after ``timeout_s``.
        """
        deadline = asyncio.get_running_loop().time() + timeout_s
        watch_parked = "reflect" not in exclude and "reflect" in self.resources.stage_topics
        while True:
            for _ in range(2):
                await wait_for_zero_lag(
                    self.bootstrap, self.groups(exclude), timeout_s=timeout_s, poll_s=0.25
                )
            if not watch_parked:
                return
            parked = await (await self.resources.reflection_queue()).parked()
            if parked == 0:
                return
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"{parked} session closes still parked for reflection after {timeout_s} s")
            await asyncio.sleep(PARKED_POLL_S)


class _SecondTickServer(uvicorn.Server):
    """uvicorn's server embedded in a process that owns its signals, with a 1 s housekeeping tick
    instead of 0.1 s.

    uvicorn 0.54 (``Server.main_loop``) wakes ten times a second to refresh the ``Date`` header
    (every tenth tick) and to notice ``should_exit``; an idle gateway paid for those wake-ups. Here
    every tick is a tenth tick: the ``Date`` header still changes each second, and a stop is noticed
    within a second.

    ``Server.capture_signals`` replaces the process's SIGINT/SIGTERM handlers while it serves and
    raises the signals it caught again when it ends; a second SIGINT (a terminal's Ctrl-C reaches
    ``uv`` and ``hindsight`` both, and ``uv`` forwards it) made it force the exit and cancel the
    lifespan, which printed a ``CancelledError`` traceback. ``hindsight up`` handles the signals on
    its event loop and stops the server itself (``should_exit``), so the server captures none.
    """

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        """Leave the process's signal handlers alone (its owner stops this server)."""
        yield

    async def main_loop(self) -> None:
        """Tick once a second until ``on_tick`` says to exit."""
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 10) % 864_000
            await asyncio.sleep(1.0)
            should_exit = await self.on_tick(counter)


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
    server = _SecondTickServer(config)
    task = asyncio.create_task(server.serve(), name="gateway")
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError("gateway exited during start-up")
        await asyncio.sleep(0.05)
    bound = server.servers[0].sockets[0].getsockname()
    return server, task, f"http://{bound[0]}:{bound[1]}"


EMBEDDED_TIMINGS: dict[str, dict[str, int]] = {
    "kafka": {
        "fetch_max_wait_ms": 5000,
        "batch_timeout_ms": 5000,
        "consumer_timeout_ms": 10_000,
        "session_timeout_ms": 30_000,
    },
    "tansu": {
        "fetch_max_wait_ms": 25,
        "batch_timeout_ms": 10,
        "consumer_timeout_ms": 200,
        "session_timeout_ms": 3000,
    },
}
"""Consumer timings per embedded broker (``hindsight bench broker`` measures both; docs/delivery.md).

- **kafka**: Kafka holds an empty fetch until a record arrives (up to ``fetch_max_wait_ms``) and the
  consumers wait for the fetcher event-driven (``hindsight.consumer._EventDrivenBatchSubscriber``),
  so none of the timeouts delays a record: they only set how often an idle consumer asks again (a
  fetch every 5 s, a wake-up of the stage every 5 s; aiokafka's fetch loop wakes on each fetch
  answer, seek, pause, resume and rebalance, so its 10 s timeout is a backstop that an idle consumer
  never reaches while its 5 s fetch is in flight). Each of the eight consumers of ``up`` woke its
  stage every second and its fetch loop every 2 s before (1,000 and 2,000 ms): the event loop's
  idle wake-ups went from ~18 to ~9 a second and its CPU from ~1.0 to ~0.5 % of a core (per-thread
  ``/proc`` sampling beside ``hindsight bench idle``, docs/delivery.md).
  An idle stage's wake-up does nothing (an empty ``getmany``; a graceful stop cancels the wait); it
  is also when aiokafka raises a coordination error it holds, now within 5 s. The one cost of the
  long fetch: a partition resumed after a pause (a failing batch) or sought back
  waits for the fetch in flight, up to 5 s. The consumers are static members (``instance_id`` per
  data directory), so a restart, even after SIGKILL, takes the partitions back at once; the long
  session (30 s, a heartbeat every 10 s) then only bounds how late a consumer that hangs is
  noticed, and one process owns every group.
- **tansu**: Tansu answers a fetch with no new records only when ``fetch_max_wait_ms`` expires (a
  new record does not wake it), so each hop waits up to that long: 25 ms keeps ingest-to-searchable
  p95 near 175 ms for ~0.2 cores of idle polling. It holds a group join for about half the session
  timeout and the five groups join one after another, hence 3,000; no static membership.
"""


def tune_for_embedded_broker(kafka: KafkaSettings, data_dir: Path | None = None) -> None:
    """Apply :data:`EMBEDDED_TIMINGS` of ``kafka.embedded`` to the consumer settings, each unless set
    in the environment; for Kafka, also the idempotent producer and a static ``instance_id`` derived
    from ``data_dir`` (one process per directory), unless set in the environment."""
    timings = EMBEDDED_TIMINGS[kafka.embedded]
    for name in ("fetch_max_wait_ms", "batch_timeout_ms", "consumer_timeout_ms", "session_timeout_ms"):
        if name not in kafka.model_fields_set:
            setattr(kafka, name, timings[name])
    if kafka.embedded != "kafka":
        return
    if "idempotent" not in kafka.model_fields_set:
        kafka.idempotent = True  # Kafka has the idempotent producer (Tansu had not)
    if data_dir is not None and "instance_id" not in kafka.model_fields_set:
        digest = hashlib.sha256(str(Path(data_dir).resolve()).encode()).hexdigest()[:12]
        kafka.instance_id = f"up-{digest}"


@asynccontextmanager
async def embedded_stack(
    settings: AllSettings | None = None,
    gateway: GatewaySettings | None = None,
    evict: EvictSettings | None = None,
    ingest: IngestSettings | None = None,
    *,
    broker: EmbeddedBroker | None = None,
) -> AsyncIterator[Stack]:
    """Start everything; yield a :class:`Stack`; stop everything (gateway, consumers, broker) on exit.

    ``ingest`` overrides ``HINDSIGHT_INGEST_*`` (e.g. ``stages=("trigger", "embed")``: reconcile off).
    ``broker``: an :class:`~hindsight.brokers.embedded.EmbeddedBroker` the caller launched early
    (and closes); by default one is launched here and closed on exit.

    Raises:
        ConfigurationError: a store or broker cannot be started as configured.
        StoreUnavailableError: another process holds the data directory (its lock is taken first,
            before anything under it is opened), or a store or the broker did not start.
    """
    cfg = settings or AllSettings()
    gw = gateway or GatewaySettings()
    if not cfg.kafka.bootstrap:
        tune_for_embedded_broker(cfg.kafka, cfg.runtime.data_dir)
    # The data directory's lock comes first: a second process is refused before any store or broker
    # touches a file. A caller may have launched it already, to boot the broker during its imports.
    owned = broker is None
    local = broker if broker is not None else EmbeddedBroker(cfg)
    with local if owned else nullcontext(local):
        local.launch()
        bootstrap = await asyncio.to_thread(local.ready)
        kafka = make_broker(cfg.kafka, bootstrap)
        async with open_resources(cfg, kafka) as resources:
            resources.bootstrap = bootstrap
            await ensure_topics(bootstrap, {str(t): cfg.kafka.partitions for t in Topic})
            # A fresh Kafka creates its group coordinator (__consumer_offsets) on the first request
            # for one; wait for it here, or five consumers log "coordinator not available" at start.
            await describe_group(bootstrap, cfg.kafka.group("guard"), timeout_s=60.0)
            await guard_app.register(resources)
            await ingest_app.register(resources, ingest)
            await reflect_app.register(resources)
            await accesslog_app.register(resources)
            job = evict_app.register(resources, evict)
            await kafka.start()
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
                await kafka.stop()
