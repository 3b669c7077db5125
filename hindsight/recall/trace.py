"""What became of every candidate of one recall: the record tuning learns from (DESIGN.md section 10).

:func:`trace` turns a :class:`~hindsight.recall.pipeline.RecallResult` into one
:class:`~schemas.RecallCandidate` per candidate with its component scores and its outcome:

- ``returned``: in the response (with its 1-based ``rank``);
- ``below_floor``: its cosine is under the similarity floor (scored no further, so ``relevance``,
  ``time_weight`` and ``final_score`` are null);
- ``duplicate``: folded into a near-identical memory by dedupe;
- ``below_top_k``: scored and distinct, but not among the ``top_k`` best;
- ``over_budget``: among the ``top_k`` but cut by the token budget.

Pure and cheap (one pass over ~100 candidates, objects built without re-validation): the gateway
calls it after the response is computed, so the hot path only pays for building the log row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from schemas import RecallCandidate

if TYPE_CHECKING:
    from hindsight.recall.pipeline import RecallResult
    from hindsight.recall.rank import Candidate, RecalledMemory

SECONDS_PER_DAY = 86_400.0


def _days(reference_ts: float, payload: dict[str, Any], key: str) -> float:
    value = payload.get(key)
    if value is None:
        return 0.0
    return (reference_ts - float(value)) / SECONDS_PER_DAY


def _row(
    c: Candidate,
    outcome: str,
    reference_ts: float,
    scored: RecalledMemory | None,
    rank: int | None,
) -> RecallCandidate:
    p = c.payload
    fields: dict[str, Any] = {
        "memory_id": c.id,
        "memory_type": p.get("type", "episodic"),
        "kind": p.get("kind", "turn"),
        "outcome": outcome,
        "rank": rank,
        "similarity": float(c.cosine),
        "dense_rank": c.dense_rank,
        "lexical_rank": c.lexical_rank,
        "lexical_score": c.lexical_score,
        "rerank_score": c.rerank_score,
        "relevance": None if scored is None else scored.relevance,
        "time_weight": None if scored is None else scored.time_weight,
        "final_score": None if scored is None else scored.final_score,
        "in_time_window": False if scored is None else scored.in_time_window,
        "age_days": _days(reference_ts, p, "created_ts"),
        "since_access_days": _days(reference_ts, p, "last_accessed_ts"),
        "access_count": int(p.get("access_count", 0)),
        "importance": float(p.get("importance", 0.0)),
        "confidence": float(p.get("confidence", 0.0)),
        "status": p.get("status", "active"),
        "version": int(p.get("version", 1)),
    }
    # trusted internal values (already validated when the memory was stored): skip re-validation
    return RecallCandidate.model_construct(**fields)


def trace(result: RecallResult) -> list[RecallCandidate]:
    """Every candidate of ``result`` with its scores and outcome (module doc): returned ones first
    in response order, then the others by final score (below-floor ones by cosine). Pure."""
    reference_ts = result.reference_time.timestamp() if result.reference_time is not None else 0.0
    scored = {m.id: m for m in result.scored}
    returned = {m.id: m.rank for m in result.memories}
    ordered = {m.id for m in result.ordered}
    distinct = {m.id for m in result.deduped}
    rows: list[RecallCandidate] = []
    for memory in result.memories:
        c = result.found.get(memory.id)
        if c is not None:
            rows.append(_row(c, "returned", reference_ts, scored.get(memory.id), returned[memory.id]))
    for memory in result.scored:
        if memory.id in returned:
            continue
        c = result.found.get(memory.id)
        if c is None:
            continue
        if memory.id not in distinct:
            outcome = "duplicate"
        elif memory.id in ordered:
            outcome = "over_budget"
        else:
            outcome = "below_top_k"
        rows.append(_row(c, outcome, reference_ts, memory, None))
    below = sorted((c for c in result.found.values() if c.id not in scored), key=lambda c: (-c.cosine, c.id))
    rows.extend(_row(c, "below_floor", reference_ts, None, None) for c in below)
    return rows
