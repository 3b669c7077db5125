"""Children of the embedded default die with it, and one left running is stopped by the next owner."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bench.up import alive
from hindsight.childproc import die_with_parent_argv, reap_orphan

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

REPO_ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}


def _wait_gone(pid: int, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def _wait_exec(pid: int, name: str, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    comm = Path(f"/proc/{pid}/comm")
    while time.monotonic() < deadline:
        try:
            if comm.read_text().strip() == name:
                return True
        except OSError:
            return False
        time.sleep(0.01)
    return False


def test_a_child_launched_with_pdeathsig_dies_when_its_owner_is_killed(tmp_path: Path) -> None:
    assert die_with_parent_argv(), "setpriv (util-linux) is missing: children would outlive a SIGKILL"
    owner = textwrap.dedent(
        """
        import subprocess, sys, time
        from hindsight.childproc import die_with_parent_argv
        child = subprocess.Popen([*die_with_parent_argv(), "sleep", "600"])
        print(child.pid, flush=True)
        time.sleep(600)
        """
    )
    process = subprocess.Popen([sys.executable, "-c", owner], stdout=subprocess.PIPE, text=True, env=ENV)
    try:
        assert process.stdout is not None
        child = int(process.stdout.readline())
        assert alive(child)
        # setpriv arms the parent-death signal, then execs the command: a kill before that is a race
        # the test would lose on a slow machine (the signal is never armed), not what it checks
        assert _wait_exec(child, "sleep"), "setpriv did not exec the command"
        process.kill()  # SIGKILL: no shutdown code runs in the owner
        process.wait(timeout=10)
        assert _wait_gone(child), "the child outlived its SIGKILLed owner"
    finally:
        if process.poll() is None:
            process.kill()
        if process.stdout is not None:
            process.stdout.close()


def test_reap_orphan_stops_only_the_recorded_server_of_this_directory(tmp_path: Path) -> None:
    orphan = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        pid_file = tmp_path / "server.pid"
        pid_file.write_text(f"{orphan.pid}\n")
        assert reap_orphan(pid_file, "no-such-marker") is None  # a recycled pid of another program
        assert alive(orphan.pid)
        assert reap_orphan(pid_file, "sleep") == orphan.pid
        orphan.wait(timeout=10)
        assert reap_orphan(pid_file, "sleep") is None  # nothing left to stop
        (tmp_path / "garbage.pid").write_text("not a pid")
        assert reap_orphan(tmp_path / "garbage.pid", "sleep") is None
        assert reap_orphan(tmp_path / "missing.pid", "sleep") is None
    finally:
        if orphan.poll() is None:
            orphan.kill()
            orphan.wait(timeout=10)
