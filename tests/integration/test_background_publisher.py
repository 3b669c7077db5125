"""The background publisher on a real Kafka broker: offers never wait, everything offered arrives,
the queue is bounded, and a graceful stop drains it before the broker goes away."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from aiokafka import AIOKafkaConsumer
from faststream.kafka import KafkaBroker
from prometheus_client import REGISTRY

from hindsight.brokers import ensure_topics
from hindsight.publisher import BackgroundPublisher
from hindsight.runtime import make_broker
from hindsight.settings import KafkaSettings
from schemas import AccessEvent, Topic

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
async def broker(kafka_bootstrap: str) -> AsyncIterator[KafkaBroker]:
    kafka = make_broker(KafkaSettings(), kafka_bootstrap)
    await kafka.connect()
    try:
        yield kafka
    finally:
        await kafka.stop()


async def _read(bootstrap: str, topic: str, marker: str, count: int, timeout_s: float = 30.0) -> list[bytes]:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    found: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(found) < count and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            found += [r.value for recs in batches.values() for r in recs if marker.encode() in r.value]
    finally:
        await consumer.stop()
    return found


def _access(i: int, run: str) -> AccessEvent:
    return AccessEvent(
        access_id=f"{run}-{i}",
        query_id=f"q-{run}",
        tenant_id=f"t-{run}",
        user_id="u1",
        agent_id="a1",
        memory_id=str(uuid.uuid4()),
        memory_type="episodic",
        rank=1 + i % 10,
        similarity=0.8,
        time_weight=1.0,
        final_score=0.7,
        query_text="where?",
        accessed_at=datetime.now(UTC),
    )


async def test_offers_return_at_once_and_every_event_arrives_in_order(
    broker: KafkaBroker, kafka_bootstrap: str
) -> None:
    await ensure_topics(kafka_bootstrap, {str(Topic.ACCESS): 3})
    run = uuid.uuid4().hex[:8]
    publisher = BackgroundPublisher(broker, "test")
    async with publisher.running():
        started = time.perf_counter()
        accepted = [publisher.offer(Topic.ACCESS, b"t:u1", _access(i, run)) for i in range(300)]
        offered_ms = (time.perf_counter() - started) * 1000
        assert all(accepted)
        assert len(publisher) > 0  # nothing was sent while offering: the caller never waited
        await asyncio.wait_for(publisher.wait_sent(), 30)
        assert len(publisher) == 0
    assert offered_ms < 1000  # 300 appends; a broker round trip each would be far slower
    values = await _read(kafka_bootstrap, str(Topic.ACCESS), f"q-{run}", 300)
    ids = [v.decode().split('"access_id":"')[1].split('"')[0] for v in values]
    assert ids == [f"{run}-{i}" for i in range(300)]  # one key: one partition, offer order
    assert publisher.dropped == 0


async def test_a_full_queue_refuses_and_counts_and_stop_drains_what_was_queued(
    broker: KafkaBroker, kafka_bootstrap: str
) -> None:
    await ensure_topics(kafka_bootstrap, {str(Topic.ACCESS): 3})
    run = uuid.uuid4().hex[:8]
    publisher = BackgroundPublisher(broker, "test-bounded", capacity=50)
    # no running loop task yet: offers queue synchronously up to capacity, the rest is refused
    results = [publisher.offer(Topic.ACCESS, b"t:u1", _access(i, run)) for i in range(80)]
    assert results.count(True) == 50
    assert results.count(False) == 30
    assert publisher.dropped == 30
    await publisher.close()  # a graceful stop sends the 50 queued before returning
    assert len(publisher) == 0
    assert not publisher.offer(Topic.ACCESS, b"t:u1", _access(999, run))  # stopped: refused
    assert publisher.dropped == 31
    values = await _read(kafka_bootstrap, str(Topic.ACCESS), f"q-{run}", 50)
    assert len(values) == 50


async def test_offers_from_scheduled_callbacks_are_sent_by_wait_sent_and_close(
    broker: KafkaBroker, kafka_bootstrap: str
) -> None:
    """The gateway offers a recall's log from an event-loop callback scheduled as the recall returns:
    a ``wait_sent`` or a graceful stop right after that must still see and send it."""
    await ensure_topics(kafka_bootstrap, {str(Topic.ACCESS): 3})
    run = uuid.uuid4().hex[:8]
    name = f"test-{run}"
    publisher = BackgroundPublisher(broker, name)
    loop = asyncio.get_running_loop()
    async with publisher.running():
        loop.call_soon(publisher.offer, Topic.ACCESS, b"t:u1", _access(0, run))
        assert len(publisher) == 0  # not offered yet: the callback runs on the loop's next turn
        async with asyncio.timeout(30):  # awaited in this task (wait_for would add a loop turn)
            await publisher.wait_sent()
        sent = REGISTRY.get_sample_value("hindsight_background_publish_sent_total", {"name": name})
        assert sent == 1  # acknowledged before wait_sent returned
        loop.call_soon(publisher.offer, Topic.ACCESS, b"t:u1", _access(1, run))
    # the context's exit closed the publisher right after the second callback was scheduled
    assert publisher.dropped == 0
    found = await _read(kafka_bootstrap, str(Topic.ACCESS), run, 2)
    assert sorted(AccessEvent.model_validate_json(v).access_id for v in found) == [f"{run}-0", f"{run}-1"]
