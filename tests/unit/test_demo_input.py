"""``hindsight demo`` refuses a wrong conversation id or a missing file before it loads the stack
(the embedded runner, the gateway, the models): the error comes at once, not after seconds of imports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import json, sys
from typer.testing import CliRunner
from services.cli.main import app
result = CliRunner().invoke(app, ["demo", *sys.argv[1:]])
stack = ("services.cli.embedded", "services.gateway.settings", "services.cli.demo")
heavy = [m for m in stack if m in sys.modules]
print(json.dumps({"code": result.exit_code, "output": result.output, "heavy": heavy}))
"""


def _demo(*args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_an_unknown_conversation_is_refused_before_the_stack_is_imported() -> None:
    out = _demo("--conversations", "conv-26,conv-999")
    assert out["code"] != 0
    assert "unknown conversation(s) ['conv-999']" in str(out["output"])
    assert out["heavy"] == []


def test_a_missing_file_is_refused_before_the_stack_is_imported(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    out = _demo("--data", str(missing))
    assert out["code"] != 0
    assert str(missing) in str(out["output"])
    assert out["heavy"] == []


def test_both_all_and_conversations_is_refused() -> None:
    out = _demo("--all", "--conversations", "conv-26")
    assert out["code"] != 0
    assert "either --all or --conversations" in str(out["output"])
    assert out["heavy"] == []
