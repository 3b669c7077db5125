"""A real Qdrant server (the ``qdrant`` binary) run as a child process on loopback.

Where several processes must write one collection (the embed stage scaled out) the embedded
engine cannot serve (one process per directory); production runs a Qdrant server, and tests and
the chaos run start this one: the Qdrant 1.18.3 binary built for these machines
(``../shared/bin/qdrant`` beside the checkout, see its README), telemetry off, storage and
snapshots under ``work_dir``, HTTP and gRPC on free 127.0.0.1 ports. It needs no file beside the
binary (its working directory is ``work_dir``). Ready when ``GET /readyz`` answers 200 (~0.1 s).

:meth:`QdrantServer.kill` (SIGKILL) and :meth:`QdrantServer.start` again on the same ``work_dir``
and ports are how a harness crashes and restarts it: Qdrant replays its write-ahead log.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from hindsight.childproc import die_with_parent_argv
from hindsight.errors import ConfigurationError, StoreUnavailableError

QDRANT_BIN_ENV = "HINDSIGHT_QDRANT_BIN"
"""Environment variable naming the ``qdrant`` executable."""

_REPO_ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def find_qdrant() -> str:
    """The ``qdrant`` server binary: ``$HINDSIGHT_QDRANT_BIN``, ``<checkout>/../shared/bin/qdrant``,
    or ``qdrant`` on PATH.

    :raises ConfigurationError: none exists.
    """
    candidates = [os.environ.get(QDRANT_BIN_ENV), str(_REPO_ROOT.parent / "shared" / "bin" / "qdrant")]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    on_path = shutil.which("qdrant")
    if on_path is None:
        raise ConfigurationError(
            f"no qdrant server binary: set {QDRANT_BIN_ENV}, put it in ../shared/bin/qdrant beside the "
            "checkout, or on PATH"
        )
    return on_path


class QdrantServer:
    """One Qdrant server process with its data under ``work_dir``.

    Args:
        work_dir: storage (``storage/``), snapshots and the server's log (``qdrant.log``).
        binary: the executable; default :func:`find_qdrant`.
        http_port, grpc_port: loopback ports (free ones when None; kept across restarts).
        startup_timeout_s: how long :meth:`start` waits for ``/readyz``.
    """

    def __init__(
        self,
        work_dir: Path,
        *,
        binary: str | None = None,
        http_port: int | None = None,
        grpc_port: int | None = None,
        startup_timeout_s: float = 60.0,
    ) -> None:
        self.work_dir = Path(work_dir)
        self.binary = binary
        self.http_port = http_port if http_port is not None else _free_port()
        self.grpc_port = grpc_port if grpc_port is not None else _free_port()
        self.startup_timeout_s = startup_timeout_s
        self.startup_s: float | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<http_port>`` (qdrant-client's ``url``)."""
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def running(self) -> bool:
        """True while the process is alive."""
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs."""
        return self._process.pid if self.running and self._process is not None else None

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/readyz", timeout=1.0) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def start(self) -> Self:
        """Launch the server and wait until ``/readyz`` answers 200.

        :raises ConfigurationError: no binary.
        :raises StoreUnavailableError: it exited or was not ready in ``startup_timeout_s``.
        """
        if self.running:
            return self
        binary = self.binary or find_qdrant()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "QDRANT__SERVICE__HOST": "127.0.0.1",
            "QDRANT__SERVICE__HTTP_PORT": str(self.http_port),
            "QDRANT__SERVICE__GRPC_PORT": str(self.grpc_port),
            "QDRANT__STORAGE__STORAGE_PATH": str(self.work_dir / "storage"),
            "QDRANT__STORAGE__SNAPSHOTS_PATH": str(self.work_dir / "snapshots"),
            "QDRANT__TELEMETRY_DISABLED": "true",
        }
        began = time.monotonic()
        self._log = (self.work_dir / "qdrant.log").open("ab")
        self._process = subprocess.Popen(
            [*die_with_parent_argv(), binary],
            cwd=self.work_dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = began + self.startup_timeout_s
        while not self._ready():
            if self._process.poll() is not None or time.monotonic() > deadline:
                code = self._process.poll()
                self.kill()
                tail = (self.work_dir / "qdrant.log").read_bytes()[-3000:].decode(errors="replace")
                raise StoreUnavailableError(f"qdrant did not get ready (exit code {code}):\n{tail}")
            time.sleep(0.05)
        self.startup_s = time.monotonic() - began
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM (a clean exit), SIGKILL after ``timeout_s``; idempotent."""
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=10)
        self._close()

    def kill(self) -> None:
        """SIGKILL: a crash, nothing flushed beyond what Qdrant already wrote; idempotent."""
        if self._process is not None and self._process.poll() is None:
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
        """Stop (see :meth:`stop`)."""
        self.stop()
