"""The update scenario files (`bench updates --data`) are well formed: what a scenario names exists."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.updates import load

DATA = Path(__file__).resolve().parents[2] / "bench" / "data"
KINDS = {"update", "cancellation", "correction", "lookalike", "refinement", "lesson"}


@pytest.mark.parametrize("name", ["updates.json", "updates_blind.json"])
def test_every_scenario_names_only_its_own_statements(name: str) -> None:
    doc = load(DATA / name)
    ids = [s["id"] for s in doc["scenarios"]]
    assert len(ids) == len(set(ids))
    for s in doc["scenarios"]:
        marks = [st["mark"] for st in s["statements"]]
        days = {st["mark"]: st["day"] for st in s["statements"]}
        assert s["kind"] in KINDS, s["id"]
        assert s["lang"] in doc["filler"], s["id"]
        assert sorted(s["deliver"]) == sorted(marks), s["id"]
        for old, new in s["supersede"]:
            assert days[old] < days[new], s["id"]  # the newer statement by event time supersedes
        assert set(s["active"]) <= set(marks), s["id"]
        for probe in s["probes"]:
            top = probe.get("top")
            assert probe.get("lesson_top3") or set(top if isinstance(top, list) else [top]) <= set(marks), s[
                "id"
            ]
        assert (s["kind"] == "lesson") == ("close" in s), s["id"]


def test_the_unseen_set_has_both_languages_and_every_kind() -> None:
    scenarios = load(DATA / "updates_blind.json")["scenarios"]
    assert {(s["lang"], s["kind"]) for s in scenarios} == {(lang, k) for lang in ("en", "zh") for k in KINDS}
    assert all(s["split"] == "heldout" for s in scenarios)
