"""``hindsight bench broker``: the embedded default's broker candidates, measured side by side.

For each broker (``--broker kafka`` and/or ``--broker tansu``, see :mod:`hindsight.brokers.embedded`)
it prints two JSON lines:

- ``"part": "broker"``: the broker alone, as ``hindsight up`` starts it under a data directory.
  Start-up on a fresh directory and again on the same one, produce throughput (``--records``
  records of ``--record-bytes`` bytes, ``acks=all``, awaited in chunks of 1,000), consume
  throughput (one consumer, ``getmany``), one-hop latency (a record produced every 100 ms to a
  consumer waiting with the embedded consumer timings: what each pipeline hop adds), the broker's
  and the clients' CPU while five consumer groups sit idle, resident memory, stop time, and how
  many records the restarted broker still has;
- ``"part": "up"``: the whole embedded default (``hindsight up``) on that broker: time to ready,
  idle CPU of the process tree over ``--idle-seconds``, ingest-to-searchable latency of
  ``--events`` retains (HTTP 202 to the memory readable by id, polled every 20 ms), SIGTERM exit
  time, time to ready again on the same directory, and how many of the memories it still has (one
  retain first, not counted, warms the embedder up).

Timings on a shared machine are noisy: compare brokers within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from bench.common import arg_parser, latency_summary, loadavg, print_line, scratch_dir
from bench.idle import cpu_seconds, rss_mib, tree_cpu
from bench.up import UpProcess
from hindsight.brokers.admin import ensure_topics
from hindsight.brokers.embedded import EmbeddedKind, embedded_broker_process
from hindsight.ids import turn_memory_id
from services.cli.embedded import EMBEDDED_TIMINGS

_SELF = os.getpid()
BENCH_KEY = "bench-broker-key"
BENCH_TENANT = "bench"
_CHUNK = 1000
_IDLE_GROUPS = 5


async def _produce(bootstrap: str, topic: str, records: int, size: int) -> float:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        value = b"x" * size
        began = time.perf_counter()
        for start in range(0, records, _CHUNK):
            futures = [
                await producer.send(topic, value, key=b"%d" % (k % 64))
                for k in range(start, min(records, start + _CHUNK))
            ]
            await asyncio.gather(*futures)
        return records / (time.perf_counter() - began)
    finally:
        await producer.stop()


async def _consume(bootstrap: str, topic: str, records: int) -> tuple[float, int]:
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"bench-{uuid.uuid4().hex[:6]}",
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        seen = 0
        began = time.perf_counter()
        async with asyncio.timeout(120):
            while seen < records:
                batches = await consumer.getmany(timeout_ms=1000, max_records=10_000)
                seen += sum(len(batch) for batch in batches.values())
        return seen / (time.perf_counter() - began), seen
    finally:
        await consumer.stop()


async def _count(bootstrap: str, topic: str) -> int:
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", group_id=None
    )
    await consumer.start()
    try:
        seen, empty = 0, 0
        while empty < 3:
            batches = await consumer.getmany(timeout_ms=500, max_records=10_000)
            got = sum(len(batch) for batch in batches.values())
            seen += got
            empty = empty + 1 if got == 0 else 0
        return seen
    finally:
        await consumer.stop()


def _consumer(bootstrap: str, topic: str, group: str, timings: dict[str, int]) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="latest",
        fetch_max_wait_ms=timings["fetch_max_wait_ms"],
        session_timeout_ms=timings["session_timeout_ms"],
        heartbeat_interval_ms=max(1000, timings["session_timeout_ms"] // 3),
    )


async def _hop_latency(bootstrap: str, topic: str, timings: dict[str, int], samples: int) -> dict[str, Any]:
    """Produce one record every 100 ms; a consumer waiting like a stage (getmany with the batch
    timeout, no sleep) stamps its arrival."""
    consumer = _consumer(bootstrap, topic, f"bench-hop-{uuid.uuid4().hex[:6]}", timings)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await consumer.start()
    await producer.start()
    latencies: list[float] = []
    try:
        async with asyncio.timeout(60):
            while not consumer.assignment():  # noqa: ASYNC110 (aiokafka offers no assignment event)
                await asyncio.sleep(0.05)
        await consumer.seek_to_end()
        for _ in range(samples):
            sent = time.perf_counter()
            await producer.send_and_wait(topic, b"%f" % sent)
            async with asyncio.timeout(30):
                while True:
                    batches = await consumer.getmany(timeout_ms=timings["batch_timeout_ms"])
                    if batches:
                        latencies.append((time.perf_counter() - sent) * 1000)
                        break
            await asyncio.sleep(0.1)
    finally:
        await producer.stop()
        await consumer.stop()
    return latency_summary(latencies)


async def _idle_clients(
    bootstrap: str, topic: str, timings: dict[str, int], broker_pid: int, seconds: float
) -> dict[str, float]:
    """Five consumer groups waiting like the embedded stages; CPU of the broker and of this process."""
    consumers = [
        _consumer(bootstrap, topic, f"bench-idle-{k}-{uuid.uuid4().hex[:4]}", timings)
        for k in range(_IDLE_GROUPS)
    ]
    for consumer in consumers:
        await consumer.start()
    stop = asyncio.Event()

    async def loop(consumer: AIOKafkaConsumer) -> None:
        while not stop.is_set():
            await consumer.getmany(timeout_ms=timings["batch_timeout_ms"])

    tasks = [asyncio.create_task(loop(c)) for c in consumers]
    try:
        await asyncio.sleep(10)  # groups joined and settled
        broker0, self0 = cpu_seconds(broker_pid), cpu_seconds(_SELF)
        began = time.monotonic()
        await asyncio.sleep(seconds)
        elapsed = time.monotonic() - began
        broker1, self1 = cpu_seconds(broker_pid), cpu_seconds(_SELF)
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        for consumer in consumers:
            await consumer.stop()
    if broker0 is None or broker1 is None or self0 is None or self1 is None:
        raise RuntimeError("the broker process went away during the idle window")
    return {
        "idle_cpu_broker_pct": round((broker1[1] - broker0[1]) / elapsed * 100, 2),
        "idle_cpu_clients_pct": round((self1[1] - self0[1]) / elapsed * 100, 2),
    }


def measure_broker(kind: EmbeddedKind, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The ``"part": "broker"`` line for ``kind``."""
    timings = EMBEDDED_TIMINGS[kind]
    topic, hop_topic, idle_topic = "bench.throughput", "bench.hop", "bench.idle"
    broker = embedded_broker_process(kind, workdir, partitions=6)
    line: dict[str, Any] = {}
    with broker:
        line["start_fresh_s"] = round(broker.startup_s or 0.0, 2)
        bootstrap = broker.bootstrap
        asyncio.run(ensure_topics(bootstrap, {topic: 6, hop_topic: 1, idle_topic: 6}))
        line["produce_per_s"] = round(
            asyncio.run(_produce(bootstrap, topic, args.records, args.record_bytes))
        )
        rate, seen = asyncio.run(_consume(bootstrap, topic, args.records))
        line["consume_per_s"] = round(rate)
        line["hop_latency_ms"] = asyncio.run(_hop_latency(bootstrap, hop_topic, timings, args.hops))
        assert broker.pid is not None
        line.update(asyncio.run(_idle_clients(bootstrap, idle_topic, timings, broker.pid, args.idle_seconds)))
        line["rss_mib"] = round(rss_mib(broker.pid), 1)
        began = time.monotonic()
    line["stop_s"] = round(time.monotonic() - began, 2)
    again = embedded_broker_process(kind, workdir, partitions=6)
    with again:
        line["start_again_s"] = round(again.startup_s or 0.0, 2)
        line["records_after_restart"] = asyncio.run(_count(again.bootstrap, topic))
    line["records"] = seen
    return line


def _request(url: str, *, data: dict[str, Any] | None = None, timeout: float = 10.0) -> tuple[int, bytes]:
    body = None if data is None else json.dumps(data).encode()
    request = urllib.request.Request(
        url,
        data=body,
        method="POST" if data is not None else "GET",
        headers={"Authorization": f"Bearer {BENCH_KEY}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def _retain_and_wait(url: str, k: int, timeout_s: float = 60.0) -> tuple[str, float]:
    """Retain one event (English or Chinese, a fact the write-trigger keeps, its own user so no
    near-duplicate merge hides it); return its memory id and the ms until it is readable by id."""
    event_id = f"bench-{uuid.uuid4().hex}"
    colour, room = ["blue", "green", "red", "amber"][k % 4], ["kitchen", "garage", "study", "attic"][k % 4]
    zh_room = ["书房", "车库", "厨房", "阁楼"][k % 4]
    content = (
        f"My {colour} notebook number {k * 7919 % 10007} is in drawer {k % 13} of the {room} desk."
        if k % 2 == 0
        else f"我的第{k * 104729 % 10007}号文件放在{zh_room}的第{k % 11}个抽屉里。"
    )
    began = time.perf_counter()
    status, body = _request(
        f"{url}/v1/memories",
        data={"user_id": f"bench-user-{k}", "session_id": "bench", "content": content, "event_id": event_id},
    )
    if status != 202:
        raise RuntimeError(f"retain answered {status}: {body[:300]!r}")
    memory_id = turn_memory_id(BENCH_TENANT, event_id)
    deadline = began + timeout_s
    while time.perf_counter() < deadline:
        if _request(f"{url}/v1/memories/{memory_id}")[0] == 200:
            return memory_id, (time.perf_counter() - began) * 1000
        time.sleep(0.02)
    raise RuntimeError(f"event {event_id} ({content!r}) not searchable after {timeout_s} s")


def measure_up(kind: EmbeddedKind, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The ``"part": "up"`` line for ``kind``."""
    env = {
        "HINDSIGHT_KAFKA_EMBEDDED": kind,
        "HINDSIGHT_GATEWAY_API_KEYS": f"{BENCH_KEY}={BENCH_TENANT}",
        "HINDSIGHT_LOG_LEVEL": "WARNING",
    }
    line: dict[str, Any] = {}
    up = UpProcess(workdir / "data", env)
    with up:
        line["ready_fresh_s"] = round(up.ready_s or 0.0, 2)
        assert up.pid is not None
        time.sleep(args.settle)
        idle = tree_cpu(up.pid, args.idle_seconds)
        line["idle_cpu_pct"] = idle["total_pct"]
        line["idle_cpu_by_process"] = idle["by_process"]
        line["rss_mib"] = idle["rss_mib"]
        _retain_and_wait(up.url, args.events)  # warm-up: the first batch also loads the embedder
        ids, latencies = [], []
        for k in range(args.events):
            memory_id, ms = _retain_and_wait(up.url, k)
            ids.append(memory_id)
            latencies.append(ms)
            time.sleep(0.5)
        line["ingest_to_searchable_ms"] = latency_summary(latencies)
        code, took = up.terminate()
        line["sigterm_exit_code"], line["sigterm_s"] = code, round(took, 2)
    with up:
        line["ready_again_s"] = round(up.ready_s or 0.0, 2)
        line["memories_after_restart"] = sum(_request(f"{up.url}/v1/memories/{i}")[0] == 200 for i in ids)
    line["events"] = args.events
    return line


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (``hindsight bench broker --help``); prints the JSON lines; 0 on success."""
    parser = arg_parser("hindsight bench broker", __doc__)
    parser.add_argument(
        "--broker", action="append", choices=["kafka", "tansu"], help="repeatable; default: kafka and tansu"
    )
    parser.add_argument("--records", type=int, default=20_000, help="records for the throughput parts")
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--hops", type=int, default=50, help="records for the one-hop latency")
    parser.add_argument("--idle-seconds", type=float, default=60.0, help="length of each idle window")
    parser.add_argument("--settle", type=float, default=15.0, help="seconds after up is ready before idling")
    parser.add_argument("--events", type=int, default=30, help="retains for ingest-to-searchable")
    parser.add_argument("--only", choices=["broker", "up"], help="measure one part only")
    parser.add_argument("--workdir", type=Path, help="keep files here (default: a temp dir)")
    args = parser.parse_args(argv)
    for kind in args.broker or ["kafka", "tansu"]:
        for part, measure in (("broker", measure_broker), ("up", measure_up)):
            if args.only not in (None, part):
                continue
            keep = args.workdir / f"{kind}-{part}" if args.workdir else None
            with scratch_dir(f"hindsight-bench-{kind}-", keep) as scratch:
                line = measure(kind, scratch, args)
            print_line({"bench": "broker", "broker": kind, "part": part, **line, "loadavg": loadavg()})
    return 0
