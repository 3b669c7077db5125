"""Quiet logs (issue 12 item 5): an expected wait is retried like a transient failure but is not a
warning; a real outage still is."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, cast

import pytest
from aiokafka.structs import ConsumerRecord

from hindsight.consumer import Envelope, Rejection, run_batch
from hindsight.errors import NotReadyError, StoreUnavailableError
from hindsight.publisher import EventPublisher
from tests.fixtures.kafka import consumed

pytestmark = pytest.mark.unit


class FailsThenWorks:
    """A stage that raises ``error`` on its first ``failures`` attempts, then handles the batch."""

    name = "test-stage"

    def __init__(self, error: Exception, failures: int) -> None:
        self.error = error
        self.failures = failures
        self.attempts = 0

    def parse(self, topic: str, raw: bytes) -> bytes:
        return raw

    async def handle(self, batch: Sequence[Envelope[Any]], out: EventPublisher) -> Sequence[Rejection]:
        self.attempts += 1
        if self.attempts <= self.failures:
            raise self.error
        return ()


def record() -> ConsumerRecord[bytes, bytes]:
    return consumed("memory.sessions.v1", b"t:u", b"{}", 7)


def publisher() -> EventPublisher:
    # nothing is queued, so flush() never reaches a broker
    return EventPublisher(cast("Any", None))


async def test_an_expected_wait_is_retried_and_logged_at_info_not_as_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stage = FailsThenWorks(NotReadyError("session s1: 3/5 events processed"), failures=2)
    retries: list[int] = []
    with caplog.at_level(logging.DEBUG, logger="hindsight.consumer"):
        await run_batch(
            stage,
            [record()],
            publisher(),
            max_attempts=3,
            first_backoff_s=0.001,
            on_retry=lambda: retries.append(1),
        )
    assert stage.attempts == 3
    assert len(retries) == 2  # partitions paused before each retry, as for a transient failure
    mine = [r for r in caplog.records if r.name == "hindsight.consumer"]
    assert [r.levelno for r in mine] == [logging.INFO, logging.INFO]
    assert all("waiting for work in flight" in r.getMessage() for r in mine)
    assert all("3/5 events processed" in str(getattr(r, "reason", "")) for r in mine)


async def test_a_store_outage_is_still_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    stage = FailsThenWorks(StoreUnavailableError("qdrant down"), failures=1)
    with caplog.at_level(logging.DEBUG, logger="hindsight.consumer"):
        await run_batch(stage, [record()], publisher(), max_attempts=3, first_backoff_s=0.001)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage() for r in warnings] == ["transient failure, retrying batch"]


async def test_an_expected_wait_that_outlasts_the_attempts_is_raised_for_the_runner_to_pause() -> None:
    stage = FailsThenWorks(NotReadyError("not yet"), failures=5)
    with pytest.raises(NotReadyError):
        await run_batch(stage, [record()], publisher(), max_attempts=2, first_backoff_s=0.001)
    assert stage.attempts == 2
