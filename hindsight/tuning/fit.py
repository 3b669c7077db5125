"""The fits of ``hindsight tune`` (DESIGN.md sections 4 and 10): pure functions over the aggregates
ClickHouse returns (:mod:`hindsight.analytics.queries`), each with the statistics that back it.

- :func:`fit_floor`: the similarity floor. Over returned memories of recalls that received feedback,
  recall(θ) = share of *relevant* ones (``used``/``outdated``) with cosine >= θ and precision(θ) = share
  of relevant among those kept; the floor is the θ with the best precision among those that keep at
  least ``target_recall`` (default 0.95) of relevant memories *with 95% confidence* (a one-sided
  binomial bound on the share they lose, :func:`max_misses`: with few labels the floor stays low, near
  the least similar used memory, and rises toward the plain quantile as labels accumulate). Fitted on
  the earlier labels; the latest ones (``holdout``) validate it: the floor is applied only when it
  keeps ``target_recall`` of the held-out relevant memories and its 95% bootstrap interval is narrow.
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
  memory is computed as the eviction job would have computed it then (its returns before the cut,
  the last of them, with the decay under test); a threshold θ would have expired those below it, and
  its *regret* is the share of memories used after the cut that it would have expired. The threshold
  is the largest θ whose regret stays <= ``max_regret`` at every training cut, or, when an
  expire-share target is set and a smaller θ already expires that share of never-used memories, that
  smaller (safer) θ. A later held-out cut, whose later uses the training cuts never see, validates it:
  applied only when its regret there is <= ``max_regret`` too.
- :func:`fit_keep`: the write-trigger's keep threshold: the largest importance t such that memories
  below t hold at most ``1 - keep_recall`` of the memories used (with 95% confidence, as for the
  floor), with the share of stored memories it would have saved; validated on the memories used in the
  held-out period. Only raisable from the data: turns the write-trigger skipped were never stored, so
  never observed.

Each fit refuses data that cannot support it: it returns :class:`NotFitted` naming how much it has and
how much it needs (the minimums below). A fit that ran but did not validate is returned with
``validated=False`` and the reason: it is reported, never applied (the current value stays).
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
MIN_HOLDOUT_POSITIVES = 30
"""Held-out relevant labels the floor's validation needs (a 95% share measured on 30 is +-8%)."""
MIN_HOLDOUT_LATER_USED = 20
"""Memories used after the held-out cut the expiry validation needs."""
MIN_HOLDOUT_USED_MEMORIES = 20
"""Memories used in the held-out period the keep-threshold validation needs."""
CONFIDENCE = 0.95
"""Confidence of the one-sided bounds (:func:`max_misses`)."""
MAX_FLOOR_CI = 0.05
"""Widest 95% bootstrap interval of the floor (cosine) that is applied."""
MIN_FLOOR_TRIM = 0.10
"""Least share of the unused returns above the current floor that a raised floor must remove to be
applied (ours): a floor that trims less barely changes what an agent reads, while every used memory
it drops is a miss (LoCoMo replay, 2026-12-03: a floor of 0.79 trimmed 4.5 % of unused returns,
precision 0.078 -> 0.080, and cost recall@10 0.006)."""
MAX_DECAY_REL_SE = 0.25
"""Largest standard error of the decay rate relative to the rate that is fitted (95% interval about
+-50%): wider, and the data do not pin the decay down."""

Floats = npt.NDArray[np.float64]


def binomial_cdf(k: npt.ArrayLike, n: int, p: float) -> Floats:
    """``P(X <= k)`` for ``X ~ Binomial(n, p)``, element-wise over ``k`` (log-space recursion over the
    pmf, exact to float precision; a unit test checks it against ``scipy.stats.binom.cdf``).

    Raises:
        ValueError: ``n < 0`` or ``p`` outside ``(0, 1)``.
    """
    if n < 0 or not 0.0 < p < 1.0:
        raise ValueError(f"binomial_cdf needs n >= 0 and 0 < p < 1, got n={n}, p={p}")
    i = np.arange(n + 1, dtype=np.float64)
    steps = np.log(np.maximum(n - i[:-1], 1.0)) - np.log(i[1:]) + math.log(p / (1.0 - p))
    log_pmf = n * math.log1p(-p) + np.concatenate(([0.0], np.cumsum(steps)))
    cdf = np.minimum(1.0, np.cumsum(np.exp(log_pmf - log_pmf.max())) * math.exp(log_pmf.max()))
    kk = np.asarray(k, dtype=np.int64)
    return np.where(kk < 0, 0.0, cdf[np.clip(kk, 0, n)])


def max_misses(n: int, miss_share: float, confidence: float = CONFIDENCE) -> int:
    """The most misses among ``n`` that still show, with ``confidence``, that the true miss share is
    at most ``miss_share``: the largest ``k`` with ``P(Binomial(n, miss_share) <= k) <= 1 - confidence``
    (equivalently, the one-sided Clopper-Pearson upper bound of ``k / n`` is <= ``miss_share``).
    ``-1`` when even no miss is not enough (``n`` below ``log(1 - confidence) / log(1 - miss_share)``,
    e.g. 59 for a 5% share at 95%, 299 for 1%).
    """
    if miss_share <= 0.0:
        return -1
    if miss_share >= 1.0 or n <= 0:
        return n if miss_share >= 1.0 else -1
    cdf = binomial_cdf(np.arange(n + 1), n, miss_share)
    ok = np.flatnonzero(cdf <= 1.0 - confidence + 1e-12)
    return int(ok.max()) if ok.size else -1


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
    """The fitted similarity floor, its precision/recall curve, and its validation on held-out labels."""

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
    unused_trimmed: float = 0.0
    """Share of the unused labelled returns at or above the current floor that this floor removes."""
    holdout_positives: int = 0
    holdout_recall: float | None = None
    """Share of held-out relevant memories the floor keeps (``None``: no held-out labels)."""
    current_holdout_recall: float | None = None
    validated: bool = False
    reason: str = ""
    """Why it is not applied (empty when validated)."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready statistics (the curve itself goes to the plot)."""
        return {
            "fitted": True,
            "validated": self.validated,
            "not_applied_because": self.reason or None,
            "floor": round(self.floor, 4),
            "recall_of_used": round(self.recall, 4),
            "precision": round(self.precision, 4),
            "ci95": [round(self.ci95[0], 4), round(self.ci95[1], 4)],
            "positives": self.positives,
            "negatives": self.negatives,
            "target_recall": self.target_recall,
            "unused_trimmed": round(self.unused_trimmed, 4),
            "holdout_positives": self.holdout_positives,
            "holdout_recall_of_used": None if self.holdout_recall is None else round(self.holdout_recall, 4),
            "current_floor": self.current,
            "current_recall_of_used": round(self.current_recall, 4),
            "current_precision": round(self.current_precision, 4),
            "current_holdout_recall_of_used": None
            if self.current_holdout_recall is None
            else round(self.current_holdout_recall, 4),
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


def _choose_floor(pos: Floats, neg: Floats, allowed_misses: int) -> int:
    """Index of the best-precision threshold among those losing at most ``allowed_misses`` positives
    (ties: the highest threshold); 0 (keep everything) when no threshold qualifies."""
    _, precision = _curve(pos, neg)
    lost = np.concatenate(([0.0], np.cumsum(pos)[:-1]))  # positives below bin i
    ok = np.flatnonzero(lost <= allowed_misses + 1e-9)
    if ok.size == 0:
        return 0
    best = ok[np.flatnonzero(precision[ok] >= precision[ok].max() - 1e-12)]
    return int(best.max())


def _share_kept(bins: Floats, pos: Floats, threshold: float) -> float | None:
    total = float(pos.sum())
    if total <= 0:
        return None
    return float(pos[bins >= threshold - 1e-9].sum() / total)


def fit_floor(
    bins: Sequence[float],
    positives: Sequence[float],
    negatives: Sequence[float],
    *,
    holdout_positives: Sequence[float] | None = None,
    target_recall: float = 0.95,
    current: float = 0.65,
    confidence: float = CONFIDENCE,
    max_ci: float = MAX_FLOOR_CI,
    min_trim: float = MIN_FLOOR_TRIM,
    bootstrap: int = 200,
    seed: int = 7,
) -> FloorFit | NotFitted:
    """Fit the similarity floor from a labelled histogram and validate it (module doc).

    Args:
        bins: lower edges of the similarity bins, ascending (cosine).
        positives / negatives: relevant / irrelevant labelled returns per bin (the training part).
        holdout_positives: relevant labelled returns per bin of the held-out (later) recalls; ``None``
            or too few: the fit is reported but not validated, so not applied.
        target_recall: share of relevant memories the floor must keep (0..1), with ``confidence``.
        current: the floor in force, for comparison.
        max_ci: widest bootstrap 95% interval (cosine) of a floor that is applied.
        min_trim: least share of the unused returns at or above ``current`` that a raised floor must
            remove to be applied (:data:`MIN_FLOOR_TRIM`).
        bootstrap: resamples for the 95% interval.

    Raises:
        ValueError: ``target_recall`` outside (0, 1], or the sequences differ in length.
    """
    if not 0.0 < target_recall <= 1.0:
        raise ValueError(f"target_recall must be in (0, 1], got {target_recall}")
    b = np.asarray(bins, dtype=np.float64)
    p = np.asarray(positives, dtype=np.float64)
    n = np.asarray(negatives, dtype=np.float64)
    h = np.asarray(holdout_positives if holdout_positives is not None else np.zeros_like(p), dtype=np.float64)
    if not (b.shape == p.shape == n.shape == h.shape):
        raise ValueError("bins, positives, negatives and holdout_positives must have the same length")
    n_pos, n_neg = int(p.sum()), int(n.sum())
    if n_pos < MIN_FLOOR_POSITIVES or n_neg < MIN_FLOOR_NEGATIVES:
        return NotFitted(
            "similarity_floor",
            f"needs >= {MIN_FLOOR_POSITIVES} used and >= {MIN_FLOOR_NEGATIVES} unused labelled returns "
            f"(before the held-out part), has {n_pos} and {n_neg} (agents send them with "
            "POST /v1/recall/{query_id}/feedback)",
            {"positives": n_pos, "negatives": n_neg},
            {"positives": MIN_FLOOR_POSITIVES, "negatives": MIN_FLOOR_NEGATIVES},
        )
    allowed = max_misses(n_pos, 1.0 - target_recall, confidence)  # resamples keep n_pos: computed once
    i = _choose_floor(p, n, allowed)
    recall, precision = _curve(p, n)
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(bootstrap):
        bp = rng.multinomial(n_pos, p / n_pos).astype(np.float64)
        bn = rng.multinomial(n_neg, n / n_neg).astype(np.float64)
        draws.append(b[_choose_floor(bp, bn, allowed)])
    lo, hi = (float(x) for x in np.percentile(draws, [2.5, 97.5]))
    j = int(np.searchsorted(b, current, side="left"))
    floor = float(b[i])
    held = int(h.sum())
    held_recall = _share_kept(b, h, floor)
    reasons = []
    if held < MIN_HOLDOUT_POSITIVES:
        reasons.append(f"{held} held-out used labels, validation needs >= {MIN_HOLDOUT_POSITIVES}")
    elif held_recall is not None and held_recall < target_recall:
        reasons.append(
            f"keeps {held_recall:.1%} of the {held} held-out used memories, under the target "
            f"{target_recall:.0%}"
        )
    if hi - lo > max_ci:
        reasons.append(f"95% interval {lo:.3f}-{hi:.3f} is wider than {max_ci}")
    above = b >= current - 1e-9
    unused_above = float(n[above].sum())
    trimmed = float(n[above & (b < floor - 1e-9)].sum()) / unused_above if unused_above > 0 else 0.0
    if floor > current + 1e-9 and trimmed < min_trim:
        lost = float(p[above & (b < floor - 1e-9)].sum()) / max(float(p[above].sum()), 1.0)
        reasons.append(
            f"removes only {trimmed:.1%} of the unused returns (needs >= {min_trim:.0%}) "
            f"for {lost:.1%} of the used ones"
        )
    return FloorFit(
        floor=floor,
        recall=float(recall[i]),
        precision=float(precision[i]),
        ci95=(lo, hi),
        positives=n_pos,
        negatives=n_neg,
        target_recall=target_recall,
        unused_trimmed=trimmed,
        thresholds=b,
        recall_curve=recall,
        precision_curve=precision,
        current=current,
        current_recall=float(recall[j]) if j < b.size else 0.0,
        current_precision=float(precision[j]) if j < b.size else 0.0,
        holdout_positives=held,
        holdout_recall=held_recall,
        current_holdout_recall=_share_kept(b, h, current),
        validated=not reasons,
        reason="; ".join(reasons),
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
    if se > MAX_DECAY_REL_SE * rate:
        return NotFitted(
            f"decay[{group}]",
            f"the data do not pin the decay down: {rate:.4f}/day +- {se:.4f} (standard error over "
            f"{MAX_DECAY_REL_SE:.0%} of the rate, from {n_events} reuses); keeping the current decay",
            {"relative_se": se / rate, "reuses": n_events},
            {"relative_se": MAX_DECAY_REL_SE},
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
    """The stored memories at one cut with their history before it and whether they were used after it
    (one array entry per memory). Cut times may differ per user (each user's own history is cut at the
    same fraction of it)."""

    cut: float
    """The cut as a fraction of each user's recall window (a label: times are in ``cut_day``)."""
    user: npt.NDArray[np.int64]
    """Dense user index (the frequency term's max is per user)."""
    memory_type: Sequence[str]
    importance: Floats
    born: Floats
    cut_day: Floats
    """The cut of each memory's user (days on the tuner's clock)."""
    accesses_before: Floats
    """Returns by recalls before the cut: the eviction job's access count."""
    last_access_before: Floats
    """The last of them (0 if none)."""
    uses_before: Floats
    """Uses (the tuner's signal) before the cut."""
    used_after: npt.NDArray[np.bool_]
    holdout: bool = False
    """A validation cut (its later uses are never seen by the training cuts)."""

    def scores(self, decay_by_type: Mapping[str, float], default_decay: float) -> Floats:
        """Eviction score of every memory at the cut, as the eviction job computes it then
        (:func:`hindsight.scoring.eviction_scores`: importance, days since the last access or since
        birth, access count against the user's most accessed memory)."""
        last = np.where(self.accesses_before > 0, np.maximum(self.last_access_before, self.born), self.born)
        days = self.cut_day - last
        most = np.zeros(int(self.user.max()) + 1 if self.user.size else 0)
        np.maximum.at(most, self.user, self.accesses_before)
        decay = np.array([decay_by_type.get(t, default_decay) for t in self.memory_type], dtype=np.float64)
        return eviction_scores(
            self.importance, days, self.accesses_before, most[self.user], decay_per_day=decay
        )

    @property
    def never_used(self) -> npt.NDArray[np.bool_]:
        """Memories used neither before the cut nor after it."""
        mask: npt.NDArray[np.bool_] = (self.uses_before == 0) & ~self.used_after
        return mask


@dataclass(frozen=True)
class ExpiryFit:
    """The fitted expiry threshold for one decay setting, the replay behind it and its validation."""

    threshold: float
    max_regret: float
    grid: Floats
    expired_share: Floats
    """Share of memories each threshold expires, averaged over the training cuts."""
    never_used_expired_share: Floats
    regret: Floats
    """Worst regret over the training cuts per threshold."""
    cuts: list[dict[str, float]]
    current: float
    current_regret: float
    current_never_used_expired: float
    decay: str = "current"
    """Which decay the scores used: ``current``, ``fitted`` or ``grid`` (:data:`EVICTION_DECAY_GRID`)."""
    default_decay: float = 0.0
    """The decay rate (per day) of memory types without their own, as replayed."""
    target_expire_share: float = 0.0
    zero_regret_threshold: float = 0.0
    """The largest threshold within ``max_regret`` on the training cuts."""
    holdout: dict[str, Any] = field(default_factory=dict)
    """The validation cut: memories, used after, expired, never-used expired share, regret (tuned and
    current threshold)."""
    validated: bool = False
    reason: str = ""

    @property
    def never_used_share(self) -> float:
        """Share of never-used memories the fitted threshold expires (mean over the training cuts)."""
        return float(self.never_used_expired_share[int(np.argmin(np.abs(self.grid - self.threshold)))])

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready statistics (a coarse table of the sweep; the plot has all of it)."""
        i = int(np.argmin(np.abs(self.grid - self.threshold)))
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
            "validated": self.validated,
            "not_applied_because": self.reason or None,
            "decay": self.decay,
            "decay_per_day": round(self.default_decay, 5),
            "expire_below": round(self.threshold, 4),
            "zero_regret_threshold": round(self.zero_regret_threshold, 4),
            "target_expire_share": self.target_expire_share,
            "max_regret": self.max_regret,
            "expired_share": round(float(self.expired_share[i]), 4),
            "never_used_expired_share": round(float(self.never_used_expired_share[i]), 4),
            "worst_regret": round(float(self.regret[i]), 4),
            "current_expire_below": self.current,
            "current_worst_regret": round(self.current_regret, 4),
            "current_never_used_expired_share": round(self.current_never_used_expired, 4),
            "holdout": self.holdout,
            "cuts": self.cuts,
            "sweep": table,
        }


def _sweep(snap: Snapshot, scores: Floats, thresholds: Floats) -> tuple[Floats, Floats, Floats]:
    """Per threshold: share expired, share of never-used expired, regret (share of later-used expired)."""
    below = scores[None, :] < thresholds[:, None]  # (thresholds, memories)
    never = snap.never_used
    later = snap.used_after
    return (
        below.mean(axis=1),
        below[:, never].mean(axis=1) if never.any() else np.zeros(thresholds.size),
        below[:, later].mean(axis=1) if later.any() else np.zeros(thresholds.size),
    )


def fit_expiry(
    snapshots: Sequence[Snapshot],
    decay_by_type: Mapping[str, float],
    default_decay: float,
    *,
    max_regret: float = 0.0,
    target_expire_share: float = 0.0,
    current: float = 0.15,
    decay: str = "current",
    grid: Floats | None = None,
) -> ExpiryFit | NotFitted:
    """Sweep expiry thresholds over replayed cuts and validate on the held-out one (module doc).

    Args:
        snapshots: the stored memories at each cut; those with ``holdout`` set validate, the others
            train.
        decay_by_type / default_decay: the decay per memory type under test (fitted, or current).
        max_regret: largest share of later-used memories a threshold may expire, at any cut.
        target_expire_share: when > 0, the smallest threshold that expires this share of never-used
            memories (averaged over the training cuts) is taken instead of the zero-regret one if it is
            smaller: the storage goal met with the most room to spare.
        current: the threshold in force, for comparison.
        decay: label of the decay setting (``current`` / ``fitted`` / ``grid``), reported.
        grid: thresholds to try (default 0 .. 0.6 by 0.0025).
    """
    thresholds = grid if grid is not None else np.round(np.arange(0.0, 0.6001, 0.0025), 4)
    train = [s for s in snapshots if not s.holdout]
    usable = [
        s
        for s in train
        if int(s.used_after.sum()) >= MIN_LATER_USED and s.importance.size >= MIN_REPLAY_MEMORIES
    ]
    if not usable:
        have_used = max((int(s.used_after.sum()) for s in train), default=0)
        have_mem = max((int(s.importance.size) for s in train), default=0)
        return NotFitted(
            "expire_below",
            f"needs a replay cut with >= {MIN_REPLAY_MEMORIES} stored memories and >= {MIN_LATER_USED} of "
            f"them used after it (before the held-out period), has at best {have_mem} and {have_used}",
            {"memories": have_mem, "used_after_cut": have_used},
            {"memories": MIN_REPLAY_MEMORIES, "used_after_cut": MIN_LATER_USED},
        )
    expired = np.zeros((len(usable), thresholds.size))
    never = np.zeros_like(expired)
    regret = np.zeros_like(expired)
    cuts = []
    for k, snap in enumerate(usable):
        expired[k], never[k], regret[k] = _sweep(snap, snap.scores(decay_by_type, default_decay), thresholds)
        cuts.append(
            {
                "cut": round(snap.cut, 3),
                "memories": int(snap.importance.size),
                "used_after": int(snap.used_after.sum()),
                "never_used": int(snap.never_used.sum()),
            }
        )
    worst = regret.max(axis=0)
    never_mean = never.mean(axis=0)
    ok = np.flatnonzero(worst <= max_regret + 1e-12)
    zero = int(ok.max()) if ok.size else 0
    i = zero
    if target_expire_share > 0:
        meets = np.flatnonzero(never_mean >= target_expire_share - 1e-12)
        if meets.size and int(meets.min()) < zero:
            i = int(meets.min())
    threshold = float(thresholds[i])
    j = int(np.argmin(np.abs(thresholds - current)))
    held = [s for s in snapshots if s.holdout]
    reasons: list[str] = []
    holdout: dict[str, Any] = {}
    if not held:
        reasons.append("no held-out cut to validate on")
    else:
        snap = held[-1]
        scores = snap.scores(decay_by_type, default_decay)
        later = int(snap.used_after.sum())
        expired_later = int((scores[snap.used_after] < threshold).sum())
        current_later = int((scores[snap.used_after] < current).sum())
        never_mask = snap.never_used
        holdout = {
            "cut": round(snap.cut, 3),
            "memories": int(scores.size),
            "used_after": later,
            "never_used": int(never_mask.sum()),
            "expired": int((scores < threshold).sum()),
            "never_used_expired_share": round(float((scores[never_mask] < threshold).mean()), 4)
            if never_mask.any()
            else 0.0,
            "later_used_expired": expired_later,
            "current_later_used_expired": current_later,
            "current_never_used_expired_share": round(float((scores[never_mask] < current).mean()), 4)
            if never_mask.any()
            else 0.0,
        }
        if later < MIN_HOLDOUT_LATER_USED:
            reasons.append(
                f"{later} memories used after the held-out cut, validation needs >= {MIN_HOLDOUT_LATER_USED}"
            )
        elif expired_later / later > max_regret + 1e-12:
            reasons.append(
                f"at the held-out cut it would have expired {expired_later} of the {later} memories used "
                f"later (allowed share {max_regret:g})"
            )
    return ExpiryFit(
        threshold=threshold,
        max_regret=max_regret,
        grid=thresholds,
        expired_share=expired.mean(axis=0),
        never_used_expired_share=never_mean,
        regret=worst,
        cuts=cuts,
        current=current,
        current_regret=float(worst[j]),
        current_never_used_expired=float(never_mean[j]),
        decay=decay,
        default_decay=default_decay,
        target_expire_share=target_expire_share,
        zero_regret_threshold=float(thresholds[zero]),
        holdout=holdout,
        validated=not reasons,
        reason="; ".join(reasons),
    )


EVICTION_DECAY_GRID: tuple[float, ...] = (0.002, 0.005, 0.01, 0.02)
"""Eviction decays (per day) the expiry replay tries beside the fitted and the current one (ours: half-lives
of about a year to a month). The reuse fit answers how fast a memory's chance of reuse falls at first;
what eviction needs is the order in which memories stop being used, and where reuse has a long tail (a
question about an old session long after it; LoCoMo replay, docs/tuning.md) a slower decay keeps the
memories that tail needs while a threshold still expires as many never-used ones."""


def choose_expiry(alternatives: Sequence[ExpiryFit | NotFitted]) -> ExpiryFit | NotFitted:
    """The eviction setting to apply: among the alternatives that validated, the one whose threshold
    expires the largest share of never-used memories on the training cuts (each already within the
    allowed regret); ties go to the earlier one (fitted, then current, then the grid). None validated:
    the first, reported and not applied.

    Raises:
        ValueError: ``alternatives`` is empty.
    """
    if not alternatives:
        raise ValueError("no eviction setting was replayed")
    validated = [a for a in alternatives if isinstance(a, ExpiryFit) and a.validated]
    if not validated:
        return alternatives[0]
    best = max(a.never_used_share for a in validated)
    return next(a for a in validated if a.never_used_share >= best - 1e-12)


# -- keep threshold ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeepFit:
    """The fitted write-trigger keep threshold and its validation."""

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
    holdout_used: int = 0
    holdout_kept: float | None = None
    validated: bool = False
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready statistics."""
        return {
            "fitted": True,
            "validated": self.validated,
            "not_applied_because": self.reason or None,
            "keep_threshold": round(self.threshold, 4),
            "keep_recall": self.keep_recall,
            "used_kept_share": round(self.used_kept, 4),
            "stored_saved_share": round(self.stored_saved, 4),
            "used_memories": self.used_memories,
            "stored_memories": self.stored_memories,
            "holdout_used_memories": self.holdout_used,
            "holdout_used_kept_share": None if self.holdout_kept is None else round(self.holdout_kept, 4),
            "current_keep_threshold": self.current,
        }


def fit_keep(
    bins: Sequence[float],
    stored: Sequence[float],
    used: Sequence[float],
    *,
    holdout_used: Sequence[float] | None = None,
    keep_recall: float = 0.99,
    current: float = 0.2,
    confidence: float = CONFIDENCE,
) -> KeepFit | NotFitted:
    """Largest importance threshold that keeps ``keep_recall`` of used memories with ``confidence``
    (:func:`max_misses`), never below ``current`` (lower thresholds cannot be learned: those turns were
    never stored); validated on the memories used in the held-out period (module doc). A threshold equal
    to ``current`` changes nothing and is not proposed."""
    b = np.asarray(bins, dtype=np.float64)
    s = np.asarray(stored, dtype=np.float64)
    u = np.asarray(used, dtype=np.float64)
    h = np.asarray(holdout_used if holdout_used is not None else np.zeros_like(u), dtype=np.float64)
    n_used = int(u.sum())
    allowed = max_misses(n_used, 1.0 - keep_recall, confidence)
    if n_used < MIN_USED_MEMORIES or allowed < 0:
        need = MIN_USED_MEMORIES
        while max_misses(need, 1.0 - keep_recall, confidence) < 0:
            need += 1
        return NotFitted(
            "keep_threshold",
            f"needs >= {need} distinct used memories with a stored importance (to show {keep_recall:.0%} "
            f"of them kept with {confidence:.0%} confidence), has {n_used}",
            {"used_memories": n_used},
            {"used_memories": need},
        )
    lost = np.concatenate(([0.0], np.cumsum(u)[:-1]))  # used memories below bin i
    ok = np.flatnonzero(lost <= allowed + 1e-9)
    i = int(ok.max())
    threshold = max(float(b[i]), current)
    k = int(np.searchsorted(b, threshold - 1e-9, side="left"))
    saved = float(s[:k].sum() / s.sum()) if s.sum() > 0 else 0.0
    held = int(h.sum())
    held_kept = _share_kept(b, h, threshold)
    reasons = []
    if threshold <= current + 1e-9:
        reasons.append(f"no higher threshold keeps {keep_recall:.0%} of used memories: the current one stays")
    elif held < MIN_HOLDOUT_USED_MEMORIES:
        reasons.append(
            f"{held} memories used in the held-out period, validation needs >= {MIN_HOLDOUT_USED_MEMORIES}"
        )
    elif held_kept is not None and held_kept < keep_recall:
        reasons.append(
            f"keeps {held_kept:.1%} of the {held} memories used in the held-out period, under "
            f"{keep_recall:.0%}"
        )
    return KeepFit(
        threshold=threshold,
        keep_recall=keep_recall,
        used_kept=float(u[k:].sum() / n_used) if n_used else 0.0,
        stored_saved=saved,
        used_memories=n_used,
        stored_memories=int(s.sum()),
        bins=b,
        stored=s,
        used=u,
        current=current,
        holdout_used=held,
        holdout_kept=held_kept,
        validated=not reasons,
        reason="; ".join(reasons),
    )
