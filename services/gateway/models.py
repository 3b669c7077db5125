"""Request and response bodies of the gateway (HTTP and MCP share them); documented field by field so
``/openapi.json`` and the MCP tool schemas describe everything.

Every request model is the single source of one operation's parameters: the HTTP route takes it as
its body (or as its query parameters) and the MCP tool of the same name is generated from it
(:mod:`services.gateway.mcp_server`), so both offer the same parameters with the same constraints,
and both refuse an unknown parameter (``extra="forbid"``).

A bound that depends on the gateway's settings (``top_k`` up to ``max_top_k``, ``limit`` up to
``history_max``) is marked in the JSON schema with :data:`MAX_FROM_SETTING` and filled in from the
running settings by :func:`finish_schema`, so the published documents state what this server enforces.
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, Literal
from zoneinfo import available_timezones

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from schemas import Memory, Provenance
from schemas.v1 import MemoryKind, MemoryStatus, MemoryType, Source
from services.gateway.errors import NOT_BLANK, SCOPE

Order = Literal["relevance", "chronological"]
Outcome = Literal["success", "failure", "abandoned", "unknown"]

MAX_FROM_SETTING = "x-maximum-from-setting"
"""JSON-schema key naming the gateway setting whose value is the field's ``maximum``."""
TIME_ZONES = "x-iana-time-zones"
"""JSON-schema key marking a field whose values are the IANA zone names (an ``enum`` in OpenAPI)."""


@cache
def time_zone_names() -> frozenset[str]:
    """Every IANA time zone name this machine knows (``zoneinfo.available_timezones``)."""
    return frozenset(available_timezones())


def _known_zone(name: str) -> str:
    if name not in time_zone_names():
        raise ValueError(f"unknown time zone {name!r}; use an IANA name such as 'Asia/Shanghai'")
    return name


TimeZone = Annotated[
    str,
    AfterValidator(_known_zone),
    WithJsonSchema({"type": "string", "minLength": 1, TIME_ZONES: True}),
]
"""An IANA time zone name, e.g. ``Asia/Shanghai``."""


def finish_schema(schema: Any, limits: dict[str, int], *, zone_enum: bool) -> Any:
    """``schema`` (an OpenAPI document or a JSON schema) with the settings-dependent markers resolved:
    ``{MAX_FROM_SETTING: name}`` becomes ``{"maximum": limits[name]}`` and a :data:`TIME_ZONES` marker
    becomes the ``enum`` of :func:`time_zone_names` (``zone_enum``; OpenAPI) or is dropped (MCP tool
    schemas, where 600 names would cost every client's context window for a check the server makes
    anyway). Pure; returns a new structure.
    """
    if isinstance(schema, list):
        return [finish_schema(item, limits, zone_enum=zone_enum) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: finish_schema(v, limits, zone_enum=zone_enum) for k, v in schema.items()}
    setting = out.pop(MAX_FROM_SETTING, None)
    if setting is not None:
        out["maximum"] = limits[setting]
    if out.pop(TIME_ZONES, None) and zone_enum:
        out["enum"] = sorted(time_zone_names())
    return out


def json_integer(value: Any) -> Any:
    """Before-validator of an integer field: JSON ``true``/``false`` and ``"3"`` are not JSON-Schema
    integers (``3.0`` is); pydantic's lax mode would take them."""
    if isinstance(value, bool | str):
        raise PydanticCustomError("int_type", "Input should be a valid integer")
    return value


def json_time(value: Any) -> Any:
    """Before-validator of a date-time field: only a string (or null); pydantic's lax mode would read a
    number as a Unix time."""
    if value is not None and not isinstance(value, str):
        raise PydanticCustomError(
            "datetime_type", "Input should be an RFC 3339 date-time string, e.g. 2026-03-02T09:30:00+08:00"
        )
    return value


class _Body(BaseModel):
    """A request: unknown fields are refused. JSON bodies take exactly what their JSON schema allows
    (:func:`json_integer`, :func:`json_time`, ``StrictBool``, ``StrictFloat``), so ``0`` is not a boolean,
    ``false`` not a count and a number not a time; query-parameter models stay lax (query values
    arrive as strings)."""

    model_config = ConfigDict(extra="forbid")


def fields(body: BaseModel) -> dict[str, Any]:
    """A request's fields as keyword arguments for the service (one level: values stay as validated)."""
    return {name: getattr(body, name) for name in type(body).model_fields}


UserIdField = Annotated[
    str,
    Field(min_length=1, max_length=256, pattern=NOT_BLANK, description="End user the memories are about."),
]
SessionIdField = Annotated[
    str,
    Field(min_length=1, max_length=256, pattern=NOT_BLANK, description="Conversation or task session."),
]
MemoryIdField = Annotated[
    str, Field(min_length=1, max_length=256, description="Memory id (UUID) from recall or history.")
]


MAX_TAGS = 64
"""Most tags on one retained event (ours: labels, not content; a 3 MB list of tags once reached the
broker's record limit and failed as an internal error)."""
TagField = Annotated[
    str, Field(min_length=1, max_length=128, pattern=NOT_BLANK, description="A label, 1-128 characters.")
]


class RetainRequest(_Body):
    """Something that happened, to remember; it is published to ``memory.interactions.v1`` and
    passes the guard before anything is stored."""

    user_id: UserIdField
    session_id: SessionIdField
    content: str = Field(
        min_length=1,
        max_length=100_000,
        pattern=NOT_BLANK,
        description="The text: a turn, a note, a tool result; must contain a non-whitespace character.",
    )
    source: Source = Field("user", description="Who produced it; sets the initial confidence (source trust).")
    occurred_at: AwareDatetime | None = Field(
        None, description="When it happened, with the user's own UTC offset; default now (UTC)."
    )
    tags: list[TagField] = Field(
        default_factory=list, max_length=MAX_TAGS, description=f"Labels such as 'health'; at most {MAX_TAGS}."
    )
    scope: str = Field(
        "global",
        pattern=SCOPE,
        description="'global' (every agent of the tenant) or 'agent:<id>' (that agent only).",
    )
    external_ref: str | None = Field(None, max_length=512, description="Reference in the caller's system.")
    event_id: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        description="Idempotency key; default a new UUID4. Resending "
        "the same id never creates a second memory.",
    )
    speaker: str | None = Field(None, max_length=256, description="Display name of the speaker.")
    agent_id: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        description="Agent that produced it (ignored for a per-agent key).",
    )

    _times = field_validator("occurred_at", mode="before")(json_time)


class Accepted(BaseModel):
    """An event was published to Kafka (acknowledged by the broker); processing is asynchronous."""

    event_id: str = Field(description="Id of the published event.")
    status: Literal["accepted"] = Field("accepted", description="Always 'accepted'.")


class RecallRequest(_Body):
    """A recall query (DESIGN.md section 5). The time window is ``[time_from, time_to)``: when both are
    sent, ``time_from`` must be before ``time_to`` (else 400 ``invalid_request`` naming ``time_from``;
    JSON Schema cannot state a rule between two fields, so the server checks it)."""

    query: str = Field(
        min_length=1,
        max_length=10_000,
        pattern=NOT_BLANK,
        description="Natural-language query; must contain a non-whitespace character.",
    )
    user_id: UserIdField
    top_k: int | None = Field(
        None,
        ge=1,
        json_schema_extra={MAX_FROM_SETTING: "max_top_k"},
        description="How many memories to return: 1..maximum (15 unless configured); default 5.",
    )
    types: list[MemoryType] | None = Field(None, description="Memory layers to search; default all.")
    kinds: list[MemoryKind] | None = Field(
        None,
        description="Granularity: 'turn', 'fact', 'lesson', 'episode'. Default turns, facts and lessons: "
        "whole-session episode summaries are long and broad, ask for them explicitly (or use history).",
    )
    scopes: list[str] | None = Field(
        None, description="Scopes to search; default every scope the key may read."
    )
    tags_any: list[str] | None = Field(None, description="Only memories with at least one of these tags.")
    tags_exclude: list[str] | None = Field(None, description="Never memories with any of these tags.")
    time_from: AwareDatetime | None = Field(
        None, description="Only memories created at or after this time; before time_to when both are sent."
    )
    time_to: AwareDatetime | None = Field(
        None, description="Only memories created before this time; after time_from when both are sent."
    )
    reference_time: AwareDatetime | None = Field(
        None, description="'Now' for time weighting (ages are measured to it); default the current time."
    )
    order: Order = Field(
        "relevance", description="'relevance' (best first) or 'chronological' (oldest first)."
    )
    include_superseded: StrictBool = Field(
        False,
        description="Also return superseded (older) versions, marked status 'superseded' with "
        "superseded_by; by default only the current version of each version chain is returned.",
    )
    time_zone: TimeZone | None = Field(
        None,
        description="The caller's IANA time zone (e.g. 'Asia/Shanghai') for 'yesterday', 'last week'.",
    )
    token_budget: int | None = Field(
        None, ge=1, le=100_000, description="Most tokens of memory text to return (default 2,000)."
    )
    rerank: StrictBool | None = Field(
        None, description="Rerank candidates with the reranker (default: settings)."
    )
    recency: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Blend recency into the ranking: 'auto' when the query asks for the current state "
        "('latest', 'now'), or always 'on' / 'off'.",
    )

    _ints = field_validator("top_k", "token_budget", mode="before")(json_integer)
    _times = field_validator("time_from", "time_to", "reference_time", mode="before")(json_time)


class ReflectRequest(_Body):
    """A session or task has ended: triggers episode consolidation and semantic abstraction (HTTP body
    of ``POST /v1/sessions/{session_id}/close``)."""

    user_id: UserIdField
    outcome: Outcome = Field("unknown", description="How the task ended.")
    feedback: str | None = Field(None, max_length=10_000, description="User feedback text.")
    feedback_score: StrictFloat | None = Field(None, ge=-1.0, le=1.0, description="-1 (bad) .. 1 (good).")
    task: str | None = Field(None, max_length=2_000, description="What the session was for.")
    event_count: int | None = Field(
        None,
        ge=0,
        description="Interaction events the session produced: reflection waits for them, at most the "
        "reflect stage's grace period (HINDSIGHT_REFLECT_CLOSE_GRACE_S, 30 s by default).",
    )

    _ints = field_validator("event_count", mode="before")(json_integer)


class CloseSessionRequest(ReflectRequest):
    """``reflect`` over MCP: the session id and the body of ``POST /v1/sessions/{session_id}/close``."""

    session_id: SessionIdField


class HistoryRequest(_Body):
    """A user's memories in chronological order (the query parameters of ``GET /v1/memories``)."""

    user_id: UserIdField
    session_id: str | None = Field(None, min_length=1, max_length=256, description="Only this session.")
    types: list[MemoryType] | None = Field(None, description="Only these layers.")
    include_inactive: bool = Field(True, description="Include expired and superseded memories.")
    limit: int = Field(
        100,
        ge=1,
        json_schema_extra={MAX_FROM_SETTING: "history_max"},
        description="At most this many (the newest), oldest first; 1..maximum (1,000 unless configured).",
    )
    memory_id: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        description="Only this memory's version chain (walked both ways), oldest first.",
    )


class MemoryRequest(_Body):
    """One memory by id (``GET /v1/memories/{memory_id}``)."""

    memory_id: MemoryIdField


class ForgetOptions(_Body):
    """How to forget (the query parameters of ``DELETE /v1/memories/{memory_id}``)."""

    hard: bool = Field(
        False,
        description="Delete instead of expiring (expired stays in history). Either way every memory "
        "derived from it is rebuilt without it and its events are tombstoned.",
    )


class ForgetRequest(ForgetOptions):
    """``forget`` over MCP: the memory id and the options of ``DELETE /v1/memories/{memory_id}``."""

    memory_id: MemoryIdField


class Scores(BaseModel):
    """Why a memory was recalled (DESIGN.md sections 4-5; formula in ``hindsight.recall.rank``)."""

    similarity: float = Field(description="Cosine similarity of the memory to the query, -1..1.")
    relevance: float = Field(
        description="Reciprocal-rank fusion of the dense, lexical (and rerank) lists, 0..1."
    )
    dense_rank: int | None = Field(None, description="Rank in the dense (embedding) list; null if absent.")
    lexical_rank: int | None = Field(None, description="Rank in the lexical (BM25) list; null if absent.")
    rerank: float | None = Field(None, description="Reranker score, when reranking ran.")
    time_weight: float = Field(
        description="Time weight from the memory's age: 1.0 / 0.8 / 0.6 (step) or exp."
    )
    in_time_window: bool = Field(False, description="Created inside the time the query names.")
    final: float = Field(description="Score used for ranking (relevance blended with time, boosts).")


class MemoryView(BaseModel):
    """A memory as the gateway shows it."""

    id: str = Field(description="Memory id (UUID).")
    user_id: str = Field(description="End user the memory is about.")
    content: str = Field(description="Memory text (redacted by the guard).")
    type: MemoryType = Field(description="working / episodic / semantic.")
    kind: MemoryKind = Field("turn", description="'turn', 'fact', 'lesson' or 'episode'.")
    source: Source = Field(description="Who said or produced it.")
    speaker: str | None = Field(None, description="Display name of the speaker.")
    scope: str = Field("global", description="'global' or 'agent:<id>'.")
    session_id: str = Field(description="Session it came from.")
    created_at: AwareDatetime = Field(description="When the remembered thing happened (user's offset).")
    valid_from: AwareDatetime | None = Field(None, description="Start of validity (event time).")
    valid_to: AwareDatetime | None = Field(
        None, description="End of validity: when a newer version replaced it, or when it was forgotten."
    )
    status: MemoryStatus = Field(
        "active", description="active / superseded / merged / expired / quarantined."
    )
    version: int = Field(1, description="Position in the version chain (1 = first).")
    parent_id: str | None = Field(None, description="Previous version, if any.")
    superseded_by: str | None = Field(None, description="Next (newer) version, if any.")
    merged_into: str | None = Field(None, description="The memory kept when this duplicate was merged.")
    related_ids: list[str] = Field(default_factory=list, description="Memories it refines or is refined by.")
    conflicts_with: list[str] = Field(
        default_factory=list, description="Active memories it conflicts with (the judge was unsure)."
    )
    entity: str | None = Field(None, description="Facts: who or what the fact is about.")
    attribute: str | None = Field(None, description="Facts: the attribute (e.g. 'employer').")
    value: str | None = Field(None, description="Facts: the value stated.")
    tags: list[str] = Field(default_factory=list, description="Labels such as 'health'.")
    confidence: float = Field(description="0..1 confidence.")
    provenance: Provenance = Field(
        Provenance(), description="Events, external references and memories it rests on."
    )
    merged_ids: list[str] = Field(
        default_factory=list,
        description="Duplicates merged into it (the revision judge found the same information; each "
        "has status 'merged' and merged_into = this id).",
    )
    merged_provenance: Provenance = Field(
        Provenance(),
        description="The events and external references of the merged duplicates: what else this "
        "memory stands for. 'provenance' stays the memory's own, so a citation stays precise.",
    )

    @model_validator(mode="before")
    @classmethod
    def _merged_provenance(cls, data: Any) -> Any:
        """A stored payload keeps the absorbed provenance as ``merged_event_ids`` / ``merged_refs``
        (:meth:`hindsight.chains.ChainEditor.merge`); show it as ``merged_provenance``."""
        if isinstance(data, dict) and "merged_provenance" not in data:
            events, refs = data.get("merged_event_ids") or (), data.get("merged_refs") or ()
            if events or refs:
                data = {**data, "merged_provenance": {"event_ids": events, "external_refs": refs}}
        return data

    @classmethod
    def from_payload(cls, memory_id: str, payload: dict[str, Any]) -> MemoryView:
        """The view of a vector-store payload (see :mod:`hindsight.records`)."""
        return cls.model_validate({**payload, "id": memory_id})


class Evidence(BaseModel):
    """A turn a fact was extracted from."""

    id: str = Field(description="Turn memory id.")
    content: str = Field(description="The turn's text.")
    speaker: str | None = Field(None, description="Display name of the speaker.")
    created_at: AwareDatetime = Field(description="When it was said.")
    status: MemoryStatus = Field("active", description="The turn's status.")


class RecalledMemory(MemoryView):
    """A recalled memory with its scores and rank (the "memory usage report")."""

    scores: Scores = Field(description="Similarity, time weight and final score.")
    rank: int = Field(ge=1, description="1-based position in the response.")
    tokens: int = Field(
        0, ge=0, description="Tokens of this memory's text and its evidence (counted for the budget)."
    )
    duplicates: list[str] = Field(default_factory=list, description="Near-identical memories folded into it.")
    trimmed: bool = Field(
        False,
        description="The content is an excerpt cut to the token budget (the memory alone was larger than "
        "the budget); get the whole memory by id.",
    )
    evidence: list[Evidence] = Field(
        default_factory=list, description="Facts: the turns the fact was extracted from (its evidence)."
    )


class ConflictPair(BaseModel):
    """Two active memories the revision judge could not reconcile: the agent decides which holds."""

    memory_ids: list[str] = Field(description="[returned memory, the memory it conflicts with].")
    other: MemoryView = Field(description="The memory it conflicts with (it may not be among 'memories').")


class RecallResponse(BaseModel):
    """Result of a recall; its log (``memory.recalls.v1``: every candidate, which were returned) is
    published after the answer and feeds the access log."""

    query_id: str = Field(description="Id of this recall (its log and access rows carry it).")
    memories: list[RecalledMemory] = Field(description="At most top_k memories, in the requested order.")
    tokens: int = Field(0, ge=0, description="Tokens of all returned memory texts (<= token_budget).")
    truncated: bool = Field(False, description="The token budget cut the list short.")
    time_window: list[AwareDatetime] | None = Field(
        None, description="[start, end) of the time expression the query named, in UTC, if any."
    )
    entities: list[str] = Field(default_factory=list, description="Entities found in the query.")
    conflicts: list[ConflictPair] = Field(
        default_factory=list,
        description="Returned memories that conflict with another active memory (reconcile's judge "
        "could not tell which holds): both are kept, the agent decides.",
    )


class FeedbackRequest(_Body):
    """Which memories a recall returned the agent actually used (DESIGN.md section 10). Each id must be
    one the recall returned; one label per memory. Returned memories left out count as unused. At
    least one list is non-empty (the JSON schema says so with ``anyOf``; the service answers 400
    otherwise)."""

    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {"required": [name], "properties": {name: {"minItems": 1}}}
                for name in ("used", "unused", "wrong", "outdated")
            ]
        }
    )

    used: list[str] = Field(
        default_factory=list, max_length=100, description="Ids of returned memories the agent used."
    )
    unused: list[str] = Field(
        default_factory=list, max_length=100, description="Ids of returned memories it did not use."
    )
    wrong: list[str] = Field(
        default_factory=list,
        max_length=100,
        description="Ids of returned memories that were false or off-topic.",
    )
    outdated: list[str] = Field(
        default_factory=list, max_length=100, description="Ids of returned memories that are no longer true."
    )


QueryIdField = Annotated[
    str, Field(min_length=1, max_length=64, description="query_id of the recall response.")
]


class FeedbackToolRequest(FeedbackRequest):
    """``feedback`` over MCP: the recall's query id and the body of
    ``POST /v1/recall/{query_id}/feedback``. Its input schema has no top-level ``anyOf`` (several
    function-calling clients refuse one); the service still answers an all-empty call with an error."""

    model_config = ConfigDict(json_schema_extra=None)

    query_id: QueryIdField


class FeedbackResult(BaseModel):
    """Feedback recorded: one label per (query, memory); sending it again changes nothing."""

    query_id: str = Field(description="The recall.")
    labels: dict[str, str] = Field(description="Memory id -> label recorded (used, unused, wrong, outdated).")


class ForgetResult(BaseModel):
    """A memory was forgotten."""

    id: str = Field(description="The memory id.")
    status: Literal["expired", "deleted"] = Field(
        description="'expired' (soft: kept for history, never recalled) or 'deleted' (hard)."
    )
    derived: list[str] = Field(
        default_factory=list,
        description="Memories derived from it (episodes, facts, lessons) rebuilt without it, or forgotten "
        "with it when it was their only source.",
    )
    tombstoned_events: int = Field(
        0, ge=0, description="Its source events, tombstoned: re-sending them does not bring it back."
    )
    also_forgotten: list[str] = Field(
        default_factory=list,
        description="Memories forgotten with it: facts extracted from it and duplicates merged into it.",
    )


class UserRequest(_Body):
    """One end user (``DELETE /v1/users/{user_id}``, ``GET /v1/users/{user_id}/erasure``)."""

    user_id: UserIdField


class ErasureReport(BaseModel):
    """What is left of a user in each store (``forget_user`` erases it all; tenant-wide keys only)."""

    user_id: str = Field(description="The user.")
    complete: bool = Field(description="True when nothing of the user remains in any store below.")
    remaining: dict[str, int] = Field(
        description="Store -> what of the user remains: 'vector_store' (memories, any status), 'redis' "
        "(working memory, session ledger and reflection keys), 'guard_claims' (the guard's claim verdicts "
        "and entries of the user's events), 'access_log', 'quarantine' and 'analytics' (recall log, "
        "candidates, feedback, memory inventory) ClickHouse rows."
    )
    forgotten_at: AwareDatetime | None = Field(
        None, description="When the user was forgotten: events of the user that happened before are dropped."
    )


class MemoryDetail(BaseModel):
    """One memory and its whole version chain (walked both ways)."""

    memory: Memory = Field(description="The full memory record.")
    chain: list[MemoryView] = Field(
        description="Every version of its chain, newest first: the newer versions (superseded_by), the "
        "memory itself, then the older ones (parent_id)."
    )


class HistoryResponse(BaseModel):
    """A user's memories in chronological order."""

    user_id: str = Field(description="The user.")
    memories: list[MemoryView] = Field(description="Oldest first (by created_at), with status and version.")
    truncated: bool = Field(description="True when more memories matched than 'limit'.")


class HealthResponse(BaseModel):
    """Liveness of the gateway's dependencies."""

    status: Literal["ok", "unavailable"] = Field(description="'ok' when every check passed.")
    checks: dict[str, str] = Field(description="Check name -> 'ok' or the failure.")
    tuned: dict[str, Any] = Field(
        default_factory=dict,
        description="Tuned settings each service of this process loaded at start-up (version, values, file).",
    )


class QuarantineListRequest(_Body):
    """Which quarantined items to list (admin keys only)."""

    user_id: str | None = Field(None, min_length=1, max_length=256, description="Only this user's items.")
    status: Literal["pending", "released", "rejected"] | None = Field(
        "pending", description="Only items with this review status (null: all)."
    )
    limit: int = Field(100, ge=1, le=1000, description="At most this many, newest first.")


class QuarantineItemRequest(_Body):
    """One quarantined item (``POST /v1/quarantine/{item_id}/release|reject``; admin keys only)."""

    item_id: str = Field(
        min_length=1, max_length=256, description="Quarantine item id from GET /v1/quarantine."
    )


class QuarantineView(BaseModel):
    """A quarantined (or blocked) event as an operator reviews it; every text is redacted."""

    id: str = Field(description="Item id (for release / reject).")
    user_id: str = Field(description="User the event concerned.")
    agent_id: str = Field(description="Agent that sent it.")
    session_id: str = Field(description="Its session.")
    event_id: str = Field(description="The interaction event id.")
    stage: str = Field(description="'guard', or 'ingest.embed' for the consistency check.")
    verdict: Literal["block", "quarantine"] = Field(
        description="'block' (a secret: no content kept) or 'quarantine'."
    )
    reasons: list[str] = Field(
        description="Why, e.g. 'poisoning:indirect_injection', 'secret:password', 'burst:claim'."
    )
    source: str = Field(description="user / assistant / tool / system.")
    trust: float | None = Field(None, description="Source trust the memory would have had.")
    tool_name: str | None = Field(None, description="Tool that produced it (redacted).")
    external_ref: str | None = Field(None, description="The external_ref it came with (redacted).")
    scores: dict[str, float] = Field(default_factory=dict, description="Detector scores behind the reasons.")
    content: str | None = Field(None, description="Redacted content; null when blocked.")
    findings: dict[str, int] = Field(
        default_factory=dict, description="PII/secret types found and how often."
    )
    quarantined_at: AwareDatetime = Field(description="When it was quarantined (UTC).")
    status: Literal["pending", "released", "rejected"] = Field(description="Review status.")
    reviewed_by: str | None = Field(None, description="Who released or rejected it (key's tenant/agent).")
    reviewed_at: AwareDatetime | None = Field(None, description="When.")


class QuarantineList(BaseModel):
    """Quarantined items of the caller's tenant."""

    items: list[QuarantineView] = Field(description="Newest first.")
