"""The pipeline as separate service processes on loopback, and a fault-injecting vector store.

:class:`ServiceProcess` runs one Hindsight process (by default ``faststream run <app> --factory``)
that a harness can SIGKILL, SIGTERM and restart; :class:`Pipeline` configures guard, write-trigger
and embed processes sharing one broker, one Redis and one consumer-group prefix; the embed process's
vector store sits behind :class:`OutageVectorStore` (``create_ingest_app``), so a harness can make
it unavailable for a while by creating a flag file. Used by ``hindsight chaos``,
``hindsight bench load``, the fault tests and the scale-out test.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, Self, cast

from faststream import FastStream

from bench.common import REPO_ROOT
from hindsight import topology
from hindsight.errors import ConfigurationError, StoreUnavailableError
from hindsight.runtime import Resources, service_app
from hindsight.settings import AllSettings
from services.ingest import app as ingest_app

if TYPE_CHECKING:
    from hindsight.stores.vector import VectorStore

log = logging.getLogger("hindsight.chaos")


class ServiceProcess:
    """One Hindsight process on loopback, by default a service app run as
    ``python -m faststream run <app> --factory``.

    The environment is ours plus ``env``; stdout and stderr go to ``log_path``. :meth:`kill` is
    SIGKILL (nothing drains), :meth:`terminate` SIGTERM (the batch in flight drains and commits).
    """

    def __init__(
        self,
        name: str,
        app: str,
        env: Mapping[str, str],
        log_path: Path,
        *,
        argv: Sequence[str] | None = None,
    ) -> None:
        """Configure (nothing starts yet).

        :param name: label for logs and reports, e.g. ``trigger-2``.
        :param app: FastStream app factory, e.g. ``services.guard.app:create_app``.
        :param env: extra environment (``HINDSIGHT_*`` settings).
        :param log_path: file receiving the process's output (appended across restarts).
        :param argv: run this command instead of ``faststream run <app>`` (``app`` is then a label).
        """
        self.name = name
        self.app = app
        self.argv = (
            list(argv) if argv is not None else [sys.executable, "-m", "faststream", "run", app, "--factory"]
        )
        self.env = dict(env)
        self.log_path = log_path
        self.starts = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """Process id while running."""
        return self._process.pid if self.alive and self._process is not None else None

    @property
    def alive(self) -> bool:
        """True while the process runs."""
        return self._process is not None and self._process.poll() is None

    def start(self) -> Self:
        """Launch the process (no wait for readiness: consumers join their group on their own)."""
        if self.alive:
            return self
        self._close_log()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        env = {**os.environ, **self.env, "PYTHONUNBUFFERED": "1"}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        self._process = subprocess.Popen(
            self.argv,
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.starts += 1
        return self

    def kill(self) -> None:
        """SIGKILL and reap the process (a crash: nothing is drained or committed)."""
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGKILL)
            self._process.wait()
        self._close_log()

    def terminate(self, timeout_s: float = 30.0) -> tuple[int | None, float]:
        """SIGTERM and wait up to ``timeout_s`` seconds; SIGKILL if it is still running then.

        :returns: the exit code (negative: killed by that signal; ``None``: was not running) and the
            seconds the process took to exit.
        """
        began = time.monotonic()
        if self._process is None or self._process.poll() is not None:
            self._close_log()
            return (None if self._process is None else self._process.returncode), 0.0
        self._process.send_signal(signal.SIGTERM)
        try:
            code = self._process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self._process.kill()
            code = self._process.wait()
        self._close_log()
        return code, time.monotonic() - began

    def log_tail(self, n_bytes: int = 3000) -> str:
        """The end of the process's log (for failure messages)."""
        if not self.log_path.exists():
            return "(no log)"
        data = self.log_path.read_bytes()
        return data[-n_bytes:].decode(errors="replace")

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> Self:
        """Start (see :meth:`start`)."""
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """SIGTERM, then SIGKILL after 30 s."""
        self.terminate()


def stop_all(processes: Sequence[ServiceProcess], timeout_s: float = 30.0) -> None:
    """SIGTERM every process at once, then wait for each (SIGKILL after ``timeout_s``)."""
    for proc in processes:
        if proc.alive and proc._process is not None:
            proc._process.send_signal(signal.SIGTERM)
    for proc in processes:
        proc.terminate(timeout_s)


# ---------------------------------------------------------------------------------------------
# Fault injection: a vector store that fails while a flag file exists
# ---------------------------------------------------------------------------------------------

OUTAGE_FLAG_ENV = "HINDSIGHT_CHAOS_VECTOR_OUTAGE_FILE"
"""Environment variable naming the flag file of :func:`create_ingest_app`'s vector store."""


class OutageVectorStore:
    """A :class:`~hindsight.stores.vector.VectorStore` that raises ``StoreUnavailableError`` from
    every call while ``flag`` exists, and delegates to ``inner`` otherwise.

    Methods are delegated by name (``__getattr__``), so the wrapper follows the protocol whatever
    methods it gains; the check costs one ``stat`` per call.
    """

    def __init__(self, inner: VectorStore, flag: Path) -> None:
        self._inner = inner
        self._flag = flag
        self.dim = inner.dim
        self.failures = 0
        """Calls refused so far (in this process)."""

    def close(self) -> None:
        """Close the wrapped store (never refused)."""
        self._inner.close()

    def __getattr__(self, name: str) -> Any:
        """The wrapped store's attribute; methods refuse to run while the flag file exists."""
        target = getattr(self._inner, name)
        if not callable(target):
            return target

        @functools.wraps(target)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            if self._flag.exists():
                self.failures += 1
                raise StoreUnavailableError(f"vector store unavailable (fault injected by {self._flag})")
            return target(*args, **kwargs)

        return guarded


def create_ingest_app() -> FastStream:
    """The ingest service of ``services.ingest.app`` with its vector store behind
    :class:`OutageVectorStore` on the flag file named by ``$HINDSIGHT_CHAOS_VECTOR_OUTAGE_FILE``.

    ``faststream run bench.procs:create_ingest_app --factory``; chaos runs and fault tests only.

    Raises:
        ConfigurationError: the environment variable is not set.
    """
    flag = os.environ.get(OUTAGE_FLAG_ENV)
    if not flag:
        raise ConfigurationError(f"{OUTAGE_FLAG_ENV} must name the outage flag file")
    path = Path(flag)

    async def register(resources: Resources) -> None:
        def wrap(store: VectorStore) -> VectorStore:
            return cast("VectorStore", OutageVectorStore(store, path))

        resources.vector_store_wrapper = wrap
        await ingest_app.register(resources)

    return service_app(register)


# ---------------------------------------------------------------------------------------------
# The pipeline as processes
# ---------------------------------------------------------------------------------------------

STAGE_TOPICS: dict[str, list[str]] = {
    name: [str(t) for t in topology.STAGE_TOPICS[name]]
    for name in ("guard", "ingest-trigger", "ingest-embed")
}
"""Consumer group suffix -> topics, for the stages a chaos run or a scale-out test runs."""


@dataclass
class Pipeline:
    """Guard, write-trigger and embed processes sharing one broker, one Redis and one group prefix.

    Every write-trigger and guard process gets its own data directory (they keep nothing there);
    the embed process owns ``<workdir>/embed`` (the embedded vector store) across restarts. With
    ``qdrant_url`` every embed process writes collection ``qdrant_collection`` of that Qdrant
    server instead, so several may run (``embed(i)``), like in production.
    """

    bootstrap: str
    redis_url: str
    workdir: Path
    prefix: str
    idempotent: bool = True
    extra_env: dict[str, str] = field(default_factory=dict)
    qdrant_url: str = ""
    qdrant_collection: str = "memories"
    reconcile: bool = False
    """The embed process also runs reconcile (group ``<prefix>-ingest-reconcile``, same store)."""

    @property
    def outage_flag(self) -> Path:
        """While this file exists the embed process's vector store refuses every call."""
        return self.workdir / "vector-outage"

    @property
    def embed_data_dir(self) -> Path:
        """The embed process's ``HINDSIGHT_DATA_DIR`` (its vector store is under ``qdrant/``)."""
        return self.workdir / "embed"

    def groups(self) -> dict[str, list[str]]:
        """Full consumer group id -> topics, for lag checks."""
        groups = {f"{self.prefix}-{name}": topics for name, topics in STAGE_TOPICS.items()}
        if self.reconcile:
            groups[f"{self.prefix}-ingest-reconcile"] = [
                str(t) for t in topology.STAGE_TOPICS["ingest-reconcile"]
            ]
        return groups

    def group(self, name: str) -> str:
        """Full consumer group id of stage group ``name`` (e.g. ``ingest-trigger``)."""
        return f"{self.prefix}-{name}"

    def _env(self, name: str, data_dir: Path, extra: Mapping[str, str]) -> dict[str, str]:
        return {
            "HINDSIGHT_KAFKA_BOOTSTRAP": self.bootstrap,
            "HINDSIGHT_KAFKA_GROUP_PREFIX": self.prefix,
            "HINDSIGHT_KAFKA_IDEMPOTENT": "true" if self.idempotent else "false",
            "HINDSIGHT_KAFKA_SESSION_TIMEOUT_MS": "6000",
            "HINDSIGHT_REDIS_URL": self.redis_url,
            "HINDSIGHT_DATA_DIR": str(data_dir),
            "HINDSIGHT_INGEST_KEEP_THRESHOLD": "0",
            "HINDSIGHT_LOG_LEVEL": "INFO",
            "HINDSIGHT_QDRANT_URL": self.qdrant_url,
            "HINDSIGHT_QDRANT_COLLECTION": self.qdrant_collection,
            # the test server (1.18.3) is older than the pinned client (1.20); the congruence
            # tests cover the API the adapter uses
            "HINDSIGHT_QDRANT_CHECK_COMPATIBILITY": "false",
            **self.extra_env,
            **extra,
        }

    def guard(self, i: int) -> ServiceProcess:
        """Guard process ``i`` (stateless; group ``<prefix>-guard``)."""
        name = f"guard-{i}"
        env = self._env(name, self.workdir / name, {})
        return ServiceProcess(
            name, "services.guard.app:create_app", env, self.workdir / "logs" / f"{name}.log"
        )

    def trigger(self, i: int) -> ServiceProcess:
        """Write-trigger process ``i`` (state in Redis; group ``<prefix>-ingest-trigger``)."""
        name = f"trigger-{i}"
        env = self._env(name, self.workdir / name, {"HINDSIGHT_INGEST_STAGES": '["trigger"]'})
        return ServiceProcess(
            name, "services.ingest.app:create_app", env, self.workdir / "logs" / f"{name}.log"
        )

    def embed(self, i: int = 0, **extra: str) -> ServiceProcess:
        """Embed process ``i`` (group ``<prefix>-ingest-embed``; its vector store behind
        :class:`OutageVectorStore`); with :attr:`reconcile` it runs reconcile too. Only ``i=0``
        without ``qdrant_url``: the embedded vector store allows one process; with a Qdrant server
        any number share the collection."""
        if i and not self.qdrant_url:
            raise ConfigurationError("a second embed process needs a Qdrant server (qdrant_url)")
        name = "embed" if i == 0 else f"embed-{i}"
        stages = '["embed", "reconcile"]' if self.reconcile else '["embed"]'
        env = self._env(
            name,
            self.embed_data_dir if i == 0 else self.workdir / name,
            {"HINDSIGHT_INGEST_STAGES": stages, OUTAGE_FLAG_ENV: str(self.outage_flag), **extra},
        )
        return ServiceProcess(
            name, f"{__name__}:create_ingest_app", env, self.workdir / "logs" / f"{name}.log"
        )

    def settings(self) -> AllSettings:
        """Settings of the embed processes (to open their vector store once they have stopped)."""
        cfg = AllSettings()
        cfg.runtime.data_dir = self.embed_data_dir
        cfg.qdrant.url = self.qdrant_url
        cfg.qdrant.collection = self.qdrant_collection
        cfg.qdrant.check_compatibility = False
        return cfg
