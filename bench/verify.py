"""What the stores and topics hold for a :class:`bench.workload.Workload`: the exactly-once check.

Every valid event must be exactly one memory (its own point, or a near-duplicate merged into
another's ``merged_ids``) or one dead letter, every malformed record exactly one dead letter, stored
contents must match their checksums, and the write-trigger must have seen each user's events in order.
"""

from __future__ import annotations

import base64
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bench.workload import Workload, checksum
from hindsight.brokers import read_topic
from hindsight.ids import turn_memory_id
from hindsight.runtime import open_vector_store
from hindsight.settings import AllSettings
from hindsight.stores.vector import MemoryFilter, VectorRecord
from schemas import DeadLetter, MemoryCandidate, Topic

if TYPE_CHECKING:
    pass


def memories_of(settings: AllSettings, tenant: str) -> list[VectorRecord]:
    """Every point of ``tenant`` in the vector store of ``settings`` (whatever its status).

    Raises:
        StoreUnavailableError: the store is held by a running process or cannot be opened.
    """
    store = open_vector_store(settings)
    try:
        found: list[VectorRecord] = []
        offset: str | None = None
        while True:
            page, offset = store.scroll(MemoryFilter(tenant_id=tenant, statuses=None), 1000, offset)
            found.extend(page)
            if offset is None:
                return found
    finally:
        store.close()


@dataclass
class Verdict:
    """What the stores and topics hold for one workload."""

    memories: int = 0
    merged: int = 0
    dead_letters: int = 0
    dead_letter_copies: int = 0
    lost: int = 0
    duplicated: int = 0
    corrupted: int = 0
    out_of_order: int = 0
    examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Nothing lost, duplicated, corrupted or reordered."""
        return not (self.lost or self.duplicated or self.corrupted or self.out_of_order)

    def note(self, text: str) -> None:
        """Keep the first few problems as examples for the report."""
        if len(self.examples) < 10:
            self.examples.append(text)


def dead_letter_identity(letter: DeadLetter) -> tuple[str, str, int, int]:
    """What makes two dead letters the same: the stage and the source record's coordinates.

    The DLQ is at-least-once like every topic (a stage that crashes after dead-lettering and before
    its commit dead-letters the record again): tools count identities, not records.
    """
    return (letter.stage, letter.topic, letter.partition, letter.offset)


def verify(
    work: Workload,
    points: Sequence[VectorRecord],
    letters: Sequence[DeadLetter],
    candidates: Sequence[MemoryCandidate],
) -> Verdict:
    """Check that every valid event is exactly one turn memory (own point or merged id) or one dead
    letter, every malformed record exactly one dead letter, stored contents match their checksums,
    and the write-trigger emitted each user's candidates in turn order (first occurrences;
    ``candidates`` in topic order per partition)."""
    verdict = Verdict(memories=sum(1 for p in points if p.payload.get("kind", "turn") == "turn"))
    reps = _count_memories(work, points, verdict)
    bad_counts = _count_dead_letters(work, letters, verdict, reps)
    for i in range(len(work.events)):
        if reps[i] == 0:
            verdict.lost += 1
            verdict.note(f"event {i} ({work.events[i].event_id}) is neither a memory nor a dead letter")
        elif reps[i] > 1:
            verdict.duplicated += 1
            verdict.note(f"event {i} ({work.events[i].event_id}) is represented {reps[i]} times")
    for j in range(len(work.malformed)):
        if bad_counts[j] != 1:
            verdict.lost += bad_counts[j] == 0
            verdict.duplicated += bad_counts[j] > 1
            verdict.note(f"malformed record {j} has {bad_counts[j]} dead letters")
    verdict.out_of_order = _order_violations(work, candidates, verdict)
    return verdict


def _count_memories(work: Workload, points: Sequence[VectorRecord], verdict: Verdict) -> Counter[int]:
    """Representations of each event among the points (own id, or a merged id); checks checksums.

    A duplicate reconcile merged keeps its own point (status ``merged``) and is listed in the kept
    memory's ``merged_ids`` too: it counts once. Facts reconcile extracted are not turn memories."""
    index = {turn_memory_id(work.tenant, ev.event_id): i for i, ev in enumerate(work.events)}
    own = {point.id for point in points}
    reps: Counter[int] = Counter()
    for point in points:
        payload = point.payload
        i = index.get(point.id)
        if i is not None:
            reps[i] += 1
            refs = payload.get("provenance", {}).get("external_refs", [])
            if checksum(str(payload.get("content", ""))) not in refs:
                verdict.corrupted += 1
                verdict.note(f"event {i}: stored content does not match its checksum")
        for merged in payload.get("merged_ids", []):
            j = index.get(str(merged))
            if j is not None and str(merged) not in own:
                reps[j] += 1
                verdict.merged += 1
    return reps


def _count_dead_letters(
    work: Workload, letters: Sequence[DeadLetter], verdict: Verdict, reps: Counter[int]
) -> Counter[int]:
    """Distinct dead letters of this workload: adds valid events to ``reps``, returns the count per
    malformed record."""
    event_re = re.compile(rf"ev-{re.escape(work.tenant.removeprefix('chaos-'))}-(\d+)\b".encode())
    bad_re = re.compile(rf"{re.escape(work.bad_marker(0)[:-1])}(\d+)\b".encode())
    identities: dict[tuple[str, str, int, int], bytes] = {}
    for letter in letters:
        raw = base64.b64decode(letter.original_b64)
        if work.tenant.encode() in raw:
            verdict.dead_letter_copies += 1
            identities.setdefault(dead_letter_identity(letter), raw)
    verdict.dead_letters = len(identities)
    bad_counts: Counter[int] = Counter()
    for raw in identities.values():
        if found := bad_re.search(raw):
            bad_counts[int(found.group(1))] += 1
        elif found := event_re.search(raw):
            reps[int(found.group(1))] += 1
    return bad_counts


def _order_violations(work: Workload, candidates: Sequence[MemoryCandidate], verdict: Verdict) -> int:
    """Users whose candidates (first occurrence of each turn) are not in turn order."""
    by_id = {ev.event_id: ev for ev in work.events}
    seen: dict[str, set[int]] = defaultdict(set)
    last: dict[str, int] = {}
    broken: set[str] = set()
    for cand in candidates:
        ev = by_id.get(cand.provenance.event_ids[0]) if cand.provenance.event_ids else None
        if ev is None or ev.turn_index is None or ev.turn_index in seen[ev.user_id]:
            continue
        seen[ev.user_id].add(ev.turn_index)
        if ev.turn_index < last.get(ev.user_id, -1):
            if ev.user_id not in broken:
                verdict.note(f"{ev.user_id}: turn {ev.turn_index} processed after turn {last[ev.user_id]}")
            broken.add(ev.user_id)
        last[ev.user_id] = max(last.get(ev.user_id, -1), ev.turn_index)
    return len(broken)


async def read_dead_letters(bootstrap: str) -> list[DeadLetter]:
    """Every record of ``memory.dlq.v1`` (copies included), parsed."""
    return [
        DeadLetter.model_validate_json(rec.value)
        for rec in await read_topic(bootstrap, str(Topic.DLQ))
        if rec.value is not None
    ]


async def read_candidates(bootstrap: str) -> list[MemoryCandidate]:
    """Every record of ``memory.candidates.v1``, in offset order per partition."""
    return [
        MemoryCandidate.model_validate_json(rec.value)
        for rec in await read_topic(bootstrap, str(Topic.CANDIDATES))
        if rec.value is not None
    ]
