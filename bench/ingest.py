"""``hindsight bench ingest``: the pipeline's ingest throughput against the embedder's own (issue 12).

One run, the embedded default (guard -> write-trigger -> embed -> store, Kafka, Valkey), ~1 KB
events (consecutive real LoCoMo turns of one session, :func:`bench.synth.ingest_texts`):

1. ``ingest-embedder``: the stack's own embedder (same engine, same threads) embeds the same kind of
   texts alone, one call per text and in batches of 8: texts/s (the best of the two is the
   embedder's standalone rate); measured again at the end, the mean of both runs is the baseline;
2. ``ingest-burst``: ``--burst`` events published at once; the pipeline drains the backlog:
   ``drain_events_per_s``, stored events/s from the first publish to the last ``memory.stored.v1``
   (events the write-trigger drops are not embedded and not counted), and that rate over the
   embedder's standalone rate;
3. ``ingest-steady``: events offered at ``--fraction`` (default 0.8) of the embedder's standalone
   rate for ``--seconds``: ingest-to-searchable p50/p95/p99 (publish -> ``memory.stored.v1``,
   sent after the upsert returned) and whether the rate was sustained.

Every line carries ``reconcile``: whether the reconcile stage ran beside ingest (``--no-reconcile``
measures guard -> write-trigger -> embed alone; on CPU reconcile's local judge shares the cores, on
a GPU deployment it runs on Triton).

Run: ``uv run hindsight bench ingest`` (JSON lines on stdout).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import DEFAULT_DATA, arg_parser, loadavg, print_line, rounded, scratch_dir
from bench.stack import IngestProbe, embedded
from bench.synth import ingest_texts, make_users
from hindsight.eval import locomo
from services.ingest.settings import IngestSettings

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


EMBED_STAGE = "ingest.embed"


def stage_busy_s(stage: str) -> float:
    """Seconds ``stage`` has spent in its batches in this process (``hindsight_batch_seconds`` sum)."""
    from prometheus_client import REGISTRY  # noqa: PLC0415

    return REGISTRY.get_sample_value("hindsight_batch_seconds_sum", {"stage": stage}) or 0.0


async def burst(probe: IngestProbe, count: int, timeout_s: float) -> dict[str, Any]:
    """Publish ``count`` events at once and time the drain (only stored events count).

    Besides the rate, the embed stage's share of the drain spent in a batch (``embed_stage_busy_share``:
    below 1, the stage waited for events, a pipeline that does not keep the embedder fed) and its rate
    while busy (``embed_stage_events_per_busy_s``: the embedder's pace beside the other stages).
    """
    busy0 = stage_busy_s(EMBED_STAGE)
    t0 = time.perf_counter()
    sent = [await probe.send_next() for _ in range(count)]
    await asyncio.gather(*(f for _, f in sent))
    ids = [m for m, _ in sent]
    await probe.wait_stored(ids, timeout_s)
    arrivals = sorted(probe.stored[m] for m in ids if m in probe.stored)
    # first publish -> last arrival. Not first -> last arrival: the embed stage takes the backlog in
    # batches (HINDSIGHT_EMBEDDER_BATCH_SIZE, 32) and stores a batch once all of it is embedded, so the
    # first arrival comes after most of the work (a 60-event burst: ~27 s of ~34) and that rate read
    # 3-4x the embedder's own. This one includes the fill (the first event through guard and
    # write-trigger, well under a second), so it errs low.
    drain = arrivals[-1] - t0 if arrivals else 0.0
    busy = stage_busy_s(EMBED_STAGE) - busy0
    return {
        "bench": "ingest-burst",
        "events": count,
        "stored": len(arrivals),
        "not_stored": count - len(arrivals),
        "first_stored_after_s": (arrivals[0] - t0) if arrivals else None,
        "drain_seconds": drain if arrivals else None,
        "drain_events_per_s": len(arrivals) / drain if drain > 0 else 0.0,
        "embed_stage_busy_share": busy / drain if drain > 0 else 0.0,
        "embed_stage_events_per_busy_s": len(arrivals) / busy if busy > 0 else 0.0,
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
    reconcile: bool = True,
) -> None:
    """All three measurements in one embedded stack (see the module docstring); ``reconcile`` False
    runs the ingest stages without the reconcile stage.

    Raises:
        locomo.DatasetError: the LoCoMo file is missing.
    """
    texts = ingest_texts(data)
    sample = [t for _, t in texts[-baseline_texts:]]  # the probe publishes from the head of the list
    users = make_users(50, tenants=5)
    stages = ("trigger", "embed", "reconcile") if reconcile else ("trigger", "embed")
    ingest = IngestSettings(stages=stages)

    def put(line: dict[str, Any]) -> None:
        emit(rounded({**line, "reconcile": reconcile}))

    with scratch_dir("hindsight-bench-ingest-", workdir) as work:
        async with (
            embedded(work / "data", {"dev-bench-ingest-key": "tenant-0"}, ingest=ingest) as stack,
            IngestProbe(stack, users, texts[: len(texts) - baseline_texts]) as probe,
        ):
            warm = [await probe.send_next() for _ in range(3)]  # one-off costs: threads, connections
            await probe.wait_stored([m for m, _ in warm], timeout_s)
            before = await standalone(stack, sample)
            put(before)
            line = await burst(probe, burst_events, timeout_s)
            line["vs_embedder_standalone"] = line["drain_events_per_s"] / before["standalone_texts_per_s"]
            put(line)
            rate = round(fraction * before["standalone_texts_per_s"], 2)
            put({**await steady(probe, rate, seconds, timeout_s), "fraction_of_standalone": fraction})
            after = await standalone(stack, sample)
            mean = (before["standalone_texts_per_s"] + after["standalone_texts_per_s"]) / 2
            put(
                {
                    **after,
                    "bench": "ingest-summary",
                    "standalone_before_after_mean": mean,
                    "burst_vs_standalone_mean": line["drain_events_per_s"] / mean,
                    "goal_vs_standalone_at_least": 0.9,
                    "goal_searchable_p95_ms_below": 1000,
                }
            )


def main(argv: Sequence[str] | None = None) -> int:
    """``bench ingest`` command line: prints one JSON line per measurement."""
    parser = arg_parser("hindsight bench ingest", __doc__)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo file (event texts).")
    parser.add_argument(
        "--burst", type=int, default=60, help="Events published at once for the burst (drain) measurement."
    )
    parser.add_argument(
        "--fraction",
        type=float,
        default=0.8,
        help="Steady publishing rate as a share of the embedder's standalone rate.",
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="Steady publishing time.")
    parser.add_argument(
        "--baseline-texts",
        type=int,
        default=16,
        help="Texts the embedder embeds alone, before and after (its standalone rate).",
    )
    parser.add_argument(
        "--timeout-s",
        type=float,
        default=600.0,
        help="Longest wait (s) for the pipeline to store what was published.",
    )
    parser.add_argument("--workdir", type=Path, default=None, help="Scratch folder (default: a temp dir).")
    parser.add_argument(
        "--no-reconcile",
        dest="reconcile",
        action="store_false",
        help="Guard, write-trigger and embed without the reconcile stage (its CPU judge shares the cores).",
    )
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
                reconcile=args.reconcile,
            )
        )
    except locomo.DatasetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
