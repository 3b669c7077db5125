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
    DecayFit,
    ExpiryFit,
    FloorFit,
    KeepFit,
    NotFitted,
    Snapshot,
    fit_decay,
    fit_expiry,
    fit_floor,
    fit_keep,
    hazard_from_gaps,
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
    fit = fit_floor(*_floor_inputs(used, unused), target_recall=0.95, current=0.65)
    assert isinstance(fit, FloorFit)
    truth = mu_used - 1.6449 * sigma
    assert fit.floor == pytest.approx(truth, abs=0.02)
    assert fit.recall >= 0.95
    assert fit.ci95[0] <= fit.floor <= fit.ci95[1]
    assert fit.ci95[1] - fit.ci95[0] < 0.05
    assert fit.positives == n
    assert 0 < fit.precision <= 1


def test_floor_refuses_too_few_labels_and_says_how_many_it_needs() -> None:
    rng = np.random.default_rng(2)
    fit = fit_floor(*_floor_inputs(rng.normal(0.8, 0.05, 40), rng.normal(0.7, 0.05, 500)))
    assert isinstance(fit, NotFitted)
    assert "needs >= 100 used" in fit.reason
    assert "has 40 and 500" in fit.reason
    assert fit.have == {"positives": 40, "negatives": 500}
    with pytest.raises(ValueError, match="target_recall"):
        fit_floor([0.5], [1], [1], target_recall=0.0)


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
    cut: float, importance: list[float], used_after: list[bool], uses_before: list[int]
) -> Snapshot:
    n = len(importance)
    return Snapshot(
        cut=cut,
        user=np.zeros(n, dtype=np.int64),
        memory_type=["episodic"] * n,
        importance=np.asarray(importance, dtype=np.float64),
        born=np.zeros(n),
        uses_before=np.asarray(uses_before, dtype=np.float64),
        last_use_before=np.where(np.asarray(uses_before) > 0, cut - 1.0, 0.0),
        used_after=np.asarray(used_after, dtype=bool),
    )


def test_expiry_picks_the_largest_threshold_that_expires_no_later_used_memory() -> None:
    rng = np.random.default_rng(5)
    n = 400
    importance = rng.uniform(0.0, 1.0, n)
    later = importance > 0.5  # only important memories are used later
    snap = _snapshot(200.0, importance.tolist(), later.tolist(), [0] * n)
    fit = fit_expiry([snap], {"episodic": 0.05}, 0.05, max_regret=0.0, current=0.15)
    assert isinstance(fit, ExpiryFit)
    # 200 days after birth recency ~ 0 and nothing was used before: score = 0.4 * importance
    lowest_later = 0.4 * importance[later].min()
    assert fit.threshold <= lowest_later
    assert fit.threshold > lowest_later - 0.0026  # one grid step
    i = int(np.searchsorted(fit.grid, fit.threshold))
    assert fit.regret[i] == 0.0
    assert fit.never_used_expired_share[i] == pytest.approx(1.0, abs=0.02)
    too_few = fit_expiry([_snapshot(10.0, [0.5] * 50, [True] * 5 + [False] * 45, [0] * 50)], {}, 0.05)
    assert isinstance(too_few, NotFitted)
    assert "needs a cut with >= 200" in too_few.reason


def test_keep_threshold_keeps_99_percent_of_used_and_never_goes_below_current() -> None:
    bins = [round(0.01 * i, 2) for i in range(100)]
    stored = [10] * 100
    used = [0] * 40 + [2] * 60  # every used memory has importance >= 0.40
    fit = fit_keep(bins, stored, used, keep_recall=0.99, current=0.2)
    assert isinstance(fit, KeepFit)
    assert fit.threshold == pytest.approx(0.40)
    assert fit.stored_saved == pytest.approx(0.40)
    assert fit.used_kept == pytest.approx(1.0)
    low = fit_keep(bins, stored, [2] * 100, current=0.2)
    assert isinstance(low, KeepFit)
    assert low.threshold == pytest.approx(0.2)
    assert isinstance(fit_keep(bins, stored, [0] * 99 + [10]), NotFitted)


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
