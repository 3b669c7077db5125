"""The session-end garbage hook of ``tests/conftest.py``, run in a child pytest with this project's
configuration: a socket leaked by a session fixture's teardown is reported, not fatal; one leaked
inside a test still fails that test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

LEAKY = """
import socket
import pytest

class Holder:
    pass

@pytest.fixture(scope="session")
def leaky():
    yield
    holder = Holder()
    holder.self = holder  # a cycle: only a garbage collection frees it
    holder.sock = socket.socket()
    holder.sock.bind(("127.0.0.1", 0))

def test_uses_leaky(leaky):
    assert leaky is None
"""

LEAK_IN_TEST = """
import socket

def test_leaks_a_socket():
    socket.socket().bind(("127.0.0.1", 0))
"""


def _run(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    test = tmp_path / "test_child.py"
    test.write_text(source)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
         "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path), str(test)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.unit
def test_a_socket_left_after_the_session_is_reported_not_fatal(tmp_path: Path) -> None:
    child = _run(tmp_path, LEAKY)
    assert child.returncode == 0, child.stdout[-2000:] + child.stderr[-2000:]
    assert "left unclosed after the session: unclosed <socket.socket" in child.stderr


@pytest.mark.unit
def test_a_socket_leaked_inside_a_test_still_fails_it(tmp_path: Path) -> None:
    child = _run(tmp_path, LEAK_IN_TEST)
    assert child.returncode == 1, child.stdout[-2000:] + child.stderr[-2000:]
    assert "ResourceWarning" in child.stdout + child.stderr
