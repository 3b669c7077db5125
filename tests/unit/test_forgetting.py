"""The provenance mechanism behind forgetting (issue 13, defect 7): which memories derive from a
forgotten one, and what is left of them. Pure; English and Chinese."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from hindsight.forgetting import MARKER, Forgotten, derived_from, redact, without
from schemas import Memory, Provenance
from schemas.v1 import MemoryKind

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 3, 9, 0, tzinfo=UTC)


def _memory(mid: str, content: str, kind: MemoryKind = "turn", **prov: tuple[str, ...]) -> Memory:
    return Memory(
        id=mid,
        tenant_id="t",
        user_id="u",
        agent_id="a",
        session_id="s",
        type="semantic" if kind == "fact" else "episodic",
        kind=kind,
        content=content,
        source="user",
        importance=0.5,
        confidence=0.8,
        created_at=NOW,
        stored_at=NOW,
        last_accessed_at=NOW,
        provenance=Provenance(**prov),
    )


@pytest.mark.parametrize(
    ("summary", "forgotten", "expected"),
    [
        (  # a key point clipped at 160 characters with an ellipsis, as episodes quote turns
            "Key points: Ana: My therapist Dr. Okafor says the panic attacks started after the "
            "accident in March and…| Ana: We repaint the kitchen.",
            "My therapist Dr. Okafor says the panic attacks started after the accident in March and that "
            "the medication helps.",
            f"Key points: Ana: {MARKER}| Ana: We repaint the kitchen.",
        ),
        (
            "事实：我对花生过敏，医生说要随身带药。另外我喜欢绿茶。",
            "我对花生过敏，医生说要随身带药。",
            f"事实：{MARKER}另外我喜欢绿茶。",
        ),
        (
            "She said:  I   moved to Berlin in 2021 for work.",
            "I moved to Berlin in 2021 for work.",
            "She said:  I   moved to Berlin in 2021 for work.",
        ),
        (
            "Topic: Berlin came up in 3 of the last 10 sessions.",
            "I moved to Berlin in 2021.",
            "Topic: Berlin came up in 3 of the last 10 sessions.",
        ),
    ],
    ids=["clipped-quote-en", "quote-zh", "reflowed-whitespace-not-a-quote", "no-quote"],
)
def test_redact_removes_every_quote_and_only_quotes(summary: str, forgotten: str, expected: str) -> None:
    assert redact(summary, forgotten) == expected


def test_derived_memories_are_found_over_provenance_and_lose_the_forgotten_sources() -> None:
    turn = _memory("m1", "I moved to Berlin in 2021 for work.", event_ids=("e1",))
    sibling = _memory("m1b", "passage two of the same event", event_ids=("e1",))
    other = _memory("m2", "We repaint the kitchen.", event_ids=("e2",))
    episode = _memory(
        "ep",
        "Key points: I moved to Berlin in 2021 for work. | We repaint the kitchen.",
        "episode",
        memory_ids=("m1", "m2"),
        event_ids=("e1", "e2"),
    )
    fact = _memory("f1", "Lives in Berlin.", "fact", event_ids=("e1",))
    lesson = _memory("l1", "Ask before moving appointments.", "fact", memory_ids=("ep",))
    forgotten = Forgotten.of([turn])
    found = derived_from([turn, sibling, other, episode, fact, lesson], forgotten)
    assert [m.id for m in found] == ["ep", "f1"]  # not the turn itself, its sibling, or a second-order one
    rebuilt = without(episode, forgotten)
    assert rebuilt is not None
    assert rebuilt.content == f"Key points: {MARKER} | We repaint the kitchen."
    assert (rebuilt.provenance.memory_ids, rebuilt.provenance.event_ids) == (("m2",), ("e2",))
    assert without(fact, forgotten) is None  # its only source is gone: forget it too
