"""Distinct interaction events with checksums and malformed records, published at a steady rate.

What ``hindsight chaos``, ``hindsight bench load``, the fault tests and the scale-out test publish:
every valid event's content is distinct and carries a SHA-256 checksum in ``external_ref`` (so a
stored memory can be traced back to its event and checked for corruption); malformed records of
four kinds carry a marker to find their dead letter.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from aiokafka import AIOKafkaProducer

from schemas import InteractionEvent, Topic, partition_key

if TYPE_CHECKING:
    pass


_WORDS = (  # noqa: SIM905 (a word list reads better as one string)
    "harbour lantern orchard violin glacier bakery cathedral meadow compass telescope quarry "
    "saffron tundra pottery mosaic vineyard lighthouse canyon monastery marathon chess origami "
    "volcano bamboo caravan espresso falcon granite hammock iceberg jasmine kayak labyrinth mango "
    "nebula oasis pelican quilt raccoon sapphire tram umbrella walnut yacht zebra accordion bonfire "
    "cinnamon dolphin elevator fjord gondola hazelnut igloo jukebox kettle lagoon marble noodle "
    "opera parsley quinoa rooftop sailboat tangerine ukulele velvet waterfall xylophone yoghurt "
    "zeppelin archive bicycle cottage dumpling embroidery festival greenhouse harmonica inkwell "
    "jigsaw kimono lavender mandolin notebook observatory pancake"
).split()
_PLACES = (  # noqa: SIM905
    "Lisbon Kyoto Oslo Nairobi Lima Hanoi Tbilisi Quito Porto Leipzig Valparaiso Tallinn Cusco "
    "Bergen Hobart Matera Ghent Luang Zanzibar Bruges"
).split()


def _letters(i: int) -> str:
    """``i`` spelled in letters (0 -> "a", 25 -> "z", 26 -> "ba"): distinct without a digit."""
    out = ""
    while True:
        i, r = divmod(i, 26)
        out = chr(ord("a") + r) + out
        if i == 0:
            return out


def event_content(rng: random.Random, i: int) -> str:
    """A distinct, PII-free sentence for event ``i``: chatter the write-trigger keeps (12+ words, a
    place) but that states nothing durable (no first person, date or number), so only the
    ``--updates`` users' statements reach the CPU judge; a run of durable notes would queue hundreds
    of judge calls behind ingest."""
    a, b, c, d = rng.sample(_WORDS, 4)
    place = rng.choice(_PLACES)
    return (
        f"In log entry x{_letters(i)} the {a} and the {b} near {place} came up, "
        f"then a {c} next to a {d} for a while."
    )


def checksum(content: str) -> str:
    """``sha256:<first 16 hex digits>`` of ``content`` (UTF-8): carried in ``external_ref``."""
    return "sha256:" + hashlib.sha256(content.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Workload:
    """What one run publishes: valid events, malformed records, and how to recognise each."""

    tenant: str
    events: list[InteractionEvent]
    malformed: list[tuple[bytes, bytes]]
    """(key, value) of each malformed record; the value holds the marker ``bad-<run>-<j>``."""
    order: list[tuple[str, int]]
    """Publish order: ``("event", i)`` or ``("bad", j)``."""

    def bad_marker(self, j: int) -> str:
        """The marker inside malformed record ``j``."""
        return f"bad-{self.tenant}-{j}"


def make_workload(run: str, n_events: int, n_malformed: int, n_users: int, seed: int) -> Workload:
    """``n_events`` valid events over ``n_users`` users (one session each, turns in order, 30 s
    apart in event time so the guard sees no burst) and ``n_malformed`` malformed records of four
    kinds (invalid JSON, schema-invalid, not UTF-8, wrong shape), shuffled in at random points."""
    rng = random.Random(seed)
    tenant = f"chaos-{run}"
    t0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
    turns: dict[int, int] = {}
    events: list[InteractionEvent] = []
    for i in range(n_events):
        u = rng.randrange(n_users)
        turn = turns.get(u, 0)
        turns[u] = turn + 1
        content = event_content(rng, i)
        events.append(
            InteractionEvent(
                event_id=f"ev-{run}-{i}",
                tenant_id=tenant,
                user_id=f"user-{u}",
                agent_id=f"agent-{u}",
                session_id=f"session-{u}",
                occurred_at=t0 + timedelta(seconds=30 * turn),
                source="user",
                content=content,
                turn_index=turn,
                external_ref=checksum(content),
            )
        )
    malformed: list[tuple[bytes, bytes]] = []
    for j in range(n_malformed):
        marker = f"bad-{tenant}-{j}"
        key = partition_key(tenant, f"user-{rng.randrange(n_users)}")
        kind = j % 4
        if kind == 0:
            value = f'{{"event_id": "{marker}", "content": "cut off'.encode()
        elif kind == 1:
            bad = json.loads(events[0].model_dump_json()) if events else {}
            bad.update(event_id=marker, occurred_at="2026-11-01T08:00:00")  # no time zone
            value = json.dumps(bad).encode()
        elif kind == 2:
            value = b"\xff\xfe" + marker.encode() + b"\x80"
        else:
            value = json.dumps({"marker": marker, "content": 42}).encode()
        malformed.append((key, value))
    order = [("event", i) for i in range(n_events)]
    for j in range(n_malformed):
        order.insert(rng.randrange(len(order) + 1), ("bad", j))
    return Workload(tenant, events, malformed, order)


@dataclass
class PublishProgress:
    """How far :func:`publish` is: records acknowledged so far out of ``total``."""

    total: int
    acked: int = 0

    def fraction(self) -> float:
        """Acknowledged share of the records, 0..1."""
        return self.acked / self.total if self.total else 1.0


async def publish(
    bootstrap: str,
    work: Workload,
    *,
    rate: float,
    idempotent: bool,
    progress: PublishProgress | None = None,
) -> None:
    """Publish the workload in order at about ``rate`` records per second (``acks=all``)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=idempotent)
    await producer.start()
    try:
        began = time.monotonic()
        pending: list[asyncio.Future[Any]] = []
        for n, (kind, idx) in enumerate(work.order):
            if kind == "event":
                ev = work.events[idx]
                key, value = partition_key(ev.tenant_id, ev.user_id), ev.model_dump_json().encode()
            else:
                key, value = work.malformed[idx]
            pending.append(await producer.send(str(Topic.INTERACTIONS), value, key=key))
            if len(pending) >= 10:
                await asyncio.gather(*pending)
                pending.clear()
                if progress is not None:
                    progress.acked = n + 1
                ahead = (n + 1) / rate - (time.monotonic() - began)
                if ahead > 0:
                    await asyncio.sleep(ahead)
        await asyncio.gather(*pending)
        if progress is not None:
            progress.acked = len(work.order)
    finally:
        await producer.stop()


async def publish_events(bootstrap: str, events: Sequence[InteractionEvent], *, idempotent: bool) -> None:
    """Publish ``events`` in order to ``memory.interactions.v1`` (``acks=all``), all at once."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=idempotent)
    await producer.start()
    try:
        for ev in events:
            key = partition_key(ev.tenant_id, ev.user_id)
            await producer.send_and_wait(str(Topic.INTERACTIONS), ev.model_dump_json().encode(), key=key)
    finally:
        await producer.stop()
