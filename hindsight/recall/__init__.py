"""Recall (DESIGN.md section 5): query parsing, hybrid candidates, ranking, token budget.

Modules, one step each: :mod:`~hindsight.recall.query` (entities, intent, time expressions),
:mod:`~hindsight.recall.rank` (fusion, time weight, boosts, floor, dedupe, order),
:mod:`~hindsight.recall.budget` (token budget), :mod:`~hindsight.recall.pipeline` (the I/O).
"""

from hindsight.recall.pipeline import Conflict, RecallResult, recall
from hindsight.recall.rank import (
    SIMILARITY_FLOOR,
    TOP_K_DEFAULT,
    TOP_K_MAX,
    Candidate,
    RecalledMemory,
    RecallParams,
)

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
