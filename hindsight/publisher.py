"""Keyed, confirmed publishing of pydantic events to Kafka (DESIGN.md section 3).

Stages queue events with :meth:`EventPublisher.send` while they work and call
:meth:`EventPublisher.flush` before returning, which waits until the broker acknowledged every one
(``acks=all``). Only then does the consumer commit its offsets.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from aiokafka.errors import (
    CorruptRecordException,
    KafkaError,
    MessageSizeTooLargeError,
    RecordListTooLargeError,
    RecordTooLargeError,
)

from hindsight.errors import OutputRefusedError, StoreUnavailableError

if TYPE_CHECKING:
    from faststream.kafka import KafkaBroker
    from pydantic import BaseModel

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
