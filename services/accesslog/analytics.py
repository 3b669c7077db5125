"""Analytics sink: recalls, feedback and stored memories -> ClickHouse (DESIGN.md s10).

One consumer group (``<prefix>-analytics``) over ``memory.recalls.v1`` (every candidate a recall
considered), ``memory.feedback.v1`` (the agent's labels), ``memory.stored.v1`` and
``memory.episodes.v1`` (the memory inventory the tuner replays); quarantined items have their own
sink and table (the guard's review store). Each batch is written with one insert per table, durable
before the offset is committed; redelivery is deduplicated by the tables
(:mod:`hindsight.analytics.store`). It is a separate group from the access log, so a slow analytics
insert never holds back the access counts the eviction job reads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel

from hindsight.consumer import Envelope, Rejection, parse_model
from schemas import (
    EpisodeEvent,
    MemoryStoredEvent,
    RecallFeedbackEvent,
    RecallLogEvent,
    Topic,
)

if TYPE_CHECKING:
    from hindsight.analytics.store import AnalyticsStore
    from hindsight.publisher import EventPublisher

TOPICS: dict[str, type[BaseModel]] = {
    Topic.RECALLS: RecallLogEvent,
    Topic.FEEDBACK: RecallFeedbackEvent,
    Topic.STORED: MemoryStoredEvent,
    Topic.EPISODES: EpisodeEvent,
}
"""Topic -> the event model it carries."""


class AnalyticsStage:
    """Sinks the topics of :data:`TOPICS` into their ClickHouse tables."""

    name = "analytics"

    def __init__(self, store: AnalyticsStore) -> None:
        self._store = store

    def parse(self, topic: str, raw: bytes) -> BaseModel:
        """Validate a record as the model of its topic.

        Raises:
            ValueError: a topic this stage does not read (a wiring error: dead-lettered).
        """
        model = TOPICS.get(topic)
        if model is None:
            raise ValueError(f"analytics does not read topic {topic!r}")
        return parse_model(model, raw)

    async def handle(self, batch: Sequence[Envelope[BaseModel]], out: EventPublisher) -> Sequence[Rejection]:
        """One insert per table for the batch.

        Raises:
            StoreUnavailableError: ClickHouse failed (retried; nothing committed).
        """
        recalls = [e.event for e in batch if isinstance(e.event, RecallLogEvent)]
        feedback = [e.event for e in batch if isinstance(e.event, RecallFeedbackEvent)]
        memories = [e.event for e in batch if isinstance(e.event, MemoryStoredEvent | EpisodeEvent)]
        if recalls:
            await asyncio.to_thread(self._store.insert_recalls, recalls)
        if feedback:
            await asyncio.to_thread(self._store.insert_feedback, feedback)
        if memories:
            await asyncio.to_thread(self._store.insert_memories, memories)
        return ()
