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
from hindsight.stores.tombstones import buried_in
from schemas import QuarantineRecord

if TYPE_CHECKING:
    from hindsight.publisher import EventPublisher
    from hindsight.stores.quarantine import QuarantineStore
    from hindsight.stores.tombstones import Tombstones


class QuarantineSinkStage:
    """Sinks quarantine records into the review store."""

    name = "guard.quarantine"

    def __init__(self, store: QuarantineStore, *, tombstones: Tombstones | None = None) -> None:
        self._store = store
        self._tombstones = tombstones

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
        records = [env.event for env in batch]
        # a record of a user forgotten after the guard judged it (it was in flight) is not stored
        forgotten = await buried_in(
            self._tombstones, ((r.tenant_id, r.user_id, r.event_id, r.quarantined_at) for r in records)
        )
        kept = [r for r in records if r.event_id not in forgotten]
        if kept:
            await asyncio.to_thread(self._store.add, kept)
        return ()
