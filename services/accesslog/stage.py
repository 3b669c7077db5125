"""Access-log sink: ``memory.access.v1`` -> ClickHouse ``access_log`` in batches (DESIGN.md s3).

One insert per consumed batch, durable before the offset is committed; redelivered events are
deduplicated by the table (ReplacingMergeTree on the deterministic ``access_id``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hindsight.consumer import Envelope, Rejection, parse_model
from hindsight.stores.tombstones import buried_in
from schemas import AccessEvent

if TYPE_CHECKING:
    from hindsight.publisher import EventPublisher
    from hindsight.stores.accesslog import AccessLogStore
    from hindsight.stores.tombstones import Tombstones


class AccessLogStage:
    """Sinks access events into ClickHouse."""

    name = "accesslog"

    def __init__(self, store: AccessLogStore, *, tombstones: Tombstones | None = None) -> None:
        self._store = store
        self._tombstones = tombstones

    def parse(self, topic: str, raw: bytes) -> AccessEvent:
        """Validate an access event."""
        return parse_model(AccessEvent, raw)

    async def handle(
        self, batch: Sequence[Envelope[AccessEvent]], out: EventPublisher
    ) -> Sequence[Rejection]:
        """Insert the batch in one statement.

        Raises:
            StoreUnavailableError: ClickHouse failed (retried; nothing committed).
        """
        events = [env.event for env in batch]
        # an access of a user forgotten since (the event was still in flight) is not logged
        forgotten = await buried_in(
            self._tombstones, ((e.tenant_id, e.user_id, e.access_id, e.accessed_at) for e in events)
        )
        rows = [e.model_dump(exclude={"schema_version"}) for e in events if e.access_id not in forgotten]
        if rows:
            await asyncio.to_thread(self._store.insert, rows)
        return ()
