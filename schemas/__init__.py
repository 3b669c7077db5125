"""Hindsight wire schemas: versioned pydantic event models and topic names.

Depends on pydantic and the standard library only (DESIGN.md section 9), so agents and code
generators for other languages can read it. ``KNOWN_VERSIONS`` lists the wire versions this
package can parse; the current models are re-exported from :mod:`schemas.v1`.
"""

from schemas.topics import Topic, partition_key
from schemas.v1 import (
    SCHEMA_VERSION,
    AccessEvent,
    DeadLetter,
    EpisodeEvent,
    GuardedEvent,
    InteractionEvent,
    Memory,
    MemoryCandidate,
    MemoryOperation,
    MemoryStoredEvent,
    Provenance,
    QuarantineRecord,
    RecallCandidate,
    RecallFeedbackEvent,
    RecallLogEvent,
    ReflectionResult,
    SessionClosedEvent,
)

KNOWN_VERSIONS: tuple[str, ...] = ("1",)

__all__ = [
    "KNOWN_VERSIONS",
    "SCHEMA_VERSION",
    "AccessEvent",
    "DeadLetter",
    "EpisodeEvent",
    "GuardedEvent",
    "InteractionEvent",
    "Memory",
    "MemoryCandidate",
    "MemoryOperation",
    "MemoryStoredEvent",
    "Provenance",
    "QuarantineRecord",
    "RecallCandidate",
    "RecallFeedbackEvent",
    "RecallLogEvent",
    "ReflectionResult",
    "SessionClosedEvent",
    "Topic",
    "partition_key",
]
