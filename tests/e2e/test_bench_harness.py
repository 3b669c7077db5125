"""The benchmark commands on small runs: what they print stays the same (issue 12, item 6).

The harnesses moved from ``services/cli/`` to the ``bench`` package; these runs pin each command's
JSON lines (which lines, in which order, with which keys) as they were before the move, and check
values that follow from the inputs. Keys named ``recall_<step>_p50_ms`` / ``_p95_ms`` come from the
recall pipeline's own step timings (they change with the pipeline) and are not pinned.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.common import REPO_ROOT

pytestmark = pytest.mark.e2e

DATA = (
    next(
        (
            p
            for p in (REPO_ROOT.parent, REPO_ROOT.parents[1])
            if (p / "shared/data/locomo_dev.json").is_file()
        ),
        REPO_ROOT.parent,
    )
    / "shared"
    / "data"
    / "locomo_dev.json"
)
"""The dev data lies in ../shared/ beside the checkout (as in CI; ../../shared from a worktree under
a folder of worktrees); a missing file fails the test."""

POOL_KEYS = {"bench", "cached_before", "embed_seconds", "note", "pool_texts"}
SCALE_BASE = {
    "bench",
    "memories_per_user_max",
    "memories_per_user_median",
    "phase",
    "pool_texts",
    "queried_user_memories_median",
    "rerank_mode",
    "size",
    "sparse_vectors",
    "users",
    "vectors",
    "load_avg",
}
SCALE_LOAD = SCALE_BASE | {"load_seconds", "points_per_s"}
SCALE_PLAIN = SCALE_BASE | {
    "embed_p50_ms",
    "embed_p95_ms",
    "index",
    "indexed_vectors",
    "mean_ms",
    "mean_returned",
    "n",
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "queries",
    "rerank",
    "search_p50_ms",
    "search_p95_ms",
    "search_p99_ms",
    "segments",
}
SCALE_HNSW = SCALE_PLAIN | {"optimize_changed", "optimize_seconds"}
INGEST_STEADY = {
    "achieved_events_per_s",
    "bench",
    "drain_seconds",
    "event_bytes_mean",
    "events",
    "lag_after_drain",
    "lag_when_publishing_ended",
    "load_avg_end",
    "load_avg_start",
    "mode",
    "not_stored_after_drain",
    "not_stored_reason",
    "offered_events_per_s",
    "optimize_called",
    "preload_seconds",
    "preloaded_memories",
    "published_events_per_s",
    "searchable_max_ms",
    "searchable_p50_ms",
    "searchable_p95_ms",
    "searchable_p99_ms",
    "store_check",
    "stored",
    "stored_deduplicated",
    "stored_within_publish_window",
    "sustained",
}
INGEST_BURST = {
    "backlog_before",
    "bench",
    "drain_seconds",
    "events",
    "load_avg_end",
    "mode",
    "publish_seconds",
    "stored",
    "throughput_events_per_s",
}
RECALL_BASELINE = {
    "all_evidence_at_10",
    "by_category",
    "conversations",
    "k",
    "mean_tokens",
    "ndcg_at_10",
    "p50_ms",
    "p95_ms",
    "questions",
    "recall_at_10",
    "recall_at_5",
    "system",
}
RECALL_HINDSIGHT = RECALL_BASELINE | {
    "best_baseline",
    "broad_memories_returned",
    "events",
    "ingest_seconds",
    "load_avg_at_end",
    "load_avg_at_start",
    "mean_memories_returned",
    "memories",
    "reconcile_lag",
    "reconcile_seconds",
    "rerank",
    "rerank_field_accepted",
    "tokens_source",
    "vs_best_baseline_by_category",
    "vs_best_baseline_recall_at_10",
}
_STEP_KEY = re.compile(r"^recall_\w+_p(50|95)_ms$")

TURNS = (
    ("Ana", "I adopted a beagle named Pixel last weekend."),
    ("Ben", "I started learning Mandarin on Tuesdays."),
    ("Ana", "My sister moved to Lisbon to work as a nurse."),
    ("Ben", "I am allergic to peanuts, I always ask."),
    ("Ana", "Pixel chewed my running shoes this morning."),
    ("Ben", "我下个月要去杭州出差，想顺便看看西湖。"),
    ("Ana", "I finished the pottery class and made a blue vase."),
    ("Ben", "My marathon plan says 30 kilometres on Sunday."),
)
QA = (
    ("What is the name of Ana's dog?", "D1:1", 4),
    ("Where did Ana's sister move?", "D1:3", 1),
    ("What is Ben allergic to?", "D1:4", 4),
    ("Where is Ben going next month?", "D2:2", 2),
    ("What did Ana make in pottery?", "D2:3", 3),
)


def tiny_locomo() -> list[dict[str, Any]]:
    """One LoCoMo-format conversation: two sessions of four turns (one Chinese), five questions."""
    conv: dict[str, Any] = {"speaker_a": "Ana", "speaker_b": "Ben"}
    for s, when in ((1, "1:56 pm on 8 May, 2023"), (2, "9:00 am on 1 June, 2023")):
        conv[f"session_{s}_date_time"] = when
        conv[f"session_{s}"] = [
            {"speaker": who, "dia_id": f"D{s}:{i + 1}", "text": text}
            for i, (who, text) in enumerate(TURNS[4 * (s - 1) : 4 * s])
        ]
    qa = [{"question": q, "answer": "-", "evidence": [ev], "category": c} for q, ev, c in QA]
    return [{"sample_id": "conv-tiny", "conversation": conv, "qa": qa}]


def hindsight(*args: str, timeout_s: float) -> list[dict[str, Any]]:
    """Run ``hindsight <args>`` in a fresh process group; its stdout JSON lines (asserts exit 0).

    On timeout the whole group gets SIGTERM (the command stops its embedded broker and stores),
    then SIGKILL after 30 s, so nothing it started outlives the test.
    """
    command = [sys.executable, "-c", "from services.cli.main import main; main()", *args]
    with subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as proc:
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                out, err = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                out, err = proc.communicate()
            pytest.fail(f"hindsight {' '.join(args[:2])} timed out after {timeout_s} s:\n{err[-3000:]}")
    assert proc.returncode == 0, err[-3000:]
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def pinned(line: dict[str, Any]) -> set[str]:
    return {k for k in line if not _STEP_KEY.match(k)}


@pytest.mark.timeout(600)
def test_bench_scale_prints_the_same_lines_on_a_small_run(tmp_path: Path) -> None:
    args = ["bench", "scale", "--data", str(DATA), "--sizes", "300", "--users", "20", "--queries", "6"]
    args += ["--pool-size", "60", "--preload", "200", "--rate", "2", "--seconds", "4", "--burst", "4"]
    args += ["--drain-timeout-s", "180", "--cache-dir", str(tmp_path / "cache")]
    lines = hindsight(*args, timeout_s=560)
    shape = [(x["bench"], x.get("phase"), x.get("rerank"), x.get("mode")) for x in lines]
    assert shape == [
        ("scale-pool", None, None, None),
        ("scale-recall", "load", None, None),
        ("scale-recall", "plain", False, None),
        ("scale-recall", "plain", True, None),
        ("scale-recall", "hnsw", False, None),
        ("scale-recall", "hnsw", True, None),
        ("scale-ingest", None, None, "steady"),
        ("scale-ingest", None, None, "burst"),
    ]
    pool, load, *measured, steady, burst = lines
    assert pinned(pool) == POOL_KEYS
    assert (pool["pool_texts"], pool["cached_before"]) == (60, 0)  # a fresh cache: every text embedded
    assert pinned(load) == SCALE_LOAD
    assert (load["size"], load["users"]) == (300, 20)
    assert [pinned(x) for x in measured] == [SCALE_PLAIN, SCALE_PLAIN, SCALE_HNSW, SCALE_HNSW]
    for line in measured:
        assert line["n"] == line["queries"] == 6
        assert 0 < line["mean_returned"] <= 10
        assert line["p50_ms"] <= line["p95_ms"] <= line["p99_ms"]
    assert pinned(steady) == INGEST_STEADY
    assert steady["events"] == 8  # 2 events/s for 4 s
    assert steady["stored"] + steady["not_stored_after_drain"] == 8
    assert steady["preloaded_memories"] == 200
    assert pinned(burst) == INGEST_BURST
    # the guard may quarantine part of a burst of look-alike LoCoMo chunks sent by several users at
    # once (its claim/burst rules; noted in the closing note of issue 10): at least one is stored
    assert burst["events"] == 4
    assert 1 <= burst["stored"] <= 4


@pytest.mark.timeout(600)
def test_bench_recall_prints_the_same_lines_on_a_tiny_conversation(tmp_path: Path) -> None:
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps(tiny_locomo(), ensure_ascii=False), encoding="utf-8")
    lines = hindsight(
        "bench", "recall", "--data", str(data), "--quiet", "--cache-dir", str(tmp_path / "c"), timeout_s=560
    )
    assert [x["system"] for x in lines] == ["dense", "bm25", "hybrid", "hindsight"]
    assert [pinned(x) for x in lines] == [RECALL_BASELINE] * 3 + [RECALL_HINDSIGHT]
    for line in lines:
        assert line["questions"] == 5
        assert line["conversations"] == ["conv-tiny"]
        assert line["recall_at_10"] == 1.0  # 8 turns, k = 10: every system returns every turn
    mine = lines[-1]
    assert mine["events"] == 10  # 8 turns and 2 session closes
    assert mine["rerank"] is True
    assert mine["vs_best_baseline_recall_at_10"] == 0.0
