"""Recall (DESIGN.md section 5): query parsing, hybrid candidates, ranking, token budget.

Modules, one step each: :mod:`~hindsight.recall.query` (entities, intent, time expressions),
:mod:`~hindsight.recall.rank` (fusion, time weight, boosts, floor, dedupe, order),
:mod:`~hindsight.recall.budget` (token budget), :mod:`~hindsight.recall.pipeline` (the I/O).

The pipeline's names are imported on first use (PEP 562): a process that only needs the ranking
constants (``hindsight tune`` reads ``SIMILARITY_FLOOR``) does not pay for the pipeline's imports
(query parsing, stores: ~1.4 s of a 2-core machine's start-up, measured with ``-X importtime``).
"""

from typing import TYPE_CHECKING, Any

from hindsight.recall.rank import (
    SIMILARITY_FLOOR,
    TOP_K_DEFAULT,
    TOP_K_MAX,
    Candidate,
    RecalledMemory,
    RecallParams,
)

if TYPE_CHECKING:
    from hindsight.recall.pipeline import Conflict, RecallResult, recall

_PIPELINE = frozenset({"Conflict", "RecallResult", "recall"})


def __getattr__(name: str) -> Any:
    if name in _PIPELINE:
        from hindsight.recall import pipeline  # noqa: PLC0415 (lazy on purpose: module doc)

        return getattr(pipeline, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "SIMILARITY_FLOOR",
    "TOP_K_DEFAULT",
    "TOP_K_MAX",
    "Candidate",
    "Conflict",
    "RecallParams",
    "RecallResult",
    "RecalledMemory",
    "recall",
]
