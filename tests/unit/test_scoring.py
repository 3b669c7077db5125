"""Eviction score, time weight and blend formulas (DESIGN.md section 4)."""

from __future__ import annotations

import math

import pytest

from hindsight import scoring

pytestmark = pytest.mark.unit


def test_recency_has_about_a_fourteen_day_half_life() -> None:
    assert scoring.recency(0) == 1.0
    assert scoring.recency(14) == pytest.approx(math.exp(-0.7))
    assert 0.49 < scoring.recency(14) < 0.51


def test_frequency_is_log_normalised_by_the_users_maximum() -> None:
    assert scoring.frequency(0, 10) == 0.0
    assert scoring.frequency(10, 10) == 1.0
    assert scoring.frequency(3, 15) == pytest.approx(math.log(4) / math.log(16))
    assert scoring.frequency(5, 0) == 0.0


def test_eviction_score_weights_importance_recency_frequency() -> None:
    score = scoring.eviction_score(0.5, 10, 2, 8)
    expected = 0.4 * 0.5 + 0.3 * math.exp(-0.5) + 0.3 * math.log(3) / math.log(9)
    assert score == pytest.approx(expected)


def test_unimportant_unused_memory_expires_after_about_a_month() -> None:
    fresh = scoring.eviction_score(0.1, 0, 0, 0)
    month = scoring.eviction_score(0.1, 30, 0, 0)
    assert fresh > scoring.EXPIRE_BELOW
    assert month < scoring.EXPIRE_BELOW


@pytest.mark.parametrize(
    ("age", "weight"), [(0, 1.0), (7, 1.0), (7.01, 0.8), (30, 0.8), (30.5, 0.6), (400, 0.6)]
)
def test_step_time_weight_boundaries(age: float, weight: float) -> None:
    assert scoring.time_weight(age, "step") == weight


def test_exponential_time_weight_and_future_memories() -> None:
    assert scoring.time_weight(20, "exp") == pytest.approx(math.exp(-1.0))
    assert scoring.time_weight(-3, "exp") == 1.0
    with pytest.raises(ValueError, match="mode"):
        scoring.time_weight(1, "linear")


def test_blend_is_seventy_thirty_by_default() -> None:
    assert scoring.blend(0.9, 0.6) == pytest.approx(0.7 * 0.9 + 0.3 * 0.6)


def test_abstraction_confidence_rises_with_support_and_falls_with_contradictions() -> None:
    assert scoring.abstraction_confidence(3, 0) == pytest.approx(0.3)
    assert scoring.abstraction_confidence(5, 0) == pytest.approx(0.5)
    assert scoring.abstraction_confidence(5, 2) == pytest.approx(0.2)
    assert scoring.abstraction_confidence(30, 0) == 0.9
    assert scoring.abstraction_confidence(3, 5) == 0.0
