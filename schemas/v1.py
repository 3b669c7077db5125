"""Wire events, version 1 (DESIGN.md sections 2 and 3).

Frozen pydantic v2 models; every event carries ``schema_version``. Consumers ignore unknown fields so
producers may add optional fields without a new version; removing or retyping a field needs ``v2``.
Times are timezone-aware (``AwareDatetime``): the producer's own UTC offset is kept, never replaced.
This module depends on pydantic and the standard library only.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StringConstraints

SCHEMA_VERSION: Literal["1"] = "1"

Identifier = Annotated[str, StringConstraints(min_length=1, max_length=256, strip_whitespace=True)]
Source = Literal["user", "assistant", "tool", "system"]
MemoryType = Literal["working", "episodic", "semantic"]
MemoryKind = Literal["turn", "episode", "fact"]
MemoryStatus = Literal["active", "superseded", "expired", "quarantined"]
Scalar = str | int | float | bool


class _Event(BaseModel):
    """Base of every wire model: frozen, unknown fields ignored, versioned."""

    model_config = ConfigDict(frozen=True, extra="ignore", str_strip_whitespace=False)

    schema_version: Literal["1"] = Field(SCHEMA_VERSION, description="Wire version of this event.")


class _Owned(_Event):
    """Fields naming whose memory an event concerns; the partition key is ``tenant_id:user_id``."""

    tenant_id: Identifier = Field(description="Tenant (organisation) that owns the memory.")
    user_id: Identifier = Field(description="End user the memory is about.")
    agent_id: Identifier = Field(description="Agent that produced or asked for it.")
    session_id: Identifier = Field(description="Conversation or task session.")


class InteractionEvent(_Owned):
    """One thing that happened in a session: a turn, a tool call or result, a system note.

    Published by agents to ``memory.interactions.v1``. ``event_id`` must be unique and stable: a
    redelivered or re-sent event with the same id never creates a second memory.
    """

    event_id: Identifier = Field(description="Producer-assigned unique id; memory ids derive from it.")
    occurred_at: AwareDatetime = Field(description="When it happened, with the user's own UTC offset.")
    source: Source = Field(description="Who said or produced it; sets the initial confidence (trust).")
    content: str = Field(
        min_length=1,
        max_length=100_000,
        pattern=r"\S",
        description="The text (turn, tool output, ...); must contain a non-whitespace character.",
    )
    speaker: str | None = Field(None, max_length=256, description="Display name of the speaker, if any.")
    tool_name: str | None = Field(None, max_length=256, description="Tool name when source is 'tool'.")
    tool_result: str | None = Field(None, max_length=100_000, description="Tool result text, if separate.")
    turn_index: int | None = Field(None, ge=0, description="Position of the turn in its session (0-based).")
    scope: str = Field(
        "global",
        pattern=r"^(global|agent:[^\s]+)$",
        description="Visibility: 'global' (every agent of the tenant) or 'agent:<id>' (that agent only).",
    )
    tags: tuple[str, ...] = Field((), description="Labels such as 'health'; recall can require or exclude.")
    external_ref: str | None = Field(
        None, max_length=512, description="Provenance in the producer's system, e.g. a LoCoMo dia_id 'D1:3'."
    )
    metadata: dict[str, Scalar] = Field(default_factory=dict, description="Free key/value context.")


class SessionClosedEvent(_Owned):
    """A session or task has ended; triggers episode consolidation and reflection.

    Published by agents to ``memory.sessions.v1``. ``event_count``, when given, is the number of
    interaction events the session produced: reflection waits (bounded) until that many were
    processed, so a close that overtakes its own turns does not yield a partial episode.
    """

    event_id: Identifier = Field(description="Unique id of this close event.")
    closed_at: AwareDatetime = Field(description="When the session ended, with the user's UTC offset.")
    task: str | None = Field(None, max_length=2_000, description="What the session was for, if known.")
    outcome: Literal["success", "failure", "abandoned", "unknown"] = Field(
        "unknown", description="How the task ended."
    )
    feedback: str | None = Field(None, max_length=10_000, description="User feedback text, if any.")
    feedback_score: float | None = Field(None, ge=-1.0, le=1.0, description="-1 (bad) .. 1 (good).")
    event_count: int | None = Field(None, ge=0, description="Interaction events the session produced.")


class GuardedEvent(_Event):
    """An interaction that passed the guard: content redacted, trust attached (``memory.guarded.v1``)."""

    interaction: InteractionEvent = Field(description="The interaction with PII already redacted.")
    trust: float = Field(ge=0.0, le=1.0, description="Initial confidence from source trust (DESIGN.md s4).")
    findings: dict[str, int] = Field(
        default_factory=dict, description="PII types redacted and how often (never the matched text)."
    )
    guarded_at: AwareDatetime = Field(description="When the guard processed it (UTC).")
    reviewed: bool = Field(
        False, description="Released from quarantine by an operator: later checks do not hold it back again."
    )


class QuarantineRecord(_Owned):
    """An interaction the guard refused to store (``memory.quarantine.v1``); kept for review."""

    event_id: Identifier = Field(description="Id of the refused interaction event.")
    verdict: Literal["block", "quarantine"] = Field(
        description="'block': contains a secret, content dropped; 'quarantine': suspect, kept redacted."
    )
    reasons: tuple[str, ...] = Field(description="Why, e.g. 'secret:api_key' or 'poisoning:instruction'.")
    findings: dict[str, int] = Field(default_factory=dict, description="Finding types and counts.")
    source: Source = Field(description="Source of the refused interaction.")
    content_redacted: str | None = Field(
        None, description="Redacted content for review (None when blocked: secrets are never kept)."
    )
    quarantined_at: AwareDatetime = Field(description="When the guard refused it (UTC).")
    stage: str = Field(
        "guard", description="Stage that quarantined it: 'guard' or 'ingest.embed' (consistency)."
    )
    trust: float | None = Field(None, ge=0.0, le=1.0, description="Source trust the event would have had.")
    external_ref: str | None = Field(None, description="The event's external_ref (redacted).")
    tool_name: str | None = Field(None, description="The tool that produced it, if any (redacted).")
    scores: dict[str, float] = Field(
        default_factory=dict, description="Detector scores behind the reasons, e.g. {'instruction': 0.97}."
    )
    interaction: InteractionEvent | None = Field(
        None,
        description="The whole interaction, every field redacted, so a release can publish it on "
        "(None when blocked, or when quarantined after the guard).",
    )
    candidate: MemoryCandidate | None = Field(
        None, description="The memory candidate a later stage (consistency check) held back, for release."
    )


class Provenance(BaseModel):
    """Where a memory came from: the events and external references it rests on."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    event_ids: tuple[str, ...] = Field((), description="Interaction event ids the memory derives from.")
    external_refs: tuple[str, ...] = Field((), description="Producer references (e.g. LoCoMo dia_ids).")
    memory_ids: tuple[str, ...] = Field((), description="Memories it was derived from (episodes, facts).")


class MemoryCandidate(_Owned):
    """Something the write-trigger judged worth remembering (``memory.candidates.v1``)."""

    memory_id: Identifier = Field(description="Deterministic id (UUIDv5 of the source event id).")
    type: MemoryType = Field("episodic", description="Memory layer it will be stored in.")
    kind: MemoryKind = Field("turn", description="'turn' (one interaction), 'episode' or 'fact'.")
    content: str = Field(min_length=1, description="Redacted text to embed and store.")
    source: Source = Field(description="Who said it.")
    speaker: str | None = Field(None, description="Display name of the speaker, if any.")
    scope: str = Field("global", description="'global' or 'agent:<id>'.")
    tags: tuple[str, ...] = Field((), description="Labels such as 'health'.")
    entities: tuple[str, ...] = Field((), description="Named entities found in the content.")
    intent: str | None = Field(None, description="Coarse intent label, e.g. 'preference', 'fact', 'plan'.")
    importance: float = Field(ge=0.0, le=1.0, description="Write-trigger importance 0..1.")
    confidence: float = Field(ge=0.0, le=1.0, description="Initial confidence (source trust).")
    occurred_at: AwareDatetime = Field(description="When the underlying event happened (user's offset).")
    reason: str = Field(description="Why it is worth remembering (write-trigger explanation).")
    provenance: Provenance = Field(description="Source events and references.")
    reviewed: bool = Field(
        False, description="Released from quarantine by an operator: the consistency check lets it through."
    )


class Memory(_Owned):
    """A stored memory record (DESIGN.md section 2), as kept in the vector store payload.

    The embedding itself is not part of the wire model; ``embedding_model`` names what produced it.
    """

    id: Identifier = Field(description="Deterministic memory id (UUID string).")
    type: MemoryType = Field(description="working / episodic / semantic.")
    kind: MemoryKind = Field("turn", description="'turn', 'episode' or 'fact'.")
    content: str = Field(description="Redacted memory text.")
    source: Source = Field(description="Who said or produced it.")
    speaker: str | None = Field(None, description="Display name of the speaker, if any.")
    scope: str = Field("global", description="'global' or 'agent:<id>'.")
    tags: tuple[str, ...] = Field((), description="Labels such as 'health'.")
    entities: tuple[str, ...] = Field((), description="Named entities.")
    intent: str | None = Field(None, description="Coarse intent label.")
    importance: float = Field(ge=0.0, le=1.0, description="0..1, from the write-trigger or reflection.")
    confidence: float = Field(ge=0.0, le=1.0, description="0..1; source trust, then support/contradiction.")
    created_at: AwareDatetime = Field(description="When the remembered thing happened (user's offset).")
    stored_at: AwareDatetime = Field(description="When Hindsight stored it (UTC).")
    valid_from: AwareDatetime | None = Field(None, description="Start of validity (facts), if known.")
    valid_to: AwareDatetime | None = Field(None, description="End of validity; None = still valid.")
    last_accessed_at: AwareDatetime = Field(description="Last recall that returned it (initially stored_at).")
    access_count: int = Field(0, ge=0, description="How many recalls returned it.")
    status: MemoryStatus = Field("active", description="active / superseded / expired / quarantined.")
    parent_id: str | None = Field(None, description="Previous version in the version chain, if any.")
    version: int = Field(1, ge=1, description="Position in the version chain (1 = first).")
    provenance: Provenance = Field(Provenance(), description="Where it came from.")
    embedding_model: str | None = Field(None, description="Name of the embedder that produced its vector.")


class MemoryStoredEvent(_Event):
    """A memory became searchable (``memory.stored.v1``), or a near-duplicate was merged into one."""

    memory: Memory = Field(description="The stored (or the existing, merged-into) memory.")
    candidate_id: str = Field(description="Id of the candidate that led to this event.")
    deduplicated: bool = Field(
        False, description="True when the candidate was a near-duplicate (cosine > 0.95) and not stored."
    )


class EpisodeEvent(_Event):
    """A session consolidated into one episodic record (``memory.episodes.v1``)."""

    episode: Memory = Field(description="The episode memory (type 'episodic', kind 'episode').")
    turn_memory_ids: tuple[str, ...] = Field(description="Turn memories the episode summarises.")
    outcome: str = Field(description="Session outcome as reported on close.")
    feedback_score: float | None = Field(None, description="User feedback score, if any.")


class MemoryOperation(BaseModel):
    """One operation reflection applied: store a new memory, update one, or forget one."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    op: Literal["store", "update", "forget"] = Field(description="What was done.")
    memory_id: str = Field(description="The memory stored, updated or forgotten.")
    reason: str = Field(description="Why (rule or model explanation).")
    confidence: float | None = Field(None, description="Confidence after the operation, if it changed.")


class ReflectionResult(_Event):
    """What reflection did after an episode (``memory.reflections.v1``)."""

    reflection_id: str = Field(description="Deterministic id (from the episode id).")
    tenant_id: str = Field(description="Tenant.")
    user_id: str = Field(description="User.")
    episode_id: str = Field(description="The episode reflected upon.")
    operations: tuple[MemoryOperation, ...] = Field(description="Operations applied, in order.")
    reflected_at: AwareDatetime = Field(description="When (UTC).")


class AccessEvent(_Event):
    """One memory returned by one recall (``memory.access.v1``); sunk to ClickHouse ``access_log``."""

    access_id: str = Field(description="Deterministic id (query id + memory id): redelivery dedupes.")
    query_id: str = Field(description="Id of the recall call.")
    tenant_id: str = Field(description="Tenant of the caller.")
    user_id: str = Field(description="User whose memory was returned.")
    agent_id: str = Field(description="Agent that called recall.")
    memory_id: str = Field(description="Returned memory.")
    memory_type: MemoryType = Field(description="Its layer.")
    rank: int = Field(ge=1, description="1-based position in the response.")
    similarity: float = Field(description="Cosine similarity to the query.")
    time_weight: float = Field(description="Time weight applied (DESIGN.md section 4).")
    final_score: float = Field(description="Blended score used for ranking.")
    query_text: str = Field(description="The query, redacted.")
    accessed_at: AwareDatetime = Field(description="When recall returned it (UTC).")


class DeadLetter(_Event):
    """A message a stage can never process (``memory.dlq.v1``): stage, error and original bytes."""

    stage: str = Field(description="Stage that gave up, e.g. 'guard', 'ingest.embed'.")
    error_type: str = Field(description="Error class, e.g. 'ValidationError', 'JSONDecodeError'.")
    reason: str = Field(description="Human-readable reason naming the field and problem.")
    topic: str = Field(description="Topic the message came from.")
    partition: int = Field(description="Its partition.")
    offset: int = Field(description="Its offset.")
    key: str | None = Field(None, description="Its key (UTF-8, replacement chars if not).")
    original_b64: str = Field(description="The original value bytes, base64 (may hold unredacted data).")
    first_seen_at: AwareDatetime = Field(description="When the stage first failed on it (UTC).")


QuarantineRecord.model_rebuild()

PUBLIC_EVENTS: tuple[type[BaseModel], ...] = (
    InteractionEvent,
    SessionClosedEvent,
    GuardedEvent,
    QuarantineRecord,
    MemoryCandidate,
    Memory,
    MemoryStoredEvent,
    EpisodeEvent,
    ReflectionResult,
    AccessEvent,
    DeadLetter,
)
"""Models whose JSON Schema is exported to ``docs/schemas/`` (``hindsight schemas export``)."""

__all__ = [
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
    "ReflectionResult",
    "SessionClosedEvent",
]
