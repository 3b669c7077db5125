"""The memory-candidate constructor and the write-trigger candidates built with it (DESIGN.md s2-4)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from hindsight.ids import turn_memory_id
from hindsight.records import compressed_candidate, memory_candidate, memory_from_candidate
from hindsight.stores.working_memory import WorkingItem
from hindsight.text import TextFeatures, features
from schemas import InteractionEvent, Memory, MemoryCandidate, Provenance, SessionClosedEvent
from services.ingest.trigger import candidate_for
from services.ingest.write_trigger import decide

pytestmark = pytest.mark.unit

AT = datetime(2024, 5, 1, 9, 30, tzinfo=timezone(timedelta(hours=2)))
OWNER = InteractionEvent(
    tenant_id="t1",
    user_id="u1",
    agent_id="a1",
    session_id="s1",
    event_id="e1",
    occurred_at=AT,
    source="user",
    content="I am allergic to peanuts.",
    speaker="Caroline",
    scope="agent:bot",
    tags=("diet", "health"),
    external_ref="D1:3",
)


def test_constructor_takes_owner_scope_features_and_provenance() -> None:
    earlier = AT - timedelta(hours=1)
    got = memory_candidate(
        OWNER,
        memory_id="m1",
        text="Jon Snow is my doctor",
        source="assistant",
        features=TextFeatures(entities=("Jon Snow",), intent="fact", tags=("health",), words=5),
        tags=("compressed", "health"),
        importance=0.4,
        confidence=0.6,
        occurred_at=earlier,
        reason="why",
        event_id="e0",
        external_ref="D1:2",
    )
    assert got == MemoryCandidate(
        tenant_id="t1",
        user_id="u1",
        agent_id="a1",
        session_id="s1",
        memory_id="m1",
        type="episodic",
        kind="turn",
        content="Jon Snow is my doctor",
        source="assistant",
        speaker=None,
        scope="agent:bot",
        tags=("compressed", "health"),
        entities=("Jon Snow",),
        intent="fact",
        importance=0.4,
        confidence=0.6,
        occurred_at=earlier,
        reason="why",
        provenance=Provenance(event_ids=("e0",), external_refs=("D1:2",)),
    )
    assert got.occurred_at.utcoffset() == timedelta(hours=2)  # the given offset is kept
    no_ref = memory_candidate(
        OWNER,
        memory_id="m1",
        text="x",
        source="user",
        features=TextFeatures(entities=(), intent="chatter", tags=(), words=1),
        tags=(),
        importance=0.0,
        confidence=1.0,
        occurred_at=earlier,
        reason="why",
        event_id="e0",
        external_ref=None,
        speaker="Ann",
    )
    assert no_ref.provenance == Provenance(event_ids=("e0",))
    assert no_ref.speaker == "Ann"


def test_turn_candidate_merges_event_and_detected_tags_once() -> None:
    decision = decide(OWNER.content, OWNER.source)
    got = candidate_for(OWNER, decision, 0.9)
    assert got.memory_id == turn_memory_id("t1", "e1")
    assert (got.content, got.source, got.speaker, got.scope) == (
        OWNER.content,
        "user",
        "Caroline",
        "agent:bot",
    )
    assert got.tags == ("diet", "health")
    assert (got.importance, got.confidence, got.reason) == (decision.importance, 0.9, decision.reason)
    assert got.occurred_at == AT
    assert got.provenance == Provenance(event_ids=("e1",), external_refs=("D1:3",))


def test_compressed_candidate_keeps_the_items_identity_and_the_owners_session() -> None:
    item = WorkingItem(
        id="m-old",
        content="  my   doctor\nsaid so  ",
        importance=0.1,
        turn_index=0,
        created_at=datetime(2024, 4, 30, tzinfo=UTC),
        source="tool",
        external_ref=None,
        event_id="e-old",
    )
    got = compressed_candidate(item, OWNER, 0.7)
    assert got.memory_id == "m-old"
    assert (got.content, got.source, got.speaker, got.scope) == (
        "my doctor said so",
        "tool",
        None,
        "agent:bot",
    )
    assert got.tags == ("compressed", "health")
    assert (got.importance, got.confidence) == (0.1, 0.7)
    assert got.reason == "compressed: pushed out of working memory"
    assert got.occurred_at == item.created_at
    assert got.provenance == Provenance(event_ids=("e-old",))
    assert (got.tenant_id, got.user_id, got.agent_id, got.session_id) == ("t1", "u1", "a1", "s1")


def test_a_session_leftover_becomes_the_same_memory_reflect_built_by_hand() -> None:
    """Reflect's leftover of a closed session (compressed_candidate + memory_from_candidate) gives
    exactly the record it used to build field by field: global scope, confidence 0.5, valid from
    the item's time, last accessed when stored."""
    item = WorkingItem(
        id="m-left",
        content="Booked  the\tLisbon flight",
        importance=0.3,
        turn_index=2,
        created_at=AT,
        source="user",
        external_ref="D2:7",
        event_id="e-left",
    )
    close = SessionClosedEvent(
        tenant_id="t1",
        user_id="u1",
        agent_id="a1",
        session_id="s1",
        event_id="close-1",
        closed_at=AT,
        outcome="success",
    )
    now = datetime(2024, 5, 2, tzinfo=UTC)
    got = memory_from_candidate(compressed_candidate(item, close, 0.5), stored_at=now, model="e5")
    f = features("Booked the Lisbon flight")
    assert got == Memory(
        id="m-left",
        tenant_id="t1",
        user_id="u1",
        agent_id="a1",
        session_id="s1",
        type="episodic",
        kind="turn",
        content="Booked the Lisbon flight",
        source="user",
        tags=("compressed", *f.tags),
        entities=f.entities,
        intent=f.intent,
        importance=0.3,
        confidence=0.5,
        created_at=AT,
        stored_at=now,
        valid_from=AT,
        last_accessed_at=now,
        embedding_model="e5",
        provenance=Provenance(event_ids=("e-left",), external_refs=("D2:7",)),
    )
    assert got.scope == "global"
