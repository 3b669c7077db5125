"""Keyed publishing of pydantic events to Kafka (DESIGN.md section 3): confirmed, or in the background.

- :class:`EventPublisher`: stages queue events with :meth:`EventPublisher.send` while they work and
  call :meth:`EventPublisher.flush` before returning, which waits until the broker acknowledged
  every one (``acks=all``). Only then does the consumer commit its offsets.
- :class:`BackgroundPublisher`: for events that must not hold up the caller (the gateway's access
  log, recall log rows): :meth:`BackgroundPublisher.offer` returns at once; one task sends what is
  queued and waits for the acknowledgements; stopping drains the queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from aiokafka.errors import (
    CorruptRecordException,
    KafkaError,
    MessageSizeTooLargeError,
    RecordListTooLargeError,
    RecordTooLargeError,
)
from prometheus_client import Counter, Gauge

from hindsight.errors import OutputRefusedError, StoreUnavailableError

if TYPE_CHECKING:
    from faststream.kafka import KafkaBroker
    from pydantic import BaseModel

log = logging.getLogger("hindsight.publisher")

BACKGROUND_QUEUED = Gauge(
    "hindsight_background_publish_queued", "Events waiting in a background publisher", ["name"]
)
BACKGROUND_SENT = Counter(
    "hindsight_background_publish_sent_total", "Events a background publisher had acknowledged", ["name"]
)
BACKGROUND_DROPPED = Counter(
    "hindsight_background_publish_dropped_total",
    "Events a background publisher refused (queue full or stopped) or could not send by shutdown",
    ["name"],
)
BACKGROUND_FAILURES = Counter(
    "hindsight_background_publish_failures_total",
    "Failed sends of a background publisher (retried)",
    ["name"],
)

JSON_HEADERS = {"content-type": "application/json"}
REFUSED_FOR_GOOD = (
    MessageSizeTooLargeError,
    RecordTooLargeError,
    RecordListTooLargeError,
    CorruptRecordException,
)
"""Kafka errors a retry cannot cure: the record itself is refused (by the producer's
``max_request_size`` or the broker's ``message.max.bytes``, or as invalid)."""


class EventPublisher:
    """Collects publish futures for one batch; not shared between concurrent batches."""

    def __init__(self, broker: KafkaBroker) -> None:
        self._broker = broker
        self._pending: list[tuple[str, bytes | None, bytes]] = []

    def send(self, topic: str, key: bytes | None, event: BaseModel) -> None:
        """Queue ``event`` (JSON) for ``topic`` with partition ``key`` (``tenant:user``)."""
        self._pending.append((topic, key, event.model_dump_json().encode()))

    def discard(self) -> None:
        """Drop everything queued and not yet flushed (a failed attempt's partial output)."""
        self._pending.clear()

    async def flush(self) -> int:
        """Publish everything queued and wait for every acknowledgement; returns how many.

        Raises:
            OutputRefusedError: a record is refused for good (too large): not retryable.
            StoreUnavailableError: the broker refused or timed out (retryable: nothing is committed).
        """
        pending, self._pending = self._pending, []
        if not pending:
            return 0
        try:
            futures: list[Any] = [
                await self._broker.publish(value, topic=topic, key=key, headers=JSON_HEADERS, no_confirm=True)
                for topic, key, value in pending
            ]
            await asyncio.gather(*futures)
        except REFUSED_FOR_GOOD as exc:
            raise OutputRefusedError(f"Kafka refused a record for good: {exc!r}") from exc
        except KafkaError as exc:
            raise StoreUnavailableError(f"Kafka publish failed: {exc!r}") from exc
        return len(pending)


class BackgroundPublisher:
    """Publishes events off the caller's path through a bounded in-memory queue.

    :meth:`offer` serialises nothing and waits for nothing: it appends ``(topic, key, event)`` and
    wakes the sender task (started on the first offer, or by :meth:`running`). The task takes up to
    ``max_batch`` queued events at a time, serialises them, publishes them and waits for the
    broker's acknowledgements (``acks=all``); on a Kafka error it puts them back at the head of the
    queue and retries after a back-off (0.1 s doubling to 5 s), so a broker outage loses nothing
    while the queue has room. When ``capacity`` events are waiting, further offers are refused and
    counted (``hindsight_background_publish_dropped_total``): the caller is never slowed down.

    Delivery: at-least-once while the process lives (a retry after a partial failure may send an
    event twice: consumers deduplicate on the event's id), and :meth:`running` drains the queue on
    a graceful stop (SIGTERM) for up to ``drain_timeout_s``. If the process dies (SIGKILL, OOM,
    power loss), the events still queued are lost: at most ``capacity``, in practice the few
    milliseconds' worth not yet sent. Use it only for events whose loss is tolerable, such as access
    logs: a lost access event undercounts one recall of one memory (eviction sees one access less);
    no memory, no request and no stage's progress depends on it. Events that must not be lost go
    through :class:`EventPublisher` before the caller is answered.

    Args:
        broker: a connected FastStream broker.
        name: label for metrics and logs, e.g. ``access``.
        capacity: most events waiting (default 10,000: ~100 recalls of 10 memories per second for
            10 s of broker outage).
        max_batch: most events per send.
        drain_timeout_s: how long a graceful stop waits for the queue to be sent.
    """

    def __init__(
        self,
        broker: KafkaBroker,
        name: str,
        *,
        capacity: int = 10_000,
        max_batch: int = 500,
        drain_timeout_s: float = 10.0,
    ) -> None:
        self._broker = broker
        self.name = name
        self.capacity = capacity
        self._max_batch = max_batch
        self._drain_timeout_s = drain_timeout_s
        self._queue: deque[tuple[str, bytes | None, BaseModel]] = deque()
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._last_drop_log = 0.0
        self.dropped = 0
        """Events refused or abandoned so far (also counted in Prometheus)."""

    def __len__(self) -> int:
        """Events waiting to be sent (not counting a batch in flight)."""
        return len(self._queue)

    def offer(self, topic: str, key: bytes | None, event: BaseModel) -> bool:
        """Queue ``event`` for ``topic`` with partition ``key``; never blocks.

        Returns:
            True when queued; False when refused (the queue holds ``capacity`` events, or the
            publisher is stopped): the event is counted as dropped.
        """
        if self._closed or len(self._queue) >= self.capacity:
            self._drop(1, "queue full" if not self._closed else "publisher stopped")
            return False
        self._queue.append((topic, key, event))
        BACKGROUND_QUEUED.labels(self.name).set(len(self._queue))
        self._idle.clear()
        self._wake.set()
        self._ensure_sender()
        return True

    def _ensure_sender(self) -> None:
        """Start the sender task, or restart it if a bug ended it (logged with its traceback)."""
        task = self._task
        if task is not None and task.done():
            if not task.cancelled() and task.exception() is not None:
                log.error(
                    "background publisher's sender failed; restarting it",
                    extra={"publisher": self.name},
                    exc_info=task.exception(),
                )
            task = None
        if task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"publish-{self.name}")

    async def wait_sent(self) -> None:
        """Return once everything offered so far was acknowledged (tests, shutdown). Callbacks
        already scheduled on the event loop (a recall's log is offered by one) run first."""
        await asyncio.sleep(0)
        await self._idle.wait()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[BackgroundPublisher]:
        """Start the sender; on exit refuse new offers and drain the queue (bounded by
        ``drain_timeout_s``), then stop the sender. Exit before the broker stops."""
        self._closed = False
        self._ensure_sender()
        try:
            yield self
        finally:
            await self.close()

    async def close(self) -> None:
        """Refuse new offers, send what is queued (at most ``drain_timeout_s``), stop the sender.
        Callbacks already scheduled on the event loop (a recall's log is offered by one) still offer."""
        await asyncio.sleep(0)
        self._closed = True
        self._wake.set()
        task, self._task = self._task, None
        if task is None:
            return
        try:
            async with asyncio.timeout(self._drain_timeout_s):
                await self._idle.wait()
        except TimeoutError:
            pass
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        if self._queue:
            log.error(
                "background publisher stopped with events unsent",
                extra={"publisher": self.name, "unsent": len(self._queue)},
            )
            self._drop(len(self._queue), "not sent by shutdown")
            self._queue.clear()
            BACKGROUND_QUEUED.labels(self.name).set(0)

    def _drop(self, count: int, reason: str) -> None:
        self.dropped += count
        BACKGROUND_DROPPED.labels(self.name).inc(count)
        now = time.monotonic()
        if now - self._last_drop_log >= 10.0:  # at most one line per 10 s, whatever the rate
            self._last_drop_log = now
            log.warning(
                "background publisher dropped events",
                extra={"publisher": self.name, "reason": reason, "dropped_total": self.dropped},
            )

    async def _run(self) -> None:
        backoff = 0.1
        while True:
            if not self._queue:
                self._idle.set()
                if self._closed:
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            batch = [self._queue.popleft() for _ in range(min(self._max_batch, len(self._queue)))]
            try:
                futures: list[Any] = [
                    await self._broker.publish(
                        event.model_dump_json().encode(),
                        topic=topic,
                        key=key,
                        headers=JSON_HEADERS,
                        no_confirm=True,
                    )
                    for topic, key, event in batch
                ]
                await asyncio.gather(*futures)
            except KafkaError as exc:
                self._queue.extendleft(reversed(batch))
                BACKGROUND_FAILURES.labels(self.name).inc()
                log.warning(
                    "background publish failed; retrying",
                    extra={"publisher": self.name, "queued": len(self._queue), "error": repr(exc)},
                )
                await asyncio.sleep(backoff)
                backoff = min(5.0, backoff * 2)
                continue
            backoff = 0.1
            BACKGROUND_SENT.labels(self.name).inc(len(batch))
            BACKGROUND_QUEUED.labels(self.name).set(len(self._queue))
