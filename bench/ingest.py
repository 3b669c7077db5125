"""``hindsight bench ingest``: the pipeline's ingest throughput against the embedder's own (issue 12).

One run, the embedded default (guard -> write-trigger -> embed -> store, Kafka, Valkey), ~1 KB
events (consecutive real LoCoMo turns of one session, :func:`bench.synth.ingest_texts`):

1. ``ingest-embedder``: the stack's own embedder (same engine, same threads) embeds the same kind of
   texts alone, one call per text and in batches of 8: texts/s (the best of the two is the
   embedder's standalone rate); measured again at the end, the mean of both runs is the baseline;
2. ``ingest-burst``: ``--burst`` events published at once; the pipeline drains the backlog: stored
   events/s from the first publish to the last ``memory.stored.v1`` (events the write-trigger drops
   are not embedded and not counted), and that rate over the embedder's standalone rate;
3. ``ingest-steady``: events offered at ``--fraction`` (default 0.8) of the embedder's standalone
   rate for ``--seconds``: ingest-to-searchable p50/p95/p99 (publish -> ``memory.stored.v1``,
   sent after the upsert returned) and whether the rate was sustained.

Run: ``uv run hindsight bench ingest`` (JSON lines on stdout).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import DEFAULT_DATA, loadavg, print_line, rounded, scratch_dir
from bench.stack import IngestProbe, embedded
from bench.synth import ingest_texts, make_users
from hindsight.eval import locomo

if TYPE_CHECKING:
    from services.cli.embedded import Stack


async def embedder_rate(stack: Stack, texts: Sequence[str], batch: int) -> float:
    """Texts/s of the stack's embedder on ``texts`` in calls of ``batch`` (after one warm-up call)."""
    from hindsight.inference.embedder import embed_passages_async  # noqa: PLC0415

    embedder = stack.resources.embedder()
    await embed_passages_async(embedder, texts[:1])
    started = time.perf_counter()
    for i in range(0, len(texts), batch):
        await embed_passages_async(embedder, texts[i : i + batch])
    return len(texts) / (time.perf_counter() - started)


async def standalone(stack: Stack, texts: Sequence[str]) -> dict[str, Any]:
    """The ``ingest-embedder`` line: batch 1 and batch 8 rates on ``texts``."""
    one = await embedder_rate(stack, texts, 1)
    eight = await embedder_rate(stack, texts, 8)
    return {
        "bench": "ingest-embedder",
        "texts": len(texts),
        "text_chars_mean": sum(map(len, texts)) / len(texts),
        "batch1_texts_per_s": one,
        "batch8_texts_per_s": eight,
        "standalone_texts_per_s": max(one, eight),
        "load_avg": loadavg(),
    }


async def burst(probe: IngestProbe, count: int, timeout_s: float) -> dict[str, Any]:
    """Publish ``count`` events at once and time the drain (only stored events count)."""
    t0 = time.perf_counter()
    sent = [await probe.send_next() for _ in range(count)]
    await asyncio.gather(*(f for _, f in sent))
    ids = [m for m, _ in sent]
    await probe.wait_stored(ids, timeout_s)
    arrivals = sorted(probe.stored[m] for m in ids if m in probe.stored)
    # the rate between the first and the last arrival: the pipeline's own pace with a full backlog,
    # without the time the first event needs to cross guard and write-trigger
    steady = (len(arrivals) - 1) / (arrivals[-1] - arrivals[0]) if len(arrivals) > 1 else 0.0
    return {
        "bench": "ingest-burst",
        "events": count,
        "stored": len(arrivals),
        "not_stored": count - len(arrivals),
        "first_stored_after_s": (arrivals[0] - t0) if arrivals else None,
        "drain_seconds": (arrivals[-1] - t0) if arrivals else None,
        "stored_events_per_s": steady,
        "load_avg": loadavg(),
    }


async def steady(probe: IngestProbe, rate: float, seconds: float, timeout_s: float) -> dict[str, Any]:
    """Offer ``rate`` events/s for ``seconds``; searchable latency and whether it kept up."""
    stop = asyncio.Event()
    publishing = asyncio.create_task(probe.publish_until(rate, stop))
    await asyncio.sleep(seconds)
    stop.set()
    ids = await publishing
    t_end = time.perf_counter()
    lag_end = await probe.lag()
    await probe.wait_stored(ids, timeout_s)
    line = probe.searchable(ids)
    stored = [probe.stored[m] for m in ids if m in probe.stored]
    return {
        "bench": "ingest-steady",
        "offered_events_per_s": rate,
        "seconds": seconds,
        **line,
        "stored_within_window": sum(t <= t_end for t in stored),
        "lag_when_publishing_ended": lag_end,
        "sustained": sum(lag_end.values()) <= max(2.0, 0.05 * len(ids)),
        "load_avg": loadavg(),
    }


async def run_ingest_bench(
    *,
    data: Path,
    burst_events: int,
    fraction: float,
    seconds: float,
    baseline_texts: int,
    timeout_s: float,
    workdir: Path | None,
    emit: Callable[[dict[str, Any]], None],
) -> None:
    """All three measurements in one embedded stack (see the module docstring).

    Raises:
        locomo.DatasetError: the LoCoMo file is missing.
    """
    texts = ingest_texts(data)
    sample = [t for _, t in texts[-baseline_texts:]]  # the probe publishes from the head of the list
    users = make_users(50, tenants=5)
    with scratch_dir("hindsight-bench-ingest-", workdir) as work:
        async with (
            embedded(work / "data", {"dev-bench-ingest-key": "tenant-0"}) as stack,
            IngestProbe(stack, users, texts[: len(texts) - baseline_texts]) as probe,
        ):
            warm = [await probe.send_next() for _ in range(3)]  # one-off costs: threads, connections
            await probe.wait_stored([m for m, _ in warm], timeout_s)
            before = await standalone(stack, sample)
            emit(rounded(before))
            line = await burst(probe, burst_events, timeout_s)
            line["vs_embedder_standalone"] = line["stored_events_per_s"] / before["standalone_texts_per_s"]
            emit(rounded(line))
            rate = round(fraction * before["standalone_texts_per_s"], 2)
            emit(
                rounded({**await steady(probe, rate, seconds, timeout_s), "fraction_of_standalone": fraction})
            )
            after = await standalone(stack, sample)
            mean = (before["standalone_texts_per_s"] + after["standalone_texts_per_s"]) / 2
            emit(
                rounded(
                    {
                        **after,
                        "bench": "ingest-summary",
                        "standalone_before_after_mean": mean,
                        "burst_vs_standalone_mean": line["stored_events_per_s"] / mean,
                        "goal_vs_standalone_at_least": 0.9,
                        "goal_searchable_p95_ms_below": 1000,
                    }
                )
            )


def main(argv: Sequence[str] | None = None) -> int:
    """``bench ingest`` command line: prints one JSON line per measurement."""
    parser = argparse.ArgumentParser(prog="hindsight bench ingest", description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo file (event texts).")
    parser.add_argument("--burst", type=int, default=60, help="Events of the backlog drain.")
    parser.add_argument("--fraction", type=float, default=0.8, help="Steady rate / embedder's rate.")
    parser.add_argument("--seconds", type=float, default=60.0, help="Steady publishing time.")
    parser.add_argument("--baseline-texts", type=int, default=16, help="Texts of the standalone runs.")
    parser.add_argument("--timeout-s", type=float, default=600.0, help="Most wait for the pipeline.")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    try:
        asyncio.run(
            run_ingest_bench(
                data=args.data,
                burst_events=args.burst,
                fraction=args.fraction,
                seconds=args.seconds,
                baseline_texts=args.baseline_texts,
                timeout_s=args.timeout_s,
                workdir=args.workdir,
                emit=print_line,
            )
        )
    except locomo.DatasetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
