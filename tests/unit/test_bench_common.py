"""Shared benchmark helpers (bench.common): JSON lines, rounding, scratch directories, timing."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from bench.common import Stopwatch, print_line, rounded, scratch_dir

pytestmark = pytest.mark.unit


def test_rounded_rounds_top_level_floats_only() -> None:
    line = {"p95_ms": 12.3456, "n": 3, "lag": {"g": 1.23456}, "ok": True, "name": "x"}
    assert rounded(line) == {"p95_ms": 12.35, "n": 3, "lag": {"g": 1.23456}, "ok": True, "name": "x"}
    assert rounded({"v": 0.123456}, digits=4) == {"v": 0.1235}


def test_print_line_writes_one_json_line_spaced_or_compact(capsys: pytest.CaptureFixture[str]) -> None:
    print_line({"a": 1, "b": [1, 2]})
    print_line({"a": 1, "b": [1, 2]}, compact=True)
    out = capsys.readouterr().out.splitlines()
    assert out == ['{"a": 1, "b": [1, 2]}', '{"a":1,"b":[1,2]}']
    assert [json.loads(x) for x in out] == [{"a": 1, "b": [1, 2]}] * 2


def test_scratch_dir_keeps_a_given_folder_and_removes_a_temporary_one(tmp_path: Path) -> None:
    keep = tmp_path / "keep" / "me"
    with scratch_dir("bench-test-", keep) as got:
        assert got == keep
        (got / "f").write_text("x")
    assert (keep / "f").read_text() == "x"
    with scratch_dir("bench-test-") as temp:
        assert temp.is_dir()
        assert temp.name.startswith("bench-test-")
        (temp / "f").write_text("x")
    assert not temp.exists()


def test_stopwatch_counts_milliseconds() -> None:
    sw = Stopwatch()
    time.sleep(0.02)
    assert 15.0 <= sw.ms() < 2000.0
