"""CPU time of a process tree over a window: what "an idle service uses next to no CPU" is checked by.

``hindsight bench idle`` starts the embedded default (``hindsight up``) on a fresh data directory,
lets it settle, then reads the CPU time (user + system, ``/proc/<pid>/stat``) of ``up`` and of every
child process (the broker, Valkey) at the start and the end of a window with no traffic, and prints
one JSON line: the share of one core each process used, and the total (issue 12 asks < 2 %).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import arg_parser, loadavg, print_line, scratch_dir
from bench.up import UpProcess, process_tree

_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> tuple[str, float] | None:
    """(command name, user + system CPU seconds so far) of ``pid``, or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name = stat[stat.index("(") + 1 : stat.rindex(")")]
    fields = stat.rsplit(")", 1)[1].split()
    return name, (int(fields[11]) + int(fields[12])) / _TICKS


def rss_mib(pid: int) -> float:
    """Resident memory of ``pid`` in MiB (0.0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def tree_cpu(root: int, seconds: float) -> dict[str, Any]:
    """Share of one core (%) each process of ``root``'s tree used during the next ``seconds``.

    Returns ``{"total_pct", "by_process": {"name:pid": pct}, "rss_mib": {"name:pid": MiB},
    "seconds"}``; processes that start during the window are not counted.
    """
    pids = process_tree(root)
    before = {pid: cpu_seconds(pid) for pid in pids}
    began = time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - began
    by_process: dict[str, float] = {}
    rss: dict[str, float] = {}
    for pid in pids:
        start, end = before[pid], cpu_seconds(pid)
        if start is None or end is None:
            continue
        label = f"{end[0]}:{pid}"
        by_process[label] = round((end[1] - start[1]) / elapsed * 100, 2)
        rss[label] = round(rss_mib(pid), 1)
    return {
        "total_pct": round(sum(by_process.values()), 2),
        "by_process": by_process,
        "rss_mib": rss,
        "seconds": round(elapsed, 1),
    }


def measure_up_idle(
    data_dir: Path, env: dict[str, str], *, settle_s: float, seconds: float
) -> dict[str, Any]:
    """Start ``hindsight up`` on ``data_dir``, wait ``settle_s``, measure ``seconds`` of idle CPU."""
    with UpProcess(data_dir, env) as up:
        assert up.pid is not None
        time.sleep(settle_s)
        return {"ready_s": round(up.ready_s or 0.0, 2), **tree_cpu(up.pid, seconds)}


def main(argv: Sequence[str] | None = None) -> int:
    """``hindsight bench idle``: one JSON line per embedded broker asked for."""
    parser = arg_parser("hindsight bench idle", __doc__)
    parser.add_argument(
        "--broker", action="append", choices=["kafka", "tansu"], help="repeatable; default kafka"
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the idle window")
    parser.add_argument("--settle", type=float, default=15.0, help="seconds to wait after ready")
    args = parser.parse_args(argv)
    for kind in args.broker or ["kafka"]:
        with scratch_dir(f"hindsight-idle-{kind}-") as scratch:
            env = {"HINDSIGHT_KAFKA_EMBEDDED": kind, "HINDSIGHT_LOG_LEVEL": "WARNING"}
            line = measure_up_idle(scratch / "data", env, settle_s=args.settle, seconds=args.seconds)
        print_line({"bench": "idle", "broker": kind, **line, "loadavg": loadavg()})
    return 0
