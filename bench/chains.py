"""Version chains under faults: the part of the chaos run that checks reconcile (issue 9).

The chaos workload gains a few *revision users*: each says something durable and later revises it
("My budget for the trip is 1,200 euros." then "I can stretch the trip budget to 1,800 euros."; in
English and Chinese; some deliver the newer statement first). Their turns go through the real
pipeline with reconcile on (in the embed process, which the run SIGKILLs and starves), and are
replayed once more after the run (an agent re-sending, a DLQ replay).

Then :func:`reference_chains` reconciles the same turns again, without faults, redelivery or
replay: a fresh embedded store holding each turn as the embed stage stored it (its payload with
every reconcile field reset, its vector), and a :class:`~services.ingest.reconcile.ReconcileStage`
in this process fed each turn's ``memory.stored.v1`` event once, in the partition order the chaos
run consumed them. :func:`chain_snapshot` reads the chain fields of every turn and fact of those
users from both stores; the run reports every memory whose fields differ. Both use the same judge
and extractor (deterministic: greedy decoding, ``hindsight.inference.judge``).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from bench.workload import checksum
from hindsight.consumer import Envelope
from hindsight.records import PENDING, RECONCILE_STATE, from_payload
from hindsight.stores.vector import VectorRecord
from schemas import InteractionEvent, MemoryStoredEvent, Topic, partition_key

if TYPE_CHECKING:
    from pydantic import BaseModel

    from hindsight.publisher import EventPublisher
    from hindsight.settings import AllSettings
    from hindsight.stores.vector import VectorStore

CHAIN_FIELDS = (
    "kind",
    "status",
    "version",
    "parent_id",
    "superseded_by",
    "supersedes",
    "merged_into",
    "related_ids",
    "conflicts_with",
    "derived_ids",
)
"""What "the same chain" compares, per memory."""
_RESET = {
    "status": "active",
    "version": 1,
    "parent_id": None,
    "superseded_by": None,
    "supersedes": [],
    "merged_into": None,
    "related_ids": [],
    "conflicts_with": [],
    "derived_ids": [],
    "merged_ids": [],
    "merged_event_ids": [],
    "merged_refs": [],
    "valid_to": None,
    "facts_extracted": False,
    "reconcile_plan": None,
    "reconcile_decisions": None,
    RECONCILE_STATE: PENDING,
}
"""A turn's payload as the embed stage stored it, before reconcile touched it."""

REVISIONS: tuple[tuple[str, str], ...] = (
    ("My budget for the trip is {a},200 euros.", "I can stretch the trip budget to {b},800 euros."),
    ("I live in Lyon with my partner.", "We just moved to Bordeaux, the new flat is great."),
    ("I'm an engineer at Airbus in Toulouse.", "I moved to Siemens last month, I'm in Munich now."),
    ("预算控制在 {a}000 以内。", "预算可以放宽到 {b}000。"),
    ("我住在杭州。", "我们搬到深圳了，新家离公司很近。"),
    ("I'm vegetarian, no meat or fish.", "I started eating fish again, so I'm pescatarian now."),
)
"""Durable statements and their revisions (the older first); ``{a}`` < ``{b}``."""


def revision_events(run: str, tenant: str, users: int, seed: int) -> list[InteractionEvent]:
    """Two statements per revision user, 30 days apart in event time, in delivery order: every
    third user delivers the newer one first (a late older statement)."""
    rng = random.Random(seed)
    t0 = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
    out: list[InteractionEvent] = []
    for u in range(users):
        older, newer = REVISIONS[u % len(REVISIONS)]
        a = rng.randint(2, 5)
        texts = [older.format(a=a, b=a + 3), newer.format(a=a, b=a + 3)]
        pair = []
        for turn, text in enumerate(texts):
            pair.append(
                InteractionEvent(
                    event_id=f"rev-{run}-{u}-{turn}",
                    tenant_id=tenant,
                    user_id=f"rev-user-{u}",
                    agent_id=f"rev-agent-{u}",
                    session_id=f"rev-session-{u}-{turn}",
                    occurred_at=t0 + timedelta(days=30 * turn),
                    source="user",
                    content=text,
                    turn_index=0,
                    external_ref=checksum(text),
                )
            )
        out += reversed(pair) if u % 3 == 2 else pair
    return out


def chain_snapshot(points: Sequence[VectorRecord], users: set[str]) -> dict[str, tuple[Any, ...]]:
    """``{memory id: chain fields}`` for every turn and fact of ``users`` (lists as sorted tuples)."""
    out: dict[str, tuple[Any, ...]] = {}
    for point in points:
        payload = point.payload
        if payload.get("user_id") not in users or payload.get("kind") not in ("turn", "fact"):
            continue
        row = []
        for name in CHAIN_FIELDS:
            value = payload.get(name)
            row.append(tuple(sorted(value)) if isinstance(value, list) else value)
        out[point.id] = tuple(row)
    return out


def differences(actual: Mapping[str, tuple[Any, ...]], expected: Mapping[str, tuple[Any, ...]]) -> list[str]:
    """One line per memory whose chain fields differ (or that exists on one side only)."""
    out = []
    for memory_id in sorted(set(actual) | set(expected)):
        got, want = actual.get(memory_id), expected.get(memory_id)
        if got != want:
            out.append(f"{memory_id}: chaos {got} vs reference {want}")
    return out


class _Sink:
    """Collects what the reference stage announces (nothing consumes it)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes | None, BaseModel]] = []

    def send(self, topic: str, key: bytes | None, event: BaseModel) -> None:
        self.sent.append((topic, key, event))

    def discard(self) -> None:
        self.sent.clear()

    async def flush(self) -> int:
        return len(self.sent)


async def reference_chains(
    turns: Sequence[VectorRecord], order: Sequence[str], settings: AllSettings, workdir: Path
) -> dict[str, tuple[Any, ...]]:
    """Reconcile ``turns`` (records with vectors, from the chaos store) once each, in ``order``
    (memory ids), on a fresh store under ``workdir``; returns :func:`chain_snapshot` of the result.

    Raises:
        StoreUnavailableError / ModelUnavailableError: the store or a model failed.
    """
    from hindsight.inference.embedder import build_embedder  # noqa: PLC0415
    from hindsight.inference.judge import build_chat_model, build_fact_extractor, build_judge  # noqa: PLC0415
    from hindsight.lexical import LexicalEncoder  # noqa: PLC0415
    from hindsight.runtime import open_vector_store  # noqa: PLC0415
    from services.ingest.reconcile import ReconcileStage  # noqa: PLC0415
    from services.ingest.revisions import Thresholds  # noqa: PLC0415
    from services.ingest.settings import IngestSettings  # noqa: PLC0415

    cfg = settings.model_copy(deep=True)
    cfg.runtime.data_dir = workdir
    cfg.qdrant.url = ""
    ingest = IngestSettings()
    store: VectorStore = open_vector_store(cfg)
    chat = build_chat_model(cfg.judge, cfg.llm)
    try:
        lexical = LexicalEncoder()
        store.upsert(
            [
                VectorRecord(
                    t.id,
                    t.vector,
                    {**t.payload, **_RESET},
                    sparse=lexical.document(_text(t.payload)),
                )
                for t in turns
            ]
        )
        stage = ReconcileStage(
            store,
            build_embedder(cfg.embedder),
            build_judge(cfg.judge, cfg.llm, chat=chat),
            build_fact_extractor(cfg.judge, cfg.llm, chat=chat) if ingest.reconcile_facts != "off" else None,
            Thresholds(
                turn=ingest.reconcile_turn_cosine,
                fact=ingest.reconcile_fact_cosine,
                lesson=ingest.reconcile_lesson_cosine,
                max_pairs=ingest.reconcile_max_pairs,
                min_update_confidence=ingest.reconcile_min_update_confidence,
            ),
            lexical=lexical,
            facts=ingest.reconcile_facts,
        )
        by_id = {t.id: t for t in turns}
        sink = _Sink()
        for offset, memory_id in enumerate(order):
            payload = {**by_id[memory_id].payload, **_RESET}
            event = MemoryStoredEvent(memory=from_payload(payload), candidate_id=memory_id)
            raw = event.model_dump_json().encode()
            key = partition_key(str(payload["tenant_id"]), str(payload["user_id"]))
            envelope = Envelope(event, str(Topic.STORED), 0, offset, key, raw)
            await stage.handle([envelope], cast("EventPublisher", sink))
        users = {str(t.payload["user_id"]) for t in turns}
        points, offset_id = [], None
        while True:
            page, offset_id = store.scroll(None, 1000, offset_id)
            points += page
            if offset_id is None:
                break
        return chain_snapshot(points, users)
    finally:
        chat.close()
        store.close()


def _text(payload: Mapping[str, Any]) -> str:
    speaker = payload.get("speaker")
    content = str(payload.get("content", ""))
    return f"{speaker}: {content}" if speaker else content
