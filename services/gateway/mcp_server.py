"""MCP server of the gateway (official ``mcp`` SDK 2.3.0): one tool per gateway operation, each
generated from the operation's request model in :mod:`services.gateway.models` and calling the same
:class:`~services.gateway.service.MemoryService` method as the HTTP route.

Adding an operation is one line in :data:`TOOLS`::

    tool("history", HistoryRequest, MemoryService.history, read_only=True)

The tool's input schema is the request model's JSON schema (settings-dependent bounds filled in, see
:func:`~services.gateway.models.finish_schema`), its output schema the service method's return model
(:func:`output_schema`).
Arguments are validated by the request model, so an unknown argument, a wrong type or a value out of
range is refused before the service runs.

Transports: streamable HTTP (mounted at ``/mcp`` by :func:`services.gateway.app.build_asgi`) or
stdio (:func:`services.gateway.app.run_stdio`). The server's typed lifespan context is a
:class:`~services.gateway.state.GatewayState`, which each tool reads as
``ctx.request_context.lifespan_context``.

Auth: over streamable HTTP every MCP message is an HTTP request and the SDK attaches it to the tool's
request context, so a tool reads the API key from ``ctx.headers`` (``Authorization: Bearer <key>``
or ``X-API-Key``), per call; the ``/mcp`` route also refuses a request without a valid key with
401 before the MCP layer sees it. Over stdio there are no headers (``ctx.headers`` is ``None``) and
the principal is the one of ``HINDSIGHT_API_KEY``, resolved once at start.

Errors: an invalid argument, a :class:`~hindsight.errors.RequestError` or a store outage is a tool
result with ``isError`` whose text is the HTTP error body, ``{"error": {"code", "message", "field",
"fix"}}`` as JSON, with the same codes as HTTP (``validation_error``, ``invalid_request``,
``not_found``, ``unauthenticated``, ``unavailable``, ...).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.tools.base import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from hindsight.errors import AuthenticationError, RequestError, RetryableError
from services.gateway.errors import ErrorBody, ErrorDetail, validation_detail, wire_error
from services.gateway.forget import ForgetService
from services.gateway.models import (
    CloseSessionRequest,
    FeedbackToolRequest,
    ForgetRequest,
    HistoryRequest,
    MemoryRequest,
    QuarantineItemRequest,
    QuarantineListRequest,
    RecallRequest,
    RetainRequest,
    UserRequest,
    fields,
    finish_schema,
)
from services.gateway.review import ReviewService
from services.gateway.service import MemoryService
from services.gateway.state import GatewayState

if TYPE_CHECKING:
    from services.gateway.auth import Principal

INSTRUCTIONS = (
    "Hindsight is long-term memory for this agent. Call `recall` before answering to fetch what is "
    "known about the user (each memory comes with its scores and provenance); call `retain` for "
    "each turn or fact worth remembering (it is filtered and stored asynchronously); call `reflect` "
    "when a session or task ends; `feedback` says which recalled memories were used; `forget` removes "
    "a memory; `history` lists a user's memories over time; `get` shows one memory with its version "
    "chain (what replaced it, what it replaced)."
)

RETAIN = (
    "Remember something that happened. It is published to Kafka and passes the guard (PII redaction, "
    "poisoning checks) before being stored; returns the event id once the broker accepted it."
)
RECALL = (
    "Recall the user's memories most relevant to the query, each with its similarity, time weight, final "
    "score, rank and provenance (source events and references)."
)
REFLECT = (
    "Close a session or task: its turns are consolidated into an episode and recurring patterns "
    "abstracted into facts, asynchronously."
)
FEEDBACK = (
    "Say which memories a recall returned were used (and which were unused, wrong or outdated), so "
    "thresholds and decay can be tuned from real usage; repeating it changes nothing."
)
FORGET = (
    "Forget a memory: it is never recalled again (soft: kept in history as expired; hard: deleted), the "
    "memories derived from it are rebuilt without it, and re-sending its events does not bring it back."
)
HISTORY = (
    "The user's memories in chronological order, with status (active, superseded, expired) and "
    "version; or, with memory_id, that memory's version chain."
)
GET = (
    "One memory and its whole version chain, walked both ways (newest first): which statement replaced "
    "it, and which ones it replaced."
)
FORGET_USER = (
    "Forget a whole user (tenant-wide key): every memory, working-memory, session and guard claim key, "
    "access-log, quarantine and analytics row is erased and the user's events are tombstoned; answers "
    "what is left in each store (nothing)."
)
ERASURE = (
    "What of a user is left in each store (tenant-wide key): vector store, Redis, the guard's claim "
    "counters, access log, quarantine and analytics tables."
)

QUARANTINE_LIST = (
    "Operator tool (admin key): the tenant's quarantined items with reasons, source, trust and "
    "external_ref; content is redacted."
)
QUARANTINE_RELEASE = (
    "Operator tool (admin key): publish a quarantined item on through the pipeline (stored once)."
)
QUARANTINE_REJECT = "Operator tool (admin key): keep a quarantined item out of memory for good."

GatewayContext = Context[GatewayState, Any]
ServiceCall = Callable[[GatewayState, "Principal", BaseModel], Awaitable[BaseModel]]


@dataclass(frozen=True)
class ToolSpec:
    """One MCP tool: its name, the request model its arguments are, and the service call it makes."""

    name: str
    request: type[BaseModel]
    call: ServiceCall
    result: type[BaseModel]
    description: str
    annotations: ToolAnnotations


def memory_service(state: GatewayState) -> MemoryService:
    """The service most tools call: the gateway's :class:`MemoryService`."""
    return state.service


def forget_service(state: GatewayState) -> ForgetService:
    """Whole-user erasure over the gateway's resources."""
    return ForgetService(state.resources)


def review_service(state: GatewayState) -> ReviewService:
    """Quarantine review over the gateway's resources."""
    return ReviewService(state.resources)


def tool(
    name: str,
    request: type[BaseModel],
    method: Callable[..., Awaitable[BaseModel]],
    *,
    service: Callable[[GatewayState], Any] = memory_service,
    read_only: bool = False,
    destructive: bool = False,
    idempotent: bool = False,
    description: str | None = None,
) -> ToolSpec:
    """A :class:`ToolSpec` calling ``method(service(state), principal, **fields(request))``.

    Args:
        name: tool name (the HTTP route's operation).
        request: the operation's request model (``extra="forbid"``): the tool's parameters.
        method: an unbound service method taking the principal and the request's fields as
            keywords; its return annotation (a pydantic model) is the tool's output schema.
        service: the service instance ``method`` belongs to, from the gateway state (default
            :func:`memory_service`).
        description: what the tool does, for the model; default: the request model's docstring.

    Raises:
        TypeError: ``method`` does not declare a pydantic model as its return type.
    """
    result = inspect.signature(method).return_annotation
    if isinstance(result, str):  # postponed annotation: a name in the method's module
        result = getattr(method, "__globals__", {}).get(result)
    if not (isinstance(result, type) and issubclass(result, BaseModel)):
        raise TypeError(f"{method.__qualname__} must declare a pydantic model as its return type")
    text = description or (request.__doc__ or name).strip().split("\n\n", 1)[0]

    async def call(state: GatewayState, principal: Principal, body: BaseModel) -> BaseModel:
        return await method(service(state), principal, **fields(body))

    hints = ToolAnnotations(
        read_only_hint=read_only,
        destructive_hint=destructive if not read_only else None,
        idempotent_hint=idempotent or read_only,
    )
    return ToolSpec(name, request, call, result, " ".join(text.split()), hints)


TOOLS: tuple[ToolSpec, ...] = (
    tool("retain", RetainRequest, MemoryService.retain, idempotent=True, description=RETAIN),
    tool("recall", RecallRequest, MemoryService.recall, read_only=True, description=RECALL),
    tool("reflect", CloseSessionRequest, MemoryService.reflect, description=REFLECT),
    tool("feedback", FeedbackToolRequest, MemoryService.feedback, idempotent=True, description=FEEDBACK),
    tool(
        "forget", ForgetRequest, MemoryService.forget, destructive=True, idempotent=True, description=FORGET
    ),
    tool("history", HistoryRequest, MemoryService.history, read_only=True, description=HISTORY),
    tool("get", MemoryRequest, MemoryService.get, read_only=True, description=GET),
    tool(
        "forget_user",
        UserRequest,
        ForgetService.forget_user,
        service=forget_service,
        destructive=True,
        idempotent=True,
        description=FORGET_USER,
    ),
    tool(
        "erasure_report",
        UserRequest,
        ForgetService.erasure_report,
        service=forget_service,
        read_only=True,
        description=ERASURE,
    ),
    tool(
        "quarantine_list",
        QuarantineListRequest,
        ReviewService.list,
        service=review_service,
        read_only=True,
        description=QUARANTINE_LIST,
    ),
    tool(
        "quarantine_release",
        QuarantineItemRequest,
        ReviewService.release,
        service=review_service,
        idempotent=True,
        description=QUARANTINE_RELEASE,
    ),
    tool(
        "quarantine_reject",
        QuarantineItemRequest,
        ReviewService.reject,
        service=review_service,
        destructive=True,
        idempotent=True,
        description=QUARANTINE_REJECT,
    ),
)
"""Every MCP tool of the gateway; one line per operation."""


class _Arguments(ArgModelBase):
    """Hands the raw arguments through unvalidated: the tool validates them against its request model
    itself, so a refusal has the gateway's error shape rather than the SDK's text."""

    model_config = ConfigDict(extra="allow")

    def model_dump_one_level(self) -> dict[str, Any]:
        """Every argument as sent."""
        return {"arguments": dict(self.model_extra or {})}


def error_result(detail: ErrorDetail) -> CallToolResult:
    """A tool error whose text is the HTTP error body ``{"error": {code, message, field, fix}}`` as JSON.

    No ``structuredContent``: clients (the TypeScript SDK among them) validate it against the tool's
    output schema, which describes the success result.
    """
    body = ErrorBody(error=detail).model_dump(mode="json")
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(body, ensure_ascii=False))], is_error=True
    )


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


def _decode_json_strings(request: type[BaseModel], arguments: dict[str, Any]) -> dict[str, Any]:
    """Arguments whose non-string field arrived as a JSON array or object inside a string (some
    clients send lists that way), decoded; everything else unchanged."""
    out = dict(arguments)
    for key, value in arguments.items():
        field = request.model_fields.get(key)
        if field is None or field.annotation is str or not isinstance(value, str):
            continue
        try:
            decoded = json.loads(value)
        except (ValueError, RecursionError):
            continue
        if isinstance(decoded, list | dict):
            out[key] = decoded
    return out


class _NullableAsTypeList(GenerateJsonSchema):
    """pydantic's JSON schema with ``X | None`` of a plain type written ``{"type": [X, "null"]}``
    (``null`` added to an ``enum``) instead of ``{"anyOf": [X, {"type": "null"}]}``: the same instances
    are valid, and a client validating with ``jsonschema`` descends once instead of into two branches."""

    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        inner = self.generate_inner(schema["schema"])
        kind = inner.get("type")
        if (
            not isinstance(kind, str)
            or kind == "null"
            or {"$ref", "anyOf", "oneOf", "allOf", "const"} & inner.keys()
        ):
            return super().nullable_schema(schema)
        out = {**inner, "type": [kind, "null"]}
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
        return out


def _inline_refs(node: Any, defs: dict[str, Any], seen: tuple[str, ...] = ()) -> Any:
    """``node`` with every ``{"$ref": "#/$defs/Name", ...}`` replaced by a copy of that definition
    (sibling keywords such as ``description`` kept) and ``$defs`` dropped.

    Raises:
        ValueError: a definition refers to itself (a recursive model has no inline form).
    """
    if isinstance(node, list):
        return [_inline_refs(item, defs, seen) for item in node]
    if not isinstance(node, dict):
        return node
    out = {k: _inline_refs(v, defs, seen) for k, v in node.items() if k not in ("$defs", "$ref")}
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        name = ref.removeprefix("#/$defs/")
        if name in seen:
            raise ValueError(f"recursive model {name!r} cannot be inlined")
        return {**_inline_refs(defs[name], defs, (*seen, name)), **out}
    return out


def output_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The tool's ``outputSchema``: ``model``'s JSON schema (validation mode, as the SDK derives it)
    with optional plain fields as type lists and nested models inlined (no ``$ref``).

    Every MCP client SDK validates each ``structuredContent`` against this schema. With ``jsonschema``
    (the Python SDK) a recall of 8 memories took 5.6 ms against pydantic's schema and 3.3 ms against
    this one (2026-12-02, ``docs/benchmarks.md``, "Recall as agents see it"); both accept the same
    instances (``tests/unit/test_mcp_output_schema.py``).
    """
    schema = model.model_json_schema(schema_generator=_NullableAsTypeList)
    inlined: dict[str, Any] = _inline_refs(schema, schema.get("$defs", {}))
    return inlined


def build_tool(spec: ToolSpec, limits: dict[str, int]) -> Tool:
    """The SDK tool for ``spec``: input schema from the request model (``limits`` fill the
    settings-dependent maxima), output schema from the result model."""

    async def run(ctx: GatewayContext, arguments: dict[str, Any]) -> BaseModel | CallToolResult:
        try:
            body = spec.request.model_validate(_decode_json_strings(spec.request, arguments))
        except ValidationError as exc:
            return error_result(validation_detail(exc.errors(include_url=False)))
        try:
            state, principal = _caller(ctx)
            return await spec.call(state, principal, body)
        except (RequestError, RetryableError) as exc:
            return error_result(wire_error(exc)[1].error)

    schema = finish_schema(spec.request.model_json_schema(), limits, zone_enum=False)
    return Tool(
        fn=run,
        name=spec.name,
        title=spec.name.replace("_", " ").capitalize(),
        description=spec.description,
        parameters=schema,
        fn_metadata=FuncMetadata(
            arg_model=_Arguments, output_model=spec.result, output_schema=output_schema(spec.result)
        ),
        is_async=True,
        context_kwarg="ctx",
        annotations=spec.annotations,
    )


def build_mcp_server(
    current_state: Callable[[], GatewayState], limits: dict[str, int], tools: Sequence[ToolSpec] = TOOLS
) -> MCPServer[GatewayState]:
    """An MCP server with ``tools``; its typed lifespan context is ``current_state()``, called when the
    server starts (the streamable-HTTP session manager's ``run()``, or stdio). ``limits`` maps each
    settings-dependent bound to its value (see :meth:`GatewaySettings.limits`)."""

    @asynccontextmanager
    async def lifespan(_: MCPServer[GatewayState]) -> AsyncIterator[GatewayState]:
        yield current_state()

    return MCPServer(
        "hindsight",
        instructions=INSTRUCTIONS,
        version="0.1.0",
        lifespan=lifespan,
        tools=[build_tool(spec, limits) for spec in tools],
    )


__all__ = ["INSTRUCTIONS", "TOOLS", "GatewayContext", "ToolSpec", "build_mcp_server", "tool"]
