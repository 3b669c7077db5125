"""The embedded default started for a benchmark, and a probe that times ingest until searchable."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.common import latency_summary, loadavg
from bench.synth import UserInfo
from hindsight.settings import AllSettings

if TYPE_CHECKING:
    from services.cli.embedded import Stack
    from services.ingest.settings import IngestSettings


@contextlib.asynccontextmanager
async def embedded(
    data_dir: Path,
    api_keys: Mapping[str, str],
    *,
    settings: AllSettings | None = None,
    ingest: IngestSettings | None = None,
    **gateway: Any,
) -> AsyncIterator[Stack]:
    """The embedded default (:func:`services.cli.embedded.embedded_stack`) with its stores under
    ``data_dir`` and the gateway on a free loopback port accepting ``api_keys`` (key -> tenant);
    ``ingest`` overrides ``HINDSIGHT_INGEST_*`` (e.g. the stages: reconcile on or off); ``gateway``
    sets other :class:`GatewaySettings` fields. Stops everything at exit.

    Raises:
        ConfigurationError: a store or the broker cannot be started.
    """
    from services.cli.embedded import embedded_stack  # noqa: PLC0415
    from services.gateway.settings import GatewaySettings  # noqa: PLC0415

    cfg = settings or AllSettings()
    cfg.runtime.data_dir = data_dir
    gw = GatewaySettings(port=0, api_keys=dict(api_keys), **gateway)
    async with embedded_stack(cfg, gw, ingest=ingest) as stack:
        yield stack


class IngestProbe:
    """Publishes events into a running stack and timestamps their ``memory.stored.v1`` arrival."""

    def __init__(self, stack: Any, users: Sequence[UserInfo], texts: Sequence[tuple[str, str]]) -> None:
        from hindsight.ids import turn_memory_id  # noqa: PLC0415

        self.stack = stack
        self.users = list(users)
        self.texts = list(texts)
        self.run_id = uuid.uuid4().hex[:8]
        self.published: dict[str, float] = {}
        self.stored: dict[str, float] = {}
        self.deduplicated = 0
        self.sent_bytes: list[int] = []
        self._counter = 0
        self._per_user: dict[str, int] = {}
        self._arrived = asyncio.Event()
        self._turn_id = turn_memory_id
        self._producer: Any = None
        self._consumer: Any = None
        self._task: asyncio.Task[None] | None = None
        self._stop = False

    async def __aenter__(self) -> IngestProbe:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # noqa: PLC0415

        from schemas import Topic  # noqa: PLC0415

        self._producer = AIOKafkaProducer(bootstrap_servers=self.stack.bootstrap, acks="all", linger_ms=0)
        self._consumer = AIOKafkaConsumer(
            str(Topic.STORED),
            bootstrap_servers=self.stack.bootstrap,
            group_id=None,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=10,
        )
        await self._producer.start()
        await self._consumer.start()
        self._task = asyncio.create_task(self._consume())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stop = True
        if self._task is not None:
            await self._task
        await self._consumer.stop()
        await self._producer.stop()

    async def _consume(self) -> None:
        while not self._stop:
            batches = await self._consumer.getmany(timeout_ms=50)
            now = time.perf_counter()
            for records in batches.values():
                for rec in records:
                    body = json.loads(rec.value)
                    cid = body.get("candidate_id")
                    if cid in self.published and cid not in self.stored:
                        self.stored[cid] = now
                        self.deduplicated += bool(body.get("deduplicated"))
            if batches:
                self._arrived.set()

    def _event(self) -> Any:
        from schemas import InteractionEvent  # noqa: PLC0415

        i = self._counter
        self._counter += 1
        u = self.users[i % len(self.users)]
        n = self._per_user.get(u.user_id, 0)
        self._per_user[u.user_id] = n + 1
        # each user walks the text list from its own offset: no two events of one user share a text
        speaker, text = self.texts[(n + 37 * (i % len(self.users))) % len(self.texts)]
        self.sent_bytes.append(len(text.encode()))
        return InteractionEvent(
            event_id=f"bench-{self.run_id}-{i}",
            tenant_id=u.tenant_id,
            user_id=u.user_id,
            agent_id=u.agents[0],
            session_id=f"{u.user_id}:bench-{self.run_id}",
            occurred_at=datetime.now(UTC),
            source="user",
            content=text,
            speaker=speaker,
            turn_index=n,
        )

    async def send_next(self) -> tuple[str, Any]:
        """Publish the next event (not awaiting the ack); returns its memory id and ack future."""
        from schemas import Topic, partition_key  # noqa: PLC0415

        ev = self._event()
        mid = self._turn_id(ev.tenant_id, ev.event_id)
        self.published[mid] = time.perf_counter()
        future = await self._producer.send(
            str(Topic.INTERACTIONS),
            ev.model_dump_json().encode(),
            key=partition_key(ev.tenant_id, ev.user_id),
        )
        return mid, future

    async def publish_until(self, rate: float, stop: asyncio.Event) -> list[str]:
        """Publish at ``rate`` events/s (acknowledgements awaited in the background) until ``stop``
        is set; returns the memory ids published, in order."""
        ids: list[str] = []
        futures: list[Any] = []
        t0 = time.perf_counter()
        while not stop.is_set():
            delay = t0 + len(ids) / rate - time.perf_counter()
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)
                continue
            mid, future = await self.send_next()
            ids.append(mid)
            futures.append(future)
        await asyncio.gather(*futures)
        return ids

    def searchable(self, ids: Sequence[str]) -> dict[str, Any]:
        """Ingest-to-searchable latency of ``ids`` (publish -> ``memory.stored.v1``): p50/p95/p99/max
        in ms and how many arrived."""
        lat = [(self.stored[m] - self.published[m]) * 1000 for m in ids if m in self.stored]
        summary = latency_summary(lat)
        return {
            "events": len(ids),
            "stored": len(lat),
            "searchable_p50_ms": summary["p50_ms"],
            "searchable_p95_ms": summary["p95_ms"],
            "searchable_p99_ms": summary["p99_ms"],
            "searchable_max_ms": max(lat) if lat else None,
        }

    async def wait_stored(self, ids: Sequence[str], timeout_s: float) -> float:
        """Wait until every id arrived on ``memory.stored.v1``, or every stage has consumed everything
        (lag 0: what is still missing was dropped by the write-trigger as not worth remembering),
        or the timeout; returns the time."""
        deadline = time.perf_counter() + timeout_s
        while not all(i in self.stored for i in ids):
            left = deadline - time.perf_counter()
            if left <= 0 or not any((await self.lag()).values()):
                break
            self._arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), timeout=min(left, 1.0))
        return time.perf_counter()

    async def lag(self) -> dict[str, int]:
        """Consumer lag of guard, write-trigger and embed groups."""
        from hindsight.brokers.admin import consumer_lag  # noqa: PLC0415

        groups = {
            g: t
            for g, t in self.stack.groups().items()
            if g.endswith(("guard", "ingest-trigger", "ingest-embed"))
        }
        return {g: await consumer_lag(self.stack.bootstrap, g, t) for g, t in groups.items()}

    async def steady(self, rate: float, seconds: float, drain_timeout_s: float) -> dict[str, Any]:
        """Publish at ``rate`` for ``seconds``, then drain; the steady-rate result line."""
        n_events = int(rate * seconds)
        futures, measured = [], []
        load_start = loadavg()
        t0 = time.perf_counter()
        for j in range(n_events):
            delay = t0 + j / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            mid, future = await self.send_next()
            futures.append(future)
            measured.append(mid)
        t_end = time.perf_counter()
        await asyncio.gather(*futures)
        lag_end = await self.lag()
        in_window = sum(1 for m in measured if m in self.stored and self.stored[m] <= t_end)
        t_done = await self.wait_stored(measured, drain_timeout_s)
        lag_after = await self.lag()
        ok = [m for m in measured if m in self.stored]
        lat = [(self.stored[m] - self.published[m]) * 1000 for m in ok]
        summary = latency_summary(lat)
        sample = ok[:: max(1, len(ok) // 50)]
        present = len(await asyncio.to_thread(self.stack.resources.vector_store().retrieve, sample))
        return {
            "bench": "scale-ingest",
            "mode": "steady",
            "offered_events_per_s": rate,
            "published_events_per_s": n_events / (t_end - t0),
            "events": n_events,
            "event_bytes_mean": float(np.mean(self.sent_bytes)),
            "stored": len(ok),
            "stored_deduplicated": self.deduplicated,
            "not_stored_after_drain": n_events - len(ok),
            "not_stored_reason": "still queued" if any(lag_after.values()) else "write-trigger dropped",
            "stored_within_publish_window": in_window,
            "achieved_events_per_s": len(ok) / (max(self.stored[m] for m in ok) - t0) if ok else 0.0,
            "sustained": not any(lag_after.values()) and in_window >= 0.9 * len(ok),
            "searchable_p50_ms": summary["p50_ms"],
            "searchable_p95_ms": summary["p95_ms"],
            "searchable_p99_ms": summary["p99_ms"],
            "searchable_max_ms": max(lat) if lat else None,
            "lag_when_publishing_ended": lag_end,
            "lag_after_drain": lag_after,
            "drain_seconds": t_done - t_end,
            "store_check": f"{present}/{len(sample)} sampled stored ids retrievable",
            "optimize_called": False,
            "load_avg_start": load_start,
            "load_avg_end": loadavg(),
        }

    async def burst(self, count: int, drain_timeout_s: float) -> dict[str, Any]:
        """Publish ``count`` events at once; the drain throughput line.

        Throughput counts every ``memory.stored.v1`` arrival while the burst drains (a backlog left
        by an earlier measurement included) over the time from the first publish to the last arrival.
        """
        backlog = len(self.published) - len(self.stored)
        t0 = time.perf_counter()
        sent = [await self.send_next() for _ in range(count)]
        await asyncio.gather(*(f for _, f in sent))
        t_pub = time.perf_counter()
        ids = [m for m, _ in sent]
        t_done = await self.wait_stored(ids, drain_timeout_s)
        arrivals = [t for t in self.stored.values() if t >= t0]
        end = max(arrivals) if arrivals else t_done
        return {
            "bench": "scale-ingest",
            "mode": "burst",
            "events": count,
            "backlog_before": backlog,
            "publish_seconds": t_pub - t0,
            "stored": sum(i in self.stored for i in ids),
            "throughput_events_per_s": len(arrivals) / (end - t0) if arrivals else 0.0,
            "drain_seconds": t_done - t0,
            "load_avg_end": loadavg(),
        }
