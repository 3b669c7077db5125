"""Scale-out with real processes on a 6-partition topic: 3 write-trigger processes in one group.

The write-trigger keeps its state in the shared (real) Redis, so it scales by processes; the guard
is stateless (2 processes). The embed stage runs as ONE process because the embedded vector store
(qdrant-edge) allows one process per data directory (production scales it against a Qdrant server).
A trigger process leaves (SIGTERM) and another joins while events flow: every event becomes exactly
one memory, each user's events are processed in order, and no graceful rebalance makes a process
handle a record twice. ``HINDSIGHT_TEST_PRIVATE_KAFKA_BOOTSTRAP`` points the module at a broker you
started yourself (its pipeline topics are deleted!).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from bench.procs import Pipeline, ServiceProcess, stop_all
from bench.verify import memories_of, read_candidates, read_dead_letters, verify
from bench.workload import make_workload, publish
from hindsight.brokers import consumer_lag, delete_topics, describe_group, ensure_topics, wait_for_zero_lag
from hindsight.runtime import GRACEFUL_TIMEOUT_S
from schemas import Topic

pytestmark = pytest.mark.e2e

PIPELINE_TOPICS = [str(t) for t in Topic]


async def wait_until(predicate: Callable[[], Awaitable[bool]], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(0.2)


def shape(pipe: Pipeline, group: str, want: list[int]) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        state = await describe_group(pipe.bootstrap, pipe.group(group))
        return state.stable and sorted(len(p) for p in state.members.values()) == want

    return check


async def caught_up(pipe: Pipeline) -> None:
    for _ in range(2):
        await wait_for_zero_lag(pipe.bootstrap, pipe.groups(), timeout_s=180)


@pytest.mark.timeout(400)
async def test_three_trigger_processes_share_six_partitions_and_rebalance_without_loss_or_duplicates(
    private_kafka: str, redis_url: str, tmp_path: Path
) -> None:
    await delete_topics(private_kafka, PIPELINE_TOPICS)
    await ensure_topics(private_kafka, dict.fromkeys(PIPELINE_TOPICS, 6))
    pipe = Pipeline(private_kafka, redis_url, tmp_path, f"scale-{uuid.uuid4().hex[:8]}", True)
    work = make_workload(uuid.uuid4().hex[:6], 240, 0, 24, seed=11)
    procs: list[ServiceProcess] = [
        pipe.guard(0),
        pipe.guard(1),
        pipe.trigger(0),
        pipe.trigger(1),
        pipe.trigger(2),
    ]
    procs.append(pipe.embed())
    try:
        for proc in procs:
            proc.start()
        await wait_until(shape(pipe, "ingest-trigger", [2, 2, 2]), 90, "3 triggers with 2 partitions each")
        await wait_until(shape(pipe, "guard", [3, 3]), 30, "2 guards with 3 partitions each")
        flowing = asyncio.create_task(publish(pipe.bootstrap, work, rate=8, idempotent=True))
        await asyncio.sleep(3)
        code, seconds = procs[2].terminate(timeout_s=GRACEFUL_TIMEOUT_S + 15)  # a trigger leaves mid-stream
        assert code == 0
        assert seconds < GRACEFUL_TIMEOUT_S + 10
        await wait_until(shape(pipe, "ingest-trigger", [3, 3]), 60, "2 triggers with 3 partitions each")
        joined = pipe.trigger(3)  # another joins mid-stream
        procs.append(joined.start())
        await wait_until(shape(pipe, "ingest-trigger", [2, 2, 2]), 60, "3 triggers again")
        assert not flowing.done(), "the rebalances should happen while events flow"
        await flowing
        await caught_up(pipe)
    finally:
        stop_all(procs, timeout_s=30)

    candidates = await read_candidates(pipe.bootstrap)
    verdict = verify(
        work,
        await asyncio.to_thread(memories_of, pipe.settings(), work.tenant),
        await read_dead_letters(pipe.bootstrap),
        candidates,
    )
    assert verdict.ok, verdict.examples
    assert verdict.memories + verdict.merged == len(work.events)
    per_candidate = Counter(c.memory_id for c in candidates)
    assert max(per_candidate.values()) == 1, "a graceful leave or join made a trigger process a record twice"


@pytest.mark.timeout(900)
async def test_three_embed_processes_write_one_qdrant_server_collection_without_loss_or_duplicates(
    private_kafka: str, redis_url: str, qdrant_url: str, tmp_path: Path
) -> None:
    """The embed stage scaled out as in production (issue 13, defect 13): three processes in one
    group on six partitions, all writing one collection of a real Qdrant server; one leaves
    (SIGTERM) and another joins while events flow. Every event is exactly one memory (or merged into
    a near-duplicate of the same user), in order, and the server holds nothing else."""
    await delete_topics(private_kafka, PIPELINE_TOPICS)
    await ensure_topics(private_kafka, dict.fromkeys(PIPELINE_TOPICS, 6))
    run = uuid.uuid4().hex[:8]
    pipe = Pipeline(
        private_kafka,
        redis_url,
        tmp_path,
        f"scale-embed-{run}",
        True,
        qdrant_url=qdrant_url,
        qdrant_collection=f"scaleout_{run}",
    )
    work = make_workload(run[:6], 320, 0, 24, seed=13)
    procs: list[ServiceProcess] = [
        pipe.guard(0),
        pipe.trigger(0),
        pipe.embed(0),
        pipe.embed(1),
        pipe.embed(2),
    ]
    try:
        for proc in procs:
            proc.start()
        await wait_until(
            shape(pipe, "ingest-embed", [2, 2, 2]), 300, "3 embed processes with 2 partitions each"
        )
        flowing = asyncio.create_task(publish(pipe.bootstrap, work, rate=6, idempotent=True))
        await asyncio.sleep(4)
        code, seconds = procs[3].terminate(timeout_s=GRACEFUL_TIMEOUT_S + 40)  # an embed process leaves
        assert code == 0
        # a batch still embedding after the graceful timeout is cancelled (redelivered), but the
        # interpreter waits for the embedding thread to finish it before the process exits
        assert seconds < GRACEFUL_TIMEOUT_S + 30
        await wait_until(shape(pipe, "ingest-embed", [3, 3]), 60, "2 embed processes with 3 partitions each")
        procs.append(pipe.embed(3).start())  # another joins mid-stream
        await wait_until(shape(pipe, "ingest-embed", [2, 2, 2]), 240, "3 embed processes again")
        backlog = await consumer_lag(pipe.bootstrap, pipe.group("ingest-embed"), [str(Topic.CANDIDATES)])
        assert not flowing.done() or backlog > 0, "the rebalances should happen while there is work"
        await flowing
        await caught_up(pipe)
    finally:
        stop_all(procs, timeout_s=30)

    points = await asyncio.to_thread(memories_of, pipe.settings(), work.tenant)
    verdict = verify(
        work, points, await read_dead_letters(pipe.bootstrap), await read_candidates(pipe.bootstrap)
    )
    assert verdict.ok, verdict.examples
    assert verdict.memories + verdict.merged == len(work.events)
    assert len(points) == verdict.memories  # one point per memory in the shared collection
