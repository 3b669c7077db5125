"""Pure scoring formulas of Hindsight's memory model, one place each (DESIGN.md sections 2, 4, 9).

Every function here is pure (no I/O, no clock): callers pass ages and counts in the units named.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt


def working_memory_score(importance: float, age_turns: int, lam: float = 0.1) -> float:
    """Importance-weighted recency score of a working-memory item.

    Formula (DESIGN.md section 2, from the seed article's section 4.3):
    ``score = importance * exp(-lam * age_turns)``. With ``lam = 0.1`` an item loses about 63 % of
    its weight every 10 turns (``exp(-1) ~ 0.368``). When a session holds more than its capacity,
    the item with the lowest score is pushed out of working memory (and compressed into episodic
    memory by the caller).

    Args:
        importance: the item's importance, dimensionless, in ``[0, 1]``.
        age_turns: turns elapsed since the item was added: the session's current turn index minus
            the item's turn index (``>= 0`` in normal use; a negative age, from an item that
            arrived ahead of the session's turn counter, scores above its importance).
        lam: decay rate per turn, ``>= 0`` (default 0.1).

    Returns:
        The score, dimensionless, in ``[0, importance]`` for non-negative ages.

    Raises:
        ValueError: if ``importance`` is outside ``[0, 1]`` or ``lam`` is negative or either is NaN.
    """
    if not 0.0 <= importance <= 1.0:
        raise ValueError(f"importance must be in [0, 1], got {importance!r}")
    if not lam >= 0.0:
        raise ValueError(f"lam must be >= 0, got {lam!r}")
    return importance * math.exp(-lam * age_turns)


# --- eviction (DESIGN.md section 4) -----------------------------------------------------------

EVICTION_WEIGHTS = (0.4, 0.3, 0.3)
"""(importance, recency, frequency) weights of the eviction score (DESIGN.md section 4)."""
RECENCY_DECAY_PER_DAY = 0.05
"""``recency = exp(-0.05 * days)``: about a 14-day half-life (DESIGN.md section 4)."""
EXPIRE_BELOW = 0.15
"""A memory whose eviction score falls below this is soft-deleted (status ``expired``)."""


def recency(days_since_last_access: float, decay_per_day: float = RECENCY_DECAY_PER_DAY) -> float:
    """``exp(-decay_per_day * days)`` in ``(0, 1]``; negative ages (clock skew) count as 0 days."""
    return math.exp(-decay_per_day * max(0.0, days_since_last_access))


def frequency(access_count: int, max_access_count: int) -> float:
    """``log(access_count+1) / log(max_access_count+1)`` in ``[0, 1]``; 0 when nothing was accessed.

    ``max_access_count`` is the largest count among the same user's memories (DESIGN.md section 4).
    """
    if max_access_count <= 0:
        return 0.0
    return min(1.0, math.log(access_count + 1) / math.log(max_access_count + 1))


def eviction_score(
    importance: float,
    days_since_last_access: float,
    access_count: int,
    max_access_count: int,
    *,
    weights: tuple[float, float, float] = EVICTION_WEIGHTS,
    decay_per_day: float = RECENCY_DECAY_PER_DAY,
) -> float:
    """``0.4*importance + 0.3*recency + 0.3*frequency`` (DESIGN.md section 4), in ``[0, 1]``.

    Args:
        importance: 0..1.
        days_since_last_access: days (float) since the memory was last returned by recall, or since
            it was stored if it never was.
        access_count: recalls that returned it.
        max_access_count: the largest ``access_count`` among the user's memories.
    """
    w_imp, w_rec, w_freq = weights
    return (
        w_imp * importance
        + w_rec * recency(days_since_last_access, decay_per_day)
        + w_freq * frequency(access_count, max_access_count)
    )


def eviction_scores(
    importance: npt.ArrayLike,
    days_since_last_access: npt.ArrayLike,
    access_count: npt.ArrayLike,
    max_access_count: npt.ArrayLike,
    *,
    decay_per_day: npt.ArrayLike = RECENCY_DECAY_PER_DAY,
    weights: tuple[float, float, float] = EVICTION_WEIGHTS,
) -> npt.NDArray[np.float64]:
    """:func:`eviction_score` of many memories at once (the tuner replays thousands): the same formula
    element-wise over broadcastable arrays (``decay_per_day`` may differ per memory, e.g. by type).

    Returns:
        ``(n,)`` float64 scores in ``[0, 1]``; equal to :func:`eviction_score` element by element.
    """
    w_imp, w_rec, w_freq = weights
    days = np.maximum(0.0, np.asarray(days_since_last_access, dtype=np.float64))
    rec = np.exp(-np.asarray(decay_per_day, dtype=np.float64) * days)
    count = np.asarray(access_count, dtype=np.float64)
    most = np.asarray(max_access_count, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        freq = np.where(most > 0, np.minimum(1.0, np.log(count + 1.0) / np.log(most + 1.0)), 0.0)
    return w_imp * np.asarray(importance, dtype=np.float64) + w_rec * rec + w_freq * freq


# --- recall time weight (DESIGN.md section 4) ---------------------------------------------------

STEP_TIME_WEIGHTS = ((7.0, 1.0), (30.0, 0.8))
"""Step mode: created within 7 days 1.0, within 30 days 0.8, older 0.6 (DESIGN.md section 4)."""
STEP_TIME_WEIGHT_OLDER = 0.6
TIME_BLEND = 0.3
"""Share of the time weight in the final recall score; similarity gets ``1 - 0.3`` (DESIGN.md s4)."""


def time_weight(age_days: float, mode: str = "step", decay_per_day: float = RECENCY_DECAY_PER_DAY) -> float:
    """Recall time weight of a memory ``age_days`` old (created_at to the query's reference time).

    ``step``: 1.0 within 7 days, 0.8 within 30, else 0.6; ``exp``: ``exp(-decay_per_day * age)``.
    A memory from the future (negative age) gets 1.0.

    Raises:
        ValueError: unknown ``mode``.
    """
    age = max(0.0, age_days)
    if mode == "step":
        for limit, weight in STEP_TIME_WEIGHTS:
            if age <= limit:
                return weight
        return STEP_TIME_WEIGHT_OLDER
    if mode == "exp":
        return math.exp(-decay_per_day * age)
    raise ValueError(f"time weight mode must be 'step' or 'exp', got {mode!r}")


def blend(similarity: float, time_w: float, time_share: float = TIME_BLEND) -> float:
    """Final recall score ``(1 - time_share) * similarity + time_share * time_w`` (DESIGN.md s4)."""
    return (1.0 - time_share) * similarity + time_share * time_w


# --- semantic confidence (DESIGN.md section 4) ---------------------------------------------------


def abstraction_confidence(
    support: int,
    contradictions: int,
    *,
    k: int = 3,
    base: float = 0.3,
    step: float = 0.1,
    penalty: float = 0.15,
    ceiling: float = 0.9,
) -> float:
    """Confidence of a semantic memory abstracted from ``support`` episodes (K-of-M rule).

    Starts low at ``base`` when seen in exactly ``k`` episodes, rises ``step`` per extra supporting
    episode, falls ``penalty`` per contradicting one, clipped to ``[0, ceiling]``. Rule-based and
    documented here; only the K-of-M shape (K=3, M=10, "low-confidence candidate") is from DESIGN.md
    section 4, the numbers are ours.
    """
    value = base + step * max(0, support - k) - penalty * contradictions
    return max(0.0, min(ceiling, value))


def reinforced_confidence(confidence: float, *, rate: float = 0.3, ceiling: float = 0.95) -> float:
    """Confidence of a fact or lesson stated again (the same information merged into it): closes
    ``rate`` of the gap to ``ceiling`` per repetition (0.6 -> 0.705 -> 0.78 -> ...), so repeated
    support raises it with diminishing steps and never reaches certainty. Ours, not from DESIGN.md
    (which says only that support raises confidence)."""
    return round(min(ceiling, confidence + rate * max(0.0, ceiling - confidence)), 4)
