"""The memory service core that the HTTP routes and the MCP tools both call.

Writes go through Kafka: ``retain`` publishes an :class:`~schemas.InteractionEvent` and ``reflect``
a :class:`~schemas.SessionClosedEvent`, so every memory passes the guard (DESIGN.md section 9).
Reads (``recall``, ``get``, ``history``) go to the vector store with the caller's tenant pushed
into the filter; the tenant always comes from the API key (:class:`Principal`), never from the
request. ``forget`` is the one store write: a soft expiry (or a hard delete) of the caller's own
memory. Store calls are synchronous, so they run in worker threads.

Recall answers without waiting for its recall log: one event per recall goes to ``memory.recalls.v1``
through a :class:`~hindsight.publisher.BackgroundPublisher` (:attr:`MemoryService.access_log`),
which the gateway's lifespan drains on shutdown (see its docstring for what a crash loses and why
that is acceptable for access and tuning logs). The access log (what eviction counts) and the tuning
tables are both sunk from it.
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from hindsight.analytics.store import RecallOwner
from hindsight.chains import ChainEditor, Loader, ids_of, walk_chain
from hindsight.errors import OutputRefusedError
from hindsight.ids import stable_id
from hindsight.pii import redact
from hindsight.publisher import BackgroundPublisher
from hindsight.recall import RecallParams, RecallResult, recall
from hindsight.recall.trace import trace
from hindsight.records import from_payload, public_view
from hindsight.stores.vector import MemoryFilter, VectorRecord
from schemas import (
    InteractionEvent,
    RecallCandidate,
    RecallFeedbackEvent,
    RecallLogEvent,
    SessionClosedEvent,
    Topic,
    partition_key,
)
from schemas.v1 import FeedbackLabel
from services.gateway.auth import Principal
from services.gateway.errors import (
    ConflictError,
    ForbiddenError,
    InvalidRequestError,
    NotFoundError,
    OutOfRangeError,
    PayloadTooLargeError,
    RecallNotFoundError,
)
from services.gateway.forget import ForgetService
from services.gateway.metrics import LOG_BUILD, RECALLED, observe
from services.gateway.models import (
    Accepted,
    ConflictPair,
    Evidence,
    FeedbackResult,
    ForgetResult,
    HistoryResponse,
    MemoryDetail,
    MemoryView,
    Order,
    Outcome,
    RecalledMemory,
    RecallResponse,
    Scores,
)

if TYPE_CHECKING:
    from hindsight.recall.rank import RecalledMemory as RankedMemory
    from hindsight.runtime import Resources
    from schemas.v1 import MemoryType, Source
    from services.gateway.settings import GatewaySettings

__all__ = ["MemoryService", "Principal"]

DEFAULT_AGENT = "gateway"
"""``agent_id`` of events published for a tenant-wide key that names no agent."""
MAX_CHAIN = 100
"""Longest version chain ``get`` walks (a guard against a cycle in ``parent_id``)."""
_SCROLL_PAGE = 256


M = TypeVar("M", bound=BaseModel)


def _build(model: type[M], **fields: Any) -> M:
    """``model(**fields)``, a validation failure as :class:`InvalidRequestError` naming the field."""
    try:
        return model(**fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or model.__name__
        raise InvalidRequestError(
            f"invalid {field}: {first['msg']}", field=field, fix=f"send a valid '{field}' ({first['msg']})"
        ) from exc


def _aware(name: str, value: datetime | None) -> None:
    if value is not None and value.utcoffset() is None:
        raise InvalidRequestError(
            f"{name} has no time zone",
            field=name,
            fix=f"send {name} with a UTC offset, e.g. 2026-03-02T09:30:00+08:00",
        )


def wire_memory(hit: RankedMemory) -> RecalledMemory:
    """The response view of one recalled memory (its record, the evidence turns of a fact, scores, rank
    and tokens).

    Raises:
        pydantic.ValidationError: the stored payload is not a memory record.
    """
    return RecalledMemory.model_validate(  # one validation of the payload (extra keys ignored)
        {
            **hit.payload,
            "id": hit.id,
            "evidence": [
                Evidence.model_validate({**payload, "id": turn_id}) for turn_id, payload in hit.evidence
            ],
            "scores": Scores(
                similarity=hit.similarity,
                relevance=hit.relevance,
                dense_rank=hit.dense_rank,
                lexical_rank=hit.lexical_rank,
                rerank=hit.rerank_score,
                time_weight=hit.time_weight,
                in_time_window=hit.in_time_window,
                final=hit.final_score,
            ),
            "rank": hit.rank,
            "tokens": hit.tokens,
            "duplicates": list(hit.duplicates),
            "trimmed": hit.trimmed,
        }
    )


class RecentRecalls:
    """The last ``size`` recalls of this process (query id -> tenant, user, returned ids), so feedback
    right after a recall is checked without waiting for its log to reach ClickHouse. Bounded (LRU)."""

    def __init__(self, size: int = 10_000) -> None:
        self._size = size
        self._items: OrderedDict[str, tuple[str, RecallOwner]] = OrderedDict()

    def add(self, tenant_id: str, query_id: str, user_id: str, returned: Sequence[str]) -> None:
        """Remember one recall."""
        self._items[query_id] = (tenant_id, RecallOwner(user_id, frozenset(returned)))
        if len(self._items) > self._size:
            self._items.popitem(last=False)

    def get(self, tenant_id: str, query_id: str) -> RecallOwner | None:
        """The recall, if this process ran it for ``tenant_id`` (another tenant's id: ``None``)."""
        found = self._items.get(query_id)
        if found is None or found[0] != tenant_id:
            return None
        return found[1]


DEFAULT_RECALL_KINDS = ("turn", "fact", "lesson")
"""What recall searches unless the caller asks for other kinds: precise memories (turns, the facts
drawn from them, lessons from finished tasks); episode summaries are broad and long (hundreds of
tokens) and answer "what happened in that session" (ask for kind 'episode', or use history)."""


@dataclass(frozen=True)
class RecallPlan:
    """One validated recall request as the pipeline runs it (see :meth:`MemoryService.plan_recall`)."""

    query: str
    filter: MemoryFilter
    params: RecallParams
    rerank: bool
    reference_time: datetime | None
    time_zone: str | None


class MemoryService:
    """Retain, recall, reflect, forget, get and history for authenticated principals.

    Args:
        resources: the process's clients (broker, vector store, embedder).
        settings: gateway knobs (top_k bounds, similarity floor, time mode, access-log buffer).
    """

    def __init__(self, resources: Resources, settings: GatewaySettings) -> None:
        self._resources = resources
        self._settings = settings
        self._recent = RecentRecalls()
        self.access_log = BackgroundPublisher(resources.broker, "access", capacity=settings.access_log_buffer)
        """Access events and recall logs, sent off the response path (run it with ``running()``)."""

    # -- scopes ---------------------------------------------------------------------------------

    @staticmethod
    def _check_scope(principal: Principal, scope: str, field: str = "scope") -> None:
        allowed = principal.allowed_scopes()
        if allowed is not None and scope not in allowed:
            raise ForbiddenError(
                f"this API key may not use scope {scope!r}", field=field, fix=f"use one of {list(allowed)}"
            )

    def _read_scopes(self, principal: Principal, scopes: Sequence[str] | None) -> tuple[str, ...] | None:
        allowed = principal.allowed_scopes()
        if scopes is None:
            return allowed
        for scope in scopes:
            self._check_scope(principal, scope, "scopes")
        return tuple(scopes)

    @staticmethod
    def _agent(principal: Principal, agent_id: str | None) -> str:
        return principal.agent_id or agent_id or DEFAULT_AGENT

    # -- writes through Kafka --------------------------------------------------------------------

    async def retain(
        self,
        principal: Principal,
        *,
        user_id: str,
        content: str,
        session_id: str,
        source: Source = "user",
        occurred_at: datetime | None = None,
        tags: Sequence[str] = (),
        scope: str = "global",
        external_ref: str | None = None,
        event_id: str | None = None,
        speaker: str | None = None,
        agent_id: str | None = None,
    ) -> Accepted:
        """Publish one interaction to ``memory.interactions.v1`` (keyed ``tenant:user``) and wait for
        the broker's acknowledgement. Nothing is stored here: the guard and ingest stages decide.

        Raises:
            InvalidRequestError: a field is invalid (empty content, naive ``occurred_at``, ...).
            ForbiddenError: a per-agent key used another agent's scope.
            PayloadTooLargeError: the event is larger than the broker's record limit (HTTP 413).
            StoreUnavailableError: Kafka refused or timed out (retry: same ``event_id`` is safe).
        """
        with observe("retain"):
            _aware("occurred_at", occurred_at)
            self._check_scope(principal, scope)
            event = _build(
                InteractionEvent,
                tenant_id=principal.tenant_id,
                user_id=user_id,
                agent_id=self._agent(principal, agent_id),
                session_id=session_id,
                event_id=event_id or str(uuid.uuid4()),
                occurred_at=occurred_at or datetime.now(UTC),
                source=source,
                content=content,
                speaker=speaker,
                scope=scope,
                tags=tuple(tags),
                external_ref=external_ref,
            )
            publisher = self._resources.publisher()
            publisher.send(Topic.INTERACTIONS, partition_key(event.tenant_id, event.user_id), event)
            try:
                await publisher.flush()
            except OutputRefusedError as exc:
                raise PayloadTooLargeError(
                    f"the event is larger than the broker accepts ({exc})",
                    field="content",
                    fix="send a shorter content (or fewer tags); split a long document into several retains",
                ) from exc
            return Accepted(event_id=event.event_id)

    async def reflect(
        self,
        principal: Principal,
        *,
        user_id: str,
        session_id: str,
        outcome: Outcome = "unknown",
        feedback: str | None = None,
        feedback_score: float | None = None,
        task: str | None = None,
        event_count: int | None = None,
        agent_id: str | None = None,
    ) -> Accepted:
        """Publish a session close to ``memory.sessions.v1``: episode consolidation and semantic
        abstraction follow asynchronously.

        Raises:
            InvalidRequestError: a field is invalid (``feedback_score`` outside -1..1, ...).
            StoreUnavailableError: Kafka refused or timed out.
        """
        with observe("reflect"):
            event = _build(
                SessionClosedEvent,
                tenant_id=principal.tenant_id,
                user_id=user_id,
                agent_id=self._agent(principal, agent_id),
                session_id=session_id,
                event_id=str(uuid.uuid4()),
                closed_at=datetime.now(UTC),
                task=task,
                outcome=outcome,
                feedback=feedback,
                feedback_score=feedback_score,
                event_count=event_count,
            )
            publisher = self._resources.publisher()
            publisher.send(Topic.SESSIONS, partition_key(event.tenant_id, event.user_id), event)
            await publisher.flush()
            return Accepted(event_id=event.event_id)

    # -- reads --------------------------------------------------------------------------------------

    def _top_k(self, top_k: int | None) -> int:
        default, most = self._settings.default_top_k, self._settings.max_top_k
        value = default if top_k is None else top_k
        if isinstance(value, bool) or not 1 <= value <= most:
            raise OutOfRangeError(
                f"top_k={top_k!r} is out of range",
                field="top_k",
                fix=f"ask for 1..{most} memories (default {default})",
            )
        return value

    def plan_recall(
        self,
        principal: Principal,
        *,
        query: str,
        user_id: str,
        top_k: int | None = None,
        types: Sequence[MemoryType] | None = None,
        kinds: Sequence[str] | None = None,
        scopes: Sequence[str] | None = None,
        tags_any: Sequence[str] | None = None,
        tags_exclude: Sequence[str] | None = None,
        time_from: datetime | None = None,
        time_to: datetime | None = None,
        reference_time: datetime | None = None,
        order: Order = "relevance",
        include_superseded: bool = False,
        time_zone: str | None = None,
        token_budget: int | None = None,
        rerank: bool | None = None,
        recency: Literal["auto", "on", "off"] = "auto",
    ) -> RecallPlan:
        """Validate a recall request into the filter (tenant from the key) and knobs the pipeline
        runs; the arguments are those of :meth:`recall`.

        Raises:
            InvalidRequestError: empty ``query`` or ``user_id``, naive times.
            OutOfRangeError: ``top_k`` outside 1..max_top_k.
            ForbiddenError: a per-agent key asked for another agent's scope.
        """
        if not query or not query.strip():
            raise InvalidRequestError(
                "query is empty", field="query", fix="send the question to recall memories for"
            )
        if not user_id or not user_id.strip():
            raise InvalidRequestError("user_id is empty", field="user_id", fix="send the user's id")
        k = self._top_k(top_k)
        for name, value in (
            ("time_from", time_from),
            ("time_to", time_to),
            ("reference_time", reference_time),
        ):
            _aware(name, value)
        if time_from is not None and time_to is not None and time_from >= time_to:
            raise InvalidRequestError(
                "time_from is not before time_to",
                field="time_from",
                fix="send time_from earlier than time_to (the window is [time_from, time_to))",
            )
        flt = MemoryFilter(
            tenant_id=principal.tenant_id,
            user_id=user_id,
            scopes=self._read_scopes(principal, scopes),
            types=types,
            kinds=DEFAULT_RECALL_KINDS if kinds is None else kinds,
            statuses=("active", "superseded") if include_superseded else ("active",),
            tags_any=tags_any,
            tags_exclude=tags_exclude,
            created_from=time_from,
            created_to=time_to,
        )
        use_rerank = self._resources.settings.reranker.enabled if rerank is None else rerank
        params = RecallParams(
            top_k=k,
            candidates=max(self._settings.candidates, k),
            similarity_floor=self._settings.similarity_floor,
            time_mode=self._settings.time_mode,
            order=order,
            rerank=use_rerank,
            rerank_top_n=self._resources.settings.reranker.top_n,
            token_budget=token_budget or self._settings.token_budget,
            recency=recency,
        )
        return RecallPlan(query, flt, params, use_rerank, reference_time, time_zone)

    async def run_recall(self, plan: RecallPlan) -> RecallResult:
        """Run the recall pipeline for ``plan`` (no response building, no access events).

        Raises:
            InvalidRequestError: unknown ``time_zone``.
            StoreUnavailableError / ModelUnavailableError: the store or the embedder failed.
        """
        try:
            return await recall(
                plan.query,
                plan.filter,
                store=self._resources.vector_store(),
                embedder=self._resources.embedder(),
                lexical=self._resources.lexical(),
                reranker=self._resources.reranker() if plan.rerank else None,
                params=plan.params,
                reference_time=plan.reference_time,
                time_zone=plan.time_zone,
            )
        except ValueError as exc:  # unknown time zone (the message names it)
            raise InvalidRequestError(str(exc), field="time_zone", fix="use an IANA zone name") from exc

    async def recall(
        self,
        principal: Principal,
        *,
        query: str,
        user_id: str,
        **options: Any,
    ) -> RecallResponse:
        """Recall the caller's tenant's memories of ``user_id`` most relevant to ``query``, with the
        scores that explain each. Queues one :class:`~schemas.RecallLogEvent` (every candidate, its
        scores and outcome, latency per step, the redacted query; its returned candidates are the
        access log's rows) for tuning and eviction: built on the event loop's next turn, after this
        returns, and sent in the background (the answer waits for neither); ``options`` are those
        of :meth:`plan_recall`.

        Raises:
            InvalidRequestError: empty ``query`` or ``user_id``, naive times.
            OutOfRangeError: ``top_k`` outside 1..max_top_k.
            ForbiddenError: a per-agent key asked for another agent's scope.
            StoreUnavailableError / ModelUnavailableError: the store or the embedder failed.
        """
        with observe("recall"):
            started = time.perf_counter()
            plan = self.plan_recall(principal, query=query, user_id=user_id, **options)
            result, params = await self.run_recall(plan), plan.params
            query_id = str(uuid.uuid4())
            memories = [wire_memory(hit) for hit in result.memories]
            window = result.parsed.window
            response = RecallResponse(
                query_id=query_id,
                memories=memories,
                tokens=result.tokens,
                truncated=result.truncated,
                time_window=None if window is None else [window.start, window.end],
                entities=list(result.parsed.entities),
                conflicts=[
                    ConflictPair(
                        memory_ids=[c.memory_id, c.other_id],
                        other=MemoryView.from_payload(c.other_id, c.other),
                    )
                    for c in result.conflicts
                ],
            )
            served_ms = (time.perf_counter() - started) * 1000
            self._recent.add(principal.tenant_id, query_id, user_id, [m.id for m in memories])
            # the log is built once the answer is on its way (the next turn of the event loop)
            asyncio.get_running_loop().call_soon(
                functools.partial(
                    self._log_recall,
                    principal,
                    query_id=query_id,
                    query=query,
                    result=result,
                    user_id=user_id,
                    params=params,
                    served_ms=served_ms,
                )
            )
            RECALLED.inc(len(memories))
            return response

    async def explain(
        self, principal: Principal, *, query: str, user_id: str, **options: Any
    ) -> tuple[RecallResult, RecallParams, list[RecallCandidate]]:
        """What :meth:`recall` would do for this query, with every candidate's scores and outcome
        (:func:`hindsight.recall.trace.trace`), without logging an access: the console's "why".

        Raises:
            The errors of :meth:`recall`.
        """
        with observe("explain"):
            plan = self.plan_recall(principal, query=query, user_id=user_id, **options)
            result, params = await self.run_recall(plan), plan.params
            return result, params, trace(result)

    def _log_recall(
        self,
        principal: Principal,
        *,
        query_id: str,
        query: str,
        user_id: str,
        result: RecallResult,
        params: RecallParams,
        served_ms: float,
    ) -> None:
        """Queue the :class:`~schemas.RecallLogEvent` of the whole recall on :attr:`access_log` (sent in
        the background: the answer does not wait for the broker; see
        :class:`~hindsight.publisher.BackgroundPublisher` for what a crash can lose). It is the access
        log's source too: its ``returned`` candidates are the accesses (one record per recall, not one
        per memory; :mod:`services.accesslog.stage`).

        Runs as an event-loop callback scheduled by :meth:`recall`, so the HTTP answer is written
        before it (the candidates' trace and the query's redaction cost ~0.5 ms per recall, measured
        by ``hindsight_recall_log_build_seconds``); the query is redacted first (DESIGN.md s6:
        nothing unredacted reaches ClickHouse). A bug here is logged by the event loop's exception
        handler and loses this log only; the recall was already answered.
        """
        built = time.perf_counter()
        now = datetime.now(UTC)
        agent = self._agent(principal, None)
        safe_query = redact(query).text
        key = partition_key(principal.tenant_id, user_id)
        window = result.parsed.window
        log_event = RecallLogEvent(
            query_id=query_id,
            tenant_id=principal.tenant_id,
            user_id=user_id,
            agent_id=agent,
            query_text=safe_query,
            intent=result.parsed.intent,
            entities=tuple(e for e in result.parsed.entities if e in safe_query),
            window_start=None if window is None else window.start,
            window_end=None if window is None else window.end,
            wants_recent=result.parsed.wants_recent,
            top_k=params.top_k,
            similarity_floor=params.similarity_floor,
            time_mode=params.time_mode,
            order=params.order,
            rerank=params.rerank,
            token_budget=params.token_budget,
            tokens=result.tokens,
            truncated=result.truncated,
            candidates=tuple(trace(result)),
            timings_ms={**result.timings_ms, "served": served_ms},
            reference_time=result.reference_time or now,
            recalled_at=now,
        )
        self.access_log.offer(Topic.RECALLS, key, log_event)
        LOG_BUILD.observe(time.perf_counter() - built)

    async def feedback(
        self,
        principal: Principal,
        *,
        query_id: str,
        used: Sequence[str] = (),
        unused: Sequence[str] = (),
        wrong: Sequence[str] = (),
        outdated: Sequence[str] = (),
    ) -> FeedbackResult:
        """Record which memories recall ``query_id`` returned were used (and which were unused, wrong
        or outdated) as labels in ClickHouse, one per (query, memory): sending the same feedback
        again changes nothing, a later label for the same memory replaces the earlier one. Returned
        memories a recall with feedback does not label count as unused for tuning.

        Raises:
            RecallNotFoundError: no recall ``query_id`` for this key's tenant (another tenant's query id
                gives the same answer), or its log has not reached ClickHouse yet.
            InvalidRequestError: no id at all, or an id in two lists.
            ConflictError: an id the recall did not return (the recall's state, HTTP 409).
            StoreUnavailableError: ClickHouse or Kafka failed.
        """
        with observe("feedback"):
            # the recall first: a request for no recall of this tenant is 404 whatever its body (the
            # rules below span several lists, which the request's JSON schema cannot state)
            owner = self._recent.get(principal.tenant_id, query_id)
            if owner is None:
                owner = await asyncio.to_thread(
                    self._resources.analytics().recall_owner, principal.tenant_id, query_id
                )
            if owner is None:
                raise RecallNotFoundError(query_id)
            labels: dict[str, FeedbackLabel] = {}
            for name, ids in (("used", used), ("unused", unused), ("wrong", wrong), ("outdated", outdated)):
                for memory_id in ids:
                    if labels.get(memory_id, name) != name:
                        raise InvalidRequestError(
                            f"memory {memory_id!r} is in both {labels[memory_id]!r} and {name!r}",
                            field=name,
                            fix="give each memory one label",
                        )
                    labels[memory_id] = name  # type: ignore[assignment]
            if not labels:
                raise InvalidRequestError(
                    "no memory ids given",
                    field="used",
                    fix="list the ids of the returned memories the agent used (and optionally unused, "
                    "wrong, outdated)",
                )
            stray = sorted(set(labels) - owner.returned)
            if stray:
                field = labels[stray[0]]
                raise ConflictError(
                    f"recall {query_id} did not return {stray[:5]}",
                    field=field,
                    fix="label only memories this recall returned (the ids in its response)",
                )
            now = datetime.now(UTC)
            agent = self._agent(principal, None)
            publisher = self._resources.publisher()
            key = partition_key(principal.tenant_id, owner.user_id)
            for memory_id, label in labels.items():
                publisher.send(
                    Topic.FEEDBACK,
                    key,
                    RecallFeedbackEvent(
                        feedback_id=stable_id("feedback", principal.tenant_id, query_id, memory_id),
                        query_id=query_id,
                        tenant_id=principal.tenant_id,
                        user_id=owner.user_id,
                        agent_id=agent,
                        memory_id=memory_id,
                        label=label,
                        given_at=now,
                    ),
                )
            await publisher.flush()
            return FeedbackResult(query_id=query_id, labels=labels)

    async def _owned(self, principal: Principal, memory_id: str) -> VectorRecord:
        """The caller's memory ``memory_id``; another tenant's (or scope's) memory is "not found"."""
        try:
            records = await asyncio.to_thread(self._resources.vector_store().retrieve, [memory_id])
        except ValueError as exc:  # not a UUID: cannot exist
            raise NotFoundError(memory_id) from exc
        if not records:
            raise NotFoundError(memory_id)
        record = records[0]
        allowed = principal.allowed_scopes()
        if record.payload.get("tenant_id") != principal.tenant_id or (
            allowed is not None and record.payload.get("scope") not in allowed
        ):
            raise NotFoundError(memory_id)
        return record

    def _chain_loader(self, principal: Principal, user_id: str) -> Loader:
        """Payload lookup for chain walks that sees only the caller's tenant, its readable scopes and
        ``user_id`` (a chain never links two tenants' or users' memories; this holds even if one did)."""
        store = self._resources.vector_store()
        allowed = principal.allowed_scopes()

        def load(ids: Sequence[str]) -> dict[str, dict[str, Any]]:
            return {
                r.id: r.payload
                for r in store.retrieve(list(ids))
                if r.payload.get("tenant_id") == principal.tenant_id
                and r.payload.get("user_id") == user_id
                and (allowed is None or r.payload.get("scope") in allowed)
            }

        return load

    async def forget(self, principal: Principal, *, memory_id: str, hard: bool = False) -> ForgetResult:
        """Forget one of the caller's memories: soft (``status='expired'``, ``valid_to`` and
        ``expired_ts`` = now; kept for history, never recalled) or hard (deleted). Its events are
        tombstoned and every memory derived from it is rebuilt without it
        (:class:`~services.gateway.forget.ForgetService`).

        Version chains stay consistent (:meth:`hindsight.chains.ChainEditor.detach`): the newer
        version of a forgotten one now follows the older one; forgetting the newest version makes the
        one it replaced current again. The facts extracted from a forgotten turn and the duplicates
        merged into it are forgotten with it (``also_forgotten``).

        Raises:
            NotFoundError: no such memory in the caller's tenant (another tenant's id gives the same).
            StoreUnavailableError: the vector store failed.
        """
        with observe("forget"):
            record = await self._owned(principal, memory_id)
            store = self._resources.vector_store()
            load = self._chain_loader(principal, str(record.payload.get("user_id")))

            def plan() -> tuple[dict[str, dict[str, Any]], list[str]]:
                editor = ChainEditor(load)
                editor.preload({record.id: record.payload})
                targets = [record.id]
                for derived in ids_of(record.payload.get("derived_ids")):
                    if editor.node(derived) is not None:
                        targets.append(derived)
                for target in list(targets):
                    for duplicate in editor.detach(target):
                        if duplicate not in targets and editor.node(duplicate) is not None:
                            editor.detach(duplicate)
                            targets.append(duplicate)
                return editor.changes(), targets

            # version chains first (main's ChainEditor), then the forgetting itself: tombstones,
            # working memory and every memory derived over provenance (ForgetService)
            changes, targets = await asyncio.to_thread(plan)
            for changed_id, fields_ in changes.items():
                await asyncio.to_thread(store.set_payload, [changed_id], fields_)
            also = [r.payload for r in await asyncio.to_thread(store.retrieve, targets[1:])]
            return await ForgetService(self._resources).forget(
                principal, record.payload, hard=hard, also=also
            )

    async def get(self, principal: Principal, *, memory_id: str) -> MemoryDetail:
        """One of the caller's memories and its whole version chain, walked both ways, newest first.

        Raises:
            NotFoundError: no such memory in the caller's tenant (another tenant's id gives the same).
            StoreUnavailableError: the vector store failed.
        """
        with observe("get"):
            record = await self._owned(principal, memory_id)
            load = self._chain_loader(principal, str(record.payload.get("user_id")))
            chain = await asyncio.to_thread(walk_chain, record.id, load, limit=MAX_CHAIN)
            return MemoryDetail(
                memory=from_payload(public_view(record.payload)),
                chain=[MemoryView.from_payload(i, p) for i, p in reversed(chain)],
            )

    async def history(
        self,
        principal: Principal,
        *,
        user_id: str,
        session_id: str | None = None,
        types: Sequence[MemoryType] | None = None,
        include_inactive: bool = True,
        limit: int = 100,
        memory_id: str | None = None,
    ) -> HistoryResponse:
        """The user's memories in chronological order (``created_at``), with status and version: the
        newest ``limit`` of them, oldest first. Expired and superseded ones are included unless
        ``include_inactive`` is false. With ``memory_id``: only that memory's version chain (walked
        both ways from it), oldest first.

        Raises:
            InvalidRequestError: empty ``user_id``.
            OutOfRangeError: ``limit`` outside 1..history_max.
            StoreUnavailableError: the vector store failed.
        """
        with observe("history"):
            if not user_id or not user_id.strip():
                raise InvalidRequestError("user_id is empty", field="user_id", fix="send the user's id")
            if isinstance(limit, bool) or not 1 <= limit <= self._settings.history_max:
                raise OutOfRangeError(
                    f"limit={limit!r} is out of range",
                    field="limit",
                    fix=f"use 1..{self._settings.history_max}",
                )
            if memory_id is not None:
                record = await self._owned(principal, memory_id)
                if record.payload.get("user_id") != user_id:
                    raise NotFoundError(memory_id)
                chain = await asyncio.to_thread(
                    walk_chain, record.id, self._chain_loader(principal, user_id), limit=MAX_CHAIN
                )
                versions = [(i, p) for i, p in chain if include_inactive or p.get("status") == "active"]
                return HistoryResponse(
                    user_id=user_id,
                    memories=[MemoryView.from_payload(i, p) for i, p in versions[-limit:]],
                    truncated=len(versions) > limit,
                )
            flt = MemoryFilter(
                tenant_id=principal.tenant_id,
                user_id=user_id,
                session_id=session_id or None,
                types=types,
                scopes=principal.allowed_scopes(),
                statuses=None if include_inactive else ("active",),
            )
            records = await asyncio.to_thread(self._scroll_all, flt)
            records.sort(key=lambda r: (float(r.payload.get("created_ts", 0.0)), r.id))
            newest = records[-limit:]
            return HistoryResponse(
                user_id=user_id,
                memories=[MemoryView.from_payload(r.id, r.payload) for r in newest],
                truncated=len(records) > limit,
            )

    def _scroll_all(self, flt: MemoryFilter) -> list[VectorRecord]:
        store = self._resources.vector_store()
        out: list[VectorRecord] = []
        offset: str | None = None
        while True:
            page, offset = store.scroll(flt, _SCROLL_PAGE, offset)
            out.extend(page)
            if offset is None:
                return out
