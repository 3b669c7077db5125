"""Conversion between :class:`schemas.Memory` and the vector store payload (DESIGN.md section 2), and
the constructors of memory candidates (:func:`memory_candidate`, :func:`compressed_candidate`) and of
the memory a candidate becomes (:func:`memory_from_candidate`).

The payload is the memory's JSON plus float epoch-second copies of its times (``created_ts``,
``stored_ts``, ``last_accessed_ts``) for range filters and scoring, ``text_tokens`` (tokens of the
text recall hands a caller, counted once at write so the recall token budget costs no tokenizer
call; about 0.25 ms per memory), and ``merged_ids`` (candidates merged into it as near-duplicates,
so a redelivered duplicate is not counted twice).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from hindsight.text import TextFeatures, compress, features, speaker_text
from hindsight.tokens import count_tokens
from schemas import InteractionEvent, Memory, MemoryCandidate, Provenance, SessionClosedEvent
from schemas.v1 import Source

if TYPE_CHECKING:
    from hindsight.stores.working_memory import WorkingItem

_DERIVED = ("created_ts", "stored_ts", "last_accessed_ts", "text_tokens")
RECONCILE_STATE = "reconcile_state"
"""Payload field: ``pending`` (stored, not reconciled yet), ``planned`` (its decision is written in
``reconcile_plan`` and being applied) or ``done``; absent on memories stored before reconcile existed
(treated as done)."""
PENDING, PLANNED, DONE = "pending", "planned", "done"
RECONCILE_PLAN = "reconcile_plan"
"""Payload field: ``{memory_id: {field: value}}``, the changes a reconcile decision makes (write-ahead)."""
RECONCILE_DECISIONS = "reconcile_decisions"
"""Payload field: the judge's verdicts for this memory (``with``, ``relation``, ``confidence``,
``backend``, ``reason``), kept for audit."""
_BOOKKEEPING = (
    "merged_ids",
    "merged_event_ids",
    "merged_refs",
    "expired_ts",
    "eviction_score",
    RECONCILE_STATE,
    RECONCILE_PLAN,
    RECONCILE_DECISIONS,
    "facts_extracted",
)


def to_payload(memory: Memory, *, merged_ids: list[str] | None = None) -> dict[str, Any]:
    """Payload dict for ``memory`` (JSON-safe; times as ISO strings plus ``*_ts`` epoch seconds)."""
    payload = memory.model_dump(mode="json")
    payload["created_ts"] = memory.created_at.timestamp()
    payload["stored_ts"] = memory.stored_at.timestamp()
    payload["last_accessed_ts"] = memory.last_accessed_at.timestamp()
    payload["text_tokens"] = count_tokens(speaker_text(memory.speaker, memory.content))
    payload["merged_ids"] = list(merged_ids or [])
    return payload


def from_payload(payload: dict[str, Any]) -> Memory:
    """The :class:`Memory` stored in ``payload`` (derived fields are ignored).

    Raises:
        pydantic.ValidationError: the payload is not a memory record.
    """
    return Memory.model_validate({k: v for k, v in payload.items() if k not in _DERIVED})


def with_merged_provenance(payload: dict[str, Any]) -> Memory:
    """The memory with the provenance of near-duplicates merged into it added to its own.

    Used where a memory stands for everything it absorbed (episode consolidation); recall keeps the
    memory's own provenance so a citation stays precise.
    """
    memory = from_payload(payload)
    events = tuple(payload.get("merged_event_ids", ()))
    refs = tuple(payload.get("merged_refs", ()))
    if not events and not refs:
        return memory
    prov = memory.provenance
    return memory.model_copy(
        update={
            "provenance": prov.model_copy(
                update={
                    "event_ids": (*prov.event_ids, *events),
                    "external_refs": (*prov.external_refs, *refs),
                }
            )
        }
    )


def public_view(payload: dict[str, Any]) -> dict[str, Any]:
    """What the gateway returns for a memory: the record without internal bookkeeping fields."""
    return {k: v for k, v in payload.items() if k not in (*_DERIVED, *_BOOKKEEPING)}


def memory_candidate(
    owner: InteractionEvent | SessionClosedEvent,
    *,
    memory_id: str,
    text: str,
    source: Source,
    features: TextFeatures,
    tags: tuple[str, ...],
    importance: float,
    confidence: float,
    occurred_at: datetime,
    reason: str,
    event_id: str,
    external_ref: str | None,
    speaker: str | None = None,
) -> MemoryCandidate:
    """The candidate memory ``memory_id`` storing ``text``.

    It belongs to ``owner``'s tenant, user, agent and session and has its scope; entities and intent
    come from ``features`` (``tags`` are given whole); its provenance is the source event ``event_id``
    and that event's ``external_ref``, when it has one.

    Raises:
        pydantic.ValidationError: a field is invalid (e.g. empty ``text``).
    """
    return MemoryCandidate(
        tenant_id=owner.tenant_id,
        user_id=owner.user_id,
        agent_id=owner.agent_id,
        session_id=owner.session_id,
        memory_id=memory_id,
        content=text,
        source=source,
        speaker=speaker,
        scope=owner.scope if isinstance(owner, InteractionEvent) else "global",
        tags=tags,
        entities=features.entities,
        intent=features.intent,
        importance=importance,
        confidence=confidence,
        occurred_at=occurred_at,
        reason=reason,
        provenance=Provenance(event_ids=(event_id,), external_refs=(external_ref,) if external_ref else ()),
    )


def compressed_candidate(
    item: WorkingItem, owner: InteractionEvent | SessionClosedEvent, trust: float
) -> MemoryCandidate:
    """Episodic candidate for a working-memory item that leaves working memory without having been
    kept (DESIGN.md section 2: compressed, never just dropped): pushed out by a newer item (the
    write-trigger, ``owner`` the pushing event) or left over when its session closes (reflect,
    ``owner`` the close; scope ``global``)."""
    text = compress(item.content)
    f = features(text)
    return memory_candidate(
        owner,
        memory_id=item.id,
        text=text,
        source=item.source,
        features=f,
        tags=("compressed", *f.tags),
        importance=item.importance,
        confidence=trust,
        occurred_at=item.created_at,
        reason="compressed: pushed out of working memory",
        event_id=item.event_id,
        external_ref=item.external_ref,
    )


def memory_from_candidate(c: MemoryCandidate, *, stored_at: datetime, model: str) -> Memory:
    """The new memory record for a candidate (``last_accessed_at`` starts at ``stored_at``)."""
    return Memory(
        id=c.memory_id,
        tenant_id=c.tenant_id,
        user_id=c.user_id,
        agent_id=c.agent_id,
        session_id=c.session_id,
        type=c.type,
        kind=c.kind,
        content=c.content,
        source=c.source,
        speaker=c.speaker,
        scope=c.scope,
        tags=c.tags,
        entities=c.entities,
        intent=c.intent,
        importance=c.importance,
        confidence=c.confidence,
        created_at=c.occurred_at,
        stored_at=stored_at,
        valid_from=c.occurred_at,
        last_accessed_at=stored_at,
        provenance=c.provenance,
        embedding_model=model,
    )
