"""``bench serve``'s interleaved rounds: how many a cell runs and how the queries are cut."""

from __future__ import annotations

import doctest

import pytest

import bench.serve
from bench.serve import MIN_RECALLS_PER_CALLER, blocks, rounds_for

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("queries", "concurrency", "rounds", "expected"),
    [
        (200, 1, 4, 4),  # the default at one caller: 4 rounds of 50
        (200, 4, 4, 4),  # 50 per round is 12.5 per caller
        (200, 8, 4, 2),  # 4 rounds would give 6.25 per caller
        (200, 16, 4, 1),  # one round: 12.5 per caller
        (100, 16, 4, 1),  # fewer than 10 per caller in all: still one round
        (6, 1, 4, 1),
        (20, 1, 4, 2),
        (400, 1, 1, 1),  # --rounds 1: the paths one after another, as before
        (0, 1, 4, 1),
    ],
)
def test_rounds_give_each_caller_enough_recalls(
    queries: int, concurrency: int, rounds: int, expected: int
) -> None:
    got = rounds_for(queries, concurrency, rounds)
    assert got == expected
    if got > 1:
        assert queries // got >= concurrency * MIN_RECALLS_PER_CALLER


@pytest.mark.parametrize(("n", "rounds"), [(200, 4), (7, 3), (5, 5), (3, 8), (1, 1), (0, 2), (201, 4)])
def test_blocks_cover_the_queries_in_order_and_evenly(n: int, rounds: int) -> None:
    requests = [f"q{i}" for i in range(n)]
    parts = blocks(requests, rounds)
    assert [r for part in parts for r in part] == requests
    assert len(parts) == max(1, min(rounds, n))
    sizes = [len(part) for part in parts]
    assert max(sizes) - min(sizes) <= 1
    if n >= rounds:
        assert min(sizes) >= 1


def test_docstring_examples_hold() -> None:
    result = doctest.testmod(bench.serve)
    assert result.attempted >= 2
    assert result.failed == 0
