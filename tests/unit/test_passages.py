"""Long memories are split into passages the embedder reads whole (issue 13, defect 6), in English
and Chinese, with the real XLM-R tokenizer of the embedder."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from functools import cache
from itertools import pairwise
from pathlib import Path

import pytest

from hindsight.ids import passage_memory_id, turn_memory_id
from hindsight.tokens import EMBEDDER_WINDOW, passage_tokens, split_passages
from schemas import InteractionEvent
from services.ingest.trigger import candidate_for, candidates_for
from services.ingest.write_trigger import decide

pytestmark = pytest.mark.unit

# ../shared beside the repository (CI, the main checkout), or beside the worktrees' folder
SHARED = next(
    (p / "shared" for p in Path(__file__).resolve().parents[3:5] if (p / "shared" / "data").exists()),
    Path(__file__).resolve().parents[3] / "shared",
)
LOCOMO = SHARED / "data" / "locomo_dev.json"
SEEDS = SHARED / "seeds"


@cache
def _english() -> str:
    conversation = json.loads(LOCOMO.read_text())[0]["conversation"]
    turns = [
        t["text"]
        for k, v in conversation.items()
        if k.startswith("session_") and isinstance(v, list)
        for t in v
    ]
    return " ".join(turns)[:30_000]


@cache
def _chinese() -> str:
    return "\n".join(p.read_text() for p in sorted(SEEDS.glob("*.txt"))[:3])[:20_000]


@pytest.mark.parametrize("kind", ["en", "zh", "no-spaces"])
@pytest.mark.parametrize("speaker", ["", "Caroline: "])
def test_every_passage_fits_the_window_and_together_they_cover_the_text(kind: str, speaker: str) -> None:
    text = {"en": _english, "zh": _chinese, "no-spaces": lambda: "长" * 3_000 + "x" * 3_000}[kind]()
    assert passage_tokens(speaker + text) > 4 * EMBEDDER_WINDOW
    spans = split_passages(text, prefix=speaker)
    assert len(spans) >= 4
    assert all(passage_tokens(speaker + text[a:b]) <= EMBEDDER_WINDOW for a, b in spans)
    assert spans == sorted(spans)
    assert all(b1 <= a2 for (_, b1), (a2, _) in pairwise(spans))
    assert "".join(text.split()) == "".join("".join(text[a:b] for a, b in spans).split())
    assert all(text[a:b] == text[a:b].strip() and text[a:b] for a, b in spans)
    if kind != "no-spaces":  # most passages are well filled
        assert sum(passage_tokens(speaker + text[a:b]) for a, b in spans) / len(spans) > 0.6 * EMBEDDER_WINDOW


def test_a_text_that_fits_is_one_passage_and_a_blank_one_none() -> None:
    assert split_passages("I adopted a dog last week.") == [(0, 26)]
    assert split_passages("  \n ") == []


def _event(content: str) -> InteractionEvent:
    return InteractionEvent(
        tenant_id="t",
        user_id="u",
        agent_id="a",
        session_id="s",
        event_id="e-long",
        occurred_at=datetime(2026, 3, 1, 9, tzinfo=UTC),
        source="user",
        content=content,
        speaker="Caroline",
    )


def test_a_long_turn_becomes_passages_with_provenance_and_a_short_one_stays_whole() -> None:
    short = _event("I adopted a dog last week, her name is Luna.")
    decision = decide(short.content, "user")
    assert candidates_for(short, decision, 0.9) == [candidate_for(short, decision, 0.9)]

    long = _event(_english())
    decision = decide(long.content, "user")
    passages = candidates_for(long, decision, 0.9)
    assert len(passages) >= 10
    assert passages[0].memory_id == turn_memory_id("t", "e-long")
    assert [c.memory_id for c in passages] == [
        passage_memory_id("t", "e-long", i) for i in range(len(passages))
    ]
    for i, c in enumerate(passages):
        assert c.provenance.event_ids == ("e-long",)
        assert (c.provenance.passage, c.provenance.passages) == (i, len(passages))
        start, end = c.provenance.span or (0, 0)
        assert long.content[start:end] == c.content
        assert passage_tokens(f"Caroline: {c.content}") <= EMBEDDER_WINDOW
        assert c.importance == decision.importance
