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
MemoryKind = Literal["turn", "episode", "fact", "lesson"]
MemoryStatus = Literal["active", "superseded", "merged", "expired", "quarantined"]
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
    passage: int | None = Field(
        None, ge=0, description="0-based passage of its source event's text, when that text was split."
    )
    passages: int | None = Field(None, ge=1, description="How many passages the source event's text made.")
    span: tuple[int, int] | None = Field(
        None, description="[start, end) character offsets of this passage in the source event's text."
    )


class MemoryCandidate(_Owned):
    """Something the write-trigger judged worth remembering (``memory.candidates.v1``)."""

    memory_id: Identifier = Field(description="Deterministic id (UUIDv5 of the source event id).")
    type: MemoryType = Field("episodic", description="Memory layer it will be stored in.")
    kind: MemoryKind = Field("turn", description="'turn' (one interaction), 'episode', 'fact' or 'lesson'.")
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
    kind: MemoryKind = Field(
        "turn",
        description="'turn' (one interaction, the evidence), 'fact' (a durable statement: entity, attribute, "
        "value), 'lesson' (what to repeat or avoid, from an outcome and feedback) or 'episode' (a session).",
    )
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
    status: MemoryStatus = Field(
        "active",
        description="active / superseded (a newer version replaced it) / merged (the same information as "
        "'merged_into', which was kept) / expired / quarantined.",
    )
    parent_id: str | None = Field(None, description="Previous version in the version chain, if any.")
    version: int = Field(1, ge=1, description="Position in the version chain (1 = first).")
    superseded_by: str | None = Field(
        None, description="Next (newer) version in the version chain; set when status is 'superseded'."
    )
    supersedes: tuple[str, ...] = Field(
        (),
        description="Every memory this version replaced (parent_id is the newest of them; more than one "
        "when one statement revised several).",
    )
    merged_into: str | None = Field(None, description="The memory kept when this one was merged into it.")
    related_ids: tuple[str, ...] = Field(
        (), description="Memories this one refines or is refined by (both stay active)."
    )
    conflicts_with: tuple[str, ...] = Field(
        (),
        description="Active memories the judge could not reconcile with this one (recall reports the pair "
        "as a conflict for the agent to decide).",
    )
    entity: str | None = Field(None, description="Facts: who or what the fact is about (e.g. 'user').")
    attribute: str | None = Field(None, description="Facts: the attribute (e.g. 'employer', 'budget').")
    value: str | None = Field(None, description="Facts: the value stated (e.g. 'Siemens', '8,000').")
    derived_ids: tuple[str, ...] = Field(
        (), description="Memories derived from this one (the facts extracted from a turn)."
    )
    provenance: Provenance = Field(Provenance(), description="Where it came from.")
    embedding_model: str | None = Field(None, description="Name of the embedder that produced its vector.")


class MemoryStoredEvent(_Event):
    """A memory became searchable (``memory.stored.v1``): a turn stored by the embed stage, a fact
    extracted by reconcile, a lesson written by reflection. Reconcile (consumer group
    ``ingest-reconcile``) consumes it and puts the memory into its version chain."""

    memory: Memory = Field(description="The stored (or the existing, merged-into) memory.")
    candidate_id: str = Field(description="Id of the candidate that led to this event.")
    deduplicated: bool = Field(
        False,
        description="True when the candidate was not stored because it duplicated an existing memory. The "
        "embed stage no longer merges (reconcile's judge decides every merge), so it publishes False; "
        "kept for consumers of older events.",
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
    """One memory returned by one recall (``memory.access.v1``); sunk to ClickHouse ``access_log``.
    The gateway no longer publishes it (the recall log carries the same rows); still accepted."""

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


CandidateOutcome = Literal["returned", "below_floor", "duplicate", "below_top_k", "over_budget"]
FeedbackLabel = Literal["used", "unused", "wrong", "outdated"]


class RecallCandidate(BaseModel):
    """One candidate a recall considered, with every component score and what became of it."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    memory_id: str = Field(description="The candidate memory.")
    memory_type: MemoryType = Field(description="Its layer at recall time.")
    kind: MemoryKind = Field("turn", description="Its granularity at recall time.")
    outcome: CandidateOutcome = Field(
        description="'returned', or why not: 'below_floor' (cosine under the similarity floor), "
        "'duplicate' (folded into a near-identical memory), 'below_top_k', 'over_budget' (token budget)."
    )
    rank: int | None = Field(None, ge=1, description="1-based position in the response, when returned.")
    similarity: float = Field(description="Cosine similarity to the query, -1..1.")
    dense_rank: int | None = Field(None, description="Rank in the dense list; null if absent.")
    lexical_rank: int | None = Field(None, description="Rank in the lexical (BM25) list; null if absent.")
    lexical_score: float | None = Field(None, description="BM25 score; null if absent from that list.")
    rerank_score: float | None = Field(None, description="Reranker score, when reranking ran.")
    relevance: float | None = Field(None, description="Fused relevance 0..1 (null below the floor).")
    time_weight: float | None = Field(None, description="Time weight applied (null below the floor).")
    final_score: float | None = Field(None, description="Ranking score (null below the floor).")
    in_time_window: bool = Field(False, description="Created inside the time the query names.")
    age_days: float = Field(description="Days from the memory's created_at to the recall's reference time.")
    since_access_days: float = Field(
        description="Days from its last recorded access (or storage) to the recall's reference time."
    )
    access_count: int = Field(0, ge=0, description="Accesses recorded on the memory at recall time.")
    importance: float = Field(0.0, description="Write-trigger / reflection importance 0..1.")
    confidence: float = Field(0.0, description="Confidence 0..1 at recall time.")
    status: MemoryStatus = Field("active", description="Status at recall time.")
    version: int = Field(1, ge=1, description="Version-chain position at recall time.")


class RecallLogEvent(_Event):
    """Everything one recall considered (``memory.recalls.v1``); sunk to ClickHouse ``recall_log`` and
    ``recall_candidates`` for tuning (DESIGN.md section 10). The query text is redacted."""

    query_id: str = Field(description="Id of the recall call (the response's query_id).")
    tenant_id: str = Field(description="Tenant of the caller.")
    user_id: str = Field(description="User whose memories were searched.")
    agent_id: str = Field(description="Agent that called recall.")
    query_text: str = Field(description="The query, redacted by the guard's PII rules.")
    intent: str = Field(description="Coarse intent of the query.")
    entities: tuple[str, ...] = Field((), description="Entities found in the (redacted) query.")
    window_start: AwareDatetime | None = Field(None, description="Start of the time the query named (UTC).")
    window_end: AwareDatetime | None = Field(None, description="End (exclusive) of that window (UTC).")
    wants_recent: bool = Field(False, description="The query asked for the current state.")
    top_k: int = Field(ge=1, description="Memories asked for.")
    similarity_floor: float = Field(description="Cosine floor in force.")
    time_mode: str = Field(description="Time weighting: 'step' or 'exp'.")
    order: str = Field(description="'relevance' or 'chronological'.")
    rerank: bool = Field(False, description="Whether the reranker ran.")
    token_budget: int = Field(ge=1, description="Token budget in force.")
    tokens: int = Field(0, ge=0, description="Tokens of the returned memories.")
    truncated: bool = Field(False, description="The budget cut the list.")
    candidates: tuple[RecallCandidate, ...] = Field(description="Every candidate, best first.")
    timings_ms: dict[str, float] = Field(
        default_factory=dict,
        description="Milliseconds per step: embed, parse_and_search, rerank, rank, total.",
    )
    reference_time: AwareDatetime = Field(description="'Now' of the recall (ages are measured to it).")
    recalled_at: AwareDatetime = Field(description="Wall-clock time of the recall (UTC).")


class RecallFeedbackEvent(_Event):
    """The agent's verdict on one memory a recall returned (``memory.feedback.v1``); sunk to ClickHouse
    ``recall_feedback``, one label per (query, memory): the latest wins."""

    feedback_id: str = Field(description="Deterministic id (query id + memory id).")
    query_id: str = Field(description="The recall the memory was returned by.")
    tenant_id: str = Field(description="Tenant of the caller (from the API key).")
    user_id: str = Field(description="User of the recall.")
    agent_id: str = Field(description="Agent that gave the feedback.")
    memory_id: str = Field(description="The returned memory.")
    label: FeedbackLabel = Field(
        description="'used' (it helped), 'unused', 'wrong' (false or irrelevant) or 'outdated' "
        "(no longer true)."
    )
    given_at: AwareDatetime = Field(description="When the feedback arrived (UTC); the latest label wins.")


class DeadLetter(_Event):
    """A message a stage can never process (``memory.dlq.v1``): stage, error and original bytes."""

    stage: str = Field(description="Stage that gave up, e.g. 'guard', 'ingest.embed'.")
    error_type: str = Field(description="Error class, e.g. 'ValidationError', 'JSONDecodeError'.")
    reason: str = Field(description="Human-readable reason naming the field and problem.")
    topic: str = Field(description="Topic the message came from.")
    partition: int = Field(description="Its partition.")
    offset: int = Field(description="Its offset.")
    key: str | None = Field(None, description="Its key (UTF-8, replacement chars if not).")
    original_b64: str = Field(
        description="The original value bytes, base64 (may hold unredacted data); only the first bytes "
        "when original_truncated is set."
    )
    first_seen_at: AwareDatetime = Field(description="When the stage first failed on it (UTC).")
    original_size: int | None = Field(None, ge=0, description="Bytes of the whole original value.")
    original_sha256: str | None = Field(
        None, description="SHA-256 (hex) of the whole original value, to match it against the source."
    )
    original_truncated: bool = Field(
        False,
        description="original_b64 holds only the first bytes: the whole record would not fit in one "
        "Kafka message as a dead letter (replay needs a fixed record).",
    )


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
    RecallLogEvent,
    RecallFeedbackEvent,
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
    "RecallCandidate",
    "RecallFeedbackEvent",
    "RecallLogEvent",
    "ReflectionResult",
    "SessionClosedEvent",
]
