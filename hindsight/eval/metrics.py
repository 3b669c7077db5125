"""Retrieval metrics of the recall benchmark (pure functions, no I/O).

Every ranked result is given as the provenance refs of each returned memory, best first:
``[["D1:3"], ["D2:7", "D2:8"], ...]``. Evidence credit follows ``../shared/data/README.md`` exactly
(the same rule as :func:`hindsight.eval.locomo.credited_refs`): a memory earns credit only when its
provenance lists between 1 and :data:`~hindsight.eval.locomo.MAX_REFS_FOR_CREDIT` (3) turns.

- evidence recall@k: fraction of a question's distinct evidence turns credited by the top ``k``;
- all-evidence@k: 1.0 when every evidence turn is credited within the top ``k``, else 0.0;
- nDCG@k over evidence turns: binary gain at a position whose memory credits at least one evidence
  turn not credited by an earlier position (so a second copy of the same turn earns nothing),
  discount ``1 / log2(position + 1)`` (1-based), ideal DCG with ``min(|evidence|, k)`` unit gains;
- per-category aggregation (LoCoMo categories 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop)
  and latency percentiles (linear interpolation between order statistics, numpy's default).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from hindsight.eval.locomo import MAX_REFS_FOR_CREDIT, credited_refs

CATEGORY_NAMES: Mapping[int, str] = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
"""LoCoMo category numbers as the benchmark's own scorer names them (data README)."""

Refs = Sequence[Sequence[str]]
"""Provenance refs of each ranked memory, best first."""


def _distinct(evidence: Sequence[str]) -> list[str]:
    out = list(dict.fromkeys(evidence))
    if not out:
        raise ValueError("a question needs at least one evidence turn to be scored")
    return out


def _credits(refs: Sequence[str]) -> bool:
    return 0 < len(refs) <= MAX_REFS_FOR_CREDIT


def recall_at_k(evidence: Sequence[str], ranked: Refs, k: int) -> float:
    """Fraction of the distinct ``evidence`` turns credited by the top ``k`` memories (0..1).

    Raises:
        ValueError: ``evidence`` is empty or ``k`` < 1.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    wanted = _distinct(evidence)
    found = credited_refs(ranked, k)
    return sum(e in found for e in wanted) / len(wanted)


def all_evidence_at_k(evidence: Sequence[str], ranked: Refs, k: int) -> float:
    """1.0 when every evidence turn is credited within the top ``k``, else 0.0.

    Raises:
        ValueError: ``evidence`` is empty or ``k`` < 1.
    """
    return 1.0 if recall_at_k(evidence, ranked, k) == 1.0 else 0.0


def ndcg_at_k(evidence: Sequence[str], ranked: Refs, k: int = 10) -> float:
    """nDCG@k over evidence turns (binary gains, see the module doc), 0..1.

    Raises:
        ValueError: ``evidence`` is empty or ``k`` < 1.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    wanted = set(_distinct(evidence))
    credited: set[str] = set()
    dcg = 0.0
    for position, refs in enumerate(ranked[:k], start=1):
        if not _credits(refs):
            continue
        new = (set(refs) & wanted) - credited
        if new:
            dcg += 1.0 / math.log2(position + 1)
            credited |= new
    ideal = sum(1.0 / math.log2(position + 1) for position in range(1, min(len(wanted), k) + 1))
    return dcg / ideal


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of ``values``, linear interpolation (numpy's default method).

    Raises:
        ValueError: ``values`` is empty or ``q`` is outside 0..100.
    """
    if not values:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"q must be within 0..100, got {q}")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def latency_summary(values_ms: Sequence[float]) -> dict[str, float | None]:
    """``{"p50_ms", "p95_ms", "p99_ms", "mean_ms", "n"}``; percentiles are None when there are no values."""
    if not values_ms:
        return {"p50_ms": None, "p95_ms": None, "p99_ms": None, "mean_ms": None, "n": 0}
    return {
        "p50_ms": percentile(values_ms, 50),
        "p95_ms": percentile(values_ms, 95),
        "p99_ms": percentile(values_ms, 99),
        "mean_ms": statistics.fmean(values_ms),
        "n": len(values_ms),
    }


@dataclass(frozen=True)
class QuestionScore:
    """The metrics of one question for one system."""

    category: int
    recall_at_5: float
    recall_at_10: float
    all_evidence_at_10: float
    ndcg_at_10: float
    tokens: float
    latency_ms: float


def score_question(
    evidence: Sequence[str], ranked: Refs, *, category: int, tokens: float, latency_ms: float
) -> QuestionScore:
    """Every metric of one question from its ranked provenance refs.

    Raises:
        ValueError: ``evidence`` is empty.
    """
    return QuestionScore(
        category=category,
        recall_at_5=recall_at_k(evidence, ranked, 5),
        recall_at_10=recall_at_k(evidence, ranked, 10),
        all_evidence_at_10=all_evidence_at_k(evidence, ranked, 10),
        ndcg_at_10=ndcg_at_k(evidence, ranked, 10),
        tokens=float(tokens),
        latency_ms=float(latency_ms),
    )


def _summary(scores: Sequence[QuestionScore]) -> dict[str, float | int | None]:
    if not scores:
        return {
            "questions": 0,
            "recall_at_5": None,
            "recall_at_10": None,
            "all_evidence_at_10": None,
            "ndcg_at_10": None,
            "mean_tokens": None,
            "p50_ms": None,
            "p95_ms": None,
        }
    latencies = [s.latency_ms for s in scores]
    return {
        "questions": len(scores),
        "recall_at_5": statistics.fmean(s.recall_at_5 for s in scores),
        "recall_at_10": statistics.fmean(s.recall_at_10 for s in scores),
        "all_evidence_at_10": statistics.fmean(s.all_evidence_at_10 for s in scores),
        "ndcg_at_10": statistics.fmean(s.ndcg_at_10 for s in scores),
        "mean_tokens": statistics.fmean(s.tokens for s in scores),
        "p50_ms": percentile(latencies, 50),
        "p95_ms": percentile(latencies, 95),
    }


def category_name(category: int) -> str:
    """``"multi-hop"`` for 1 ... ``"single-hop"`` for 4; ``"category-N"`` otherwise."""
    return CATEGORY_NAMES.get(category, f"category-{category}")


def aggregate(scores: Iterable[QuestionScore]) -> dict[str, object]:
    """Overall means (and latency p50/p95) plus the same per category, keyed by category name.

    Returns:
        ``{"questions", "recall_at_5", "recall_at_10", "all_evidence_at_10", "ndcg_at_10",
        "mean_tokens", "p50_ms", "p95_ms", "by_category": {name: {"category": n, ...same keys}}}``;
        categories appear in numeric order, only those with questions.
    """
    items = list(scores)
    out: dict[str, object] = dict(_summary(items))
    by_cat: dict[str, object] = {}
    for cat in sorted({s.category for s in items}):
        by_cat[category_name(cat)] = {"category": cat, **_summary([s for s in items if s.category == cat])}
    out["by_category"] = by_cat
    return out
