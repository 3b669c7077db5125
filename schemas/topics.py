"""Kafka topic names, defined once (DESIGN.md section 3).

Every topic is keyed by ``tenant_id:user_id`` (see :func:`partition_key`) so one user's events are
processed in order. The ``.v1`` suffix is the wire version of the events on the topic; a breaking
change gets a new topic next to the old one.
"""

from __future__ import annotations

from enum import StrEnum


class Topic(StrEnum):
    """Every topic Hindsight reads or writes."""

    INTERACTIONS = "memory.interactions.v1"
    """Agents publish :class:`~schemas.v1.InteractionEvent` here (raw, unredacted: short retention)."""
    SESSIONS = "memory.sessions.v1"
    """Agents publish :class:`~schemas.v1.SessionClosedEvent` here when a session or task ends."""
    QUARANTINE = "memory.quarantine.v1"
    """Guard publishes :class:`~schemas.v1.QuarantineRecord`: blocked or suspect, never stored."""
    GUARDED = "memory.guarded.v1"
    """Guard publishes redacted :class:`~schemas.v1.GuardedEvent`."""
    CANDIDATES = "memory.candidates.v1"
    """Write-trigger publishes :class:`~schemas.v1.MemoryCandidate` worth remembering."""
    STORED = "memory.stored.v1"
    """Embed stage publishes :class:`~schemas.v1.MemoryStoredEvent` once a memory is searchable."""
    EPISODES = "memory.episodes.v1"
    """Reflect publishes :class:`~schemas.v1.EpisodeEvent` for every consolidated session."""
    REFLECTIONS = "memory.reflections.v1"
    """Reflect publishes :class:`~schemas.v1.ReflectionResult` (operations it applied)."""
    ACCESS = "memory.access.v1"
    """One :class:`~schemas.v1.AccessEvent` per memory a recall returned, from producers that publish
    them (gateways before 2026-12-02); the gateway now publishes only the recall log, whose returned
    candidates the access log sinks."""
    RECALLS = "memory.recalls.v1"
    """Gateway publishes one :class:`~schemas.v1.RecallLogEvent` per recall (every candidate, scores);
    the access log and the tuning tables are sunk from it."""
    FEEDBACK = "memory.feedback.v1"
    """Gateway publishes :class:`~schemas.v1.RecallFeedbackEvent`: which recalled memories were used."""
    DLQ = "memory.dlq.v1"
    """Any stage publishes :class:`~schemas.v1.DeadLetter` for a message it can never process."""


def partition_key(tenant_id: str, user_id: str) -> bytes:
    """Kafka message key for a user's events: ``b"tenant_id:user_id"`` (DESIGN.md section 3)."""
    return f"{tenant_id}:{user_id}".encode()
