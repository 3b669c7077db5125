"""A sink that gathers records for ``min_interval_s`` between batches still keeps up when more arrive
than one batch holds: a full batch is followed at once (on the real broker)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence

import pytest
from aiokafka import AIOKafkaProducer
from pydantic import BaseModel

from hindsight.brokers import ensure_topics
from hindsight.consumer import BatchRunner, Envelope, Rejection, subscribe
from hindsight.publisher import EventPublisher
from hindsight.runtime import make_broker
from hindsight.settings import KafkaSettings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


class _Event(BaseModel):
    n: int


class _Sink:
    name = "interval-probe"

    def __init__(self, expect: int) -> None:
        self.batches: list[list[int]] = []
        self.expect = expect
        self.done = asyncio.Event()

    def parse(self, topic: str, raw: bytes) -> _Event:
        return _Event.model_validate_json(raw)

    async def handle(self, batch: Sequence[Envelope[_Event]], out: EventPublisher) -> Sequence[Rejection]:
        self.batches.append([e.event.n for e in batch])
        if sum(len(b) for b in self.batches) >= self.expect:
            self.done.set()
        return []


async def test_a_backlog_is_drained_without_waiting_the_interval_after_full_batches(
    kafka_bootstrap: str,
) -> None:
    topic = f"interval-{uuid.uuid4().hex[:8]}"
    await ensure_topics(kafka_bootstrap, {topic: 1})
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    await producer.start()
    try:  # the backlog is there before the sink starts: 6 full batches and a partial one
        for n in range(65):
            await producer.send(topic, _Event(n=n).model_dump_json().encode())
        await producer.flush()
    finally:
        await producer.stop()

    broker = make_broker(KafkaSettings(), kafka_bootstrap)
    sink = _Sink(expect=65)
    runner = subscribe(
        broker,
        sink,
        topics=[topic],
        group_id=f"g-{topic}",
        publisher_factory=lambda: EventPublisher(broker),
        max_records=10,
        min_interval_s=3.0,
    )
    assert isinstance(runner, BatchRunner)
    await broker.start()
    try:
        began = time.monotonic()
        async with asyncio.timeout(60):
            await sink.done.wait()
        took = time.monotonic() - began
    finally:
        await broker.stop()
    assert sorted(n for b in sink.batches for n in b) == list(range(65))
    assert max(len(b) for b in sink.batches) <= 10
    # 7 batches: paced by the 3 s interval after each, the last would come after >= 18 s
    assert took < 9.0, (took, [len(b) for b in sink.batches])
