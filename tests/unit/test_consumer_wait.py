"""Stage consumers wait for records event-driven: no sleep after an empty poll (issue 12, item 3).

FastStream's batch subscriber slept ``batch_timeout_ms`` after each empty ``getmany``; a record that
arrived meanwhile waited for the sleep on every hop, so the embedded default had to poll every
10 ms. :func:`hindsight.consumer.subscribe` swaps in a subscriber whose only wait is aiokafka's own
``getmany(timeout_ms)``, which returns as soon as a record is buffered.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import pytest
from faststream.kafka import KafkaBroker
from pydantic import BaseModel

from hindsight.consumer import BatchRunner, Envelope, Rejection, subscribe
from hindsight.publisher import EventPublisher

pytestmark = pytest.mark.unit


class _Event(BaseModel):
    n: int


class _Stage:
    name = "probe"

    def parse(self, topic: str, raw: bytes) -> _Event:
        return _Event.model_validate_json(raw)

    async def handle(self, batch: Sequence[Envelope[_Event]], out: EventPublisher) -> Sequence[Rejection]:
        return []


class _Consumer:
    """Stands in for ``AIOKafkaConsumer.getmany``: answers after ``delay_s`` with ``records``."""

    def __init__(self, records: dict[str, list[int]], delay_s: float = 0.0) -> None:
        self.records = records
        self.delay_s = delay_s
        self.calls: list[tuple[int, int | None]] = []

    async def getmany(self, *, timeout_ms: int, max_records: int | None = None) -> dict[str, list[int]]:
        self.calls.append((timeout_ms, max_records))
        await asyncio.sleep(self.delay_s)
        return self.records


def _subscriber(batch_timeout_ms: int) -> Any:
    broker = KafkaBroker("127.0.0.1:1")  # never connected
    subscribe(
        broker,
        _Stage(),
        topics=["t"],
        group_id="g",
        publisher_factory=lambda: EventPublisher(broker),
        max_records=7,
        batch_timeout_ms=batch_timeout_ms,
        group_instance_id="g-instance",
    )
    (subscriber,) = broker.subscribers
    return subscriber


async def test_an_empty_poll_returns_without_sleeping_the_batch_timeout() -> None:
    subscriber = _subscriber(batch_timeout_ms=5000)
    assert type(subscriber).__name__ == "_EventDrivenBatchSubscriber"
    consumer = _Consumer({})
    began = time.perf_counter()
    assert await subscriber.get_msg(consumer) == ()
    assert time.perf_counter() - began < 1.0  # FastStream's own get_msg sleeps 5 s here
    assert consumer.calls == [(5000, 7)]  # the only wait is aiokafka's, with the batch timeout


async def test_records_of_every_partition_come_back_in_one_batch() -> None:
    subscriber = _subscriber(batch_timeout_ms=1000)
    consumer = _Consumer({"t/0": [1, 2], "t/1": [3]}, delay_s=0.01)
    assert await subscriber.get_msg(consumer) == (1, 2, 3)


@pytest.mark.parametrize(
    ("interval_s", "count", "took_s", "expected"),
    [
        (1.0, 10, 0.25, 0.75),  # a partial batch: wait out the rest of the interval
        (1.0, 64, 0.25, 0.0),  # a full batch: more are waiting, fetch at once
        (1.0, 100, 0.0, 0.0),
        (1.0, 10, 3.0, 0.0),  # the batch took longer than the interval
        (0.0, 1, 0.0, 0.0),  # no interval
    ],
)
def test_a_sink_pauses_after_partial_batches_only(
    interval_s: float, count: int, took_s: float, expected: float
) -> None:
    runner = BatchRunner(
        _Stage(),
        lambda: EventPublisher(KafkaBroker("127.0.0.1:1")),
        min_interval_s=interval_s,
        max_records=64,
    )
    assert runner.pause_after(count, took_s) == pytest.approx(expected)
