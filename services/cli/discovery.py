"""Where a running ``hindsight up`` can be reached, recorded in its data directory.

``hindsight up`` writes ``<data_dir>/running.json`` (gateway URL, Kafka bootstrap, its pid) once it
is ready and removes it when it stops. Other commands on the same data directory use it instead of
opening the stores themselves (one process per directory): ``hindsight mcp-stdio`` forwards to the
gateway, ``hindsight dlq`` reads the broker. A file left by a killed ``up`` is ignored: the pid
must be alive and still a ``hindsight up``.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

RUNNING_FILE = "running.json"


@dataclass(frozen=True)
class Running:
    """A live ``hindsight up``: its gateway base URL, Kafka bootstrap address and process id."""

    gateway_url: str
    bootstrap: str
    pid: int


def record(data_dir: Path, running: Running) -> Path:
    """Write ``running`` to ``<data_dir>/running.json`` (atomically); return the path."""
    path = Path(data_dir) / RUNNING_FILE
    staging = path.with_suffix(".tmp")
    staging.write_text(json.dumps(asdict(running)) + "\n", encoding="utf-8")
    os.replace(staging, path)
    return path


def forget(data_dir: Path, pid: int | None = None) -> None:
    """Remove the record (only ``pid``'s, when given)."""
    path = Path(data_dir) / RUNNING_FILE
    found = find(data_dir, check_alive=False)
    if found is not None and pid is not None and found.pid != pid:
        return
    path.unlink(missing_ok=True)


def _is_hindsight_up(pid: int) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"up" in argv and any(b"hindsight" in part or b"services.cli" in part for part in argv)


def find(data_dir: Path, *, check_alive: bool = True) -> Running | None:
    """The ``hindsight up`` running on ``data_dir``, or None (no record, or its process is gone)."""
    path = Path(data_dir) / RUNNING_FILE
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        running = Running(
            gateway_url=str(raw["gateway_url"]), bootstrap=str(raw["bootstrap"]), pid=int(raw["pid"])
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if check_alive and not _is_hindsight_up(running.pid):
        return None
    return running
