"""The fits of ``hindsight tune`` (DESIGN.md sections 4 and 10): pure functions over the aggregates
ClickHouse returns (:mod:`hindsight.analytics.queries`), each with the statistics that back it.

- :func:`fit_floor`: the similarity floor. Over returned memories of recalls that received feedback,
  recall(θ) = share of *relevant* ones (``used``/``outdated``) with cosine >= θ and precision(θ) = share
  of relevant among those kept; the floor is the θ with the best precision among those keeping at
  least ``target_recall`` (default 0.95) of relevant memories. A 95% interval from a bootstrap of the
  labelled candidates (multinomial resampling of the histogram).
- :func:`fit_decay`: the decay rate. A piecewise-exponential (discrete-time hazard) model of reuse:
  in each bin of days since the memory's last use (its birth counts as the first), the number of uses
  is Poisson with mean ``exposure * a * exp(-lambda * t)`` (``exposure`` = memory-days at risk in the
  bin, censored gaps included). ``lambda`` is fitted by Poisson GLM maximum likelihood
  (:func:`poisson_regression`: log link, exposure offset; checked against statsmodels): the
  probability of being used again falls by half every ``ln 2 / lambda`` days, which is the eviction
  recency term's ``exp(-decay * days)``. Standard errors
  from the Fisher information, the half-life's by the delta method; deviance per degree of freedom
  says how well a single exponential fits.
- :func:`fit_expiry`: the expiry threshold. At several cut times the eviction score of every stored
  memory is computed from its history before the cut (with the fitted decay); a threshold θ would
  have expired those below it, and its *regret* is the share of memories used after the cut that it
  would have expired. The threshold is the largest θ whose regret stays <= ``max_regret`` at every cut.
- :func:`fit_keep`: the write-trigger's keep threshold: the largest importance t such that memories
  below t hold at most ``1 - keep_recall`` of the memories ever used (what a stricter write-trigger
  would have dropped), with the share of stored memories it would have saved. Only raisable from the
  data: turns the write-trigger skipped were never stored, so never observed.

Each fit refuses data that cannot support it: it returns :class:`NotFitted` naming how much it has and
how much it needs (the minimums below).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from hindsight.scoring import eviction_scores

MIN_FLOOR_POSITIVES = 100
"""Relevant (used/outdated) labelled returns the floor fit needs: the 5th percentile of 100 has a
binomial 95% interval of about +-4 ranks, i.e. roughly +-0.01 of cosine at e5's spread."""
MIN_FLOOR_NEGATIVES = 100
"""Unused/wrong labelled returns the floor fit needs (precision is meaningless without them)."""
MIN_REUSE_EVENTS = 100
"""Observed reuses (uncensored gaps) the pooled decay fit needs (rate's relative SE ~ 1/sqrt(n) = 10%)."""
MIN_REUSE_EVENTS_PER_TYPE = 50
"""Per memory type; a type with fewer uses gets the pooled rate (and says so)."""
MIN_LATER_USED = 30
"""Memories used after a cut the expiry replay needs (regret is a share of them)."""
MIN_REPLAY_MEMORIES = 200
"""Stored memories born before a cut the expiry replay needs."""
MIN_USED_MEMORIES = 50
"""Distinct used memories with a known importance the keep-threshold fit needs."""

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class NotFitted:
    """A fit refused: ``reason`` says what it has, what it needs and how to get more."""

    name: str
    reason: str
    have: dict[str, float] = field(default_factory=dict)
    need: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"fitted": False, "reason": self.reason, "have": self.have, "need": self.need}


# -- similarity floor ------------------------------------------------------------------------------


@dataclass(frozen=True)
class FloorFit:
    """The fitted similarity floor and its precision/recall curve."""

    floor: float
    recall: float
    precision: float
    ci95: tuple[float, float]
    positives: int
    negatives: int
    target_recall: float
    thresholds: Floats
    recall_curve: Floats
    precision_curve: Floats
    current: float
    current_recall: float
    current_precision: float

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready statistics (the curve itself goes to the plot)."""
        return {
            "fitted": True,
            "floor": round(self.floor, 4),
            "recall_of_used": round(self.recall, 4),
            "precision": round(self.precision, 4),
            "ci95": [round(self.ci95[0], 4), round(self.ci95[1], 4)],
            "positives": self.positives,
            "negatives": self.negatives,
            "target_recall": self.target_recall,
            "current_floor": self.current,
            "current_recall_of_used": round(self.current_recall, 4),
            "current_precision": round(self.current_precision, 4),
        }


def _curve(pos: Floats, neg: Floats) -> tuple[Floats, Floats]:
    """Recall and precision when keeping bins i.. (histograms ordered by ascending bin)."""
    kept_pos = np.cumsum(pos[::-1])[::-1]
    kept_neg = np.cumsum(neg[::-1])[::-1]
    total = kept_pos[0] if kept_pos.size else 0.0
    recall = kept_pos / total if total > 0 else np.zeros_like(kept_pos)
    kept = kept_pos + kept_neg
    precision = np.divide(kept_pos, kept, out=np.zeros_like(kept_pos), where=kept > 0)
    return recall, precision


def _choose_floor(bins: Floats, pos: Floats, neg: Floats, target: float) -> int:
    recall, precision = _curve(pos, neg)
    ok = np.flatnonzero(recall >= target - 1e-12)
    # best precision among thresholds keeping enough; ties -> the highest threshold
    best = ok[np.flatnonzero(precision[ok] >= precision[ok].max() - 1e-12)]
    return int(best.max())


def fit_floor(
    bins: Sequence[float],
    positives: Sequence[float],
    negatives: Sequence[float],
    *,
    target_recall: float = 0.95,
    current: float = 0.65,
    bootstrap: int = 200,
    seed: int = 7,
) -> FloorFit | NotFitted:
    """Fit the similarity floor from a labelled histogram (module doc).

    Args:
        bins: lower edges of the similarity bins, ascending (cosine).
        positives / negatives: relevant / irrelevant labelled returns per bin.
        target_recall: share of relevant memories the floor must keep (0..1).
        current: the floor in force, for comparison.
        bootstrap: resamples for the 95% interval.

    Raises:
        ValueError: ``target_recall`` outside (0, 1], or the three sequences differ in length.
    """
    if not 0.0 < target_recall <= 1.0:
        raise ValueError(f"target_recall must be in (0, 1], got {target_recall}")
    b = np.asarray(bins, dtype=np.float64)
    p = np.asarray(positives, dtype=np.float64)
    n = np.asarray(negatives, dtype=np.float64)
    if not (b.shape == p.shape == n.shape):
        raise ValueError("bins, positives and negatives must have the same length")
    n_pos, n_neg = int(p.sum()), int(n.sum())
    if n_pos < MIN_FLOOR_POSITIVES or n_neg < MIN_FLOOR_NEGATIVES:
        return NotFitted(
            "similarity_floor",
            f"needs >= {MIN_FLOOR_POSITIVES} used and >= {MIN_FLOOR_NEGATIVES} unused labelled returns, "
            f"has {n_pos} and {n_neg} (agents send them with POST /v1/recall/{{query_id}}/feedback)",
            {"positives": n_pos, "negatives": n_neg},
            {"positives": MIN_FLOOR_POSITIVES, "negatives": MIN_FLOOR_NEGATIVES},
        )
    i = _choose_floor(b, p, n, target_recall)
    recall, precision = _curve(p, n)
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(bootstrap):
        bp = rng.multinomial(n_pos, p / n_pos).astype(np.float64)
        bn = rng.multinomial(n_neg, n / n_neg).astype(np.float64)
        draws.append(b[_choose_floor(b, bp, bn, target_recall)])
    lo, hi = np.percentile(draws, [2.5, 97.5])
    j = int(np.searchsorted(b, current, side="left"))
    cur_recall = float(recall[j]) if j < b.size else 0.0
    cur_precision = float(precision[j]) if j < b.size else 0.0
    return FloorFit(
        floor=float(b[i]),
        recall=float(recall[i]),
        precision=float(precision[i]),
        ci95=(float(lo), float(hi)),
        positives=n_pos,
        negatives=n_neg,
        target_recall=target_recall,
        thresholds=b,
        recall_curve=recall,
        precision_curve=precision,
        current=current,
        current_recall=cur_recall,
        current_precision=cur_precision,
    )


# -- decay -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hazard:
    """Reuse events and memory-days at risk per bin of days since the last use, for one group."""

    starts: Floats
    """Bin start (days)."""
    width: float
    events: Floats
    exposure: Floats
    """Memory-days at risk in each bin."""

    @property
    def rate(self) -> Floats:
        """Empirical hazard (uses per memory-day) per bin; 0 where nothing was at risk."""
        return np.divide(self.events, self.exposure, out=np.zeros_like(self.events), where=self.exposure > 0)


def hazard_from_gaps(
    bins: npt.ArrayLike,
    censored: npt.ArrayLike,
    counts: npt.ArrayLike,
    gap_sums: npt.ArrayLike,
    width: float,
) -> Hazard:
    """Events and exact exposure per bin from the gap histogram of :meth:`TuningSql.reuse_gaps`.

    A gap of length g contributes ``width`` memory-days to every bin it passes whole and ``g - start``
    to the bin it ends in; it is an event in that bin unless censored.
    """
    idx = np.asarray(bins, dtype=np.int64)
    cens = np.asarray(censored, dtype=np.int64)
    cnt = np.asarray(counts, dtype=np.float64)
    sums = np.asarray(gap_sums, dtype=np.float64)
    size = int(idx.max()) + 1 if idx.size else 0
    ends = np.zeros(size)
    partial = np.zeros(size)
    events = np.zeros(size)
    np.add.at(ends, idx, cnt)
    np.add.at(partial, idx, sums - cnt * idx * width)
    np.add.at(events, idx[cens == 0], cnt[cens == 0])
    passing = np.cumsum(ends[::-1])[::-1] - ends  # gaps ending in a later bin pass this one whole
    exposure = passing * width + partial
    return Hazard(np.arange(size, dtype=np.float64) * width, width, events, exposure)


@dataclass(frozen=True)
class DecayFit:
    """Fitted reuse decay of one group (a memory type, or all)."""

    group: str
    rate_per_day: float
    se: float
    half_life_days: float
    half_life_ci95: tuple[float, float]
    intercept: float
    events: int
    exposure_days: float
    deviance_per_df: float
    hazard: Hazard
    pooled: bool = False
    """True when the group had too few uses and carries the pooled rate."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready statistics."""
        return {
            "fitted": True,
            "decay_per_day": round(self.rate_per_day, 5),
            "se": round(self.se, 5),
            "half_life_days": round(self.half_life_days, 2),
            "half_life_ci95": [round(self.half_life_ci95[0], 2), round(self.half_life_ci95[1], 2)],
            "base_rate_per_day": round(math.exp(self.intercept), 5),
            "reuses": self.events,
            "exposure_memory_days": round(self.exposure_days, 1),
            "deviance_per_df": round(self.deviance_per_df, 3),
            "pooled": self.pooled,
        }


@dataclass(frozen=True)
class PoissonFit:
    """Maximum-likelihood Poisson regression ``log E[y] = log(exposure) + b0 + b1 * x``."""

    intercept: float
    slope: float
    se_intercept: float
    se_slope: float
    deviance: float
    df_resid: int
    iterations: int


def poisson_regression(
    x: Floats, events: Floats, exposure: Floats, *, tol: float = 1e-10, max_iter: int = 100
) -> PoissonFit:
    """Newton-Raphson (= IRLS for the canonical log link) for a Poisson GLM with one covariate and an
    exposure offset; standard errors from the inverse Fisher information ``(X' W X)^-1``, deviance
    ``2 sum(y log(y/mu) - (y - mu))``. The covariate is centred for conditioning. A unit test checks
    it against statsmodels' ``GLM(family=Poisson, exposure=...)`` to 1e-6.

    Raises:
        ValueError: no events, or fewer than 2 points.
    """
    if x.size < 2 or float(events.sum()) <= 0:
        raise ValueError("a Poisson regression needs >= 2 points and at least one event")
    centre = float(np.average(x, weights=exposure))
    design = np.column_stack((np.ones_like(x), x - centre))
    beta = np.array([math.log(float(events.sum()) / float(exposure.sum())), 0.0])
    iterations = 0
    for iterations in range(1, max_iter + 1):  # noqa: B007 (reported in the result)
        mu = exposure * np.exp(design @ beta)
        gradient = design.T @ (events - mu)
        fisher = design.T @ (design * mu[:, None])
        step = np.linalg.solve(fisher, gradient)
        beta = beta + step
        if float(np.max(np.abs(step))) < tol:
            break
    mu = exposure * np.exp(design @ beta)
    cov = np.linalg.inv(design.T @ (design * mu[:, None]))
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(events > 0, events * np.log(events / mu), 0.0) - (events - mu)
    b0, b1 = float(beta[0]), float(beta[1])
    # back to the uncentred intercept: b0 - b1 * centre; its variance via the covariance
    var_b0 = float(cov[0, 0] + centre**2 * cov[1, 1] - 2 * centre * cov[0, 1])
    return PoissonFit(
        intercept=b0 - b1 * centre,
        slope=b1,
        se_intercept=math.sqrt(max(var_b0, 0.0)),
        se_slope=math.sqrt(float(cov[1, 1])),
        deviance=float(2.0 * terms.sum()),
        df_resid=int(x.size - 2),
        iterations=iterations,
    )


def fit_decay(group: str, hazard: Hazard, *, max_days: float | None = None) -> DecayFit | NotFitted:
    """Poisson GLM of reuse counts on days since the last use (module doc).

    Args:
        group: label of the group (memory type or ``all``).
        hazard: events and exposure per bin (:func:`hazard_from_gaps`).
        max_days: ignore bins starting at or after this (sparse tails); ``None`` keeps all.
    """
    keep = hazard.exposure > 0
    if max_days is not None:
        keep &= hazard.starts < max_days
    events = hazard.events[keep]
    exposure = hazard.exposure[keep]
    n_events = int(events.sum())
    need = MIN_REUSE_EVENTS if group == "all" else MIN_REUSE_EVENTS_PER_TYPE
    if n_events < need or int(keep.sum()) < 3:
        return NotFitted(
            f"decay[{group}]",
            f"needs >= {need} reuses of memories (a memory used again after an earlier use) over >= 3 "
            f"day bins, has {n_events} over {int(keep.sum())}",
            {"reuses": n_events, "bins": int(keep.sum())},
            {"reuses": need, "bins": 3},
        )
    mids = hazard.starts[keep] + hazard.width / 2.0
    result = poisson_regression(mids, events, exposure)
    rate, se = -result.slope, result.se_slope
    if rate <= 0:
        return NotFitted(
            f"decay[{group}]",
            f"no decay: reuse does not become rarer with time since the last use (slope "
            f"{result.slope:.4f}/day +- {se:.4f}); keeping the current decay",
            {"slope_per_day": result.slope},
            {"slope_per_day": -1e-9},
        )
    half = math.log(2.0) / rate
    lo_rate, hi_rate = rate - 1.96 * se, rate + 1.96 * se
    ci = (math.log(2.0) / hi_rate, math.log(2.0) / lo_rate if lo_rate > 0 else math.inf)
    return DecayFit(
        group=group,
        rate_per_day=rate,
        se=se,
        half_life_days=half,
        half_life_ci95=ci,
        intercept=result.intercept,
        events=n_events,
        exposure_days=float(exposure.sum()),
        deviance_per_df=result.deviance / max(1, result.df_resid),
        hazard=hazard,
    )


# -- expiry ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """The stored memories at one cut time (days) with their history before it and whether they were
    used after it (one array entry per memory)."""

    cut: float
    user: npt.NDArray[np.int64]
    """Dense user index (the frequency term's max is per user)."""
    memory_type: Sequence[str]
    importance: Floats
    born: Floats
    uses_before: Floats
    last_use_before: Floats
    used_after: npt.NDArray[np.bool_]

    def scores(self, decay_by_type: Mapping[str, float], default_decay: float) -> Floats:
        """Eviction score of every memory at the cut (:func:`hindsight.scoring.eviction_scores`)."""
        last = np.where(self.uses_before > 0, np.maximum(self.last_use_before, self.born), self.born)
        days = self.cut - last
        most = np.zeros(int(self.user.max()) + 1 if self.user.size else 0)
        np.maximum.at(most, self.user, self.uses_before)
        decay = np.array([decay_by_type.get(t, default_decay) for t in self.memory_type], dtype=np.float64)
        return eviction_scores(self.importance, days, self.uses_before, most[self.user], decay_per_day=decay)


@dataclass(frozen=True)
class ExpiryFit:
    """The fitted expiry threshold and the replay behind it."""

    threshold: float
    max_regret: float
    grid: Floats
    expired_share: Floats
    """Share of memories each threshold expires, averaged over the cuts."""
    never_used_expired_share: Floats
    regret: Floats
    """Worst regret over the cuts per threshold."""
    cuts: list[dict[str, float]]
    current: float
    current_regret: float
    current_never_used_expired: float

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready statistics (a coarse table of the sweep; the plot has all of it)."""
        i = int(np.searchsorted(self.grid, self.threshold))
        table = [
            {
                "threshold": round(float(t), 3),
                "expired_share": round(float(e), 4),
                "never_used_expired_share": round(float(u), 4),
                "worst_regret": round(float(r), 4),
            }
            for t, e, u, r in zip(
                self.grid[::10],
                self.expired_share[::10],
                self.never_used_expired_share[::10],
                self.regret[::10],
                strict=True,
            )
        ]
        return {
            "fitted": True,
            "expire_below": round(self.threshold, 4),
            "max_regret": self.max_regret,
            "expired_share": round(float(self.expired_share[i]), 4),
            "never_used_expired_share": round(float(self.never_used_expired_share[i]), 4),
            "worst_regret": round(float(self.regret[i]), 4),
            "current_expire_below": self.current,
            "current_worst_regret": round(self.current_regret, 4),
            "current_never_used_expired_share": round(self.current_never_used_expired, 4),
            "cuts": self.cuts,
            "sweep": table,
        }


def fit_expiry(
    snapshots: Sequence[Snapshot],
    decay_by_type: Mapping[str, float],
    default_decay: float,
    *,
    max_regret: float = 0.0,
    current: float = 0.15,
    grid: Floats | None = None,
) -> ExpiryFit | NotFitted:
    """Sweep expiry thresholds over replayed cuts (module doc).

    Args:
        snapshots: the stored memories at each cut.
        decay_by_type / default_decay: the decay per memory type (fitted, or current).
        max_regret: largest share of later-used memories a threshold may expire, at any cut.
        current: the threshold in force, for comparison.
        grid: thresholds to try (default 0 .. 0.6 by 0.0025).
    """
    thresholds = grid if grid is not None else np.round(np.arange(0.0, 0.6001, 0.0025), 4)
    usable = [
        s
        for s in snapshots
        if int(s.used_after.sum()) >= MIN_LATER_USED and s.importance.size >= MIN_REPLAY_MEMORIES
    ]
    if not usable:
        have_used = max((int(s.used_after.sum()) for s in snapshots), default=0)
        have_mem = max((int(s.importance.size) for s in snapshots), default=0)
        return NotFitted(
            "expire_below",
            f"needs a cut with >= {MIN_REPLAY_MEMORIES} stored memories and >= {MIN_LATER_USED} of them "
            f"used after it, has at best {have_mem} and {have_used}",
            {"memories": have_mem, "used_after_cut": have_used},
            {"memories": MIN_REPLAY_MEMORIES, "used_after_cut": MIN_LATER_USED},
        )
    expired = np.zeros((len(usable), thresholds.size))
    never = np.zeros_like(expired)
    regret = np.zeros_like(expired)
    cuts = []
    for k, snap in enumerate(usable):
        scores = snap.scores(decay_by_type, default_decay)
        below = scores[None, :] < thresholds[:, None]  # (thresholds, memories)
        later = snap.used_after
        unused = (snap.uses_before == 0) & ~later
        expired[k] = below.mean(axis=1)
        never[k] = below[:, unused].mean(axis=1) if unused.any() else 0.0
        regret[k] = below[:, later].mean(axis=1)
        cuts.append(
            {
                "cut_day": round(snap.cut, 2),
                "memories": int(scores.size),
                "used_after": int(later.sum()),
                "never_used": int(unused.sum()),
            }
        )
    worst = regret.max(axis=0)
    ok = np.flatnonzero(worst <= max_regret + 1e-12)
    i = int(ok.max()) if ok.size else 0
    j = int(np.argmin(np.abs(thresholds - current)))
    return ExpiryFit(
        threshold=float(thresholds[i]),
        max_regret=max_regret,
        grid=thresholds,
        expired_share=expired.mean(axis=0),
        never_used_expired_share=never.mean(axis=0),
        regret=worst,
        cuts=cuts,
        current=current,
        current_regret=float(worst[j]),
        current_never_used_expired=float(never.mean(axis=0)[j]),
    )


# -- keep threshold ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeepFit:
    """The fitted write-trigger keep threshold."""

    threshold: float
    keep_recall: float
    used_kept: float
    stored_saved: float
    used_memories: int
    stored_memories: int
    bins: Floats
    stored: Floats
    used: Floats
    current: float

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready statistics."""
        return {
            "fitted": True,
            "keep_threshold": round(self.threshold, 4),
            "keep_recall": self.keep_recall,
            "used_kept_share": round(self.used_kept, 4),
            "stored_saved_share": round(self.stored_saved, 4),
            "used_memories": self.used_memories,
            "stored_memories": self.stored_memories,
            "current_keep_threshold": self.current,
        }


def fit_keep(
    bins: Sequence[float],
    stored: Sequence[float],
    used: Sequence[float],
    *,
    keep_recall: float = 0.99,
    current: float = 0.2,
) -> KeepFit | NotFitted:
    """Largest importance threshold keeping ``keep_recall`` of used memories (module doc); never below
    ``current`` (lower thresholds cannot be learned: those turns were never stored)."""
    b = np.asarray(bins, dtype=np.float64)
    s = np.asarray(stored, dtype=np.float64)
    u = np.asarray(used, dtype=np.float64)
    n_used = int(u.sum())
    if n_used < MIN_USED_MEMORIES:
        return NotFitted(
            "keep_threshold",
            f"needs >= {MIN_USED_MEMORIES} distinct used memories with a stored importance, has {n_used}",
            {"used_memories": n_used},
            {"used_memories": MIN_USED_MEMORIES},
        )
    # keeping bins i.. keeps this share of used memories
    kept_used = np.cumsum(u[::-1])[::-1] / n_used
    ok = np.flatnonzero(kept_used >= keep_recall - 1e-12)
    i = int(ok.max())
    threshold = max(float(b[i]), current)
    k = int(np.searchsorted(b, threshold, side="left"))
    saved = float(s[:k].sum() / s.sum()) if s.sum() > 0 else 0.0
    return KeepFit(
        threshold=threshold,
        keep_recall=keep_recall,
        used_kept=float(kept_used[k]) if k < kept_used.size else 0.0,
        stored_saved=saved,
        used_memories=n_used,
        stored_memories=int(s.sum()),
        bins=b,
        stored=s,
        used=u,
        current=current,
    )
