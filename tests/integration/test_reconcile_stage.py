"""The reconcile stage on the real embedded Qdrant engine and the real e5 embedder: what happens on a
redelivery, after a restart between plan and apply, and in which order memories pair.

None of these needs a judge answer (identical texts are ``same`` for free; a written plan is
applied, not decided again): the stage is given the rule judge ``CorrectionJudge`` and it is never
asked. The model judge is exercised end to end in ``tests/e2e/test_reconcile.py``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from pydantic import BaseModel

from hindsight.consistency import CorrectionJudge
from hindsight.consumer import Envelope
from hindsight.ids import stable_id
from hindsight.inference.embedder import LocalE5Embedder
from hindsight.inference.judge import Fact, Statement
from hindsight.publisher import EventPublisher
from hindsight.records import (
    DONE,
    PENDING,
    PLANNED,
    RECONCILE_PLAN,
    RECONCILE_STATE,
    from_payload,
    to_payload,
)
from hindsight.stores.vector import VectorRecord
from hindsight.stores.vector_edge import EdgeVectorStore
from schemas import Memory, MemoryStoredEvent, Provenance, Topic
from services.gateway.models import MemoryView
from services.ingest.reconcile import FALLBACK_FACTS, ReconcileStage
from services.ingest.revisions import Thresholds

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
LIMITS = Thresholds(turn=0.86, fact=0.88, lesson=0.88, max_pairs=3, min_update_confidence=0.5)


class Collected:
    """Collects what the stage announces (a sink: nothing here consumes it)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, BaseModel]] = []

    def send(self, topic: str, key: bytes | None, event: BaseModel) -> None:
        self.sent.append((topic, event))

    def discard(self) -> None:
        self.sent.clear()

    async def flush(self) -> int:
        return len(self.sent)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EdgeVectorStore]:
    s = EdgeVectorStore(tmp_path / "memories", 384)
    try:
        yield s
    finally:
        s.close()


def turn(
    name: str, text: str, *, day: float, user: str = "u1", **payload: Any
) -> tuple[Memory, dict[str, Any]]:
    when = T0 + timedelta(days=day)
    memory = Memory(
        id=stable_id("test-reconcile", user, name),
        tenant_id="t1",
        user_id=user,
        agent_id="a1",
        session_id=f"s-{name}",
        type="episodic",
        kind="turn",
        content=text,
        source="user",
        intent="fact",
        importance=0.5,
        confidence=0.6,
        created_at=when,
        stored_at=when,
        valid_from=when,
        last_accessed_at=when,
        provenance=Provenance(event_ids=(f"e-{name}",)),
    )
    return memory, to_payload(memory) | {RECONCILE_STATE: PENDING} | payload


def put(store: EdgeVectorStore, e5: LocalE5Embedder, *items: tuple[Memory, dict[str, Any]]) -> None:
    vectors = e5.embed_passages([m.content for m, _ in items])
    store.upsert([VectorRecord(m.id, v, p) for (m, p), v in zip(items, vectors, strict=True)])


def stage(store: EdgeVectorStore, e5: LocalE5Embedder) -> ReconcileStage:
    return ReconcileStage(store, e5, CorrectionJudge(), None, LIMITS, facts="off")


async def deliver(rc: ReconcileStage, *memories: Memory) -> Collected:
    out = Collected()
    batch = [
        Envelope(MemoryStoredEvent(memory=m, candidate_id=m.id), str(Topic.STORED), 0, i, None, b"")
        for i, m in enumerate(memories)
    ]
    await rc.handle(batch, cast("EventPublisher", out))
    return out


def payload_of(store: EdgeVectorStore, memory: Memory) -> dict[str, Any]:
    return store.retrieve([memory.id])[0].payload


async def test_a_repeated_statement_merges_into_the_one_reconciled_first(
    store: EdgeVectorStore, local_e5: LocalE5Embedder
) -> None:
    first, p1 = turn("first", "I'm allergic to penicillin.", day=0)
    again, p2 = turn("again", "i'm allergic to penicillin!", day=9)
    put(store, local_e5, (first, p1), (again, p2))
    rc = stage(store, local_e5)
    await deliver(rc, first)  # `again` is still pending: it pairs with `first`, not the other way
    assert payload_of(store, first)["status"] == "active"
    await deliver(rc, again)
    kept, dup = payload_of(store, first), payload_of(store, again)
    assert (dup["status"], dup["merged_into"], dup[RECONCILE_STATE]) == ("merged", first.id, DONE)
    assert kept["merged_ids"] == [again.id]
    assert kept["merged_event_ids"] == ["e-again"]
    assert dup["reconcile_decisions"][0]["backend"] == "rules:identical-text"
    # the gateway shows what the kept memory absorbed beside its own (precise) provenance
    view = MemoryView.from_payload(first.id, kept)
    assert (view.merged_ids, view.merged_provenance.event_ids) == ([again.id], ("e-again",))
    assert view.provenance.event_ids == ("e-first",)
    assert MemoryView.from_payload(again.id, dup).merged_provenance == Provenance()


async def test_a_redelivered_memory_changes_nothing(
    store: EdgeVectorStore, local_e5: LocalE5Embedder
) -> None:
    first, p1 = turn("first", "My rent is 950 euros a month.", day=0)
    again, p2 = turn("again", "My rent is 950 euros a month.", day=3)
    put(store, local_e5, (first, p1), (again, p2))
    rc = stage(store, local_e5)
    await deliver(rc, first, again)
    before = {m.id: payload_of(store, m) for m in (first, again)}
    await deliver(rc, again, first, again)  # redelivered, out of order, twice
    assert {m.id: payload_of(store, m) for m in (first, again)} == before


async def test_a_restart_between_plan_and_done_applies_the_written_plan_again(
    store: EdgeVectorStore, local_e5: LocalE5Embedder
) -> None:
    old, p_old = turn("old", "I live in Lyon.", day=0)
    new, p_new = turn("new", "We just moved to Bordeaux.", day=30)
    plan = {
        old.id: {"status": "superseded", "superseded_by": new.id, "valid_to": p_new["valid_from"]},
        new.id: {"parent_id": old.id, "version": 2, "supersedes": [old.id]},
    }
    # the process died after writing the plan and before applying it: `old` still looks active
    p_new |= {RECONCILE_STATE: PLANNED, RECONCILE_PLAN: plan, "reconcile_decisions": []}
    put(store, local_e5, (old, p_old | {RECONCILE_STATE: DONE}), (new, p_new))
    await deliver(stage(store, local_e5), new)
    a, b = payload_of(store, old), payload_of(store, new)
    assert (a["status"], a["superseded_by"], a["valid_to"]) == ("superseded", new.id, b["valid_from"])
    assert (b["parent_id"], b["version"], b["supersedes"], b[RECONCILE_STATE]) == (old.id, 2, [old.id], DONE)
    assert b.get(RECONCILE_PLAN) is None
    assert from_payload(b).version == 2


async def test_memories_of_another_user_scope_or_kind_are_never_paired(
    store: EdgeVectorStore, local_e5: LocalE5Embedder
) -> None:
    text = "My daughter's school is Lindenhof Primary."
    mine, p1 = turn("mine", text, day=0)
    other_user, p2 = turn("other", text, day=1, user="u2")
    other_scope, p3 = turn("scope", text, day=2, scope="agent:a2")
    lesson, p4 = turn("lesson", text, day=3, kind="lesson", type="semantic")
    again, p5 = turn("again", text, day=4)
    put(store, local_e5, (mine, p1), (other_user, p2), (other_scope, p3), (lesson, p4), (again, p5))
    await deliver(stage(store, local_e5), mine, other_user, other_scope, lesson, again)
    statuses = {m.id: payload_of(store, m)["status"] for m in (mine, other_user, other_scope, lesson, again)}
    assert statuses == {
        mine.id: "active",
        other_user.id: "active",
        other_scope.id: "active",
        lesson.id: "active",
        again.id: "merged",
    }
    assert payload_of(store, again)["merged_into"] == mine.id


class ScriptedExtractor:
    """A fact extractor that answers from a script (text -> facts): the only fake here. It plays
    the small CPU model when it finds no fact in a turn, which the real one does for some turns
    ("我现在开始吃鱼了。", bench updates); what the stage then does is the logic under test."""

    name = "scripted"

    def __init__(self, script: dict[str, list[Fact]]) -> None:
        self.script = script
        self.asked: list[str] = []

    def extract(self, texts: Sequence[Statement]) -> list[list[Fact]]:
        self.asked += [t.text for t in texts]
        return [list(self.script[t.text]) for t in texts]


def facts_of(store: EdgeVectorStore, memory: Memory) -> list[dict[str, Any]]:
    ids = payload_of(store, memory).get("derived_ids") or []
    return [r.payload for r in store.retrieve(list(ids))]


OLD_ALLERGY = "I'm allergic to penicillin."
NEW_ALLERGY = "The doctor says I'm not allergic to penicillin after all."
ALLERGY_FACT = Fact("user", "allergy", "penicillin", "The user is allergic to penicillin.", "health")


def allergy_chain(
    store: EdgeVectorStore, e5: LocalE5Embedder, script: dict[str, list[Fact]]
) -> tuple[Memory, Memory, ReconcileStage, ScriptedExtractor]:
    """The allergy, then its correction 30 days later, stored; a revisions-mode stage whose extractor
    answers from ``script``."""
    old, p_old = turn("old", OLD_ALLERGY, day=0)
    new, p_new = turn("new", NEW_ALLERGY, day=30)
    put(store, e5, (old, p_old), (new, p_new))
    extractor = ScriptedExtractor(script)
    rc = ReconcileStage(store, e5, CorrectionJudge(), extractor, LIMITS, facts="revisions")
    return old, new, rc, extractor


async def test_a_newer_turn_without_facts_still_supersedes_the_older_turns_fact(
    store: EdgeVectorStore, local_e5: LocalE5Embedder
) -> None:
    old, new, rc, extractor = allergy_chain(store, local_e5, {OLD_ALLERGY: [ALLERGY_FACT], NEW_ALLERGY: []})
    fallbacks = FALLBACK_FACTS._value.get()
    await deliver(rc, old)
    await deliver(rc, new)

    assert sorted(extractor.asked) == sorted([OLD_ALLERGY, NEW_ALLERGY])  # the chain's two turns
    assert payload_of(store, old)["superseded_by"] == new.id  # the turns' own chain
    [old_fact], [new_fact] = facts_of(store, old), facts_of(store, new)
    assert (new_fact["kind"], new_fact["content"], new_fact["status"]) == ("fact", NEW_ALLERGY, "active")
    assert new_fact["provenance"]["memory_ids"] == [new.id]
    assert (old_fact["status"], old_fact["superseded_by"]) == ("superseded", new_fact["id"])
    assert FALLBACK_FACTS._value.get() == fallbacks + 1
    # the pair took the turns' verdict: the judge was not asked again
    [decision] = new_fact["reconcile_decisions"]
    assert (decision["with"], decision["relation"], decision["backend"]) == (
        old_fact["id"],
        "update",
        "turn-verdict",
    )


async def test_a_superseded_turn_without_facts_gets_no_fact_of_its_own_words(
    store: EdgeVectorStore, local_e5: LocalE5Embedder
) -> None:
    corrected = Fact("user", "allergy", "none", "The user is not allergic to penicillin.", "health")
    old, new, rc, _ = allergy_chain(store, local_e5, {OLD_ALLERGY: [], NEW_ALLERGY: [corrected]})
    await deliver(rc, old, new)

    assert payload_of(store, old)["status"] == "superseded"
    assert facts_of(store, old) == []  # nothing old left to be recalled as current
    [fact] = facts_of(store, new)
    assert (fact["content"], fact["status"]) == (corrected.statement, "active")


async def test_an_older_turns_one_fact_follows_its_turn_to_the_newer_turns_closest_fact(
    store: EdgeVectorStore, local_e5: LocalE5Embedder
) -> None:
    """The newer turn has two facts, neither of which the judge would pair with the old one as an
    update (the rule judge calls both ``unrelated``); the older turn's one fact restates the whole
    turn the judge superseded, so it is superseded too, by the newer fact nearest it."""
    visit = Fact("user", "doctor_visit", "monday", "The user saw the doctor on Monday.", "health")
    safe = Fact("user", "antibiotic", "amoxicillin", "The user can take amoxicillin.", "health")
    old, new, rc, _ = allergy_chain(
        store, local_e5, {OLD_ALLERGY: [ALLERGY_FACT], NEW_ALLERGY: [visit, safe]}
    )
    await deliver(rc, old)
    await deliver(rc, new)

    assert payload_of(store, old)["superseded_by"] == new.id
    [old_fact] = facts_of(store, old)
    new_facts = {f["content"]: f for f in facts_of(store, new)}
    assert sorted(new_facts) == sorted([visit.statement, safe.statement])
    assert all(f["status"] == "active" for f in new_facts.values())
    e_old, e_visit, e_safe = local_e5.embed_passages(
        [ALLERGY_FACT.statement, visit.statement, safe.statement]
    )
    nearest = safe.statement if float(e_old @ e_safe) > float(e_old @ e_visit) else visit.statement
    successor = new_facts[nearest]
    assert (old_fact["status"], old_fact["superseded_by"]) == ("superseded", successor["id"])
    assert (successor["parent_id"], successor["version"]) == (old_fact["id"], old_fact["version"] + 1)
    [decision] = [d for d in successor["reconcile_decisions"] if d["with"] == old_fact["id"]]
    assert (decision["relation"], decision["backend"]) == ("update", "turn-verdict")
    # the other new fact was judged (the rule judge: unrelated) and left the old fact alone
    other = new_facts[visit.statement if nearest == safe.statement else safe.statement]
    assert all(d["relation"] != "update" for d in other.get("reconcile_decisions") or [])


async def test_without_the_older_turns_update_its_one_fact_stays_with_the_judges_verdicts(
    store: EdgeVectorStore, local_e5: LocalE5Embedder
) -> None:
    """Congruence of the rule above: the same two turns in the other order (the correction first, the
    allergy a month later) are no update for the rule judge, so no fact inherits anything."""
    visit = Fact("user", "doctor_visit", "monday", "The user saw the doctor on Monday.", "health")
    safe = Fact("user", "antibiotic", "amoxicillin", "The user can take amoxicillin.", "health")
    first, p_first = turn("first", NEW_ALLERGY, day=0)
    later, p_later = turn("later", OLD_ALLERGY, day=30)
    put(store, local_e5, (first, p_first), (later, p_later))
    script = {OLD_ALLERGY: [ALLERGY_FACT], NEW_ALLERGY: [visit, safe]}
    rc = ReconcileStage(
        store, local_e5, CorrectionJudge(), ScriptedExtractor(script), LIMITS, facts="revisions"
    )
    await deliver(rc, first)
    await deliver(rc, later)

    assert payload_of(store, first)["status"] == "active"
    # the rule judge calls the turns unsure (the negation is in the older one): both stay active, and
    # their facts, extracted for the link, are judged pair by pair (unrelated: other topics)
    assert [f["status"] for f in facts_of(store, later) + facts_of(store, first)] == ["active"] * 3
