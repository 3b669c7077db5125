"""Quarantine sink: ``memory.quarantine.v1`` -> the ClickHouse quarantine store (issue 10 item 3).

One insert per consumed batch, durable before the offset is committed; a redelivered record is
the same row (deterministic item id, version 0 never overrides a review). The records are already
redacted by the guard (or by the consistency check), so the store holds no raw PII or secret.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hindsight.consumer import Envelope, Rejection, parse_model
from schemas import QuarantineRecord

if TYPE_CHECKING:
    from hindsight.publisher import EventPublisher
    from hindsight.stores.quarantine import QuarantineStore


class QuarantineSinkStage:
    """Sinks quarantine records into the review store."""

    name = "guard.quarantine"

    def __init__(self, store: QuarantineStore) -> None:
        self._store = store

    def parse(self, topic: str, raw: bytes) -> QuarantineRecord:
        """Validate a quarantine record."""
        return parse_model(QuarantineRecord, raw)

    async def handle(
        self, batch: Sequence[Envelope[QuarantineRecord]], out: EventPublisher
    ) -> Sequence[Rejection]:
        """Insert the batch in one statement.

        Raises:
            StoreUnavailableError: ClickHouse failed (retried; nothing committed).
        """
        await asyncio.to_thread(self._store.add, [env.event for env in batch])
        return ()
