"""Ranking steps of recall: floor, time weighting, dedupe, ordering (DESIGN.md section 5)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from hindsight.recall import RecallParams, rank
from hindsight.stores.vector import ScoredRecord

pytestmark = pytest.mark.unit

NOW = datetime(2024, 6, 1, tzinfo=UTC)


def hit(mid: str, score: float, days_old: float, content: str | None = None) -> ScoredRecord:
    created = NOW - timedelta(days=days_old)
    return ScoredRecord(
        mid, score, {"content": content or f"memory {mid}", "created_ts": created.timestamp()}
    )


def test_similarity_floor_drops_weak_matches() -> None:
    out = rank([hit("a", 0.9, 1), hit("b", 0.64, 1)], NOW, RecallParams())
    assert [m.id for m in out] == ["a"]


def test_recent_memory_outranks_slightly_more_similar_old_one() -> None:
    # old: 0.7*0.80 + 0.3*0.6 = 0.740; recent: 0.7*0.78 + 0.3*1.0 = 0.846
    out = rank([hit("old", 0.80, 90), hit("recent", 0.78, 2)], NOW, RecallParams())
    assert [m.id for m in out] == ["recent", "old"]
    assert out[0].final_score == pytest.approx(0.846)
    assert out[1].time_weight == 0.6


def test_time_share_zero_is_pure_similarity() -> None:
    out = rank([hit("old", 0.80, 90), hit("recent", 0.78, 2)], NOW, RecallParams(time_share=0.0))
    assert [m.id for m in out] == ["old", "recent"]


def test_identical_content_collapses_to_newest_version() -> None:
    out = rank(
        [hit("v1", 0.95, 40, "User prefers window seats."), hit("v2", 0.90, 3, "user prefers window seats")],
        NOW,
        RecallParams(),
    )
    assert [m.id for m in out] == ["v2"]
    assert out[0].duplicates == ("v1",)


def test_top_k_cut_and_ranks_are_one_based() -> None:
    hits = [hit(str(i), 0.7 + i / 100, 1) for i in range(10)]
    out = rank(hits, NOW, RecallParams(top_k=3))
    assert [m.id for m in out] == ["9", "8", "7"]
    assert [m.rank for m in out] == [1, 2, 3]


def test_chronological_order_keeps_the_relevant_set() -> None:
    hits = [hit("a", 0.9, 10), hit("b", 0.8, 30), hit("c", 0.7, 1), hit("d", 0.66, 50)]
    out = rank(hits, NOW, RecallParams(top_k=3, order="chronological", time_share=0.0))
    assert [m.id for m in out] == ["b", "a", "c"]
