"""The judge benchmark's sets and metrics (no model): set shape and splits, scoring arithmetic."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from bench.judge import (
    FACT_TURNS,
    LabelledPair,
    calibrate,
    fact_metrics,
    load_pairs,
    pair_metrics,
    select,
    value_match,
)
from hindsight.inference.judge import Fact
from hindsight.inference.judge_features import pair_features
from hindsight.inference.judge_prompts import JUDGE_EXAMPLES

pytestmark = pytest.mark.unit


def test_pair_set_is_broad_bilingual_and_split_per_group() -> None:
    rows = load_pairs()
    assert len(rows) >= 300
    assert len({r.id for r in rows}) == len(rows)
    langs = Counter(r.lang for r in rows)
    assert langs["en"] >= 150
    assert langs["zh"] >= 150
    assert {r.label for r in rows} == {"update", "refinement", "same", "unrelated"}
    test = [r for r in rows if r.split == "test"]
    assert 0.25 <= len(test) / len(rows) <= 0.35
    assert sum(r.category == "lookalike" for r in test) >= 20
    few_shot = {text for older, newer, _ in JUDGE_EXAMPLES for text in (older, newer)}
    assert not any(
        r.older in few_shot or r.newer in few_shot for r in rows
    )  # never measured on its own examples


def test_fact_set_has_filler_in_both_languages() -> None:
    rows = [json.loads(line) for line in FACT_TURNS.read_text(encoding="utf-8").splitlines()]
    assert len(rows) >= 80
    assert {(r["lang"], bool(r["facts"])) for r in rows} == {
        ("en", True),
        ("en", False),
        ("zh", True),
        ("zh", False),
    }


def row(label: str, category: str = "x", i: int = 0) -> LabelledPair:
    return LabelledPair(f"id{i}-{label}-{category}", "en", category, label, "dev", "a", "b")


def test_pair_metrics_count_false_updates_on_lookalikes() -> None:
    rows = [
        row("update", i=1),
        row("update", i=2),
        row("unrelated", "lookalike", 3),
        row("unrelated", "lookalike", 4),
    ]
    m = pair_metrics(rows, ["update", "unsure", "update", "unrelated"])
    assert m["precision_update"] == 0.5
    assert m["recall_update"] == 0.5
    assert m["lookalike_false_update"] == 0.5
    assert m["nonupdate_false_update"] == 0.5
    assert m["unsure_rate"] == 0.25
    assert m["accuracy"] == 0.5
    assert m["precision_same"] is None


def test_every_lookalike_category_counts_and_select_keeps_the_named_categories() -> None:
    rows = [
        row("unrelated", "lookalike", 1),
        row("unrelated", "preference-lookalike", 2),
        row("update", "job", 3),
    ]
    m = pair_metrics(rows, ["unrelated", "update", "update"])
    assert m["lookalike_n"] == 2
    assert m["lookalike_false_update"] == 0.5
    assert [r.category for r in select(rows, ("job", "preference-lookalike"))] == [
        "preference-lookalike",
        "job",
    ]
    assert select(rows, ()) == rows
    preference = select(load_pairs(), ("preference", "preference-lookalike"))
    assert {(r.lang, r.label) for r in preference} == {
        (lang, label) for lang in ("en", "zh") for label in ("update", "refinement", "same", "unrelated")
    }


def test_value_match_and_fact_metrics() -> None:
    assert value_match("Spotify", "spotify AB")
    assert value_match("十五万", "十五万元")
    assert value_match("2018 Subaru Outback", "Subaru Outback")
    assert not value_match("Lyon", "Paris")
    rows = [
        {"facts": [{"entity": "user", "attribute": "employer", "value": "Spotify", "negated": False}]},
        {"facts": []},
        {"facts": [{"entity": "user", "attribute": "plan", "value": "trip to Morocco", "negated": True}]},
    ]
    predicted = [
        [Fact("user", "employer", "Spotify", "s"), Fact("user", "job", "data scientist", "s")],
        [],
        [Fact("user", "plan", "Morocco trip", "s", negated=False)],
    ]
    m = fact_metrics(rows, predicted)
    assert m["precision"] == pytest.approx(2 / 3, abs=1e-4)
    assert m["recall"] == 1.0
    assert m["filler_without_facts"] == 1.0
    assert m["negation_agreement"] == 0.5


def test_calibrate_sweeps_thresholds_over_a_dump(tmp_path: Path) -> None:
    rows = load_pairs(split="dev")
    update = next(r for r in rows if r.label == "update" and not pair_features(r.pair()).retraction)
    look = next(r for r in rows if r.category == "lookalike")
    dump = tmp_path / "dump.jsonl"
    dump.write_text(
        json.dumps(
            {"id": update.id, "probs": {"update": 0.85, "refinement": 0.15, "same": 0.0, "unrelated": 0.0}}
        )
        + "\n"
        + json.dumps(
            {"id": look.id, "probs": {"update": 0.65, "refinement": 0.0, "same": 0.0, "unrelated": 0.35}}
        )
        + "\n",
        encoding="utf-8",
    )
    lines = {
        (line["update_threshold"], line["cue_update_threshold"]): line for line in calibrate(dump, "dev")
    }
    assert lines[(0.6, 0.6)]["lookalike_false_update"] == 1.0
    assert lines[(0.7, 0.7)]["lookalike_false_update"] == 0.0
    assert lines[(0.7, 0.7)]["recall_update"] == 1.0
    assert lines[(0.9, 0.9)]["recall_update"] == 0.0
    # the look-alike has no change word, so a lower threshold for cued pairs does not reach it
    assert lines[(0.9, 0.4)]["lookalike_false_update"] == 0.0
