"""HTTP API of the gateway (FastAPI): ``/v1/...`` over :class:`~services.gateway.service.MemoryService`,
plus ``/healthz`` and ``/metrics`` (no auth).

Auth: ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``. Every error is
``{"error": {"code", "message", "field", "fix"}}`` with the status of its class
(:mod:`services.gateway.errors`); request validation failures are 422 ``validation_error`` naming
the field.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, FastAPI, Path, Query, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from hindsight.errors import HindsightError, RequestError, RetryableError
from hindsight.stores.vector import MemoryFilter, SparseVector, VectorRecord
from services.gateway.auth import Principal
from services.gateway.errors import NOT_BLANK, ErrorBody, ErrorDetail, validation_detail, wire_error
from services.gateway.forget import ForgetService
from services.gateway.models import (
    Accepted,
    ErasureReport,
    FeedbackRequest,
    FeedbackResult,
    ForgetOptions,
    ForgetResult,
    HealthResponse,
    HistoryRequest,
    HistoryResponse,
    MemoryDetail,
    QuarantineList,
    QuarantineListRequest,
    QuarantineView,
    RecallRequest,
    RecallResponse,
    ReflectRequest,
    RetainRequest,
    fields,
)
from services.gateway.review import ReviewService
from services.gateway.state import GatewayState

HEALTH_TIMEOUT_S = 2.0
"""Each health check (broker ping, vector store count) must answer within this many seconds."""
HEALTH_TENANT = "__healthz__"
HEALTH_PROBE_ID = "00000000-0000-0000-0000-00000000feed"
"""Point id of the canary the health check writes and deletes: memory ids are UUIDv5
(``hindsight.ids``), never this one."""

_bearer = HTTPBearer(auto_error=False, description="API key as 'Authorization: Bearer <key>'.")
_api_key = APIKeyHeader(name="X-API-Key", auto_error=False, description="API key as 'X-API-Key: <key>'.")

_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {
        "model": ErrorBody,
        "description": "Invalid field value (code invalid_request), or a body that is not UTF-8 "
        "(code invalid_encoding).",
    },
    401: {"model": ErrorBody, "description": "Missing or unknown API key (code unauthenticated)."},
    403: {
        "model": ErrorBody,
        "description": "Scope (or admin role) not allowed for this key (code forbidden).",
    },
    422: {"model": ErrorBody, "description": "Request does not match the schema (code validation_error)."},
    503: {
        "model": ErrorBody,
        "description": "Kafka, the vector store or the embedder is down (code unavailable).",
    },
}
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "No such memory for this key's tenant (code not_found)."}
}


def gateway_state(request: Request) -> GatewayState:
    """The :class:`GatewayState` stored on the app by :func:`services.gateway.app.build_asgi`."""
    state: GatewayState = request.app.state.gateway
    return state


async def authenticate(
    request: Request,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)],
    api_key: Annotated[str | None, Security(_api_key)],
) -> Principal:
    """The caller's principal from its API key.

    Raises:
        AuthenticationError: missing or unknown key, or an Authorization header without the Bearer
            scheme (HTTP 401).
    """
    key = bearer.credentials if bearer is not None else api_key
    if key is None:  # the same answer as MCP's: a bare key in Authorization is named as such
        return gateway_state(request).keys.from_headers(request.headers)
    return gateway_state(request).keys.principal(key)


Caller = Annotated[Principal, Security(authenticate)]
MemoryId = Annotated[str, Path(description="Memory id (UUID) from recall or history.")]

memories = APIRouter(prefix="/v1", tags=["memory"], responses=_ERRORS)


@memories.post("/memories", status_code=202, response_model=Accepted, summary="Retain an interaction")
async def retain(body: RetainRequest, principal: Caller, request: Request) -> Accepted:
    """Publish an interaction to ``memory.interactions.v1``; the guard and ingest stages decide what is
    stored (nothing is written to a store here). 202 once Kafka acknowledged it."""
    return await gateway_state(request).service.retain(principal, **fields(body))


@memories.get(
    "/memories",
    response_model=HistoryResponse,
    responses={
        404: {"model": ErrorBody, "description": "memory_id names no memory of this user (not_found)."}
    },
    summary="A user's memory history",
)
async def history(
    query: Annotated[HistoryRequest, Query()], principal: Caller, request: Request
) -> HistoryResponse:
    """The user's memories in chronological order with status and version (expired and superseded
    ones included), or one memory's version chain."""
    return await gateway_state(request).service.history(principal, **fields(query))


@memories.get(
    "/memories/{memory_id}", response_model=MemoryDetail, responses=_NOT_FOUND, summary="One memory"
)
async def get_memory(memory_id: MemoryId, principal: Caller, request: Request) -> MemoryDetail:
    """The memory and its whole version chain, walked both ways (newest first)."""
    return await gateway_state(request).service.get(principal, memory_id=memory_id)


@memories.delete(
    "/memories/{memory_id}", response_model=ForgetResult, responses=_NOT_FOUND, summary="Forget a memory"
)
async def forget(
    memory_id: MemoryId,
    options: Annotated[ForgetOptions, Query()],
    principal: Caller,
    request: Request,
) -> ForgetResult:
    """Soft-forget (status ``expired``: never recalled, still in history) or hard-delete a memory."""
    return await gateway_state(request).service.forget(principal, memory_id=memory_id, **fields(options))


@memories.post(
    "/recall",
    response_model=RecallResponse,
    responses={
        400: {
            "model": ErrorBody,
            "description": "Invalid field value (code invalid_request): time_from not before time_to "
            "(field time_from); or a body that is not UTF-8 (code invalid_encoding). A top_k above the "
            "configured maximum (stated in this schema) is a 422 validation_error.",
        }
    },
    summary="Recall memories",
)
async def recall(body: RecallRequest, principal: Caller, request: Request) -> RecallResponse:
    """The memories most relevant to the query, each with its scores and provenance; the recall's log
    (``memory.recalls.v1``, every candidate and which were returned) is published after the answer."""
    return await gateway_state(request).service.recall(principal, **fields(body))


@memories.post(
    "/recall/{query_id}/feedback",
    response_model=FeedbackResult,
    responses={
        400: {
            "model": ErrorBody,
            "description": "The same id in two lists (code invalid_request, field: the second list).",
        },
        404: {"model": ErrorBody, "description": "No such recall for this key's tenant (not_found)."},
        409: {
            "model": ErrorBody,
            "description": "An id this recall did not return (code conflict, field: its list).",
        },
    },
    summary="Say which recalled memories were used",
)
async def recall_feedback(
    query_id: Annotated[
        str, Path(min_length=1, max_length=64, description="query_id of the recall response.")
    ],
    body: FeedbackRequest,
    principal: Caller,
    request: Request,
) -> FeedbackResult:
    """Label the memories a recall returned: ``used`` (and optionally ``unused``, ``wrong``,
    ``outdated``); stored in ClickHouse for tuning, one label per (query, memory), so repeating the
    call changes nothing. Returned memories not listed count as unused."""
    return await gateway_state(request).service.feedback(principal, query_id=query_id, **fields(body))


@memories.post(
    "/sessions/{session_id}/close",
    status_code=202,
    response_model=Accepted,
    summary="Close a session (reflect)",
)
async def close_session(
    session_id: Annotated[
        str, Path(min_length=1, max_length=256, pattern=NOT_BLANK, description="The session that ended.")
    ],
    body: ReflectRequest,
    principal: Caller,
    request: Request,
) -> Accepted:
    """Publish a session close to ``memory.sessions.v1``: episode consolidation and semantic
    abstraction follow asynchronously."""
    return await gateway_state(request).service.reflect(principal, session_id=session_id, **fields(body))


review = APIRouter(prefix="/v1/quarantine", tags=["quarantine review (admin keys)"], responses=_ERRORS)
ItemId = Annotated[str, Path(description="Quarantine item id from GET /v1/quarantine.")]
_ITEM_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "No such item for this key's tenant (code not_found)."},
    409: {
        "model": ErrorBody,
        "description": "Blocked item (no content kept) or already reviewed (code conflict).",
    },
}


@review.get("", response_model=QuarantineList, summary="List quarantined items")
async def list_quarantine(
    query: Annotated[QuarantineListRequest, Query()], principal: Caller, request: Request
) -> QuarantineList:
    """The tenant's quarantined and blocked events, redacted, with reasons, source, trust and
    external_ref. Admin keys only (403 otherwise)."""
    return await ReviewService(gateway_state(request).resources).list(principal, **fields(query))


@review.post("/{item_id}/release", response_model=QuarantineView, responses=_ITEM_ERRORS, summary="Release")
async def release_quarantine(item_id: ItemId, principal: Caller, request: Request) -> QuarantineView:
    """Publish the item on through the pipeline (stored once, however often released)."""
    return await ReviewService(gateway_state(request).resources).release(principal, item_id=item_id)


@review.post("/{item_id}/reject", response_model=QuarantineView, responses=_ITEM_ERRORS, summary="Reject")
async def reject_quarantine(item_id: ItemId, principal: Caller, request: Request) -> QuarantineView:
    """Keep the item out of memory for good (it stays listed for the audit trail)."""
    return await ReviewService(gateway_state(request).resources).reject(principal, item_id=item_id)


users = APIRouter(prefix="/v1/users", tags=["memory"], responses=_ERRORS)
UserId = Annotated[str, Path(min_length=1, max_length=256, pattern=NOT_BLANK, description="The end user.")]


@users.delete("/{user_id}", response_model=ErasureReport, summary="Forget a whole user")
async def forget_user(user_id: UserId, principal: Caller, request: Request) -> ErasureReport:
    """Erase every memory of the user (deleted, events tombstoned, a watermark against events still
    in flight), its working memory and session keys in Redis and its access-log rows; answers what is
    left in each store (nothing). Tenant-wide keys only (403 for a per-agent key)."""
    return await ForgetService(gateway_state(request).resources).forget_user(principal, user_id=user_id)


@users.get("/{user_id}/erasure", response_model=ErasureReport, summary="What is left of a user")
async def erasure_report(user_id: UserId, principal: Caller, request: Request) -> ErasureReport:
    """Counts what of the user remains in the vector store, Redis and the ClickHouse access log (all
    0 after a complete forget). Tenant-wide keys only."""
    return await ForgetService(gateway_state(request).resources).erasure_report(principal, user_id=user_id)


operations = APIRouter(tags=["operations"])


async def _check_broker(state: GatewayState) -> str:
    ok = await state.resources.broker.ping(timeout=HEALTH_TIMEOUT_S)
    return "ok" if ok else f"Kafka did not answer within {HEALTH_TIMEOUT_S} s"


def _health_probe_record(dim: int) -> VectorRecord:
    """The canary point the health check writes and deletes again: tenant ``__healthz__`` (no API key
    maps to it), a dense and a one-term sparse vector and a payload, so the write reaches every
    storage of the point (dense, sparse, payload, payload index)."""
    vector = np.zeros(dim, dtype=np.float32)
    vector[0] = 1.0
    payload = {"tenant_id": HEALTH_TENANT, "user_id": HEALTH_TENANT, "status": "probe"}
    return VectorRecord(HEALTH_PROBE_ID, vector, payload, sparse=SparseVector((0,), (1.0,)))


async def _check_vector_store(state: GatewayState) -> str:
    def probe() -> None:
        store = state.resources.vector_store()
        store.count(MemoryFilter(tenant_id=HEALTH_TENANT))
        # A real write, undone at once: a store that still reads but can no longer write (a damaged
        # journal, a full or read-only disk) must not look healthy (issue 13, defect 1).
        store.upsert([_health_probe_record(state.resources.settings.embedder.dim)])
        store.delete([HEALTH_PROBE_ID])

    try:
        await asyncio.wait_for(asyncio.to_thread(probe), HEALTH_TIMEOUT_S)
    except TimeoutError:
        return f"vector store did not answer within {HEALTH_TIMEOUT_S} s"
    except HindsightError as exc:
        return f"vector store failed: {exc}"
    return "ok"


@operations.get(
    "/healthz",
    response_model=HealthResponse,
    responses={503: {"model": HealthResponse, "description": "A dependency is down."}},
    summary="Health (no auth)",
)
async def healthz(request: Request) -> JSONResponse:
    """200 when Kafka answers a metadata request and the vector store a count and a write (a canary
    point of tenant ``__healthz__`` upserted and deleted at once); else 503 naming the failed check.
    ``tuned`` lists the tuned-settings version and values each service of this process loaded at
    start-up."""
    state = gateway_state(request)
    broker, vectors = await asyncio.gather(_check_broker(state), _check_vector_store(state))
    checks = {"kafka": broker, "vector_store": vectors}
    healthy = all(value == "ok" for value in checks.values())
    tuned = {name: applied.as_dict() for name, applied in state.resources.tuned.items()}
    body = HealthResponse(status="ok" if healthy else "unavailable", checks=checks, tuned=tuned)
    return JSONResponse(body.model_dump(), status_code=200 if healthy else 503)


@operations.get("/metrics", response_class=Response, summary="Prometheus metrics (no auth)")
async def metrics() -> Response:
    """Prometheus text exposition of this process's metrics (``hindsight_*``)."""
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


def _error_response(status: int, body: ErrorBody, headers: dict[str, str] | None = None) -> JSONResponse:
    extra = {"WWW-Authenticate": 'Bearer realm="hindsight"'} if status == 401 else {}
    return JSONResponse(body.model_dump(), status_code=status, headers={**extra, **(headers or {})})


async def _request_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestError | RetryableError)
    return _error_response(*wire_error(exc))


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return _error_response(422, ErrorBody(error=validation_detail(exc.errors())))


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if isinstance(exc.__cause__, UnicodeDecodeError):  # FastAPI's body parser: bytes that are not UTF-8
        cause = exc.__cause__
        detail = ErrorDetail(
            code="invalid_encoding",
            message=f"the request body is not UTF-8 (byte {cause.start}: {cause.reason})",
            field="body",
            fix="encode the JSON body as UTF-8 (RFC 8259 section 8.1)",
        )
        return _error_response(400, ErrorBody(error=detail))
    fix = {
        404: "see /docs or /openapi.json for the routes",
        405: f"{request.method} is not allowed here; see /openapi.json for the methods of {request.url.path}",
    }.get(exc.status_code, "see /openapi.json")
    detail = ErrorDetail(
        code="not_found" if exc.status_code == 404 else "http_error",
        message=str(exc.detail),
        field=None,
        fix=fix,
    )
    headers = dict(exc.headers or {})
    if exc.status_code == 405:  # RFC 9110 section 15.5.6: Allow lists every method of the resource
        headers["Allow"] = _allowed_methods(request)
    return _error_response(exc.status_code, ErrorBody(error=detail), headers)


_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")


def _allowed_methods(request: Request) -> str:
    """Every method some route serves at the request's path, found by matching the path with each
    method (Starlette's own 405 names only the first route's, though each method is its own route)."""
    allowed = [
        method
        for method in _METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] is Match.FULL
            for route in request.app.router.routes
        )
    ]
    return ", ".join(allowed)


async def _unexpected_error(_: Request, exc: Exception) -> JSONResponse:
    # Starlette re-raises after this response, so the server logs the traceback once.
    detail = ErrorDetail(
        code="internal",
        message=f"internal error ({type(exc).__name__})",
        fix="retry; report it if it persists",
    )
    return _error_response(500, ErrorBody(error=detail))


def install(app: FastAPI) -> None:
    """Add the routers and the error handlers to ``app``."""
    app.include_router(memories)
    app.include_router(users)
    app.include_router(review)
    app.include_router(operations)
    app.add_exception_handler(RequestError, _request_error)
    app.add_exception_handler(RetryableError, _request_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected_error)  # the one top-level handler


__all__ = ["authenticate", "gateway_state", "install"]
