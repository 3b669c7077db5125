"""Deterministic ids, so redelivery and replay never duplicate anything (DESIGN.md section 2)."""

from __future__ import annotations

import uuid

_NAMESPACE = uuid.UUID("6f1c2b1e-6a53-4f61-9d0e-2f6c8d8f4b11")
"""Hindsight's UUIDv5 namespace. Changing it changes every memory id: never do that."""


def stable_id(*parts: str) -> str:
    """UUIDv5 string of ``parts`` joined by ``\\x1f`` (unit separator), e.g. ``stable_id("turn", event_id)``.

    The same parts always give the same id; ids are valid Qdrant point ids.
    """
    return str(uuid.uuid5(_NAMESPACE, "\x1f".join(parts)))


def turn_memory_id(tenant_id: str, event_id: str) -> str:
    """Memory id of the turn memory derived from interaction ``event_id`` within a tenant."""
    return stable_id("turn", tenant_id, event_id)


def episode_memory_id(tenant_id: str, user_id: str, session_id: str) -> str:
    """Memory id of the episode consolidated from a session."""
    return stable_id("episode", tenant_id, user_id, session_id)


def fact_memory_id(tenant_id: str, user_id: str, pattern: str) -> str:
    """Memory id of the semantic fact abstracted for ``pattern`` (e.g. ``entity:paris``)."""
    return stable_id("fact", tenant_id, user_id, pattern)


def extracted_fact_id(tenant_id: str, turn_memory_id: str, index: int) -> str:
    """Memory id of the ``index``-th fact (0-based, extractor order) extracted from a turn memory."""
    return stable_id("extracted-fact", tenant_id, turn_memory_id, str(index))


def lesson_memory_id(tenant_id: str, user_id: str, session_id: str, index: int) -> str:
    """Memory id of the ``index``-th lesson (0-based) reflection drew from a closed session."""
    return stable_id("lesson", tenant_id, user_id, session_id, str(index))


def access_id(query_id: str, memory_id: str) -> str:
    """Id of the access event for ``memory_id`` returned by recall ``query_id``."""
    return stable_id("access", query_id, memory_id)
