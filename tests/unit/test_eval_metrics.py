"""Benchmark metrics: evidence recall@k, all-evidence@k, nDCG@10 with the data README's credit rule,
per-category aggregation and latency percentiles. Expected values are computed by hand."""

from __future__ import annotations

import pytest

from hindsight.eval import metrics

pytestmark = pytest.mark.unit

EVIDENCE = ["A", "B", "C"]
RANKED = [["X"], ["A"], ["Y", "Z", "W", "B"], ["C"], ["B"]]
"""A at 2, B only inside a 4-turn memory at 3 (no credit) and alone at 5, C at 4."""


def test_recall_counts_only_memories_with_at_most_three_refs() -> None:
    assert metrics.recall_at_k(EVIDENCE, RANKED, 1) == 0.0
    assert metrics.recall_at_k(EVIDENCE, RANKED, 2) == pytest.approx(1 / 3)
    assert metrics.recall_at_k(EVIDENCE, RANKED, 3) == pytest.approx(1 / 3)  # the 4-ref memory earns nothing
    assert metrics.recall_at_k(EVIDENCE, RANKED, 4) == pytest.approx(2 / 3)
    assert metrics.recall_at_k(EVIDENCE, RANKED, 5) == 1.0
    assert metrics.recall_at_k(EVIDENCE, RANKED, 10) == 1.0


def test_recall_boundaries_three_refs_credit_empty_does_not_duplicates_count_once() -> None:
    assert metrics.recall_at_k(["A", "B"], [["A", "B", "C"]], 10) == 1.0
    assert metrics.recall_at_k(["A"], [[], ["Q"]], 10) == 0.0
    assert metrics.recall_at_k(["A", "A", "B"], [["A"]], 10) == 0.5  # distinct evidence: 1 of 2
    with pytest.raises(ValueError, match="evidence"):
        metrics.recall_at_k([], [["A"]], 10)
    with pytest.raises(ValueError, match="k must be"):
        metrics.recall_at_k(["A"], [["A"]], 0)


def test_all_evidence() -> None:
    assert metrics.all_evidence_at_k(EVIDENCE, RANKED, 4) == 0.0
    assert metrics.all_evidence_at_k(EVIDENCE, RANKED, 5) == 1.0
    assert metrics.all_evidence_at_k(["A"], [["B"]], 10) == 0.0


def test_ndcg_binary_gain_for_new_evidence_only() -> None:
    # evidence {A, B}: A at 2 (gain), A again at 3 (nothing new), B in a 4-ref memory at 4 (no
    # credit), B at 5 (gain). DCG = 1/log2(3) + 1/log2(6); IDCG = 1 + 1/log2(3).
    ranked = [["X"], ["A"], ["A"], ["B", "C", "D", "E"], ["B"]]
    assert metrics.ndcg_at_k(["A", "B"], ranked, 10) == pytest.approx(0.6240505200, abs=1e-9)


def test_ndcg_one_memory_crediting_two_turns_is_one_gain() -> None:
    # one position credits both: DCG = 1, IDCG = 1 + 1/log2(3)
    assert metrics.ndcg_at_k(["A", "B"], [["A", "B"]], 10) == pytest.approx(0.6131471928, abs=1e-9)


def test_ndcg_perfect_and_cut_at_k() -> None:
    assert metrics.ndcg_at_k(["A", "B"], [["B"], ["A"], ["X"]], 10) == pytest.approx(1.0)
    assert metrics.ndcg_at_k(["A"], [["X"], ["Y"], ["A"]], 2) == 0.0
    # ideal uses min(|evidence|, k) gains: 3 evidence, k=1, hit at 1 -> 1.0
    assert metrics.ndcg_at_k(["A", "B", "C"], [["C"]], 1) == pytest.approx(1.0)
    assert metrics.ndcg_at_k(["A"], [["X"], ["A"]], 10) == pytest.approx(0.6309297536, abs=1e-9)


def test_percentiles_interpolate_linearly() -> None:
    values = [4.0, 1.0, 3.0, 2.0]
    assert metrics.percentile(values, 50) == pytest.approx(2.5)
    assert metrics.percentile(values, 95) == pytest.approx(3.85)
    assert metrics.percentile(values, 99) == pytest.approx(3.97)
    assert metrics.percentile([7.0], 99) == 7.0
    with pytest.raises(ValueError, match="no values"):
        metrics.percentile([], 50)
    summary = metrics.latency_summary([10.0, 20.0, 30.0, 40.0, 50.0])
    assert summary["p50_ms"] == 30.0
    assert summary["p95_ms"] == pytest.approx(48.0)
    assert summary["p99_ms"] == pytest.approx(49.6)
    assert metrics.latency_summary([])["p95_ms"] is None


def test_aggregate_overall_and_per_category() -> None:
    scores = [
        metrics.score_question(["A", "B"], [["A"]], category=1, tokens=100, latency_ms=10),
        metrics.score_question(["A"], [["X"], ["A"]], category=4, tokens=300, latency_ms=30),
        metrics.score_question(["A"], [["A"]], category=4, tokens=200, latency_ms=20),
    ]
    out = metrics.aggregate(scores)
    assert out["questions"] == 3
    assert out["recall_at_10"] == pytest.approx((0.5 + 1 + 1) / 3)
    assert out["all_evidence_at_10"] == pytest.approx(2 / 3)
    assert out["ndcg_at_10"] == pytest.approx((1 / 1.6309297536 + 0.6309297536 + 1) / 3)
    assert out["mean_tokens"] == pytest.approx(200.0)
    assert out["p50_ms"] == 20.0
    by_cat = out["by_category"]
    assert isinstance(by_cat, dict)
    assert list(by_cat) == ["multi-hop", "single-hop"]
    assert by_cat["multi-hop"]["category"] == 1
    assert by_cat["multi-hop"]["recall_at_10"] == 0.5
    assert by_cat["single-hop"]["questions"] == 2
    assert by_cat["single-hop"]["recall_at_5"] == 1.0
    assert by_cat["single-hop"]["p95_ms"] == pytest.approx(29.5)


def test_aggregate_of_nothing() -> None:
    out = metrics.aggregate([])
    assert out["questions"] == 0
    assert out["recall_at_10"] is None
    assert out["by_category"] == {}
