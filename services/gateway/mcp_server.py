"""MCP server of the gateway (official ``mcp`` SDK 2.3.0): tools ``retain``, ``recall``, ``reflect``,
``feedback``, ``forget``, ``history`` and ``get`` over :class:`~services.gateway.service.MemoryService`.

Transports: streamable HTTP (mounted at ``/mcp`` by :func:`services.gateway.app.build_asgi`) or
stdio (:func:`services.gateway.app.run_stdio`). The server's typed lifespan context is a
:class:`~services.gateway.state.GatewayState`, which each tool reads as
``ctx.request_context.lifespan_context``.

Auth: over streamable HTTP every MCP message is an HTTP request and the SDK attaches it to the tool's
request context, so a tool reads the API key from ``ctx.headers`` (``Authorization: Bearer <key>``
or ``X-API-Key``), per call; the ``/mcp`` route also refuses a request without a valid key with
401 before the MCP layer sees it. Over stdio there are no headers (``ctx.headers`` is ``None``) and
the principal is the one of ``HINDSIGHT_API_KEY``, resolved once at start.

Errors: a :class:`~hindsight.errors.RequestError` (or a store outage) becomes a
:class:`~mcp.server.mcpserver.exceptions.ToolError`, i.e. a tool result with ``isError`` whose text
is ``"<code>: <message> (field: <field>; fix: <fix>)"``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import AwareDatetime, Field

from hindsight.errors import AuthenticationError, RequestError, RetryableError
from schemas.v1 import MemoryType, Source
from services.gateway.auth import Principal
from services.gateway.errors import tool_error_text
from services.gateway.models import (
    Accepted,
    FeedbackResult,
    ForgetResult,
    HistoryResponse,
    MemoryDetail,
    Order,
    Outcome,
    QuarantineList,
    QuarantineView,
    RecallResponse,
)
from services.gateway.review import ReviewService
from services.gateway.state import GatewayState

if TYPE_CHECKING:
    from services.gateway.service import MemoryService

INSTRUCTIONS = (
    "Hindsight is long-term memory for this agent. Call `recall` before answering to fetch what is "
    "known about the user (each memory comes with its scores and provenance); call `retain` for "
    "each turn or fact worth remembering (it is filtered and stored asynchronously); call `reflect` "
    "when a session or task ends; `feedback` says which recalled memories were used; `forget` removes "
    "a memory; `history` lists a user's memories over time; `get` shows one memory with its version "
    "chain (what replaced it, what it replaced)."
)

GatewayContext = Context[GatewayState, Any]
T = TypeVar("T")

UserId = Annotated[str, Field(min_length=1, max_length=256, description="End user the memories are about.")]
SessionId = Annotated[
    str, Field(min_length=1, max_length=256, description="Conversation or task session id.")
]
Tags = Annotated[list[str] | None, Field(description="Labels such as 'health'.")]
Instant = Annotated[AwareDatetime | None, Field(description="ISO 8601 time with a UTC offset.")]


@contextmanager
def _tool_errors() -> Iterator[None]:
    """Re-raise a request error or store outage as an MCP tool error naming the field and the fix."""
    try:
        yield
    except (RequestError, RetryableError) as exc:
        raise ToolError(tool_error_text(exc)) from exc


def _caller(ctx: GatewayContext) -> tuple[GatewayState, Principal]:
    """The gateway state and the caller's principal (from the HTTP headers, or the stdio key).

    Raises:
        AuthenticationError: no key, or an unknown one.
    """
    state = ctx.request_context.lifespan_context
    headers = ctx.headers
    if headers is None:
        if state.stdio_principal is None:
            raise AuthenticationError("no API key: set HINDSIGHT_API_KEY for the stdio server")
        return state, state.stdio_principal
    return state, state.keys.from_headers(headers)


async def _serve(ctx: GatewayContext, call: Callable[[MemoryService, Principal], Awaitable[T]]) -> T:
    """What every tool does around its own call: resolve the caller's principal, run
    ``call(service, principal)`` and turn a request error or store outage (an unknown key included)
    into an MCP tool error."""
    with _tool_errors():
        state, principal = _caller(ctx)
        return await call(state.service, principal)


async def retain(
    *,
    user_id: UserId,
    session_id: SessionId,
    content: Annotated[
        str, Field(min_length=1, description="The text to remember: a turn, a note, a tool result.")
    ],
    ctx: GatewayContext,
    source: Annotated[
        Source, Field(description="Who produced it: user, assistant, tool or system.")
    ] = "user",
    occurred_at: Instant = None,
    tags: Tags = None,
    scope: Annotated[str, Field(description="'global' or 'agent:<id>'.")] = "global",
    external_ref: Annotated[str | None, Field(description="Reference in the caller's system.")] = None,
    event_id: Annotated[str | None, Field(description="Idempotency key; default a new UUID.")] = None,
    speaker: Annotated[str | None, Field(description="Display name of the speaker.")] = None,
) -> Accepted:
    """Remember something that happened. It is published to Kafka and passes the guard (PII
    redaction, poisoning checks) before being stored; returns the event id once the broker accepted it."""
    return await _serve(
        ctx,
        lambda service, principal: service.retain(
            principal,
            user_id=user_id,
            session_id=session_id,
            content=content,
            source=source,
            occurred_at=occurred_at,
            tags=tags or (),
            scope=scope,
            external_ref=external_ref,
            event_id=event_id,
            speaker=speaker,
        ),
    )


async def recall(
    *,
    query: Annotated[str, Field(description="What to remember, in natural language; must not be empty.")],
    user_id: UserId,
    ctx: GatewayContext,
    top_k: Annotated[int | None, Field(description="How many memories: 1..15; default 5.")] = None,
    types: Annotated[
        list[MemoryType] | None, Field(description="Layers: working, episodic, semantic.")
    ] = None,
    scopes: Annotated[
        list[str] | None, Field(description="Scopes; default every scope the key may read.")
    ] = None,
    tags_any: Annotated[list[str] | None, Field(description="Only memories with one of these tags.")] = None,
    tags_exclude: Annotated[list[str] | None, Field(description="Never memories with these tags.")] = None,
    time_from: Instant = None,
    time_to: Instant = None,
    reference_time: Instant = None,
    order: Annotated[Order, Field(description="'relevance' or 'chronological'.")] = "relevance",
    include_superseded: Annotated[bool, Field(description="Also return superseded versions.")] = False,
) -> RecallResponse:
    """Recall the user's memories most relevant to the query, each with its similarity, time weight,
    final score, rank and provenance (source events and references)."""
    return await _serve(
        ctx,
        lambda service, principal: service.recall(
            principal,
            query=query,
            user_id=user_id,
            top_k=top_k,
            types=types,
            scopes=scopes,
            tags_any=tags_any,
            tags_exclude=tags_exclude,
            time_from=time_from,
            time_to=time_to,
            reference_time=reference_time,
            order=order,
            include_superseded=include_superseded,
        ),
    )


async def reflect(
    *,
    user_id: UserId,
    session_id: SessionId,
    ctx: GatewayContext,
    outcome: Annotated[Outcome, Field(description="success, failure, abandoned or unknown.")] = "unknown",
    feedback: Annotated[str | None, Field(description="User feedback text.")] = None,
    feedback_score: Annotated[
        float | None, Field(ge=-1.0, le=1.0, description="-1 (bad) .. 1 (good).")
    ] = None,
    task: Annotated[str | None, Field(description="What the session was for.")] = None,
    event_count: Annotated[int | None, Field(ge=0, description="Interactions the session produced.")] = None,
) -> Accepted:
    """Close a session or task: its turns are consolidated into an episode and recurring patterns
    abstracted into facts, asynchronously."""
    return await _serve(
        ctx,
        lambda service, principal: service.reflect(
            principal,
            user_id=user_id,
            session_id=session_id,
            outcome=outcome,
            feedback=feedback,
            feedback_score=feedback_score,
            task=task,
            event_count=event_count,
        ),
    )


IdList = Annotated[list[str] | None, Field(description="Memory ids from the recall's response.")]


async def feedback(
    *,
    query_id: Annotated[str, Field(min_length=1, description="query_id of the recall response.")],
    ctx: GatewayContext,
    used: IdList = None,
    unused: IdList = None,
    wrong: IdList = None,
    outdated: IdList = None,
) -> FeedbackResult:
    """Say which memories a recall returned were used (and which were unused, wrong or outdated), so
    thresholds and decay can be tuned from real usage; repeating it changes nothing."""
    return await _serve(
        ctx,
        lambda service, principal: service.feedback(
            principal,
            query_id=query_id,
            used=used or (),
            unused=unused or (),
            wrong=wrong or (),
            outdated=outdated or (),
        ),
    )


async def forget(
    *,
    memory_id: Annotated[str, Field(description="Memory id from recall or history.")],
    ctx: GatewayContext,
    hard: Annotated[
        bool, Field(description="Delete instead of expiring (expired stays in history).")
    ] = False,
) -> ForgetResult:
    """Forget a memory: it is never recalled again (soft: kept in history as expired; hard: deleted)."""
    return await _serve(
        ctx, lambda service, principal: service.forget(principal, memory_id=memory_id, hard=hard)
    )


async def history(
    *,
    user_id: UserId,
    ctx: GatewayContext,
    session_id: Annotated[str | None, Field(description="Only this session.")] = None,
    types: Annotated[list[MemoryType] | None, Field(description="Only these layers.")] = None,
    include_inactive: Annotated[bool, Field(description="Include expired and superseded memories.")] = True,
    limit: Annotated[int, Field(ge=1, description="At most this many (the newest), oldest first.")] = 100,
    memory_id: Annotated[
        str | None, Field(description="Only this memory's version chain (walked both ways), oldest first.")
    ] = None,
) -> HistoryResponse:
    """The user's memories in chronological order, with status (active, superseded, expired) and
    version; or, with memory_id, that memory's version chain."""
    return await _serve(
        ctx,
        lambda service, principal: service.history(
            principal,
            user_id=user_id,
            session_id=session_id,
            types=types,
            include_inactive=include_inactive,
            limit=limit,
            memory_id=memory_id,
        ),
    )


async def get(
    *,
    memory_id: Annotated[str, Field(min_length=1, description="Memory id (UUID) from recall or history.")],
    ctx: GatewayContext,
) -> MemoryDetail:
    """One memory and its whole version chain, walked both ways (newest first): which statement
    replaced it, and which ones it replaced."""
    return await _serve(ctx, lambda service, principal: service.get(principal, memory_id=memory_id))


async def quarantine_list(
    *,
    ctx: GatewayContext,
    user_id: Annotated[str | None, Field(min_length=1, max_length=256, description="Only this user.")] = None,
    status: Annotated[
        Literal["pending", "released", "rejected"] | None,
        Field(description="Review status (default pending)."),
    ] = "pending",
    limit: Annotated[int, Field(ge=1, le=1000, description="At most this many, newest first.")] = 100,
) -> QuarantineList:
    """Operator tool (admin key): the tenant's quarantined items with reasons, source, trust and
    external_ref; content is redacted."""
    with _tool_errors():
        state, principal = _caller(ctx)
        return await ReviewService(state.resources).list(
            principal, user_id=user_id, status=status, limit=limit
        )


async def quarantine_release(
    *,
    item_id: Annotated[str, Field(description="Item id from quarantine_list.")],
    ctx: GatewayContext,
) -> QuarantineView:
    """Operator tool (admin key): publish a quarantined item on through the pipeline (stored once)."""
    with _tool_errors():
        state, principal = _caller(ctx)
        return await ReviewService(state.resources).release(principal, item_id=item_id)


async def quarantine_reject(
    *,
    item_id: Annotated[str, Field(description="Item id from quarantine_list.")],
    ctx: GatewayContext,
) -> QuarantineView:
    """Operator tool (admin key): keep a quarantined item out of memory for good."""
    with _tool_errors():
        state, principal = _caller(ctx)
        return await ReviewService(state.resources).reject(principal, item_id=item_id)


def build_mcp_server(current_state: Callable[[], GatewayState]) -> MCPServer[GatewayState]:
    """An MCP server with the memory tools (and the operator's quarantine tools); its typed lifespan
    context is ``current_state()``, called when the server starts (the streamable-HTTP session
    manager's ``run()``, or stdio)."""

    @asynccontextmanager
    async def lifespan(_: MCPServer[GatewayState]) -> AsyncIterator[GatewayState]:
        yield current_state()

    server: MCPServer[GatewayState] = MCPServer(
        "hindsight", instructions=INSTRUCTIONS, version="0.1.0", lifespan=lifespan
    )
    server.add_tool(retain, annotations=ToolAnnotations(idempotent_hint=True))
    server.add_tool(recall, annotations=ToolAnnotations(read_only_hint=True))
    server.add_tool(reflect)
    server.add_tool(feedback, annotations=ToolAnnotations(idempotent_hint=True))
    server.add_tool(forget, annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True))
    server.add_tool(history, annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
    server.add_tool(get, annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
    server.add_tool(quarantine_list, annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
    server.add_tool(quarantine_release, annotations=ToolAnnotations(idempotent_hint=True))
    server.add_tool(
        quarantine_reject, annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True)
    )
    return server


__all__ = ["INSTRUCTIONS", "GatewayContext", "build_mcp_server"]
