"""A real single-node Apache Kafka broker (KRaft, broker+controller) run as a subprocess.

The jars come from Maven Central through ``infra/kafka/fetch.sh`` into ``$HINDSIGHT_KAFKA_HOME/libs``
(default ``<repo>/.cache/kafka-4.4.0/libs``). :class:`BrokerProcess` holds what every broker process
shares (free loopback ports, bounded readiness wait, SIGTERM-then-SIGKILL stop, context manager);
:class:`KafkaServer` and :class:`hindsight.brokers.tansu.TansuBroker` only say how to launch theirs.
"""

from __future__ import annotations

import asyncio
import base64
import fcntl
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
import weakref
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from hindsight.childproc import die_with_parent_argv
from hindsight.errors import ConfigurationError, StoreUnavailableError

KAFKA_VERSION = "4.4.0"
"""The Apache Kafka version ``infra/kafka/fetch.sh`` resolves (``org.apache.kafka:kafka_2.13``)."""

KAFKA_HOME_ENV = "HINDSIGHT_KAFKA_HOME"
"""Environment variable overriding the folder whose ``libs/`` holds the broker jars."""

JAVA_ENV = "HINDSIGHT_JAVA"
"""Environment variable naming the ``java`` executable (else ``$JAVA_HOME/bin/java``, else PATH)."""

CLASS_ARCHIVE_ENV = "HINDSIGHT_KAFKA_CLASS_ARCHIVE"
"""Environment variable naming the AppCDS class archive to start the broker with ("" = none)."""

LEAN_JVM_OPTIONS: tuple[str, ...] = (
    "-Xms32m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:CICompilerCount=1",
    "-XX:CompileThresholdScaling=0.05",
    "-Xss512k",
    "-XX:-UsePerfData",
    "-XX:+ExitOnOutOfMemoryError",
)
"""JVM options for a single-node broker on a small machine. The serial collector and the C1
compiler alone start faster and idle lower than G1 with both JIT tiers (``-UsePerfData``: no
sampling of JVM counters into ``/tmp/hsperfdata_*`` every 50 ms); measured on 2 shared cores
(``hindsight bench broker``, docs/delivery.md): start-up 9-15 s -> 7 s (3.5 s with the class
archive), idle CPU 3.8 % -> 1.4 % of a core, resident memory 318 -> 206 MiB, while a single node
on loopback still moves tens of thousands of records per second.

``-XX:CompileThresholdScaling=0.05``: C1 compiles a method after 1/20 of the usual invocations
(10 instead of 200). The broker's idle paths (purgatory reapers every 200 ms, metric ticks every
5 s) otherwise reach the threshold one by one over the first minutes, so the compiler thread was
the broker's busiest at idle (0.4 % of a core in the window 15-75 s after ``up`` was ready, per-thread
``/proc`` sampling, issue 12); with the scaling that work is done during start-up and the window
shows 0.17 %. The code is the same (C1 level 1), only compiled sooner; the broker's start measured
3.0-3.3 s with and without it."""

LEAN_PROPERTIES: dict[str, str] = {
    "num.network.threads": "1",
    "num.io.threads": "2",
    "background.threads": "2",
    "num.recovery.threads.per.data.dir": "1",
    "num.replica.fetchers": "1",
    "log.cleaner.threads": "1",
    "log.cleaner.dedupe.buffer.size": str(2 * 1024 * 1024),
    "log.cleaner.io.buffer.size": str(64 * 1024),
    "group.coordinator.threads": "1",
    "share.coordinator.threads": "1",
    # The active controller appends a no-op record every 500 ms by default to advance the metadata
    # high watermark, which only matters with several controllers: one node never needs it.
    "metadata.max.idle.interval.ms": "0",
}
"""Broker properties for one node on loopback: one thread per pool where Kafka's defaults assume a
server (8 I/O threads, 3 network threads, ...)."""

_REPO_ROOT = Path(__file__).resolve().parents[2]
_FETCH_HINT = "run infra/kafka/fetch.sh (needs mvn and Java 17+)"
_LOG_TAIL_BYTES = 4000


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port on ``host`` that was free when asked (the OS picks it; racy but fine locally)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def default_kafka_home() -> Path:
    """Folder whose ``libs/`` holds the jars: ``$HINDSIGHT_KAFKA_HOME`` or ``<repo>/.cache/kafka-4.4.0``."""
    override = os.environ.get(KAFKA_HOME_ENV)
    if override:
        return Path(override)
    return _REPO_ROOT / ".cache" / f"kafka-{KAFKA_VERSION}"


def find_java() -> str:
    """Path of the ``java`` executable: ``$HINDSIGHT_JAVA``, ``$JAVA_HOME/bin/java``, or ``java`` on PATH.

    :raises ConfigurationError: when no ``java`` executable is found.
    """
    for candidate in (os.environ.get(JAVA_ENV), _java_home_java()):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    on_path = shutil.which("java")
    if on_path is None:
        raise ConfigurationError(
            "no java executable found (set HINDSIGHT_JAVA or JAVA_HOME, or install a JDK 17+: "
            f"apt-get install -y openjdk-17-jre-headless); then {_FETCH_HINT}"
        )
    return on_path


def default_class_archive(java: str, kafka_home: Path | None = None) -> Path:
    """Where the AppCDS archive of the broker's classes for ``java`` lives:
    ``<kafka home>/cds/kafka-<hash of java's real path>.jsa`` (an archive only fits the JVM build that
    wrote it; :func:`hindsight.brokers.prepare.build_class_archive` writes it)."""
    home = kafka_home if kafka_home is not None else default_kafka_home()
    digest = hashlib.sha256(os.path.realpath(java).encode()).hexdigest()[:12]
    return home / "cds" / f"kafka-{digest}.jsa"


def kafka_tool_argv(main_class: str, *, kafka_home: Path | None = None, java: str | None = None) -> list[str]:
    """The command that runs one of Kafka's command-line tools, e.g.
    ``org.apache.kafka.tools.ConsoleProducer``, from the jars ``infra/kafka/fetch.sh`` fetched
    (``libs/`` and ``tools/``); append the tool's own arguments.

    :raises ConfigurationError: java or the tools jar is missing.
    """
    home = kafka_home if kafka_home is not None else default_kafka_home()
    tools = home / "tools" / f"kafka-tools-{KAFKA_VERSION}.jar"
    if not tools.is_file():
        raise ConfigurationError(f"Kafka tools jar not found ({tools}): {_FETCH_HINT}")
    return [java or find_java(), "-Xmx128m", "-cp", f"{home / 'libs'}/*:{tools}", main_class]


def _java_home_java() -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    return str(Path(java_home) / "bin" / "java") if java_home else None


def random_cluster_id() -> str:
    """A KRaft cluster id: random UUID, 22 URL-safe base64 chars (as ``kafka-storage random-uuid``)."""
    while True:
        encoded = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not encoded.startswith("-"):  # Kafka refuses ids that look like a CLI flag
            return encoded


async def probe_metadata(bootstrap: str, *, request_timeout_s: float = 2.0) -> int:
    """Fetch cluster metadata once with a real Kafka client; return the number of brokers it lists.

    :raises KafkaError: the broker answered with an error or the connection failed.
    :raises OSError: the socket could not be opened.
    :raises TimeoutError: the broker did not answer in time.
    """
    timeout_ms = int(request_timeout_s * 1000)
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=timeout_ms)
    try:
        await asyncio.wait_for(admin.start(), request_timeout_s * 2)
        cluster = await asyncio.wait_for(admin.describe_cluster(), request_timeout_s * 2)
    finally:
        await admin.close()
    return len(cluster["brokers"])


def _probe_once(host: str, port: int) -> bool:
    """True when ``host:port`` accepts TCP and a Kafka client there lists at least one broker.

    The plain TCP check first keeps aiokafka from logging a connection error per probe while the
    broker is still booting.
    """
    try:
        with socket.create_connection((host, port), timeout=1.0):
            pass
        return asyncio.run(probe_metadata(f"{host}:{port}")) > 0
    except (KafkaError, OSError, TimeoutError):
        return False


def _terminate(process: subprocess.Popen[bytes], log_file: IO[bytes] | None, stop_timeout_s: float) -> None:
    """SIGTERM ``process``, SIGKILL it after ``stop_timeout_s`` seconds, then close ``log_file``."""
    try:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=stop_timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=stop_timeout_s)
    finally:
        if log_file is not None:
            log_file.close()


class BrokerProcess:
    """A Kafka-protocol broker run as a child process listening on ``127.0.0.1:port``.

    Subclasses provide :meth:`_command` (and optionally :meth:`_prepare`). Use as a context manager
    or call :meth:`start` / :meth:`stop` (or :meth:`launch` then :meth:`wait_ready`, to do other
    work while the broker boots). A broker left running is killed when the object is
    garbage-collected or the interpreter exits, and, with ``die_with_parent`` (the default), by the
    kernel when the thread that launched it dies, SIGKILL of this process included
    (:mod:`hindsight.childproc`): launch it from a thread that lives as long as the broker should.
    """

    name = "broker"

    def __init__(
        self,
        *,
        port: int | None = None,
        log_path: Path | None = None,
        startup_timeout_s: float = 60.0,
        stop_timeout_s: float = 30.0,
        poll_s: float = 0.2,
        die_with_parent: bool = True,
    ) -> None:
        """Configure (nothing starts yet).

        :param port: client port on 127.0.0.1; a free one is chosen when None.
        :param log_path: file receiving the broker's stdout and stderr; discarded when None.
        :param startup_timeout_s: seconds :meth:`start` waits for the broker to serve metadata.
        :param stop_timeout_s: seconds :meth:`stop` waits after SIGTERM before SIGKILL.
        :param poll_s: seconds between readiness probes.
        :param die_with_parent: the kernel kills the broker when the launching thread dies.
        """
        self.host = "127.0.0.1"
        self.port = port if port is not None else free_port(self.host)
        self.log_path = log_path
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.poll_s = poll_s
        self.die_with_parent = die_with_parent
        self.startup_s: float | None = None
        """Seconds the last :meth:`start` took until a client could fetch metadata."""
        self._process: subprocess.Popen[bytes] | None = None
        self._began = time.monotonic()
        self._log_file: IO[bytes] | None = None
        self._finalizer: weakref.finalize[..., BrokerProcess] | None = None

    @property
    def bootstrap(self) -> str:
        """Bootstrap servers string for clients: ``"127.0.0.1:PORT"``."""
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        """True while the broker process is alive."""
        return self._process is not None and self._process.poll() is None

    def _prepare(self) -> None:
        """Hook run before launching (write configs, format storage). Default: nothing."""

    def _command(self) -> Sequence[str]:
        """The argv that launches the broker in the foreground."""
        raise NotImplementedError

    def _environment(self) -> Mapping[str, str] | None:
        """Environment for the broker process; None inherits ours."""
        return None

    def start(self) -> Self:
        """Launch the broker and wait until a real client can fetch metadata from it.

        :returns: self, for chaining.
        :raises ConfigurationError: the broker's files or runtime are missing (see the message).
        :raises StoreUnavailableError: the broker exited, or did not serve metadata within
            ``startup_timeout_s`` seconds (the message holds the tail of its log).
        """
        if self.running:
            return self
        self.launch()
        return self.wait_ready()

    def launch(self) -> Self:
        """Prepare and spawn the broker process without waiting for it (see :meth:`wait_ready`).

        :raises ConfigurationError: the broker's files or runtime are missing, or it cannot be spawned.
        :raises StoreUnavailableError: the broker's data directory stays locked by another process.
        """
        if self.running:
            return self
        self.stop()  # reap a broker that died since the last start, close its log
        self._began = time.monotonic()
        self._prepare()
        stdout: IO[bytes] | int = subprocess.DEVNULL
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log_file = self.log_path.open("ab")
            stdout = self._log_file
        prefix = die_with_parent_argv() if self.die_with_parent else []
        try:
            self._process = subprocess.Popen(
                [*prefix, *self._command()],
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=subprocess.STDOUT,
                env=self._environment(),
                process_group=0,  # a terminal's Ctrl-C reaches the owner only; it stops the broker last
            )
        except OSError as error:
            self._close_log()
            raise ConfigurationError(f"cannot launch the {self.name}: {error}") from error
        self._finalizer = weakref.finalize(self, _terminate, self._process, self._log_file, 5.0)
        return self

    def wait_ready(self) -> Self:
        """Block until the launched broker serves metadata (``startup_timeout_s`` after :meth:`launch`).

        :raises StoreUnavailableError: the broker exited or did not become ready in time (it is
            stopped; the message holds the tail of its log).
        """
        try:
            self._wait_ready(deadline=self._began + self.startup_timeout_s)
        except StoreUnavailableError:
            self.stop()
            raise
        self.startup_s = time.monotonic() - self._began
        return self

    @property
    def pid(self) -> int | None:
        """The broker process's id while it runs."""
        return self._process.pid if self.running and self._process is not None else None

    def _wait_ready(self, *, deadline: float) -> None:
        # The probe runs on its own event loop in a worker thread so start() also works when the
        # caller is inside a running loop (an async test or service).
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{self.name}-probe") as pool:
            while True:
                if self._process is None or self._process.poll() is not None:
                    code = None if self._process is None else self._process.returncode
                    raise StoreUnavailableError(
                        f"the {self.name} exited with code {code} before serving metadata; "
                        f"log {self.log_path}:\n{self._log_tail()}"
                    )
                if pool.submit(_probe_once, self.host, self.port).result():
                    return
                if time.monotonic() >= deadline:
                    raise StoreUnavailableError(
                        f"the {self.name} did not serve metadata on {self.bootstrap} within "
                        f"{self.startup_timeout_s:.0f} s; log {self.log_path}:\n{self._log_tail()}"
                    )
                time.sleep(self.poll_s)

    def _log_tail(self) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        with self.log_path.open("rb") as handle:
            handle.seek(max(0, self.log_path.stat().st_size - _LOG_TAIL_BYTES))
            return handle.read().decode(errors="replace")

    def _close_log(self) -> None:
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def stop(self) -> None:
        """Stop the broker: SIGTERM, then SIGKILL after ``stop_timeout_s`` seconds. Idempotent."""
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if self._process is not None:
            _terminate(self._process, None, self.stop_timeout_s)
            self._process = None
        self._close_log()

    def __enter__(self) -> Self:
        """Start the broker (see :meth:`start`)."""
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Stop the broker (see :meth:`stop`)."""
        self.stop()


class KafkaServer(BrokerProcess):
    """A real Apache Kafka 4.x broker, single node, KRaft mode (``process.roles=broker,controller``).

    Everything lives under ``work_dir``: ``server.properties``, ``log4j2.properties``, the data
    (``data/``), the broker log (``server.log``) and the JVM's stdout/stderr (``kafka.out``).
    Starting again on a ``work_dir`` already formatted reuses its data, on any ports: the quorum is
    static (``controller.quorum.voters``, the one voter's endpoint read from the configuration at
    each start), so nothing on disk names a port.

    The JVM runs with :data:`LEAN_JVM_OPTIONS` and the broker with :data:`LEAN_PROPERTIES` unless
    told otherwise, and with the AppCDS class archive of :func:`default_class_archive` when one
    exists (``hindsight.brokers.prepare`` writes it; start-up about halves).
    """

    name = "Kafka broker"

    def __init__(
        self,
        work_dir: Path,
        *,
        num_partitions: int = 1,
        offsets_topic_partitions: int = 1,
        port: int | None = None,
        controller_port: int | None = None,
        kafka_home: Path | None = None,
        java: str | None = None,
        heap: str = "512m",
        jvm_options: Sequence[str] = LEAN_JVM_OPTIONS,
        class_archive: Path | None = None,
        use_class_archive: bool = True,
        extra_properties: Mapping[str, str] | None = None,
        startup_timeout_s: float = 60.0,
        stop_timeout_s: float = 30.0,
        die_with_parent: bool = True,
    ) -> None:
        """Configure (nothing starts yet; no file is read or written).

        :param work_dir: folder for config, data and logs (created if missing).
        :param num_partitions: partitions of auto-created topics (``num.partitions``).
        :param offsets_topic_partitions: partitions of ``__consumer_offsets`` (Kafka's default is 50,
            slow to create on small machines; one node needs few).
        :param port: client (PLAINTEXT) port on 127.0.0.1; free one when None.
        :param controller_port: KRaft controller port on 127.0.0.1; free one when None.
        :param kafka_home: folder whose ``libs/`` holds the jars; default :func:`default_kafka_home`.
        :param java: ``java`` executable; default :func:`find_java` at start.
        :param heap: JVM max heap (``-Xmx``), e.g. ``"512m"``.
        :param jvm_options: further JVM options (default :data:`LEAN_JVM_OPTIONS`).
        :param class_archive: AppCDS archive to start with; default ``$HINDSIGHT_KAFKA_CLASS_ARCHIVE``
            (empty: none), else :func:`default_class_archive` when that file exists.
        :param use_class_archive: False starts without any class archive.
        :param extra_properties: broker properties added last (they override ours).
        :param startup_timeout_s: seconds :meth:`start` waits for metadata.
        :param stop_timeout_s: seconds :meth:`stop` waits after SIGTERM before SIGKILL.
        :param die_with_parent: the kernel kills the broker when the launching thread dies.
        """
        self.work_dir = Path(work_dir)
        super().__init__(
            port=port,
            log_path=self.work_dir / "kafka.out",
            startup_timeout_s=startup_timeout_s,
            stop_timeout_s=stop_timeout_s,
            die_with_parent=die_with_parent,
        )
        self.controller_port = controller_port if controller_port is not None else free_port(self.host)
        self.num_partitions = num_partitions
        self.offsets_topic_partitions = offsets_topic_partitions
        self.kafka_home = kafka_home if kafka_home is not None else default_kafka_home()
        self.java = java
        self.heap = heap
        self.jvm_options = tuple(jvm_options)
        self.class_archive = class_archive
        self.use_class_archive = use_class_archive
        self.extra_properties = dict(extra_properties or {})
        self.cluster_id: str | None = None

    @property
    def data_dir(self) -> Path:
        """The broker's ``log.dirs`` (topic partitions and KRaft metadata)."""
        return self.work_dir / "data"

    @property
    def server_log(self) -> Path:
        """The broker's own log4j log file."""
        return self.work_dir / "server.log"

    def properties(self) -> dict[str, str]:
        """The ``server.properties`` this broker runs with."""
        listeners = f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}"
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{self.host}:{self.controller_port}",
            "listeners": listeners,
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": str(self.num_partitions),
            "default.replication.factor": "1",
            "min.insync.replicas": "1",
            "auto.create.topics.enable": "true",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": str(self.offsets_topic_partitions),
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": str(self.offsets_topic_partitions),
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            **LEAN_PROPERTIES,
        }
        props.update(self.extra_properties)
        return props

    def _jars(self) -> Path:
        libs = self.kafka_home / "libs"
        if not (libs / f"kafka_2.13-{KAFKA_VERSION}.jar").is_file():
            raise ConfigurationError(
                f"Kafka {KAFKA_VERSION} jars not found in {libs}: {_FETCH_HINT} "
                f"(or point {KAFKA_HOME_ENV} at a folder whose libs/ holds them)"
            )
        return libs

    def archive(self, java: str) -> Path | None:
        """The class archive this broker starts with, or None (see the ``class_archive`` parameter)."""
        if not self.use_class_archive:
            return None
        if self.class_archive is not None:
            return self.class_archive
        override = os.environ.get(CLASS_ARCHIVE_ENV)
        if override is not None:
            return Path(override) if override else None
        default = default_class_archive(java, self.kafka_home)
        return default if default.is_file() else None

    def _java_base(self) -> list[str]:
        java = self.java or find_java()
        jsa = self.archive(java)
        return [
            java,
            f"-Xmx{self.heap}",
            *self.jvm_options,
            *([f"-XX:SharedArchiveFile={jsa}", "-Xshare:auto"] if jsa is not None else []),
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.work_dir / 'log4j2.properties'}",
            "-cp",
            f"{self._jars()}/*",
        ]

    def _wait_for_previous_owner(self, timeout_s: float = 15.0) -> None:
        """Wait until no other process holds Kafka's own lock on the data directory (``.lock``, a
        POSIX record lock): a broker of a just-killed owner may take a moment to exit.

        :raises StoreUnavailableError: still held after ``timeout_s`` seconds.
        """
        lock_file = self.data_dir / ".lock"
        if not lock_file.exists():
            return
        deadline = time.monotonic() + timeout_s
        with lock_file.open("rb+") as handle:
            while True:
                try:
                    fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    if time.monotonic() >= deadline:
                        raise StoreUnavailableError(
                            f"the Kafka data directory {self.data_dir} is locked by another broker "
                            f"process (see {lock_file}); stop it first"
                        ) from None
                    time.sleep(0.1)
                    continue
                fcntl.lockf(handle, fcntl.LOCK_UN)
                return

    def _prepare(self) -> None:
        """Write ``server.properties`` and ``log4j2.properties``; format the storage if new.

        :raises ConfigurationError: jars or java missing, or ``StorageTool format`` failed.
        :raises StoreUnavailableError: another broker process still holds the data directory.
        """
        self._java_base()  # fail fast on missing java / jars before touching the disk
        self._wait_for_previous_owner()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        config = self.work_dir / "server.properties"
        config.write_text("".join(f"{key}={value}\n" for key, value in self.properties().items()))
        (self.work_dir / "log4j2.properties").write_text(_log4j2_properties(self.server_log))
        meta = self.data_dir / "meta.properties"
        if meta.exists():
            return
        self.cluster_id = random_cluster_id()
        command = [
            *self._java_base(),
            "kafka.tools.StorageTool",
            "format",
            "--cluster-id",
            self.cluster_id,
            "--config",
            str(config),
        ]
        try:
            result = subprocess.run(command, capture_output=True, timeout=120, check=False)
        except subprocess.TimeoutExpired as error:
            raise ConfigurationError(f"kafka StorageTool format timed out after 120 s: {command}") from error
        if result.returncode != 0:
            output = (result.stdout + result.stderr).decode(errors="replace")[-_LOG_TAIL_BYTES:]
            raise ConfigurationError(f"kafka StorageTool format failed ({result.returncode}):\n{output}")

    def _command(self) -> Sequence[str]:
        return [*self._java_base(), "kafka.Kafka", str(self.work_dir / "server.properties")]


def _log4j2_properties(log_file: Path) -> str:
    """A log4j2 config sending every broker log line to ``log_file`` at INFO (WARN for chatty loggers)."""
    return "\n".join(
        [
            "status = warn",
            "appender.file.type = File",
            "appender.file.name = FILE",
            f"appender.file.fileName = {log_file}",
            "appender.file.layout.type = PatternLayout",
            "appender.file.layout.pattern = [%d] %p %m (%c)%n",
            "rootLogger.level = INFO",
            "rootLogger.appenderRef.file.ref = FILE",
            "logger.kafka.name = kafka",
            "logger.kafka.level = INFO",
            "logger.requests.name = kafka.request.logger",
            "logger.requests.level = WARN",
            "",
        ]
    )
