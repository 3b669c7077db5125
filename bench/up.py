"""``hindsight up`` as a child process: start, wait for its ready line, SIGTERM, SIGKILL, restart.

Used by the broker and idle-CPU benchmarks and by the restart and interop tests. The process's
output (stdout and stderr) is appended to ``<data_dir>.log`` beside the data directory; the ready
line ``hindsight up: gateway URL (MCP at ...), Kafka HOST:PORT, data in DIR`` gives the gateway URL
and the broker address.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Self

_READY = re.compile(
    r"hindsight up: gateway (?P<url>http://\S+) \(MCP at \S+\), Kafka (?P<kafka>\S+), data in"
)


def hindsight_argv() -> list[str]:
    """The ``hindsight`` command of this interpreter's environment (console script, else ``-c``)."""
    script = Path(sys.executable).with_name("hindsight")
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "from services.cli.main import main; main()"]


class UpProcess:
    """One ``hindsight up --data-dir DIR --port 0`` child process (restartable on the same DIR).

    Args:
        data_dir: the data directory (kept across restarts).
        env: extra environment (``HINDSIGHT_*``), on top of ours.
        startup_timeout_s: how long :meth:`start` waits for the ready line.
    """

    def __init__(
        self, data_dir: Path, env: Mapping[str, str] | None = None, *, startup_timeout_s: float = 240.0
    ):
        self.data_dir = Path(data_dir)
        self.env = {**os.environ, **(env or {})}
        self.startup_timeout_s = startup_timeout_s
        self.log_path = self.data_dir.with_name(self.data_dir.name + ".log")
        self.url = ""
        self.bootstrap = ""
        self.ready_s: float | None = None
        """Seconds from spawn to the ready line, last start."""
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """The ``hindsight up`` process id while it runs."""
        return self._process.pid if self._process is not None and self._process.poll() is None else None

    def start(self) -> Self:
        """Spawn ``hindsight up`` and wait for its ready line.

        Raises:
            RuntimeError: it exited or printed no ready line within ``startup_timeout_s`` (the
                message holds the tail of its output).
        """
        if self.pid is not None:
            return self
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        offset = self._log.tell()
        began = time.monotonic()
        self._process = subprocess.Popen(
            [*hindsight_argv(), "up", "--data-dir", str(self.data_dir), "--port", "0"],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=self.env,
        )
        deadline = began + self.startup_timeout_s
        while time.monotonic() < deadline:
            match = _READY.search(self._output(offset))
            if match:
                self.url, self.bootstrap = match["url"], match["kafka"]
                self.ready_s = time.monotonic() - began
                return self
            if self._process.poll() is not None:
                break
            time.sleep(0.1)
        code = self._process.poll()
        self.kill()
        raise RuntimeError(
            f"hindsight up did not get ready (exit code {code}) within {self.startup_timeout_s:.0f} s:\n"
            + self._output(offset)[-4000:]
        )

    def _output(self, offset: int) -> str:
        with self.log_path.open("rb") as handle:
            handle.seek(offset)
            return handle.read().decode(errors="replace")

    def children(self) -> list[int]:
        """Process ids of the direct children (broker, Valkey) while ``up`` runs."""
        pid = self.pid
        return [] if pid is None else child_pids(pid)

    def terminate(self, timeout_s: float = 60.0) -> tuple[int | None, float]:
        """SIGTERM and wait; returns (exit code, seconds to exit). SIGKILL after ``timeout_s``."""
        if self._process is None:
            return None, 0.0
        began = time.monotonic()
        self._process.send_signal(signal.SIGTERM)
        try:
            code: int | None = self._process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=10)
            code = None
        took = time.monotonic() - began
        self._close()
        return code, took

    def kill(self) -> None:
        """SIGKILL ``hindsight up`` alone (its children die with it: ``setpriv --pdeathsig``)."""
        if self._process is not None:
            if self._process.poll() is None:
                self._process.kill()
            self._process.wait(timeout=10)
        self._close()

    def _close(self) -> None:
        self._process = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> Self:
        """Start (see :meth:`start`)."""
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """SIGTERM, then SIGKILL if it hangs."""
        if self.pid is not None:
            self.terminate()
        self._close()


def child_pids(pid: int) -> list[int]:
    """Process ids whose parent is ``pid`` (scans ``/proc``; children of any thread)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.append(int(entry.name))
    return sorted(found)


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants."""
    tree = [pid]
    for child in child_pids(pid):
        tree.extend(process_tree(child))
    return tree


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
