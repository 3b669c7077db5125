"""Access-log sink: ``memory.access.v1`` -> ClickHouse ``access_log`` in batches (DESIGN.md s3).

One insert per consumed batch, durable before the offset is committed; redelivered events are
deduplicated by the table (ReplacingMergeTree on the deterministic ``access_id``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hindsight.consumer import Envelope, Rejection, parse_model
from schemas import AccessEvent

if TYPE_CHECKING:
    from hindsight.publisher import EventPublisher
    from hindsight.stores.accesslog import AccessLogStore


class AccessLogStage:
    """Sinks access events into ClickHouse."""

    name = "accesslog"

    def __init__(self, store: AccessLogStore) -> None:
        self._store = store

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
        rows = [env.event.model_dump(exclude={"schema_version"}) for env in batch]
        await asyncio.to_thread(self._store.insert, rows)
        return ()
