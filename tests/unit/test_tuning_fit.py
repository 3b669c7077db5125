"""The tuner's fits on data with a known answer (pure numpy; statsmodels only as the reference for the
Poisson regression), the vectorised eviction score, and the tuned-settings file."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from hindsight.errors import ConfigurationError
from hindsight.scoring import eviction_score, eviction_scores
from hindsight.tuning import settings_file
from hindsight.tuning.fit import (
    MIN_FLOOR_TRIM,
    DecayFit,
    ExpiryFit,
    FloorFit,
    KeepFit,
    NotFitted,
    Snapshot,
    binomial_cdf,
    choose_expiry,
    fit_decay,
    fit_expiry,
    fit_floor,
    fit_keep,
    hazard_from_gaps,
    max_misses,
    poisson_regression,
)
from services.evict.settings import EvictSettings
from services.ingest.settings import IngestSettings

pytestmark = pytest.mark.unit


def _histogram(values: np.ndarray, width: float = 0.005) -> dict[float, int]:
    bins = np.floor(values / width) * width
    keys, counts = np.unique(np.round(bins, 6), return_counts=True)
    return dict(zip(keys.tolist(), counts.tolist(), strict=True))


def _floor_inputs(used: np.ndarray, unused: np.ndarray) -> tuple[list[float], list[int], list[int]]:
    pos, neg = _histogram(used), _histogram(unused)
    bins = sorted(set(pos) | set(neg))
    return bins, [pos.get(b, 0) for b in bins], [neg.get(b, 0) for b in bins]


@pytest.mark.parametrize(("mu_used", "sigma", "n"), [(0.82, 0.04, 2000), (0.55, 0.08, 800), (0.9, 0.02, 400)])
def test_floor_recovers_the_quantile_that_keeps_95_percent_of_used(
    mu_used: float, sigma: float, n: int
) -> None:
    rng = np.random.default_rng(1)
    used = rng.normal(mu_used, sigma, n)
    unused = rng.normal(mu_used - 2 * sigma, sigma, 3 * n)
    held = rng.normal(mu_used, sigma, n // 2)
    bins, pos, neg = _floor_inputs(used, unused)
    fit = fit_floor(bins, pos, neg, holdout_positives=_on(bins, held), target_recall=0.95, current=0.65)
    assert isinstance(fit, FloorFit)
    truth = mu_used - 1.6449 * sigma
    # with 95% confidence that >= 95% are kept, the floor sits a little under the plain quantile
    assert truth - 0.03 <= fit.floor <= truth + 0.005
    assert fit.recall >= 0.95
    assert fit.ci95[0] <= fit.floor <= fit.ci95[1]
    assert fit.ci95[1] - fit.ci95[0] < 0.05
    assert fit.positives == n
    assert 0 < fit.precision <= 1
    assert fit.validated, fit.reason
    assert fit.holdout_recall is not None
    assert fit.holdout_recall >= 0.95


def _on(bins: list[float], values: np.ndarray) -> list[int]:
    """``values`` counted on the given bins (values outside them land in the nearest edge bin)."""
    edges = np.asarray(bins)
    idx = np.clip(np.searchsorted(edges, np.floor(values / 0.005) * 0.005 - 1e-9), 0, edges.size - 1)
    return np.bincount(idx, minlength=edges.size).tolist()


def test_floor_with_few_labels_stays_near_the_least_similar_used_memory() -> None:
    rng = np.random.default_rng(8)
    used = rng.normal(0.8, 0.04, 120)
    bins, pos, neg = _floor_inputs(used, rng.normal(0.72, 0.04, 1200))
    fit = fit_floor(bins, pos, neg, holdout_positives=_on(bins, rng.normal(0.8, 0.04, 60)))
    assert isinstance(fit, FloorFit)
    # 120 labels show ">= 95% kept" with 95% confidence only if at most one is lost (the plain 5%
    # quantile would lose six): the floor stays at the second least similar used memory or below
    assert max_misses(120, 0.05) == 1
    assert fit.recall >= 119 / 120
    assert fit.floor <= np.sort(used)[1]
    assert fit.floor > used.min() - 0.01


def test_floor_that_fails_on_held_out_labels_is_reported_not_applied() -> None:
    rng = np.random.default_rng(9)
    bins, pos, neg = _floor_inputs(rng.normal(0.85, 0.02, 2000), rng.normal(0.75, 0.03, 4000))
    # the held-out (later) used memories are less similar: the fitted floor would cut a third of them
    fit = fit_floor(bins, pos, neg, holdout_positives=_on(bins, rng.normal(0.8, 0.03, 300)))
    assert isinstance(fit, FloorFit)
    assert not fit.validated
    assert "held-out used memories, under the target 95%" in fit.reason
    assert fit.holdout_recall is not None
    assert fit.holdout_recall < 0.95
    assert fit.as_dict()["validated"] is False
    few = fit_floor(bins, pos, neg, holdout_positives=[0] * len(bins))
    assert isinstance(few, FloorFit)
    assert not few.validated
    assert "validation needs >= 30" in few.reason


def test_floor_that_trims_too_little_of_the_unused_returns_is_not_applied() -> None:
    rng = np.random.default_rng(10)
    # used and unused returns equally similar: any floor drops as many used as unused memories
    bins, pos, neg = _floor_inputs(rng.normal(0.8, 0.04, 1000), rng.normal(0.8, 0.04, 6000))
    fit = fit_floor(bins, pos, neg, holdout_positives=_on(bins, rng.normal(0.8, 0.04, 300)))
    assert isinstance(fit, FloorFit)
    assert fit.floor > 0.65
    assert fit.unused_trimmed < MIN_FLOOR_TRIM
    assert not fit.validated
    assert "removes only" in fit.reason
    assert "needs >= 10%" in fit.reason
    assert fit.as_dict()["unused_trimmed"] == round(fit.unused_trimmed, 4)
    # the same labels with the unused returns less similar: the floor trims a share worth its misses
    bins, pos, neg = _floor_inputs(rng.normal(0.8, 0.04, 1000), rng.normal(0.72, 0.04, 6000))
    fit = fit_floor(bins, pos, neg, holdout_positives=_on(bins, rng.normal(0.8, 0.04, 300)))
    assert isinstance(fit, FloorFit)
    assert fit.unused_trimmed >= MIN_FLOOR_TRIM
    assert fit.validated, fit.reason


def test_floor_refuses_too_few_labels_and_says_how_many_it_needs() -> None:
    rng = np.random.default_rng(2)
    fit = fit_floor(*_floor_inputs(rng.normal(0.8, 0.05, 40), rng.normal(0.7, 0.05, 500)))
    assert isinstance(fit, NotFitted)
    assert "needs >= 100 used" in fit.reason
    assert "has 40 and 500" in fit.reason
    assert fit.have == {"positives": 40, "negatives": 500}
    with pytest.raises(ValueError, match="target_recall"):
        fit_floor([0.5], [1], [1], target_recall=0.0)


def test_binomial_bound_agrees_with_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    for n, p in ((10, 0.3), (105, 0.05), (5000, 0.01), (49000, 0.05)):
        k = np.arange(0, min(n, 400) + 1)
        assert binomial_cdf(k, n, p) == pytest.approx(stats.binom.cdf(k, n, p), abs=1e-9)
    # k misses show a miss share <= q with 95% confidence iff the one-sided Clopper-Pearson bound is <= q
    for n, q in ((58, 0.05), (59, 0.05), (105, 0.05), (1000, 0.05), (298, 0.01), (299, 0.01), (5000, 0.01)):
        k = max_misses(n, q)
        if k >= 0:
            assert stats.beta.ppf(0.95, k + 1, n - k) <= q + 1e-9
        if k + 1 < n:
            assert stats.beta.ppf(0.95, k + 2, n - k - 1) > q
    assert max_misses(58, 0.05) == -1
    assert max_misses(59, 0.05) == 0


def test_poisson_regression_agrees_with_statsmodels() -> None:
    sm = pytest.importorskip("statsmodels.api")
    rng = np.random.default_rng(3)
    x = np.arange(60, dtype=np.float64) + 0.5
    exposure = rng.uniform(50, 500, x.size)
    events = rng.poisson(exposure * 0.08 * np.exp(-0.04 * x)).astype(np.float64)
    ours = poisson_regression(x, events, exposure)
    ref = sm.GLM(events, sm.add_constant(x), family=sm.families.Poisson(), exposure=exposure).fit()
    assert ours.intercept == pytest.approx(ref.params[0], abs=1e-6)
    assert ours.slope == pytest.approx(ref.params[1], abs=1e-8)
    assert ours.se_slope == pytest.approx(ref.bse[1], rel=1e-6)
    assert ours.se_intercept == pytest.approx(ref.bse[0], rel=1e-6)
    assert ours.deviance == pytest.approx(ref.deviance, rel=1e-6)


def test_hazard_exposure_counts_memory_days_at_risk_exactly() -> None:
    # gaps: 0.5 (event, bin 0), 2.5 (event, bin 2), 1.2 (censored, bin 1)
    h = hazard_from_gaps([0, 2, 1], [0, 0, 1], [1, 1, 1], [0.5, 2.5, 1.2], width=1.0)
    assert h.events.tolist() == [1.0, 0.0, 1.0]
    # bin 0: 0.5 + 1 + 1; bin 1: 1 (the 2.5 gap) + 0.2; bin 2: 0.5
    assert h.exposure == pytest.approx([2.5, 1.2, 0.5])


def _simulate_gaps(
    a: float, lam: float, n: int, horizon: float, seed: int
) -> tuple[list[int], list[int], list[float]]:
    """Reuse processes with hazard a*exp(-lam*t) since the last use, observed for ``horizon`` days."""
    rng = np.random.default_rng(seed)
    bins: list[int] = []
    cens: list[int] = []
    gaps: list[float] = []
    for born in rng.uniform(0, horizon, n):
        t = born
        while True:
            e = rng.exponential()
            gap = math.inf if e >= a / lam else -math.log(1 - lam * e / a) / lam
            if t + gap > horizon:
                gaps.append(horizon - t)
                cens.append(1)
                bins.append(int(horizon - t))
                break
            gaps.append(gap)
            cens.append(0)
            bins.append(int(gap))
            t += gap
    return bins, cens, gaps


def test_decay_fit_recovers_a_known_half_life() -> None:
    bins, cens, gaps = _simulate_gaps(a=0.2, lam=math.log(2) / 12.0, n=3000, horizon=180.0, seed=4)
    # aggregate exactly as ClickHouse does: count and sum per (bin, censored)
    keys: dict[tuple[int, int], list[float]] = {}
    for b, c, g in zip(bins, cens, gaps, strict=True):
        keys.setdefault((b, c), []).append(g)
    hazard = hazard_from_gaps(
        [k[0] for k in keys],
        [k[1] for k in keys],
        [len(v) for v in keys.values()],
        [sum(v) for v in keys.values()],
        1.0,
    )
    fit = fit_decay("episodic", hazard)
    assert isinstance(fit, DecayFit)
    assert fit.half_life_days == pytest.approx(12.0, rel=0.1)
    assert fit.half_life_ci95[0] < 12.0 < fit.half_life_ci95[1]
    assert math.exp(fit.intercept) == pytest.approx(0.2, rel=0.1)
    assert fit.deviance_per_df < 2.0
    assert fit.as_dict()["pooled"] is False


def test_decay_refuses_too_few_reuses_and_no_decay() -> None:
    few = hazard_from_gaps([0, 1, 2], [0, 0, 0], [5, 5, 5], [2.5, 7.5, 12.5], 1.0)
    refused = fit_decay("all", few)
    assert isinstance(refused, NotFitted)
    assert "needs >= 100 reuses" in refused.reason
    flat = hazard_from_gaps(list(range(20)), [0] * 20, [30] * 20, [30 * (i + 0.5) for i in range(20)], 1.0)
    # 30 events in every bin while the at-risk population shrinks: the hazard rises, not decays
    grows = fit_decay("all", flat)
    assert isinstance(grows, NotFitted)
    assert "no decay" in grows.reason


def _snapshot(
    cut: float,
    importance: list[float] | np.ndarray,
    used_after: list[bool] | np.ndarray,
    accesses_before: list[int] | np.ndarray,
    *,
    holdout: bool = False,
) -> Snapshot:
    n = len(importance)
    accesses = np.asarray(accesses_before, dtype=np.float64)
    return Snapshot(
        cut=cut,
        user=np.zeros(n, dtype=np.int64),
        memory_type=["episodic"] * n,
        importance=np.asarray(importance, dtype=np.float64),
        born=np.zeros(n),
        cut_day=np.full(n, 200.0),
        accesses_before=accesses,
        last_access_before=np.where(accesses > 0, 199.0, 0.0),
        uses_before=np.zeros(n),
        used_after=np.asarray(used_after, dtype=bool),
        holdout=holdout,
    )


def _aged_snapshot(rng: np.random.Generator, *, holdout: bool = False) -> Snapshot:
    """200 memories used later (importance 0.5) and 200 never used (importance 0.1), of ages spread over
    0-190 days at the cut, none returned before it."""
    n = 400
    later = np.arange(n) < n // 2
    return Snapshot(
        cut=0.9 if holdout else 0.5,
        user=np.zeros(n, dtype=np.int64),
        memory_type=["episodic"] * n,
        importance=np.where(later, 0.5, 0.1),
        born=200.0 - rng.uniform(0.0, 190.0, n),
        cut_day=np.full(n, 200.0),
        accesses_before=np.zeros(n),
        last_access_before=np.zeros(n),
        uses_before=np.zeros(n),
        used_after=later,
        holdout=holdout,
    )


def test_the_eviction_decay_that_expires_the_most_never_used_memories_is_chosen() -> None:
    rng = np.random.default_rng(12)
    snaps = [_aged_snapshot(rng), _aged_snapshot(rng, holdout=True)]
    current = fit_expiry(snaps, {}, 0.05, decay="current")
    slow = fit_expiry(snaps, {}, 0.002, decay="grid")
    assert isinstance(current, ExpiryFit)
    assert isinstance(slow, ExpiryFit)
    assert current.validated
    assert slow.validated
    # at 0.05/day an old memory used later scores 0.4 * 0.5 = 0.2 and a young never-used one up to
    # 0.04 + 0.3 = 0.34: the young stay; at 0.002/day importance orders them and all never-used expire
    assert current.never_used_share < 0.97
    assert slow.never_used_share == 1.0
    assert choose_expiry([current, slow]) is slow
    assert choose_expiry([slow, current]) is slow
    refused = NotFitted("expire_below", "too little", {}, {})
    assert choose_expiry([refused, current]) is current
    assert choose_expiry([refused]) is refused
    with pytest.raises(ValueError, match="no eviction setting"):
        choose_expiry([])


def test_expiry_picks_the_largest_threshold_that_expires_no_later_used_memory() -> None:
    rng = np.random.default_rng(5)
    n = 400
    importance = rng.uniform(0.0, 1.0, n)
    later = importance > 0.5  # only important memories are used later
    held_imp = rng.uniform(0.0, 1.0, n)
    snaps = [
        _snapshot(0.5, importance, later, [0] * n),
        _snapshot(0.7, held_imp, held_imp > 0.5, [0] * n, holdout=True),
    ]
    fit = fit_expiry(snaps, {"episodic": 0.05}, 0.05, max_regret=0.0, current=0.15)
    assert isinstance(fit, ExpiryFit)
    # 200 days after birth recency ~ 0 and nothing was returned before: score = 0.4 * importance
    lowest_later = 0.4 * importance[later].min()
    assert fit.threshold <= lowest_later
    assert fit.threshold > lowest_later - 0.0026  # one grid step
    i = int(np.searchsorted(fit.grid, fit.threshold))
    assert fit.regret[i] == 0.0
    assert fit.never_used_expired_share[i] == pytest.approx(1.0, abs=0.02)
    assert fit.validated, fit.reason
    assert fit.holdout["later_used_expired"] == 0
    too_few = fit_expiry([_snapshot(0.5, [0.5] * 50, [True] * 5 + [False] * 45, [0] * 50)], {}, 0.05)
    assert isinstance(too_few, NotFitted)
    assert "needs a replay cut with >= 200" in too_few.reason


def test_expiry_that_expires_later_used_memories_at_the_held_out_cut_is_not_applied() -> None:
    rng = np.random.default_rng(6)
    importance = rng.uniform(0.0, 1.0, 400)
    held = rng.uniform(0.0, 1.0, 400)
    snaps = [
        _snapshot(0.5, importance, importance > 0.5, [0] * 400),
        # later, memories of middling importance are used too: the tuned threshold would expire them
        _snapshot(0.7, held, held > 0.3, [0] * 400, holdout=True),
    ]
    fit = fit_expiry(snaps, {}, 0.05, max_regret=0.0)
    assert isinstance(fit, ExpiryFit)
    assert not fit.validated
    assert fit.holdout["later_used_expired"] > 0
    assert "at the held-out cut it would have expired" in fit.reason
    no_holdout = fit_expiry(snaps[:1], {}, 0.05)
    assert isinstance(no_holdout, ExpiryFit)
    assert not no_holdout.validated
    assert "no held-out cut" in no_holdout.reason


def test_expiry_scores_count_every_return_as_the_eviction_job_does() -> None:
    importance = np.full(300, 0.2)
    accesses = np.where(np.arange(300) < 100, 5, 0)
    used_after = np.arange(300) < 100  # the often-returned memories are the ones used later
    snap = _snapshot(0.5, importance, used_after, accesses)
    scores = snap.scores({}, 0.05)
    # importance 0.08 + recency of an access a day before the cut + frequency 1 vs. importance only
    assert scores[:100] == pytest.approx(0.08 + 0.3 * math.exp(-0.05) + 0.3)
    assert scores[100:] == pytest.approx(0.08 + 0.3 * math.exp(-0.05 * 200))
    fit = fit_expiry([snap, _snapshot(0.7, importance, used_after, accesses, holdout=True)], {}, 0.05)
    assert isinstance(fit, ExpiryFit)
    assert fit.validated
    i = int(np.argmin(np.abs(fit.grid - fit.threshold)))
    assert fit.never_used_expired_share[i] == 1.0


def test_expiry_with_a_storage_target_takes_the_safest_threshold_that_meets_it() -> None:
    rng = np.random.default_rng(7)
    importance = rng.uniform(0.0, 1.0, 600)
    later = importance > 0.6
    snaps = [
        _snapshot(0.5, importance, later, [0] * 600),
        _snapshot(0.7, importance, later, [0] * 600, holdout=True),
    ]
    zero = fit_expiry(snaps, {}, 0.05)
    target = fit_expiry(snaps, {}, 0.05, target_expire_share=0.2)
    assert isinstance(zero, ExpiryFit)
    assert isinstance(target, ExpiryFit)
    assert target.threshold < zero.threshold
    assert target.zero_regret_threshold == zero.threshold
    i = int(np.argmin(np.abs(target.grid - target.threshold)))
    assert target.never_used_expired_share[i] >= 0.2
    assert target.never_used_expired_share[i - 1] < 0.2


def test_keep_threshold_keeps_99_percent_of_used_and_never_goes_below_current() -> None:
    bins = [round(0.01 * i, 2) for i in range(100)]
    stored = [10] * 100
    used = [0] * 40 + [6] * 60  # every used memory has importance >= 0.40
    held = [0] * 45 + [1] * 55
    fit = fit_keep(bins, stored, used, holdout_used=held, keep_recall=0.99, current=0.2)
    assert isinstance(fit, KeepFit)
    assert fit.threshold == pytest.approx(0.40)
    assert fit.stored_saved == pytest.approx(0.40)
    assert fit.used_kept == pytest.approx(1.0)
    assert fit.validated, fit.reason
    low = fit_keep(bins, stored, [6] * 100, holdout_used=held, current=0.2)
    assert isinstance(low, KeepFit)
    assert low.threshold == pytest.approx(0.2)
    assert not low.validated  # nothing to change
    worse = fit_keep(bins, stored, used, holdout_used=[1] * 100)
    assert isinstance(worse, KeepFit)
    assert not worse.validated
    assert "held-out period" in worse.reason
    few = fit_keep(bins, stored, [0] * 99 + [200])
    assert isinstance(few, NotFitted)
    assert "needs >= 299 distinct used memories" in few.reason


def test_vectorised_eviction_scores_equal_the_scalar_formula() -> None:
    rng = np.random.default_rng(6)
    imp, days = rng.uniform(0, 1, 200), rng.uniform(-5, 400, 200)
    count = rng.integers(0, 20, 200)
    most = count + rng.integers(0, 5, 200)
    decay = rng.uniform(0.01, 0.2, 200)
    got = eviction_scores(imp, days, count, most, decay_per_day=decay)
    want = [
        eviction_score(float(i), float(d), int(c), int(m), decay_per_day=float(k))
        for i, d, c, m, k in zip(imp, days, count, most, decay, strict=True)
    ]
    assert got == pytest.approx(want, abs=1e-12)


def test_tuned_file_versions_keep_the_previous_values_and_roll_back(tmp_path: Path) -> None:
    path = tmp_path / "tuning" / "tuned-settings.json"
    assert settings_file.load(path) is None
    v1 = settings_file.write(path, {"similarity_floor": 0.71, "expire_below": 0.12})
    v2 = settings_file.write(path, {"similarity_floor": 0.74, "decay_per_day": 0.03})
    assert (v1.version, v2.version) == (1, 2)
    assert v2.values.present() == {"similarity_floor": 0.74, "expire_below": 0.12, "decay_per_day": 0.03}
    assert v2.previous is not None
    assert v2.previous.values.present() == {"similarity_floor": 0.71, "expire_below": 0.12}
    assert settings_file.archive_path(path, 1).exists()
    back = settings_file.rollback(path)
    assert back.version == 3
    assert back.values.present() == {"similarity_floor": 0.71, "expire_below": 0.12}
    assert json.loads(path.read_text())["version"] == 3
    with pytest.raises(ConfigurationError, match="nothing to roll back"):
        settings_file.rollback(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ConfigurationError, match=r"bad\.json"):
        settings_file.load(tmp_path / "bad.json")


def test_services_take_tuned_values_unless_the_environment_sets_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "tuning" / "tuned-settings.json"
    settings_file.write(
        path,
        {
            "decay_per_day": 0.03,
            "decay_per_day_by_type": {"semantic": 0.01},
            "expire_below": 0.2,
            "keep_threshold": 0.3,
        },
    )
    monkeypatch.setenv("HINDSIGHT_EVICT_EXPIRE_BELOW", "0.1")
    tuning = settings_file.TuningSettings()
    evict, ingest = EvictSettings(), IngestSettings()
    applied = settings_file.apply("evict", evict, tuning, tmp_path)
    settings_file.apply("ingest", ingest, tuning, tmp_path)
    assert evict.decay_per_day == 0.03
    assert evict.decay_for("semantic") == 0.01
    assert evict.decay_for("episodic") == 0.03
    assert evict.expire_below == 0.1  # the operator's explicit value wins
    assert applied.overridden == ["expire_below"]
    assert applied.version == 1
    assert ingest.keep_threshold == 0.3
    off = EvictSettings()
    monkeypatch.setenv("HINDSIGHT_TUNING_ENABLED", "false")
    assert settings_file.apply("evict", off, settings_file.TuningSettings(), tmp_path).version is None
    assert off.decay_per_day == 0.05
