"""Episode consolidation and K-of-M abstraction (DESIGN.md sections 2 and 4)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from schemas import Memory, Provenance, SessionClosedEvent
from services.reflect.abstraction import fact_for, recurring_entities
from services.reflect.consolidate import build_episode

pytestmark = pytest.mark.unit

T0 = datetime(2023, 5, 8, 13, 0, tzinfo=UTC)


def turn(i: int, content: str, importance: float, entities: tuple[str, ...] = ()) -> Memory:
    at = T0 + timedelta(minutes=i)
    return Memory(
        id=f"m{i}",
        tenant_id="t",
        user_id="u",
        agent_id="a",
        session_id="s1",
        type="episodic",
        kind="turn",
        content=content,
        source="user",
        speaker="Ann",
        importance=importance,
        confidence=0.6,
        created_at=at,
        stored_at=at,
        last_accessed_at=at,
        entities=entities,
        provenance=Provenance(event_ids=(f"e{i}",), external_refs=(f"D1:{i}",)),
    )


def close(**kw: object) -> SessionClosedEvent:
    return SessionClosedEvent(
        event_id="c",
        tenant_id="t",
        user_id="u",
        agent_id="a",
        session_id="s1",
        closed_at=T0 + timedelta(hours=1),
        **kw,
    )  # type: ignore[arg-type]


def test_episode_quotes_the_most_important_turns_in_time_order_with_provenance() -> None:
    turns = [
        turn(0, "hello", 0.1),
        turn(1, "I adopted a dog named Rex", 0.8, ("Rex",)),
        turn(2, "ok", 0.05),
        turn(3, "I start at Google next week", 0.7, ("Google",)),
    ]
    ep = build_episode(close(outcome="success", feedback="great"), turns, stored_at=T0, key_points=2)
    assert ep.kind == "episode"
    assert ep.type == "episodic"
    assert "Key points: Ann: I adopted a dog named Rex | Ann: I start at Google next week" in ep.content
    assert "Outcome: success." in ep.content
    assert ep.provenance.external_refs == ("D1:0", "D1:1", "D1:2", "D1:3")
    assert ep.importance == pytest.approx(0.75)
    assert ep.created_at == T0


def test_episode_id_is_deterministic() -> None:
    a = build_episode(close(), [turn(0, "x", 0.5)], stored_at=T0)
    b = build_episode(close(), [turn(0, "x", 0.5)], stored_at=T0 + timedelta(days=1))
    assert a.id == b.id


def episode(i: int, entities: tuple[str, ...]) -> Memory:
    at = T0 + timedelta(days=i)
    return Memory(
        id=f"ep{i}",
        tenant_id="t",
        user_id="u",
        agent_id="a",
        session_id=f"s{i}",
        type="episodic",
        kind="episode",
        content="...",
        source="system",
        importance=0.5,
        confidence=0.6,
        created_at=at,
        stored_at=at,
        last_accessed_at=at,
        entities=entities,
    )


def test_entity_in_k_of_last_m_episodes_becomes_a_pattern() -> None:
    eps = [episode(0, ("Paris",)), episode(1, ("paris", "Rex")), episode(2, ("Rex",)), episode(3, ("Paris",))]
    patterns = recurring_entities(eps, k=3, m=10)
    assert [(p.key, p.support) for p in patterns] == [("entity:paris", 3)]


def test_only_the_last_m_episodes_count() -> None:
    eps = [episode(0, ("Paris",)), episode(1, ("Paris",)), episode(2, ("Paris",)), episode(3, ("Rome",))]
    assert recurring_entities(eps, k=3, m=3) == []


def test_fact_confidence_grows_with_support_and_keeps_identity() -> None:
    eps = [episode(i, ("Paris",)) for i in range(5)]
    pattern = recurring_entities(eps, k=3, m=10)[0]
    fact = fact_for(pattern, eps[-1], stored_at=T0, k=3, existing=None)
    assert fact.type == "semantic"
    assert fact.confidence == pytest.approx(0.5)
    assert set(fact.provenance.memory_ids) == {f"ep{i}" for i in range(5)}
    again = fact_for(pattern, eps[0], stored_at=T0 + timedelta(days=9), k=3, existing=fact)
    assert again.id == fact.id
    assert again.stored_at == fact.stored_at


def test_episode_spans_first_to_last_turn_not_the_arrival_of_the_close() -> None:
    late_close = SessionClosedEvent(
        event_id="c",
        tenant_id="t",
        user_id="u",
        agent_id="a",
        session_id="s1",
        closed_at=T0 + timedelta(days=3),  # the agent closed the session three days later
    )
    ep = build_episode(late_close, [turn(0, "a", 0.5), turn(90, "b", 0.5)], stored_at=T0)
    assert ep.content.startswith("Session s1 (2023-05-08 to 2023-05-08)")


def test_episode_records_task_steps_decisions_outcome_and_feedback() -> None:
    steps = [
        turn(0, "Book me a flight to Paris on Friday.", 0.6),
        turn(1, "Found 3 flights; the 9:05 has seats left.", 0.4).model_copy(update={"source": "assistant"}),
        turn(2, "search_flights -> 3 results", 0.4).model_copy(update={"source": "tool"}),
        turn(3, "OK, I booked the 9:05, seat 23E.", 0.5).model_copy(update={"source": "assistant"}),
    ]
    ep = build_episode(
        close(task="flight to Paris", outcome="failure", feedback="Never a middle seat again."),
        steps,
        stored_at=T0,
    )
    lines = ep.content.splitlines()
    assert "Task: flight to Paris" in lines
    assert [x for x in lines if x.startswith("Steps: ")] == [
        "Steps: Found 3 flights; the 9:05 has seats left. | search_flights -> 3 results | "
        "OK, I booked the 9:05, seat 23E."
    ]
    assert [x for x in lines if x.startswith("Decisions: ")] == [
        "Decisions: OK, I booked the 9:05, seat 23E."
    ]
    assert "Outcome: failure." in lines
    assert "Feedback: Never a middle seat again." in lines
