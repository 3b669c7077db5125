"""AsyncAPI document of the whole pipeline (``make docs`` -> ``docs/asyncapi.yaml``).

The running stages validate each record themselves (so one bad record is dead-lettered, not the
batch), which hides their message types from FastStream; this docs-only app declares every stage's
input and outputs with their pydantic models so ``faststream docs gen`` documents the topology.
"""

from __future__ import annotations

from faststream import FastStream
from faststream.kafka import KafkaBroker
from faststream.specification import AsyncAPI
from pydantic import BaseModel

from schemas import (
    AccessEvent,
    DeadLetter,
    EpisodeEvent,
    GuardedEvent,
    InteractionEvent,
    MemoryCandidate,
    MemoryStoredEvent,
    QuarantineRecord,
    RecallLogEvent,
    ReflectionResult,
    SessionClosedEvent,
    Topic,
)

TOPOLOGY: tuple[tuple[str, Topic, type[BaseModel], tuple[tuple[Topic, type[BaseModel]], ...]], ...] = (
    (
        "guard",
        Topic.INTERACTIONS,
        InteractionEvent,
        ((Topic.GUARDED, GuardedEvent), (Topic.QUARANTINE, QuarantineRecord)),
    ),
    ("ingest-trigger", Topic.GUARDED, GuardedEvent, ((Topic.CANDIDATES, MemoryCandidate),)),
    ("ingest-embed", Topic.CANDIDATES, MemoryCandidate, ((Topic.STORED, MemoryStoredEvent),)),
    (
        "reflect",
        Topic.SESSIONS,
        SessionClosedEvent,
        ((Topic.EPISODES, EpisodeEvent), (Topic.REFLECTIONS, ReflectionResult)),
    ),
    ("accesslog", Topic.RECALLS, RecallLogEvent, ()),
    ("accesslog", Topic.ACCESS, AccessEvent, ()),
)
"""(consumer group suffix, input topic, input model, outputs); every stage may also write the DLQ."""


def _declare(
    broker: KafkaBroker,
    group: str,
    topic: Topic,
    model: type[BaseModel],
    outputs: tuple[tuple[Topic, type[BaseModel]], ...],
) -> None:
    async def handler(body: BaseModel) -> None:  # docs only, never started
        del body

    handler.__annotations__ = {"body": model, "return": None}
    handler.__name__ = group.replace("-", "_")
    decorated = broker.subscriber(str(topic), group_id=f"hindsight-{group}", title=f"{group}:{topic}")(
        handler
    )
    for out_topic, out_model in (*outputs, (Topic.DLQ, DeadLetter)):
        decorated = broker.publisher(str(out_topic), schema=out_model, title=f"{group}->{out_topic}")(
            decorated
        )


def create_docs_app() -> FastStream:
    """A FastStream app that is only ever documented, never run."""
    broker = KafkaBroker("kafka:9092")
    for group, topic, model, outputs in TOPOLOGY:
        _declare(broker, group, topic, model, outputs)
    spec = AsyncAPI(title="Hindsight", version="1", description="Streaming long-term memory for LLM agents.")
    return FastStream(broker, specification=spec)
