"""Stage runtime: batch consumption, dead-lettering, retries and commit-after-durable-write.

Every consumer stage (guard, ingest, reflect, evict, access log) is a :class:`Stage`: it receives a
batch of validated events and returns the ones it must reject. This module is the top-level handler
of DESIGN.md section 3 and the only place that maps the error tree of :mod:`hindsight.errors` to
broker behaviour:

- a record that is not JSON or fails schema validation, or that the stage rejects with
  :class:`~hindsight.errors.DeadLetterError`, is published to ``memory.dlq.v1`` with the stage, the
  error and the original bytes; the rest of the batch is processed and the offset moves on;
- :class:`~hindsight.errors.RetryableError` (store or model unavailable) retries the whole batch with
  bounded exponential backoff (tenacity); if it still fails the batch is *nacked*: FastStream seeks
  every partition back to the batch's first offset and nothing is committed, so the batch is redelivered;
- success commits the consumer's offsets, after the stage's writes and publishes were confirmed.

Delivery is at-least-once; stages make every write idempotent (deterministic ids), so the stored
state is exactly-once.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from faststream.kafka.annotations import KafkaMessage
from faststream.middlewares import AckPolicy
from prometheus_client import Counter, Histogram
from pydantic import BaseModel, ValidationError
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from hindsight.errors import DeadLetterError, RetryableError
from schemas import DeadLetter, Topic

if TYPE_CHECKING:
    from aiokafka import ConsumerRecord
    from faststream.kafka import KafkaBroker

    from hindsight.publisher import EventPublisher

log = logging.getLogger("hindsight.consumer")

E = TypeVar("E", bound=BaseModel)

PROCESSED = Counter("hindsight_events_processed_total", "Events a stage processed", ["stage"])
DEAD_LETTERED = Counter("hindsight_events_dead_lettered_total", "Events sent to the DLQ", ["stage"])
RETRIES = Counter("hindsight_batch_retries_total", "Batch retries after transient errors", ["stage"])
BATCH_SECONDS = Histogram("hindsight_batch_seconds", "Wall time per consumed batch (s)", ["stage"])


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


def dead_letter(stage: str, rejection: Rejection) -> DeadLetter:
    """The DLQ event for ``rejection`` (original bytes base64-encoded)."""
    return DeadLetter(
        stage=stage,
        error_type=rejection.error_type,
        reason=rejection.reason,
        topic=rejection.topic,
        partition=rejection.partition,
        offset=rejection.offset,
        key=rejection.key.decode("utf-8", "replace") if rejection.key is not None else None,
        original_b64=base64.b64encode(rejection.raw).decode("ascii"),
        first_seen_at=datetime.now(UTC),
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
) -> None:
    """Process one consumed batch: parse, handle with retries, dead-letter rejects.

    Returns normally only when every write and publish of the batch is durable, so the caller may
    commit. Raises the last ``RetryableError`` after ``max_attempts`` (the caller then nacks).
    """
    started = time.perf_counter()
    valid, rejected = split_records(stage, records)
    if valid:
        async for attempt in AsyncRetrying(
            retry=retry_if_exception_type(RetryableError),
            stop=stop_after_attempt(max_attempts),
            wait=wait_exponential(multiplier=0.2, max=max_backoff_s),
            reraise=True,
            before_sleep=lambda rs: _log_retry(stage.name, rs.outcome.exception() if rs.outcome else None),
        ):
            with attempt:
                publisher.discard()
                rejected_now = list(await stage.handle(valid, publisher))
                await publisher.flush()
        rejected.extend(rejected_now)
    for rejection in rejected:
        log.warning(
            "dead-lettered",
            extra={
                "stage": stage.name,
                "topic": rejection.topic,
                "partition": rejection.partition,
                "offset": rejection.offset,
                "error_type": rejection.error_type,
                "reason": rejection.reason,
            },
        )
        publisher.send(Topic.DLQ, rejection.key, dead_letter(stage.name, rejection))
    await publisher.flush()
    PROCESSED.labels(stage.name).inc(len(valid))
    DEAD_LETTERED.labels(stage.name).inc(len(rejected))
    BATCH_SECONDS.labels(stage.name).observe(time.perf_counter() - started)


def _log_retry(stage: str, exc: BaseException | None) -> None:
    RETRIES.labels(stage).inc()
    log.warning("transient failure, retrying batch", extra={"stage": stage, "error": repr(exc)})


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
    session_timeout_ms: int = 10_000,
    on_batch_done: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Register ``stage`` on ``broker`` as a batch subscriber in consumer group ``group_id``.

    Offsets are committed by FastStream's ``NACK_ON_ERROR`` policy: after the handler returns
    (every write durable), or, when it raises, every partition of the batch is rewound to the
    batch's first offset and nothing is committed.
    """

    @broker.subscriber(
        *topics,
        group_id=group_id,
        batch=True,
        max_records=max_records,
        batch_timeout_ms=batch_timeout_ms,
        auto_offset_reset="earliest",
        session_timeout_ms=session_timeout_ms,
        heartbeat_interval_ms=max(1000, session_timeout_ms // 3),
        ack_policy=AckPolicy.NACK_ON_ERROR,
        title=f"{stage.name}:{','.join(topics)}",
        description=(stage.__doc__ or stage.name).strip().splitlines()[0],
        decoder=_keep_bytes,
    )
    async def _consume(body: Any, message: KafkaMessage) -> None:
        raw = message.raw_message
        records = raw if isinstance(raw, tuple) else (raw,)
        await run_batch(stage, records, publisher_factory())
        if on_batch_done is not None:
            await on_batch_done()
