"""Access-log sink: every memory a recall returned -> ClickHouse ``access_log`` in batches (DESIGN.md s3).

The rows come from ``memory.recalls.v1``: a :class:`~schemas.RecallLogEvent` already carries each
returned memory's rank and scores (its ``returned`` candidates), so the gateway publishes one record
per recall instead of one per memory as well. ``bench serve`` measured the per-memory events at ~16 ms
of gateway CPU per recall of 8 memories (producer, broker, this consumer, decoding and validation),
more than the in-process pipeline's own Python work (docs/benchmarks.md, "Recall as agents see it").
``memory.access.v1`` (:class:`~schemas.AccessEvent`, one per memory) is still read, for producers
that publish it (gateways before this change, other clients): both give a memory the same
``access_id``, so an access that arrives both ways is counted once.

One insert per consumed batch, durable before the offset is committed; redelivered events are
deduplicated by the table (ReplacingMergeTree on the deterministic ``access_id``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hindsight.consumer import Envelope, Rejection, parse_model
from hindsight.ids import access_id
from hindsight.stores.tombstones import buried_in
from schemas import AccessEvent, RecallLogEvent, Topic

if TYPE_CHECKING:
    from hindsight.publisher import EventPublisher
    from hindsight.stores.accesslog import AccessLogStore
    from hindsight.stores.tombstones import Tombstones


def access_rows(event: AccessEvent | RecallLogEvent) -> list[dict[str, Any]]:
    """The access-log rows of one event: its own fields for an :class:`~schemas.AccessEvent`; one row
    per ``returned`` candidate of a :class:`~schemas.RecallLogEvent` (rank, similarity, time weight and
    final score as recall returned them, ``accessed_at`` = ``recalled_at``)."""
    if isinstance(event, AccessEvent):
        return [event.model_dump(exclude={"schema_version"})]
    return [
        {
            "access_id": access_id(event.query_id, c.memory_id),
            "query_id": event.query_id,
            "tenant_id": event.tenant_id,
            "user_id": event.user_id,
            "agent_id": event.agent_id,
            "memory_id": c.memory_id,
            "memory_type": c.memory_type,
            "rank": c.rank,
            "similarity": c.similarity,
            "time_weight": c.time_weight,
            "final_score": c.final_score,
            "query_text": event.query_text,
            "accessed_at": event.recalled_at,
        }
        for c in event.candidates
        if c.outcome == "returned"
    ]


class AccessLogStage:
    """Sinks the memories recalls returned into ClickHouse."""

    name = "accesslog"

    def __init__(self, store: AccessLogStore, *, tombstones: Tombstones | None = None) -> None:
        self._store = store
        self._tombstones = tombstones

    def parse(self, topic: str, raw: bytes) -> AccessEvent | RecallLogEvent:
        """Validate a recall log (``memory.recalls.v1``) or an access event (any other topic).

        Raises:
            ValueError: invalid JSON or fields, or a returned candidate without its rank, time weight
                or final score (dead-lettered with the reason).
        """
        if topic != Topic.RECALLS:
            return parse_model(AccessEvent, raw)
        event = parse_model(RecallLogEvent, raw)
        for i, c in enumerate(event.candidates):
            missing = [f for f in ("rank", "time_weight", "final_score") if getattr(c, f) is None]
            if c.outcome == "returned" and missing:
                raise ValueError(
                    f"candidates[{i}] ({c.memory_id}) was returned but has no {', '.join(missing)}: "
                    "a returned candidate carries the scores recall answered with"
                )
        return event

    async def handle(
        self, batch: Sequence[Envelope[AccessEvent | RecallLogEvent]], out: EventPublisher
    ) -> Sequence[Rejection]:
        """Insert the batch's rows in one statement.

        Raises:
            StoreUnavailableError: ClickHouse failed (retried; nothing committed).
        """
        rows = [row for env in batch for row in access_rows(env.event)]
        # an access of a user forgotten since (the event was still in flight) is not logged
        forgotten = await buried_in(
            self._tombstones, ((r["tenant_id"], r["user_id"], r["access_id"], r["accessed_at"]) for r in rows)
        )
        rows = [r for r in rows if r["access_id"] not in forgotten]
        if rows:
            await asyncio.to_thread(self._store.insert, rows)
        return ()
