"""K-of-M abstraction of episodic memory into semantic memory (DESIGN.md section 4).

An entity seen in at least K of a user's last M episodes (K=3, M=10) becomes a low-confidence
semantic memory ("recurring topic"); more supporting episodes raise its confidence
(:func:`hindsight.scoring.abstraction_confidence`). Counter-examples (contradictions) lower it once
contradiction detection lands; until then ``contradictions`` is 0. Pure functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from hindsight.ids import fact_memory_id
from hindsight.scoring import abstraction_confidence
from schemas import Memory, Provenance


@dataclass(frozen=True)
class Pattern:
    """An entity that recurs across episodes."""

    key: str
    """Normalised pattern key, e.g. ``entity:paris``."""
    entity: str
    """Display form (first seen)."""
    support: int
    """Episodes among the last M that mention it."""
    window: int
    """How many episodes were looked at (<= M)."""
    episode_ids: tuple[str, ...]


def recurring_entities(episodes: Sequence[Memory], *, k: int = 3, m: int = 10) -> list[Pattern]:
    """Entities found in at least ``k`` of the ``m`` most recent episodes (by ``created_at``).

    Case-insensitive; each episode counts once per entity. Sorted by support, then key.
    """
    recent = sorted(episodes, key=lambda e: (e.created_at, e.id), reverse=True)[:m]
    seen: dict[str, tuple[str, list[str]]] = {}
    for episode in recent:
        for entity in dict.fromkeys(episode.entities):
            key = f"entity:{entity.casefold()}"
            _, ids = seen.setdefault(key, (entity, []))
            if episode.id not in ids:
                ids.append(episode.id)
    patterns = [
        Pattern(key, display, len(ids), len(recent), tuple(ids))
        for key, (display, ids) in seen.items()
        if len(ids) >= k
    ]
    return sorted(patterns, key=lambda p: (-p.support, p.key))


def fact_for(
    pattern: Pattern, owner: Memory, *, stored_at: datetime, k: int, existing: Memory | None
) -> Memory:
    """The semantic memory for ``pattern``; keeps ``existing``'s id, creation time and access history.

    Args:
        owner: any episode of the user (tenant, user, agent, scope are taken from it).
        existing: the current version of this fact, if one is stored.
    """
    confidence = abstraction_confidence(pattern.support, 0, k=k)
    content = (
        f"Recurring topic: {pattern.entity} came up in {pattern.support} of the last "
        f"{pattern.window} sessions."
    )
    base = existing or Memory(
        id=fact_memory_id(owner.tenant_id, owner.user_id, pattern.key),
        tenant_id=owner.tenant_id,
        user_id=owner.user_id,
        agent_id=owner.agent_id,
        session_id=owner.session_id,
        type="semantic",
        kind="fact",
        content=content,
        source="system",
        scope=owner.scope,
        entities=(pattern.entity,),
        intent="fact",
        importance=0.5,
        confidence=confidence,
        created_at=owner.created_at,
        stored_at=stored_at,
        valid_from=owner.created_at,
        last_accessed_at=stored_at,
    )
    return base.model_copy(
        update={
            "content": content,
            "confidence": confidence,
            "provenance": Provenance(memory_ids=pattern.episode_ids),
        }
    )
