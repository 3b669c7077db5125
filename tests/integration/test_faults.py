"""Faults against real processes and a real Apache Kafka: nothing is lost or duplicated.

Every test runs the pipeline's service processes (``faststream run``) against a private Kafka 4.4
broker of this module (the session broker's pipeline topics are consumed by the in-process stack of
the e2e tests), with the pipeline topics deleted and recreated with 6 partitions for each test, and
the session's real ``redis-server``. ``HINDSIGHT_TEST_PRIVATE_KAFKA_BOOTSTRAP`` points the module at
a broker you started yourself (its pipeline topics are deleted!).
"""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer, TopicPartition
from faststream.kafka import KafkaBroker

from bench.procs import STAGE_TOPICS, Pipeline, ServiceProcess, stop_all
from bench.verify import memories_of, read_candidates, read_dead_letters, verify
from bench.workload import Workload, make_workload, publish
from hindsight.brokers import (
    committed_offsets,
    delete_topics,
    describe_group,
    ensure_topics,
    read_topic,
    wait_for_zero_lag,
)
from hindsight.consumer import DeliveryPolicy, Envelope, Rejection, parse_model, subscribe
from hindsight.errors import BackpressureError
from hindsight.ids import turn_memory_id
from hindsight.publisher import EventPublisher
from hindsight.runtime import GRACEFUL_TIMEOUT_S
from schemas import GuardedEvent, InteractionEvent, MemoryCandidate, Topic, partition_key

pytestmark = pytest.mark.integration

PIPELINE_TOPICS = [str(t) for t in Topic]


@pytest.fixture
async def pipeline(private_kafka: str, redis_url: str, tmp_path: Path) -> Pipeline:
    """Empty 6-partition pipeline topics and a fresh group prefix."""
    await delete_topics(private_kafka, PIPELINE_TOPICS)
    await ensure_topics(private_kafka, dict.fromkeys(PIPELINE_TOPICS, 6))
    return Pipeline(
        private_kafka,
        redis_url,
        tmp_path,
        f"faults-{uuid.uuid4().hex[:8]}",
        True,
        {"HINDSIGHT_KAFKA_MAX_BATCH": "8"},
    )


@pytest.fixture
def started() -> Iterator[Callable[[ServiceProcess], ServiceProcess]]:
    """Start a process and stop it (SIGTERM, then SIGKILL) after the test."""
    procs: list[ServiceProcess] = []

    def start(proc: ServiceProcess) -> ServiceProcess:
        procs.append(proc)
        return proc.start()

    yield start
    stop_all(procs, timeout_s=20)


async def caught_up(
    pipe: Pipeline, groups: Sequence[str] = ("guard", "ingest-trigger", "ingest-embed")
) -> None:
    """Lag 0 for ``groups``, measured twice (an upstream stage may still publish in between)."""
    wanted = {pipe.group(g): STAGE_TOPICS[g] for g in groups}
    for _ in range(2):
        await wait_for_zero_lag(pipe.bootstrap, wanted, timeout_s=150)


async def progress(pipe: Pipeline, group: str, topic: str) -> int:
    """Records ``group`` has committed on ``topic``."""
    return sum(
        max(0, o) for o in (await committed_offsets(pipe.bootstrap, pipe.group(group), [topic])).values()
    )


async def wait_until(predicate: Callable[[], Any], timeout_s: float, what: str) -> None:
    """Poll the async ``predicate`` every 0.1 s until it is truthy."""
    deadline = time.monotonic() + timeout_s
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(0.1)


async def check_exactly_once(pipe: Pipeline, work: Workload) -> None:
    """Read the vector store (its process stopped) and the topics; the chaos verifier finds nothing."""
    points = await asyncio.to_thread(memories_of, pipe.settings(), work.tenant)
    verdict = verify(
        work, points, await read_dead_letters(pipe.bootstrap), await read_candidates(pipe.bootstrap)
    )
    assert verdict.ok, verdict.examples
    assert verdict.lost == verdict.duplicated == verdict.out_of_order == verdict.corrupted == 0


async def test_sigkill_of_the_ingest_process_mid_batch_loses_and_duplicates_nothing(
    pipeline: Pipeline, started: Callable[[ServiceProcess], ServiceProcess]
) -> None:
    work = make_workload(uuid.uuid4().hex[:6], 64, 0, 4, seed=1)
    started(pipeline.guard(0))
    ingest = started(pipeline.embed(HINDSIGHT_INGEST_STAGES='["trigger", "embed"]'))
    await publish(pipeline.bootstrap, work, rate=1000, idempotent=True)

    async def some_stored() -> bool:
        return await progress(pipeline, "ingest-embed", str(Topic.CANDIDATES)) >= 8

    await wait_until(some_stored, 90, "the first embedded batches")
    ingest.kill()  # mid-batch: the embed stage is busy with the next batch of 8
    at_kill = await progress(pipeline, "ingest-embed", str(Topic.CANDIDATES))
    assert at_kill < len(work.events), "the kill came too late to interrupt anything"
    ingest.start()
    await caught_up(pipeline)
    stop_all([ingest])
    await check_exactly_once(pipeline, work)


async def test_vector_store_outage_commits_nothing_until_it_ends_then_loses_nothing(
    pipeline: Pipeline, started: Callable[[ServiceProcess], ServiceProcess]
) -> None:
    work = make_workload(uuid.uuid4().hex[:6], 40, 0, 4, seed=2)
    first = Workload(work.tenant, work.events, [], [o for o in work.order if o[1] < 16])
    rest = Workload(work.tenant, work.events, [], [o for o in work.order if o[1] >= 16])
    started(pipeline.guard(0))
    ingest = started(pipeline.embed(HINDSIGHT_INGEST_STAGES='["trigger", "embed"]'))
    await publish(pipeline.bootstrap, first, rate=1000, idempotent=True)
    await caught_up(pipeline)

    pipeline.outage_flag.touch()
    before = await committed_offsets(
        pipeline.bootstrap, pipeline.group("ingest-embed"), [str(Topic.CANDIDATES)]
    )
    await publish(pipeline.bootstrap, rest, rate=1000, idempotent=True)
    await caught_up(pipeline, ["guard", "ingest-trigger"])  # candidates are waiting for the embed stage
    for _ in range(8):  # 4 s of outage: the consumer retries, rewinds and pauses, never commits
        await asyncio.sleep(0.5)
        now = await committed_offsets(
            pipeline.bootstrap, pipeline.group("ingest-embed"), [str(Topic.CANDIDATES)]
        )
        assert now == before, "an offset was committed while the vector store was down"
    assert "partitions rewound and paused" in ingest.log_tail(20_000)

    pipeline.outage_flag.unlink()
    await caught_up(pipeline)
    stop_all([ingest])
    await check_exactly_once(pipeline, work)


async def test_poison_between_two_valid_events_is_dead_lettered_with_its_reason_and_both_are_stored(
    pipeline: Pipeline, started: Callable[[ServiceProcess], ServiceProcess]
) -> None:
    work = make_workload(uuid.uuid4().hex[:6], 2, 0, 1, seed=3)
    a, b = work.events
    poison = b'{"event_id": "poison-' + work.tenant.encode() + b'", "content": "no closing quote}'
    key = partition_key(a.tenant_id, a.user_id)
    producer = AIOKafkaProducer(bootstrap_servers=pipeline.bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    try:
        for value in (a.model_dump_json().encode(), poison, b.model_dump_json().encode()):
            await producer.send_and_wait(str(Topic.INTERACTIONS), value, key=key)
    finally:
        await producer.stop()
    started(pipeline.guard(0))
    ingest = started(pipeline.embed(HINDSIGHT_INGEST_STAGES='["trigger", "embed"]'))
    await caught_up(pipeline)
    stop_all([ingest])

    mine = [d for d in await read_dead_letters(pipeline.bootstrap) if d.key == key.decode()]
    assert len(mine) == 1
    letter = mine[0]
    assert letter.stage == "guard"
    assert letter.topic == str(Topic.INTERACTIONS)
    assert letter.offset == 1, "the poison sat between the two valid events"
    assert "JSON" in letter.reason
    assert base64.b64decode(letter.original_b64) == poison
    stored = {r.id for r in await asyncio.to_thread(memories_of, pipeline.settings(), work.tenant)}
    assert stored == {turn_memory_id(work.tenant, a.event_id), turn_memory_id(work.tenant, b.event_id)}


async def group_shape(pipe: Pipeline, group: str, want: list[int]) -> bool:
    """True when ``group`` is stable with members owning ``want`` partitions (sorted counts)."""
    state = await describe_group(pipe.bootstrap, pipe.group(group))
    return state.stable and sorted(len(p) for p in state.members.values()) == want


async def test_two_consumers_split_the_partitions_and_the_survivor_takes_over_without_loss_or_duplicates(
    pipeline: Pipeline, started: Callable[[ServiceProcess], ServiceProcess]
) -> None:
    work = make_workload(uuid.uuid4().hex[:6], 180, 0, 12, seed=4)
    thirds = [Workload(work.tenant, work.events, [], work.order[k * 60 : (k + 1) * 60]) for k in range(3)]
    first, second = started(pipeline.guard(0)), started(pipeline.guard(1))
    await wait_until(lambda: group_shape(pipeline, "guard", [3, 3]), 60, "two guards with 3 partitions each")
    await publish(pipeline.bootstrap, thirds[0], rate=1000, idempotent=True)
    await caught_up(pipeline, ["guard"])

    code, seconds = first.terminate(timeout_s=GRACEFUL_TIMEOUT_S + 15)  # leaves the group
    assert code == 0
    assert seconds < GRACEFUL_TIMEOUT_S + 10
    await wait_until(lambda: group_shape(pipeline, "guard", [6]), 60, "the survivor owning all 6 partitions")
    await publish(pipeline.bootstrap, thirds[1], rate=1000, idempotent=True)
    await caught_up(pipeline, ["guard"])

    started(pipeline.guard(2))  # joins
    await wait_until(lambda: group_shape(pipeline, "guard", [3, 3]), 60, "the partitions split again")
    await publish(pipeline.bootstrap, thirds[2], rate=1000, idempotent=True)
    await caught_up(pipeline, ["guard"])
    assert second.alive

    guarded = [
        GuardedEvent.model_validate_json(r.value)
        for r in await read_topic(pipeline.bootstrap, str(Topic.GUARDED))
    ]
    ids = Counter(g.interaction.event_id for g in guarded if g.interaction.tenant_id == work.tenant)
    assert set(ids) == {e.event_id for e in work.events}, "an event was lost"
    assert max(ids.values()) == 1, "a graceful leave or join made a consumer process a batch twice"
    turns: dict[str, list[int]] = {}
    for g in guarded:
        turns.setdefault(g.interaction.user_id, []).append(g.interaction.turn_index or 0)
    assert all(t == sorted(t) for t in turns.values()), "a user's events left the guard out of order"


async def test_sigterm_drains_the_batch_in_flight_commits_it_and_exits_in_bound(
    pipeline: Pipeline, started: Callable[[ServiceProcess], ServiceProcess]
) -> None:
    work = make_workload(uuid.uuid4().hex[:6], 96, 0, 6, seed=5)
    pipeline.extra_env["HINDSIGHT_KAFKA_MAX_BATCH"] = "24"
    upstream = [started(pipeline.guard(0)), started(pipeline.trigger(0))]
    await publish(pipeline.bootstrap, work, rate=1000, idempotent=True)
    await caught_up(pipeline, ["guard", "ingest-trigger"])
    stop_all(upstream)
    embed = started(pipeline.embed())

    async def one_batch_done() -> bool:
        return await progress(pipeline, "ingest-embed", str(Topic.CANDIDATES)) > 0

    await wait_until(one_batch_done, 90, "the first embedded batch")
    code, seconds = embed.terminate(timeout_s=GRACEFUL_TIMEOUT_S + 15)
    assert code == 0, embed.log_tail()
    assert seconds < GRACEFUL_TIMEOUT_S + 10
    assert "shut down gracefully" in embed.log_tail()

    committed = await committed_offsets(
        pipeline.bootstrap, pipeline.group("ingest-embed"), [str(Topic.CANDIDATES)]
    )
    assert 0 < sum(committed.values()) < len(work.events), "SIGTERM should have come mid-stream"
    points = await asyncio.to_thread(memories_of, pipeline.settings(), work.tenant)
    represented = {p.id for p in points} | {m for p in points for m in p.payload.get("merged_ids", [])}
    for rec in await read_topic(pipeline.bootstrap, str(Topic.CANDIDATES)):
        candidate_id = MemoryCandidate.model_validate_json(rec.value).memory_id
        done = rec.offset < max(0, committed[TopicPartition(rec.topic, rec.partition)])
        assert (candidate_id in represented) == done, (
            f"{rec.partition}@{rec.offset}: stored={candidate_id in represented}, committed={done}"
        )


class _Backpressured:
    """A stage that reports backpressure on its first ``refusals`` batches, then accepts."""

    name = "test.backpressure"

    def __init__(self, refusals: int, retry_after: float) -> None:
        self.refusals = refusals
        self.retry_after = retry_after
        self.seen: list[str] = []
        self.calls: list[float] = []

    def parse(self, topic: str, raw: bytes) -> InteractionEvent:
        return parse_model(InteractionEvent, raw)

    async def handle(
        self, batch: Sequence[Envelope[InteractionEvent]], out: EventPublisher
    ) -> Sequence[Rejection]:
        self.calls.append(time.monotonic())
        if self.refusals > 0:
            self.refusals -= 1
            raise BackpressureError("downstream saturated", retry_after=self.retry_after)
        self.seen.extend(e.event.event_id for e in batch)
        return ()


async def test_backpressure_pauses_the_partition_for_retry_after_then_resumes_and_commits_once(
    pipeline: Pipeline,
) -> None:
    work = make_workload(uuid.uuid4().hex[:6], 5, 0, 1, seed=6)
    await publish(pipeline.bootstrap, work, rate=1000, idempotent=True)
    stage = _Backpressured(refusals=2, retry_after=1.5)
    broker = KafkaBroker(pipeline.bootstrap, acks="all", enable_idempotence=True)
    group = pipeline.group("backpressure")
    subscribe(
        broker,
        stage,
        topics=[str(Topic.INTERACTIONS)],
        group_id=group,
        publisher_factory=lambda: EventPublisher(broker),
        policy=DeliveryPolicy(drain_timeout_s=3.0),
    )

    async def all_seen() -> bool:
        return len(stage.seen) >= len(work.events)

    async def committed() -> bool:
        offsets = await committed_offsets(pipeline.bootstrap, group, [str(Topic.INTERACTIONS)])
        return sum(max(0, o) for o in offsets.values()) >= len(work.events)

    async with broker:
        await broker.start()
        await wait_until(all_seen, 60, "the batch after the backpressure")
        await wait_until(committed, 30, "the commit")
    assert sorted(stage.seen) == sorted(e.event_id for e in work.events), "processed exactly once"
    assert len(stage.calls) == 3, "two refusals, then one accepted delivery"
    gaps = [b - a for a, b in zip(stage.calls, stage.calls[1:], strict=False)]
    assert all(gap >= 1.5 * 0.9 for gap in gaps), f"the partition was not paused for retry_after: {gaps}"
