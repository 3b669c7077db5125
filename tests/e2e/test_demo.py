"""The demo on one real LoCoMo conversation: Kafka in, recall through the gateway, scored."""

from __future__ import annotations

from pathlib import Path
from statistics import fmean

import pytest

from hindsight.eval import locomo
from schemas import InteractionEvent
from services.cli.demo import run_demo
from services.cli.embedded import Stack
from tests.fixtures.stack import KEY_LOCOMO

pytestmark = pytest.mark.e2e

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo_dev.json"
"""The dev data lies in ../shared/ beside the checkout (as in CI); a missing file fails the test."""


def most_recent_k_recall(conv: locomo.Conversation, k: int = 10) -> float:
    """Dense-free baseline: the k latest turns before the question, whatever it asks."""
    turns = sorted((e for e in conv.events if isinstance(e, InteractionEvent)), key=lambda e: e.occurred_at)
    scores = []
    for q in conv.questions:
        latest = [t for t in turns if t.occurred_at <= q.reference_time][-k:]
        scores.append(
            locomo.evidence_recall(q.evidence, [[t.external_ref or ""] for t in reversed(latest)], k)
        )
    return fmean(scores)


async def test_demo_on_one_conversation_beats_a_dense_free_baseline(stack: Stack) -> None:
    conv = locomo.conversation(locomo.select(locomo.load(DATA), ["conv-30"])[0])
    result = await run_demo(
        stack, KEY_LOCOMO, conv.events, conv.questions, conversations=1, top_k=10, timeout_s=900
    )
    baseline = most_recent_k_recall(conv)
    assert result.questions == len(conv.questions) == 81
    assert result.events == len(conv.events)
    assert result.memories >= 0.8 * conv.turns  # near-duplicates merge, chatter is compressed
    assert result.recall_at_10 is not None
    assert result.recall_at_5 is not None
    assert result.recall_at_10 >= result.recall_at_5
    assert result.recall_at_10 > baseline + 0.2, (result.line(), baseline)
