"""``hindsight bench serve`` and ``hindsight bench ingest`` on small runs: every line is there, and the
same queries give the same answers through the pipeline, the service, HTTP and MCP."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict
from typing import Any

import pytest

from bench.serve import process_tree_cpu_s
from tests.e2e.test_bench_harness import DATA, hindsight

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(1260)
def test_bench_serve_measures_every_path_and_they_return_the_same_memories() -> None:
    args = ["bench", "serve", "--data", str(DATA), "--memories", "400", "--users", "40", "--queries", "6"]
    args += ["--concurrency", "1,2", "--idle-seconds", "0", "--ingest-rate", "0.3", "--pool-size", "100"]
    args += ["--drain-timeout-s", "60"]  # the pool's embeddings are cached in .cache/bench after one run
    lines = hindsight(*args, timeout_s=1200)
    kinds = [x["bench"] for x in lines]
    assert kinds[:2] == ["serve-setup", "serve-costs"]
    assert kinds[-2:] == ["serve-ingest", "serve-summary"]
    setup, costs = lines[0], lines[1]
    assert (setup["memories"], setup["tenants"], setup["queries"]) == (400, 5, 6)
    assert setup["embedder_standalone_texts_per_s"] > 0
    assert costs["recalls"] > 0
    assert costs["wire_view_us"] > 0
    recalls = [x for x in lines if x["bench"] == "serve-recall"]
    cells: dict[tuple[str, int], dict[str, dict[str, Any]]] = defaultdict(dict)
    for line in recalls:
        cells[(line["ingest"], line["concurrency"])][line["path"]] = line
    assert sorted(cells) == [("idle", 1), ("idle", 2), ("running", 1), ("running", 2)]
    for (ingest, _), cell in cells.items():
        assert sorted(cell) == ["http", "mcp", "pipeline", "service"]
        for line in cell.values():
            assert line["n"] == 6, line
            assert line["errors"] == []
            assert line["p50_ms"] <= line["p95_ms"] <= line["max_ms"]
            assert line["gateway_cpu_ms_per_recall"] >= 0
        assert cell["pipeline"]["p95_vs_pipeline"] == 1.0
        if ingest == "idle":  # same queries, same store: every path returns the same memories
            counts = {path: line["mean_memories"] for path, line in cell.items()}
            assert len(set(counts.values())) == 1, counts
            assert 0 < counts["http"] <= 10
    assert cells[("idle", 1)]["http"]["client_cpu_ms_per_recall"] > 0
    ingest_line = lines[-2]
    assert ingest_line["events"] >= 1
    assert ingest_line["stored"] <= ingest_line["events"]
    summary = lines[-1]
    assert summary["http_p95_c1_idle_ms"] == pytest.approx(cells[("idle", 1)]["http"]["p95_ms"], abs=0.01)
    assert summary["http_p95_c16_idle_ms"] is None  # 16 callers were not asked for


def test_process_tree_cpu_counts_a_busy_child() -> None:
    burn = (
        "import sys, time\n"
        "end = time.process_time() + 0.5\n"
        "while time.process_time() < end: pass\n"
        "print('burnt', flush=True)\n"
        "time.sleep(30)\n"
    )
    with subprocess.Popen([sys.executable, "-c", burn], stdout=subprocess.PIPE, text=True) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "burnt"
            seen = process_tree_cpu_s(os.getpid())
        finally:
            child.kill()
    assert os.getpid() in seen
    name, cpu_s = seen[child.pid]
    assert name.startswith("python")
    assert 0.45 <= cpu_s < 5.0


@pytest.mark.timeout(700)
def test_bench_ingest_measures_the_embedder_the_burst_and_the_steady_rate() -> None:
    args = ["bench", "ingest", "--data", str(DATA), "--burst", "6", "--seconds", "4", "--baseline-texts", "3"]
    lines = hindsight(*args, "--fraction", "0.5", "--no-reconcile", timeout_s=600)
    kinds = [x["bench"] for x in lines]
    assert kinds == ["ingest-embedder", "ingest-burst", "ingest-steady", "ingest-summary"]
    assert all(x["reconcile"] is False for x in lines)
    embedder, burst, steady, summary = lines
    assert embedder["texts"] == 3
    assert 900 <= embedder["text_chars_mean"] <= 1100  # ~1 KB events
    rates = (embedder["batch1_texts_per_s"], embedder["batch8_texts_per_s"])
    assert embedder["standalone_texts_per_s"] == max(rates)
    # every burst event is either stored or dropped by the write-trigger, and the drain rate counts
    # the stored ones from the first publish (not from the first arrival: that read 3-4x too high)
    assert burst["stored"] + burst["not_stored"] == 6
    assert burst["stored"] >= 1
    assert burst["drain_events_per_s"] == pytest.approx(burst["stored"] / burst["drain_seconds"], rel=0.02)
    assert burst["first_stored_after_s"] <= burst["drain_seconds"]
    # the embed stage cannot be busy longer than the drain lasted, nor store faster while busy than overall
    assert 0 < burst["embed_stage_busy_share"] <= 1.05
    assert burst["embed_stage_events_per_busy_s"] >= burst["drain_events_per_s"] * 0.95
    assert steady["offered_events_per_s"] == pytest.approx(0.5 * embedder["standalone_texts_per_s"], abs=0.01)
    assert steady["stored"] <= steady["events"]
    assert steady["searchable_p50_ms"] <= steady["searchable_p95_ms"]
    assert summary["burst_vs_standalone_mean"] == pytest.approx(
        burst["drain_events_per_s"] / summary["standalone_before_after_mean"], rel=0.05
    )
