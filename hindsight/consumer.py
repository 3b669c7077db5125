"""Stage runtime: batch consumption, dead letters, retries, pauses and commit-after-durable-write.

Every consumer stage (guard, ingest, reflect, evict, access log) is a :class:`Stage`: it receives a
batch of validated events and returns the ones it must reject. :class:`BatchRunner` is the
top-level handler of DESIGN.md section 3 and the only place that maps the error tree of
:mod:`hindsight.errors` to broker behaviour (``docs/delivery.md`` is the long form):

- **poison**: a record that is not JSON or fails schema validation, or that the stage rejects with
  :class:`~hindsight.errors.DeadLetterError`, is published to ``memory.dlq.v1`` with the stage, the
  error and the original bytes; the rest of the batch is processed and the offset moves on;
- **transient** (:class:`~hindsight.errors.RetryableError`: a store or model unavailable): the batch
  is retried in place with bounded exponential backoff (tenacity) while its partitions are paused;
  if it still fails, every partition of the batch is rewound to the batch's first offset and stays
  paused (aiokafka ``pause()``) for an exponentially growing, capped time, then resumed and the
  batch redelivered. Nothing is committed and nothing dropped, however long the outage; the
  consumer keeps polling, so its other partitions flow and it stays in its group;
- **expected wait** (:class:`~hindsight.errors.NotReadyError`, e.g. a session close that overtook its
  own turns): handled exactly like a transient failure, but logged at INFO, not as a warning;
- **backpressure** (:class:`~hindsight.errors.BackpressureError`): no retry in place; the batch's
  partitions are rewound and paused for ``retry_after`` seconds, then resumed;
- **anything else** (a bug): logged with its traceback, then treated like a transient failure with
  the longest pause: never committed, never dropped; lag grows until the fix is deployed;
- **success**: the offsets after the batch's last records are committed explicitly (FastStream
  ``AckPolicy.MANUAL``), only after every write and publish of the batch was confirmed.

Rebalances: a revoke waits (bounded) for the batch in flight to finish and commit, so a partition
changes owner at a committed boundary; a batch fetched before the revoke but not started yet, and
records of partitions no longer assigned, are skipped uncommitted (whoever owns them next reads
them again from the committed offset). Graceful shutdown waits for the batch in flight
too (FastStream's ``graceful_timeout``, set in :func:`hindsight.runtime.make_broker`).

Delivery is at-least-once; stages make every write idempotent (deterministic ids), so the stored
state is exactly-once.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from itertools import chain
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, cast

from aiokafka import ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import KafkaError
from faststream.kafka.annotations import KafkaMessage
from faststream.kafka.subscriber.usecase import BatchSubscriber
from faststream.middlewares import AckPolicy
from prometheus_client import Counter, Histogram
from pydantic import BaseModel, ValidationError
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    retry_if_not_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from hindsight.errors import (
    BackpressureError,
    DeadLetterError,
    NotReadyError,
    OutputRefusedError,
    RetryableError,
)
from schemas import DeadLetter, Topic

if TYPE_CHECKING:
    from aiokafka import AIOKafkaConsumer, ConsumerRecord
    from faststream.kafka import KafkaBroker

    from hindsight.publisher import EventPublisher

log = logging.getLogger("hindsight.consumer")

E = TypeVar("E", bound=BaseModel)

PROCESSED = Counter("hindsight_events_processed_total", "Events a stage processed", ["stage"])
DEAD_LETTERED = Counter("hindsight_events_dead_lettered_total", "Events sent to the DLQ", ["stage"])
RETRIES = Counter("hindsight_batch_retries_total", "Batch retries after transient errors", ["stage"])
BATCH_SECONDS = Histogram("hindsight_batch_seconds", "Wall time per consumed batch (s)", ["stage"])
PAUSES = Counter(
    "hindsight_batch_pauses_total",
    "Batches rewound and their partitions paused (reason: transient, not_ready, backpressure, unexpected)",
    ["stage", "reason"],
)
COMMIT_FAILURES = Counter("hindsight_commit_failures_total", "Offset commits refused or timed out", ["stage"])


@dataclass(frozen=True)
class Envelope(Generic[E]):
    """A validated event with the Kafka coordinates it came from (for logs and dead letters)."""

    event: E
    topic: str
    partition: int
    offset: int
    key: bytes | None
    raw: bytes


@dataclass(frozen=True)
class Rejection:
    """A record a stage gives up on: it goes to the DLQ with ``reason``."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    raw: bytes
    error_type: str
    reason: str


class Stage(Protocol[E]):
    """What a consumer stage implements; the runtime does parsing, DLQ, retries and commits."""

    name: str
    """Stage name used in dead letters, logs and metrics, e.g. ``guard``."""

    def parse(self, topic: str, raw: bytes) -> E:
        """Validate one record's value; raise ``ValidationError``/``ValueError``/``DeadLetterError``."""
        ...

    async def handle(self, batch: Sequence[Envelope[E]], out: EventPublisher) -> Sequence[Rejection]:
        """Process a batch durably and return rejects; queue output events on ``out``.

        The runtime flushes ``out`` (waits for every broker acknowledgement) before it commits.

        Raises:
            RetryableError: a store or model failed transiently; the batch will be retried.
        """
        ...


def reject(envelope: Envelope[Any], error: DeadLetterError) -> Rejection:
    """Build the :class:`Rejection` for an envelope the stage refuses."""
    return Rejection(
        topic=envelope.topic,
        partition=envelope.partition,
        offset=envelope.offset,
        key=envelope.key,
        raw=envelope.raw,
        error_type=type(error).__name__,
        reason=error.reason,
    )


def parse_model(model: type[E], raw: bytes) -> E:
    """Validate JSON bytes into ``model``; raises ``ValidationError`` or ``ValueError``."""
    return model.model_validate_json(raw)


def describe_validation_error(exc: ValidationError) -> str:
    """One line naming every failing field and why, e.g. ``occurred_at: Input should have timezone``."""
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"]) or "<root>"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


DEAD_LETTER_MAX_BYTES = 900_000
"""Most bytes of a dead letter's JSON value: under Kafka's default ``message.max.bytes`` (1,048,588)
and the producer's ``max_request_size`` (1,048,576), with room for the record's key, headers and
batch framing. The largest record a broker accepts becomes, base64-encoded, a third larger than
that: its dead letter keeps the first bytes (``original_truncated``) with the size and SHA-256."""
MINIMAL_DEAD_LETTER_BYTES = 16_384
"""The fallback for a broker whose limit is below :data:`DEAD_LETTER_MAX_BYTES`."""
REASON_MAX_CHARS = 4_000
"""Longest reason kept in a dead letter (and logged)."""
KEY_MAX_BYTES = 1_024
"""Longest record key a dead letter keeps as is; a longer one is replaced by ``sha256:<hex>``."""


def dead_letter_key(key: bytes | None) -> bytes | None:
    """The DLQ record key for a source key: itself, or ``sha256:<hex>`` when it is over
    :data:`KEY_MAX_BYTES` (the same user's letters still share a partition)."""
    if key is None or len(key) <= KEY_MAX_BYTES:
        return key
    return b"sha256:" + hashlib.sha256(key).hexdigest().encode()


def dead_letter(stage: str, rejection: Rejection, *, max_bytes: int = DEAD_LETTER_MAX_BYTES) -> DeadLetter:
    """The DLQ event for ``rejection``: the original bytes base64-encoded with their size and SHA-256.

    The letter's JSON is at most ``max_bytes``: when the whole original would not fit, only its first
    bytes are kept (``original_truncated``); the reason is cut at :data:`REASON_MAX_CHARS` and a key
    over :data:`KEY_MAX_BYTES` is replaced by its hash, so a letter always fits (defect 3 of issue 13:
    an oversized letter was refused by the producer, retried for ever and stalled its partition).
    """
    raw = rejection.raw
    key = dead_letter_key(rejection.key)
    letter = DeadLetter(
        stage=stage,
        error_type=rejection.error_type,
        reason=rejection.reason[:REASON_MAX_CHARS],
        topic=rejection.topic,
        partition=rejection.partition,
        offset=rejection.offset,
        key=key.decode("utf-8", "replace") if key is not None else None,
        original_b64=base64.b64encode(raw).decode("ascii"),
        first_seen_at=datetime.now(UTC),
        original_size=len(raw),
        original_sha256=hashlib.sha256(raw).hexdigest(),
    )
    size = len(letter.model_dump_json().encode())
    if size <= max_bytes:
        return letter
    room = max(0, max_bytes - (size - len(letter.original_b64)) - 64)  # 64: the truncated flag's text
    keep = room // 4 * 3
    return letter.model_copy(
        update={"original_b64": base64.b64encode(raw[:keep]).decode("ascii"), "original_truncated": True}
    )


def split_records(
    stage: Stage[E], records: Sequence[ConsumerRecord[Any, Any]]
) -> tuple[list[Envelope[E]], list[Rejection]]:
    """Parse every record; return the valid envelopes and the rejections, in offset order."""
    valid: list[Envelope[E]] = []
    rejected: list[Rejection] = []
    for rec in records:
        raw = rec.value if isinstance(rec.value, bytes) else bytes(rec.value or b"")
        key = rec.key if isinstance(rec.key, bytes) or rec.key is None else bytes(rec.key)
        try:
            event = stage.parse(rec.topic, raw)
        except ValidationError as exc:
            rejected.append(_rejection(rec, raw, key, "ValidationError", describe_validation_error(exc)))
            continue
        except DeadLetterError as exc:
            rejected.append(_rejection(rec, raw, key, type(exc).__name__, exc.reason))
            continue
        except (ValueError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            rejected.append(_rejection(rec, raw, key, type(exc).__name__, f"not valid JSON: {exc}"))
            continue
        valid.append(Envelope(event, rec.topic, rec.partition, rec.offset, key, raw))
    return valid, rejected


def _rejection(
    rec: ConsumerRecord[Any, Any], raw: bytes, key: bytes | None, kind: str, why: str
) -> Rejection:
    return Rejection(rec.topic, rec.partition, rec.offset, key, raw, kind, why)


async def run_batch(
    stage: Stage[E],
    records: Sequence[ConsumerRecord[Any, Any]],
    publisher: EventPublisher,
    *,
    max_attempts: int = 5,
    max_backoff_s: float = 10.0,
    first_backoff_s: float = 0.2,
    on_retry: Callable[[], None] | None = None,
    dead_letter_max_bytes: int = DEAD_LETTER_MAX_BYTES,
) -> None:
    """Process one consumed batch: parse, handle with retries, dead-letter rejects.

    Returns normally only when every write and publish of the batch is durable, so the caller may
    commit. A ``RetryableError`` is retried in place up to ``max_attempts`` times, waiting
    ``first_backoff_s * 2**(attempt-1)`` seconds (at most ``max_backoff_s``) in between; ``on_retry``
    runs before each wait (the runner pauses the batch's partitions there). When the broker refuses an
    output for good (:class:`~hindsight.errors.OutputRefusedError`), the batch is handled again one
    record at a time and the record whose output is refused is dead-lettered. Every dead letter fits
    in ``dead_letter_max_bytes`` (:func:`dead_letter`).

    Raises:
        BackpressureError: at once, without a retry in place (the caller pauses for ``retry_after``).
        RetryableError: the last one, after ``max_attempts`` attempts (the caller rewinds and pauses).
    """
    started = time.perf_counter()
    valid, rejected = split_records(stage, records)

    async def attempt(envelopes: Sequence[Envelope[E]]) -> list[Rejection]:
        return await _handle_with_retries(
            stage,
            envelopes,
            publisher,
            max_attempts=max_attempts,
            max_backoff_s=max_backoff_s,
            first_backoff_s=first_backoff_s,
            on_retry=on_retry,
        )

    if valid:
        try:
            rejected.extend(await attempt(valid))
        except OutputRefusedError:
            log.warning("an output was refused for good; isolating its record", extra={"stage": stage.name})
            for envelope in valid:  # in offset order, so the stage's per-partition order holds
                try:
                    rejected.extend(await attempt([envelope]))
                except OutputRefusedError as exc:
                    publisher.discard()
                    refused = reject(
                        envelope, DeadLetterError(f"an output of this record was refused: {exc}")
                    )
                    rejected.append(replace(refused, error_type=OutputRefusedError.__name__))
    await _publish_dead_letters(stage.name, rejected, publisher, dead_letter_max_bytes)
    PROCESSED.labels(stage.name).inc(len(valid))
    DEAD_LETTERED.labels(stage.name).inc(len(rejected))
    BATCH_SECONDS.labels(stage.name).observe(time.perf_counter() - started)


async def _handle_with_retries(
    stage: Stage[E],
    envelopes: Sequence[Envelope[E]],
    publisher: EventPublisher,
    *,
    max_attempts: int,
    max_backoff_s: float,
    first_backoff_s: float,
    on_retry: Callable[[], None] | None,
) -> list[Rejection]:
    """``stage.handle`` + flush, retried in place on a ``RetryableError`` (not on backpressure)."""

    def before_sleep(state: RetryCallState) -> None:
        _log_retry(stage.name, state.outcome.exception() if state.outcome else None)
        if on_retry is not None:
            on_retry()

    rejected: list[Rejection] = []
    async for attempt in AsyncRetrying(
        retry=retry_if_exception_type(RetryableError) & retry_if_not_exception_type(BackpressureError),
        stop=stop_after_attempt(max_attempts),
        wait=wait_exponential(multiplier=first_backoff_s, max=max_backoff_s),
        reraise=True,
        before_sleep=before_sleep,
    ):
        with attempt:
            publisher.discard()
            rejected = list(await stage.handle(envelopes, publisher))
            await publisher.flush()
    return rejected


async def _publish_dead_letters(
    stage: str, rejected: Sequence[Rejection], publisher: EventPublisher, max_bytes: int
) -> None:
    """Publish one dead letter per rejection and wait for the acknowledgements. A letter the broker
    still refuses (its limit is below ``max_bytes``) is sent again as a minimal letter
    (:data:`MINIMAL_DEAD_LETTER_BYTES`: reason, coordinates, size, hash and the first bytes).

    Raises:
        OutputRefusedError: even the minimal letter was refused (a broker limit below 16 KiB).
        StoreUnavailableError: Kafka did not acknowledge.
    """
    for rejection in rejected:
        log.warning(
            "dead-lettered",
            extra={
                "stage": stage,
                "topic": rejection.topic,
                "partition": rejection.partition,
                "offset": rejection.offset,
                "error_type": rejection.error_type,
                "reason": rejection.reason[:REASON_MAX_CHARS],
            },
        )
        publisher.send(
            Topic.DLQ, dead_letter_key(rejection.key), dead_letter(stage, rejection, max_bytes=max_bytes)
        )
    try:
        await publisher.flush()
    except OutputRefusedError:
        for rejection in rejected:
            key = dead_letter_key(rejection.key)
            publisher.send(Topic.DLQ, key, dead_letter(stage, rejection, max_bytes=max_bytes))
            try:
                await publisher.flush()
            except OutputRefusedError:
                minimal = dead_letter(stage, rejection, max_bytes=MINIMAL_DEAD_LETTER_BYTES)
                publisher.send(Topic.DLQ, key, minimal)
                await publisher.flush()


def _log_retry(stage: str, exc: BaseException | None) -> None:
    RETRIES.labels(stage).inc()
    if isinstance(exc, NotReadyError):  # an expected wait (e.g. a session close before its turns)
        log.info("waiting for work in flight, retrying batch", extra={"stage": stage, "reason": str(exc)})
        return
    log.warning("transient failure, retrying batch", extra={"stage": stage, "error": repr(exc)})


@dataclass(frozen=True)
class DeliveryPolicy:
    """How :class:`BatchRunner` retries, pauses, drains and commits (times in seconds).

    Defaults: three attempts in place (waits of 0.2 s and 0.4 s), then pauses of 0.8, 1.6, 3.2, ...
    capped at 30 s between redeliveries of a failing partition, for as long as the failure lasts.
    """

    attempts: int = 3
    """Attempts of a batch within one delivery (tenacity) before its partitions are rewound."""
    first_backoff_s: float = 0.2
    """Wait before the second attempt; doubles per attempt and per failed delivery."""
    max_backoff_s: float = 30.0
    """Cap of every wait: in place, and of the pause between redeliveries."""
    drain_timeout_s: float = 6.0
    """How long a partition revoke waits for the batch in flight (keep below the session timeout:
    the group waits that long at most for a member to rejoin)."""
    commit_timeout_s: float = 30.0
    """How long an offset commit may take before it is given up (the batch is then redelivered)."""

    def pause_s(self, failures: int) -> float:
        """Pause after the ``failures``-th failed delivery in a row (>= 1) of a partition:
        ``first_backoff_s * 2**(attempts + failures - 2)``, at most ``max_backoff_s``."""
        exponent = min(self.attempts + max(1, failures) - 2, 30)
        return float(min(self.max_backoff_s, self.first_backoff_s * 2.0**exponent))


def first_offsets(records: Sequence[ConsumerRecord[Any, Any]]) -> dict[TopicPartition, int]:
    """The earliest offset of ``records`` per partition (where a rewind must seek)."""
    firsts: dict[TopicPartition, int] = {}
    for rec in records:
        tp = TopicPartition(rec.topic, rec.partition)
        if tp not in firsts or rec.offset < firsts[tp]:
            firsts[tp] = rec.offset
    return firsts


def next_offsets(records: Sequence[ConsumerRecord[Any, Any]]) -> dict[TopicPartition, int]:
    """The offset to commit after ``records`` per partition: its last offset + 1."""
    nexts: dict[TopicPartition, int] = {}
    for rec in records:
        tp = TopicPartition(rec.topic, rec.partition)
        nexts[tp] = max(nexts.get(tp, 0), rec.offset + 1)
    return nexts


class BatchRunner(ConsumerRebalanceListener):  # type: ignore[misc]
    """The top-level handler of one stage subscriber, and its consumer's rebalance listener.

    :meth:`handle` runs a batch through :func:`run_batch` and then commits, or rewinds and pauses
    its partitions (see the module docstring). As a listener it makes a revoke wait for the batch
    in flight and forgets the pauses of partitions it loses.
    """

    def __init__(
        self,
        stage: Stage[Any],
        publisher_factory: Callable[[], EventPublisher],
        policy: DeliveryPolicy | None = None,
        on_batch_done: Callable[[], Awaitable[None]] | None = None,
        *,
        min_interval_s: float = 0.0,
        max_records: int | None = None,
    ) -> None:
        self.stage = stage
        self.min_interval_s = min_interval_s
        """Least seconds from the start of one batch to the next fetch (0: none); see :func:`subscribe`."""
        self.max_records = max_records
        """Records per fetch at most: a batch this full is followed at once (more are waiting)."""
        self.policy = policy or DeliveryPolicy()
        self._publisher_factory = publisher_factory
        self._on_batch_done = on_batch_done
        self._idle = asyncio.Event()
        self._idle.set()
        self._failures: dict[TopicPartition, int] = {}
        self._timers: dict[TopicPartition, asyncio.TimerHandle] = {}
        self._rebalancing = False

    @property
    def in_flight(self) -> bool:
        """True while a batch is being processed or committed."""
        return not self._idle.is_set()

    async def handle(self, records: Sequence[ConsumerRecord[Any, Any]], consumer: AIOKafkaConsumer) -> None:
        """Process ``records`` (one ``getmany`` batch) and commit them, or rewind and pause.

        Never raises except on cancellation: every failure maps to a DLQ record, a pause or a log line.
        """
        started = time.monotonic()
        self._idle.clear()
        try:
            await self._handle(records, consumer)
        finally:
            self._idle.set()
        pause = self.pause_after(len(records), time.monotonic() - started)
        if pause > 0:  # idle already: a revoke or a stop does not wait for this
            await asyncio.sleep(pause)

    def pause_after(self, count: int, took_s: float) -> float:
        """Seconds to wait before the next fetch after a batch of ``count`` records that took
        ``took_s``: what is left of ``min_interval_s``, or 0 when the batch was full (records are
        waiting: pausing then would cap the stage at ``max_records`` per interval, so a sink would
        fall further behind for as long as more arrive).

        >>> runner = BatchRunner(None, None, min_interval_s=1.0, max_records=64)  # type: ignore[arg-type]
        >>> runner.pause_after(10, 0.25), runner.pause_after(64, 0.25), runner.pause_after(10, 3.0)
        (0.75, 0.0, 0.0)
        """
        if self.min_interval_s <= 0 or (self.max_records is not None and count >= self.max_records):
            return 0.0
        return max(0.0, self.min_interval_s - took_s)

    async def _handle(self, records: Sequence[ConsumerRecord[Any, Any]], consumer: AIOKafkaConsumer) -> None:
        if self._rebalancing:
            # fetched before the revoke (aiokafka returns nothing during a reassignment): whoever
            # owns these partitions next, this consumer included, reads them from the committed offset
            log.info("skipped a batch fetched before a rebalance", extra={"stage": self.stage.name})
            return
        assigned = consumer.assignment()
        live = [r for r in records if TopicPartition(r.topic, r.partition) in assigned]
        if len(live) < len(records):
            log.info(
                "skipped records of revoked partitions (their new owner reads them)",
                extra={"stage": self.stage.name, "skipped": len(records) - len(live)},
            )
        if not live:
            return
        firsts = first_offsets(live)
        try:
            await run_batch(
                self.stage,
                live,
                self._publisher_factory(),
                max_attempts=self.policy.attempts,
                max_backoff_s=self.policy.max_backoff_s,
                first_backoff_s=self.policy.first_backoff_s,
                on_retry=lambda: self._pause(consumer, firsts),
            )
        except BackpressureError as exc:
            self._defer(consumer, firsts, exc.retry_after, "backpressure", exc)
            return
        except RetryableError as exc:
            failures = 1 + max(self._failures.get(tp, 0) for tp in firsts)
            for tp in firsts:
                self._failures[tp] = failures
            reason = "not_ready" if isinstance(exc, NotReadyError) else "transient"
            self._defer(consumer, firsts, self.policy.pause_s(failures), reason, exc)
            return
        except Exception as exc:  # the top-level handler: a bug must neither crash nor lose the batch
            log.exception(
                "unexpected failure; batch rewound, not committed", extra={"stage": self.stage.name}
            )
            self._defer(consumer, firsts, self.policy.max_backoff_s, "unexpected", exc)
            return
        await self._commit(consumer, next_offsets(live))
        self._recovered(consumer, firsts)
        if self._on_batch_done is not None:
            await self._on_batch_done()

    def _pause(self, consumer: AIOKafkaConsumer, partitions: Iterable[TopicPartition]) -> None:
        assigned = consumer.assignment()
        consumer.pause(*(tp for tp in partitions if tp in assigned))

    def _defer(
        self,
        consumer: AIOKafkaConsumer,
        firsts: dict[TopicPartition, int],
        pause_s: float,
        reason: str,
        exc: BaseException,
    ) -> None:
        """Rewind every partition of the batch to its first offset and pause it for ``pause_s``."""
        assigned = consumer.assignment()
        loop = asyncio.get_running_loop()
        for tp, offset in firsts.items():
            if tp not in assigned:
                continue
            consumer.seek(tp, offset)
            consumer.pause(tp)
            old = self._timers.pop(tp, None)
            if old is not None:
                old.cancel()
            self._timers[tp] = loop.call_later(pause_s, self._resume, consumer, tp)
        PAUSES.labels(self.stage.name, reason).inc()
        log.log(
            logging.INFO if isinstance(exc, NotReadyError) else logging.WARNING,
            "batch not committed: partitions rewound and paused",
            extra={
                "stage": self.stage.name,
                "reason": reason,
                "pause_s": round(pause_s, 3),
                "partitions": sorted(f"{tp.topic}/{tp.partition}@{o}" for tp, o in firsts.items()),
                "error": repr(exc),
            },
        )

    def _resume(self, consumer: AIOKafkaConsumer, tp: TopicPartition) -> None:
        self._timers.pop(tp, None)
        if tp in consumer.assignment() and tp in consumer.paused():
            consumer.resume(tp)

    def _recovered(self, consumer: AIOKafkaConsumer, firsts: dict[TopicPartition, int]) -> None:
        """After a committed batch: forget its partitions' failures and resume those paused in place."""
        assigned = consumer.assignment()
        paused = consumer.paused()
        for tp in firsts:
            self._failures.pop(tp, None)
            if tp not in self._timers and tp in paused and tp in assigned:
                consumer.resume(tp)

    async def _commit(self, consumer: AIOKafkaConsumer, offsets: dict[TopicPartition, int]) -> None:
        """Commit ``offsets`` of the partitions still assigned; a refused commit is only logged
        (the batch's writes are idempotent: whoever owns the partition next redelivers it)."""
        assigned = consumer.assignment()
        mine = {tp: offset for tp, offset in offsets.items() if tp in assigned}
        if not mine:
            return
        try:
            async with asyncio.timeout(self.policy.commit_timeout_s):
                await consumer.commit(mine)
        except (KafkaError, TimeoutError) as exc:
            COMMIT_FAILURES.labels(self.stage.name).inc()
            log.warning(
                "offset commit failed; the batch will be redelivered (idempotent writes)",
                extra={"stage": self.stage.name, "error": repr(exc)},
            )

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        """Wait (at most ``drain_timeout_s``) for the batch in flight; forget the lost partitions;
        until the new assignment, skip any batch that was fetched before the revoke."""
        if self.in_flight:
            try:
                async with asyncio.timeout(self.policy.drain_timeout_s):
                    await self._idle.wait()
            except TimeoutError:
                log.warning(
                    "revoke did not wait for the batch in flight; its partitions may be redelivered",
                    extra={"stage": self.stage.name, "drain_timeout_s": self.policy.drain_timeout_s},
                )
        self._rebalancing = True
        for tp in revoked:
            timer = self._timers.pop(tp, None)
            if timer is not None:
                timer.cancel()
            self._failures.pop(tp, None)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        """Log the new assignment (positions restart from the committed offsets)."""
        self._rebalancing = False
        log.info(
            "partitions assigned",
            extra={
                "stage": self.stage.name,
                "partitions": sorted(f"{tp.topic}/{tp.partition}" for tp in assigned),
            },
        )


class _EventDrivenBatchSubscriber(BatchSubscriber):
    """FastStream's batch subscriber without its idle sleep.

    FastStream 0.7.8 (``BatchSubscriber.get_msg``) sleeps ``batch_timeout_ms`` after every empty
    ``getmany``; a record arriving during that sleep waits for it, on every hop of the pipeline, so
    the timeout had to be short (10 ms) and an idle consumer woke 50 times a second. aiokafka's
    ``getmany(timeout_ms)`` already waits event-driven (it returns as soon as the fetcher buffers a
    record), so without the sleep ``batch_timeout_ms`` bounds only how often an idle consumer wakes,
    never how late a record is handled.
    """

    __slots__ = ()

    async def get_msg(self, consumer: AIOKafkaConsumer) -> tuple[ConsumerRecord[Any, Any], ...]:
        """Wait up to ``batch_timeout_ms`` for records; return them all (empty when none came)."""
        messages = await consumer.getmany(timeout_ms=self.batch_timeout_ms, max_records=self.max_records)
        return tuple(chain.from_iterable(messages.values()))


def _event_driven(subscriber: object) -> None:
    """Make a FastStream batch subscriber wait without the idle sleep (see the class above)."""
    if type(subscriber) is BatchSubscriber:
        subscriber.__class__ = _EventDrivenBatchSubscriber
    else:  # another FastStream version: correct, only slower to notice a record
        log.warning("batch subscriber kept as is", extra={"type": type(subscriber).__name__})


async def _keep_bytes(message: KafkaMessage) -> Any:
    """FastStream decoder that never parses: the stage validates each record itself, so one
    malformed record is dead-lettered instead of failing the whole batch in the decoder."""
    return message.body


def subscribe(
    broker: KafkaBroker,
    stage: Stage[Any],
    *,
    topics: Sequence[str],
    group_id: str,
    publisher_factory: Callable[[], EventPublisher],
    max_records: int = 64,
    batch_timeout_ms: int = 100,
    fetch_max_wait_ms: int = 500,
    session_timeout_ms: int = 10_000,
    consumer_timeout_ms: int = 200,
    max_poll_interval_ms: int = 300_000,
    group_instance_id: str | None = None,
    policy: DeliveryPolicy | None = None,
    on_batch_done: Callable[[], Awaitable[None]] | None = None,
    min_interval_s: float = 0.0,
) -> BatchRunner:
    """Register ``stage`` on ``broker`` as a batch subscriber in consumer group ``group_id``.

    Offsets are committed by the returned :class:`BatchRunner` (``AckPolicy.MANUAL``): after a
    batch's writes are durable, or never when it fails (rewind and pause). The runner is also the
    consumer's rebalance listener. ``policy`` defaults to :class:`DeliveryPolicy` with a drain
    timeout of 60 % of the session timeout. ``group_instance_id`` makes the consumer a static member
    (KIP-345: it rejoins with its old assignment after a restart, and leaves only by session
    timeout); None is dynamic membership. ``min_interval_s`` > 0 makes the runner wait that long
    from the start of a batch before it takes the next, so records gather into fewer, bigger
    batches: for sinks whose every write has a fixed cost (a ClickHouse insert costs ~10-20 ms of
    CPU whatever its size) and whose readers can wait; a full batch (``max_records``) is followed
    at once, so the wait never caps the stage's throughput. ``max_poll_interval_ms`` is the longest a
    batch may take before the consumer counts as failed and its partitions move (Kafka's
    ``max.poll.interval.ms``, default 5 min): a stage whose batch waits on CPU model calls raises it.
    """
    runner = BatchRunner(
        stage,
        publisher_factory,
        policy or DeliveryPolicy(drain_timeout_s=0.6 * session_timeout_ms / 1000),
        on_batch_done,
        min_interval_s=min_interval_s,
        max_records=max_records,
    )

    subscriber = broker.subscriber(
        *topics,
        group_id=group_id,
        group_instance_id=group_instance_id,
        batch=True,
        max_records=max_records,
        batch_timeout_ms=batch_timeout_ms,
        fetch_max_wait_ms=fetch_max_wait_ms,
        auto_offset_reset="earliest",
        session_timeout_ms=session_timeout_ms,
        heartbeat_interval_ms=max(1000, session_timeout_ms // 3),
        consumer_timeout_ms=consumer_timeout_ms,
        max_poll_interval_ms=max_poll_interval_ms,
        ack_policy=AckPolicy.MANUAL,
        listener=runner,
        title=f"{stage.name}:{','.join(topics)}",
        description=(stage.__doc__ or stage.name).strip().splitlines()[0],
        decoder=_keep_bytes,
    )
    _event_driven(subscriber)

    @subscriber
    async def _consume(body: Any, message: KafkaMessage) -> None:
        raw = message.raw_message
        records = raw if isinstance(raw, tuple) else (raw,)
        await runner.handle(records, cast("AIOKafkaConsumer", message.consumer))

    return runner
