"""The gateway's error tree and its wire codes (HTTP ``{"error": {code, message, field, fix}}``, MCP
tool errors). Every class names its wire ``code`` and HTTP status; :func:`wire_error` maps any
:class:`~hindsight.errors.RequestError` (and a store outage) onto that shape.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from hindsight.errors import AuthenticationError, RequestError, RetryableError


class InvalidRequestError(RequestError):
    """Wire code ``invalid_request`` (HTTP 400): a field has a value the service cannot use."""

    code = "invalid_request"


class ForbiddenError(RequestError):
    """Wire code ``forbidden`` (HTTP 403): the key may not use this scope."""

    code = "forbidden"

    def __init__(self, message: str, *, field: str, fix: str) -> None:
        super().__init__(message, field=field, fix=fix, status_code=403)


class NotFoundError(RequestError):
    """Wire code ``not_found`` (HTTP 404): no such memory for this key's tenant.

    A memory of another tenant gives the same answer, so ids of other tenants are never revealed.
    """

    code = "not_found"

    def __init__(self, memory_id: str) -> None:
        super().__init__(
            f"memory {memory_id!r} not found",
            field="memory_id",
            fix="use an id returned by recall or history for this API key",
            status_code=404,
        )


class RecallNotFoundError(RequestError):
    """Wire code ``not_found`` (HTTP 404): no recall with this query id for this key's tenant.

    Another tenant's query id gives the same answer. A recall served by another gateway process is
    found once its log reached ClickHouse (normally within seconds).
    """

    code = "not_found"

    def __init__(self, query_id: str) -> None:
        super().__init__(
            f"recall {query_id!r} not found",
            field="query_id",
            fix="use the query_id of a recall made with this API key (retry in a few seconds if the "
            "recall was just made by another gateway instance)",
            status_code=404,
        )


class ConflictError(RequestError):
    """Wire code ``conflict`` (HTTP 409): the request contradicts the item's state."""

    code = "conflict"

    def __init__(self, message: str, *, field: str, fix: str) -> None:
        super().__init__(message, field=field, fix=fix, status_code=409)


class ItemNotFoundError(RequestError):
    """Wire code ``not_found`` (HTTP 404) for a quarantine item; another tenant's id gives the same."""

    code = "not_found"

    def __init__(self, item_id: str) -> None:
        super().__init__(
            f"quarantine item {item_id!r} not found",
            field="item_id",
            fix="use an id returned by GET /v1/quarantine for this API key",
            status_code=404,
        )


class ErrorDetail(BaseModel):
    """What went wrong, which field caused it and how to fix it."""

    code: str = Field(
        description="Wire code: invalid_request, validation_error, unauthenticated, forbidden, not_found, "
        "conflict, unavailable or internal."
    )
    message: str = Field(description="Human-readable description.")
    field: str | None = Field(None, description="The request field (or header) at fault, if any.")
    fix: str | None = Field(None, description="What to change to make the call succeed.")


class ErrorBody(BaseModel):
    """Every error response of the HTTP API."""

    error: ErrorDetail = Field(description="The error.")


def wire_code(error: RequestError) -> str:
    """Wire code of ``error``: the class's ``code``, ``unauthenticated`` for a missing/unknown key,
    else ``invalid_request``."""
    if isinstance(error, AuthenticationError):
        return "unauthenticated"
    return str(getattr(error, "code", "invalid_request"))


def wire_error(error: RequestError | RetryableError) -> tuple[int, ErrorBody]:
    """HTTP status and body for ``error``; a retryable store/model failure is ``unavailable`` (503)."""
    if isinstance(error, RequestError):
        detail = ErrorDetail(code=wire_code(error), message=str(error), field=error.field, fix=error.fix)
        return error.status_code, ErrorBody(error=detail)
    detail = ErrorDetail(
        code="unavailable",
        message=f"a backing store or model is unavailable: {error}",
        fix="retry with backoff; check /healthz",
    )
    return 503, ErrorBody(error=detail)


def tool_error_text(error: RequestError | RetryableError) -> str:
    """One-line text of an MCP tool error: ``"<code>: <message> (field: <f>; fix: <fix>)"``."""
    _, body = wire_error(error)
    detail = body.error
    parts = [f"field: {detail.field}"] if detail.field else []
    if detail.fix:
        parts.append(f"fix: {detail.fix}")
    suffix = f" ({'; '.join(parts)})" if parts else ""
    return f"{detail.code}: {detail.message}{suffix}"
