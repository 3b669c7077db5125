"""Unit tests for the working-memory eviction score (DESIGN.md section 2)."""

from __future__ import annotations

import math

import pytest

from hindsight.scoring import working_memory_score
from hindsight.stores.working_memory import eviction_rank

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("importance", "age_turns", "lam", "expected"),
    [
        (0.9, 10, 0.1, 0.9 * math.exp(-1.0)),
        (0.95, 0, 0.1, 0.95),
        (1.0, 7, 0.1, math.exp(-0.7)),
        (0.2, 3, 0.1, 0.2 * math.exp(-0.3)),
        (0.5, 4, 0.0, 0.5),
        (0.5, 2, 0.5, 0.5 * math.exp(-1.0)),
        (0.0, 5, 0.1, 0.0),
    ],
)
def test_formula_values(importance: float, age_turns: int, lam: float, expected: float) -> None:
    assert working_memory_score(importance, age_turns, lam) == pytest.approx(expected, rel=1e-12)


def test_default_lambda_is_point_one() -> None:
    assert working_memory_score(0.9, 10) == pytest.approx(0.9 * math.exp(-1.0), rel=1e-12)


def test_ten_turns_cost_about_63_percent() -> None:
    assert working_memory_score(1.0, 10) == pytest.approx(0.3679, abs=1e-4)


def test_older_scores_lower_and_more_important_scores_higher() -> None:
    assert working_memory_score(0.5, 3) < working_memory_score(0.5, 2)
    assert working_memory_score(0.6, 3) > working_memory_score(0.5, 3)


def test_peanut_allergy_outlives_chatter() -> None:
    # seeds/000, section 4.3: "我对花生过敏" (0.95) ten turns ago still beats fresh small talk (0.2).
    assert working_memory_score(0.95, 10) > working_memory_score(0.2, 0)


@pytest.mark.parametrize(("importance", "lam"), [(-0.1, 0.1), (1.1, 0.1), (0.5, -0.1), (math.nan, 0.1)])
def test_rejects_out_of_range(importance: float, lam: float) -> None:
    with pytest.raises(ValueError, match="must be"):
        working_memory_score(importance, 1, lam)


def test_eviction_rank_orders_like_the_score_at_every_turn() -> None:
    # The Redis store ranks by a turn-independent key (ln importance + lam * turn); it must order
    # items exactly as working_memory_score does at any current turn.
    items = [(0.95, 0), (0.1, 1), (0.2, 2), (0.15, 3), (0.5, 7), (0.9, 12), (0.05, 30), (0.0, 4)]
    for lam in (0.0, 0.1, 0.5):
        by_rank = sorted(items, key=lambda it: eviction_rank(it[0], it[1], lam))
        for current in (30, 31, 50, 200):
            by_score = sorted(items, key=lambda it: working_memory_score(it[0], current - it[1], lam))
            assert by_rank == by_score


def test_eviction_rank_of_zero_importance_is_minus_infinity() -> None:
    assert eviction_rank(0.0, 10) == -math.inf
    assert eviction_rank(1.0, 10) == pytest.approx(1.0)
