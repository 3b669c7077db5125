"""``hindsight bench load``: steady offered load on the embedded default (a script, not a test).

Starts a Tansu broker and ``hindsight up`` (every stage and the gateway in one process, qdrant-edge,
chDB, Valkey, the in-process e5 embedder: the embedded default) as a child process. For each
``--rate`` it publishes ``rate x seconds`` interaction events at that steady rate (distinct contents
that the write-trigger keeps, so every event is embedded), samples once a second the lag of the
guard, write-trigger and embed groups, the events stored so far (the embed group's committed
offsets) and the resident memory of the ``up`` process (growth reported per 1,000 events stored in
the second half, after warm-up), then waits for the backlog to drain. It prints one JSON line per
rate and a summary line, and plots lag and memory over time to ``--plot``.

A rate is *sustained* when the stored throughput over the second half of the run is at least 95 %
of the offered rate and the backlog (published - stored) does not grow over that half by more than
5 % of the events offered in it.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path

from aiokafka.errors import KafkaError

from bench.common import print_line
from bench.procs import ServiceProcess
from bench.workload import PublishProgress, make_workload, publish
from hindsight.brokers import TansuBroker
from hindsight.brokers.admin import LagReader, lag_reader
from hindsight.errors import HindsightError
from hindsight.observability import configure_logging
from hindsight.settings import AllSettings
from schemas import Topic

GROUPS = {
    "guard": str(Topic.INTERACTIONS),
    "ingest-trigger": str(Topic.GUARDED),
    "ingest-embed": str(Topic.CANDIDATES),
}
"""Group suffix -> topic whose lag is sampled (the stages the load goes through)."""


@dataclass
class Sample:
    """One measurement: seconds since the rate started, events published and stored, lags, RSS."""

    t: float
    published: int
    stored: int
    lag: dict[str, int]
    rss_mb: float

    @property
    def backlog(self) -> int:
        """Events published but not stored yet."""
        return max(0, self.published - self.stored)


@dataclass
class RateResult:
    """What one offered rate gave."""

    rate: float
    seconds: float
    events: int
    offered_per_s: float = 0.0
    stored_per_s: float = 0.0
    backlog_end: int = 0
    backlog_growth: int = 0
    drain_s: float | None = None
    rss_start_mb: float = 0.0
    rss_end_mb: float = 0.0
    rss_per_1k_events_mb: float = 0.0
    sustained: bool = False
    samples: list[Sample] = field(default_factory=list)

    def line(self) -> str:
        """The JSON line (without the samples)."""
        data = {k: v for k, v in asdict(self).items() if k != "samples"}
        return json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in data.items()})


def rss_mb(pid: int | None) -> float:
    """Resident set size of process ``pid`` in MiB (0 when unknown)."""
    if pid is None:
        return 0.0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return 0.0
    return 0.0


async def _sample(reader: LagReader, prefix: str, began: float, published: int, pid: int | None) -> Sample:
    lags: dict[str, int] = {}
    for group, topic in GROUPS.items():
        lags[group] = sum((await reader.lag(f"{prefix}-{group}", [topic])).values())
    committed = await reader.committed(f"{prefix}-ingest-embed", [str(Topic.CANDIDATES)])
    stored = sum(max(0, offset) for offset in committed.values())
    return Sample(round(time.monotonic() - began, 2), published, stored, lags, round(rss_mb(pid), 1))


async def run_rate(
    bootstrap: str, up: ServiceProcess, rate: float, seconds: float, *, prefix: str, seed: int, drain_s: float
) -> RateResult:
    """Offer ``rate`` events/s for ``seconds`` s, sample every second, then wait for the drain."""
    n = max(1, int(rate * seconds))
    work = make_workload(f"load{seed}r{int(rate)}", n, 0, max(20, n // 20), seed)
    result = RateResult(rate, seconds, n)
    progress = PublishProgress(len(work.order))
    async with lag_reader(bootstrap) as reader:
        base = await _sample(reader, prefix, time.monotonic(), 0, up.pid)
        began = time.monotonic()
        publishing = asyncio.create_task(
            publish(bootstrap, work, rate=rate, idempotent=False, progress=progress)
        )
        while True:
            try:
                sample = await _sample(reader, prefix, began, progress.acked, up.pid)
            except KafkaError:
                await asyncio.sleep(1.0)
                continue
            sample.stored -= base.stored
            result.samples.append(sample)
            if publishing.done() and sample.backlog == 0:
                result.drain_s = round(sample.t - seconds, 1)
                break
            if sample.t > seconds + drain_s:
                break
            await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - began - sample.t)))
        await publishing
    return summarise(result)


def summarise(result: RateResult) -> RateResult:
    """Fill the throughput, backlog and memory figures from the samples."""
    during = [s for s in result.samples if s.t <= result.seconds]
    if len(during) < 4:
        return result
    half = [s for s in during if s.t >= result.seconds / 2] or during[-2:]
    first, last = half[0], half[-1]
    span = max(1e-6, last.t - first.t)
    result.offered_per_s = (last.published - first.published) / span
    result.stored_per_s = (last.stored - first.stored) / span
    result.backlog_end = last.backlog
    result.backlog_growth = last.backlog - first.backlog
    result.rss_start_mb = during[0].rss_mb
    result.rss_end_mb = result.samples[-1].rss_mb
    stored_in_half = last.stored - first.stored  # steady state: warm-up allocations excluded
    result.rss_per_1k_events_mb = (last.rss_mb - first.rss_mb) * 1000 / max(1, stored_in_half)
    offered_in_half = last.published - first.published
    result.sustained = (
        result.stored_per_s >= 0.95 * result.offered_per_s and result.backlog_growth <= 0.05 * offered_in_half
    )
    return result


def plot_results(results: Sequence[RateResult], path: Path) -> None:
    """Backlog (published - stored) and the embed group's lag over time per rate, and RSS, to PNG."""
    import matplotlib  # noqa: PLC0415 (only this command needs it)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    for res in results:
        ts = [s.t for s in res.samples]
        label = f"{res.rate:g}/s offered ({'sustained' if res.sustained else 'not sustained'})"
        line = top.plot(ts, [s.backlog for s in res.samples], label=label)[0]
        top.plot(ts, [s.lag["ingest-embed"] for s in res.samples], linestyle=":", color=line.get_color())
        bottom.plot(ts, [s.rss_mb for s in res.samples], color=line.get_color(), label=label)
        top.axvline(res.seconds, color="grey", linewidth=0.5)
    top.set_ylabel("events not yet stored (solid)\nembed-group lag (dotted)")
    top.set_title("hindsight bench load: embedded default on 2 cores (multilingual-e5-small in-process)")
    top.legend(fontsize=8)
    bottom.set_ylabel("RSS of `hindsight up` (MiB)")
    bottom.set_xlabel("seconds since the rate started (grey line: end of offered load)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


async def _wait_ready(up: ServiceProcess, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while "hindsight up: gateway" not in up.log_tail(20_000):
        if not up.alive or time.monotonic() > deadline:
            raise RuntimeError(f"`hindsight up` did not start:\n{up.log_tail()}")
        await asyncio.sleep(0.5)


async def run_load(rates: Sequence[float], seconds: float, workdir: Path) -> list[RateResult]:
    """Start Tansu and ``hindsight up`` in ``workdir``; run each rate in turn; stop everything."""
    with ExitStack() as stack:
        broker = stack.enter_context(TansuBroker(workdir / "tansu"))
        argv = [sys.executable, "-c", "from services.cli.main import main; main()", "up"]
        argv += ["--bootstrap", broker.bootstrap, "--data-dir", str(workdir / "data"), "--port", "0"]
        up = ServiceProcess("up", "hindsight up", {}, workdir / "up.log", argv=argv).start()
        stack.callback(up.terminate, 60.0)
        await _wait_ready(up, 180)
        prefix = AllSettings().kafka.group_prefix
        results = []
        for i, rate in enumerate(rates):
            result = await run_rate(
                broker.bootstrap, up, rate, seconds, prefix=prefix, seed=i + 1, drain_s=max(60.0, seconds)
            )
            print(result.line(), flush=True)
            results.append(result)
        return results


def main_load(*, rates: Sequence[float], seconds: float, plot: Path, workdir: Path | None) -> int:
    """``hindsight bench load``: run, print JSON lines and the summary, write the plot; exit code."""
    configure_logging(AllSettings().runtime)
    root = workdir or Path(tempfile.mkdtemp(prefix="hindsight-load-"))
    try:
        results = asyncio.run(run_load(rates, seconds, root))
    except (HindsightError, RuntimeError, TimeoutError) as exc:
        print_line({"error": str(exc)[:2000], "workdir": str(root)})
        return 2
    plot_results(results, plot)
    sustained = [r.rate for r in results if r.sustained]
    summary = {
        "highest_sustained_rate": max(sustained) if sustained else None,
        "max_stored_per_s": round(max(r.stored_per_s for r in results), 2),
        "plot": str(plot),
    }
    print_line(summary)
    if workdir is None:
        shutil.rmtree(root, ignore_errors=True)
    return 0
