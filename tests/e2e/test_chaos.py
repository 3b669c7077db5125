"""``hindsight chaos --events 500 --updates 2``: the CI-sized chaos run, as a real command.

It starts its own Kafka 4.4 broker, ``redis-server`` and six service processes, SIGKILLs and
restarts them at random points, restarts Redis, cuts the vector store for a few seconds and injects
malformed records (see ``bench/chaos.py``). All 500 events go through the embedding stage; two users
revise a statement, their events are replayed, and their version chains (reconcile runs in the embed
process, with the local judge) must equal a fault-free reference run's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.common import REPO_ROOT
from tests.fixtures.kafka import _fetch_kafka_jars

pytestmark = pytest.mark.e2e

EXPECTED_KEYS = {
    "published",
    "valid",
    "malformed",
    "memories",
    "dead_letters",
    "lost",
    "duplicated",
    "kills",
    "seconds",
    "chain_differences",
}


@pytest.mark.timeout(1200)
def test_chaos_run_of_500_events_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    _fetch_kafka_jars()
    command = [sys.executable, "-c", "from services.cli.main import main; main()"]
    args = ["chaos", "--events", "500", "--updates", "2", "--seed", "3", "--workdir", str(tmp_path)]
    args += ["--timeout-s", "1000"]
    result = subprocess.run(
        [*command, *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=1150, check=False
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no JSON line; stderr:\n{result.stderr[-4000:]}"
    report = json.loads(lines[-1])
    assert result.returncode == 0, f"{report}\n{result.stderr[-4000:]}"
    assert set(report) >= EXPECTED_KEYS
    assert report["published"] == report["valid"] + report["malformed"] == 500 + 4 + 8
    assert report["lost"] == report["duplicated"] == 0
    assert report["out_of_order"] == report["corrupted"] == 0
    assert (
        report["memories"] + report["merged"] + report["dead_letters"] - report["malformed"]
        == report["valid"]
    )
    assert report["dead_letters"] == report["malformed"]
    assert report["kills"] >= 4
    assert report["redis_restarts"] == report["vector_outages"] == 1
    assert report["chain_users"] == 2
    assert report["chain_differences"] == 0
    assert report["superseded"] >= 2  # both users' older statement (turn, and its fact) was revised
