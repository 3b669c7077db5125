"""The gateway's error tree and its wire codes (HTTP ``{"error": {code, message, field, fix}}``, MCP
tool errors). Every class names its wire ``code`` and HTTP status; :func:`wire_error` maps any
:class:`~hindsight.errors.RequestError` (and a store outage) onto that shape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from pydantic import BaseModel, Field

from hindsight.errors import AuthenticationError, RequestError, RetryableError

_LOCATIONS = ("body", "query", "path", "header")
WHITESPACE = (
    r"\t\n\u000b\f\r \u001c-\u001f\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
r"""A character-class body of every character that is whitespace to Python's ``\s`` or to ECMA-262's
(the regex dialect of JSON-Schema patterns): the two differ on U+001C-U+001F, U+0085 and U+FEFF, so
a pattern built on ``\s`` would let the published schema and the server disagree."""
NOT_BLANK = f"[^{WHITESPACE}]"
"""Pattern of every text field that must hold a non-whitespace character (in either dialect)."""
SCOPE = f"^(global|agent:[^{WHITESPACE}]+)$"
"""Pattern of a scope: ``global`` or ``agent:<id>`` with no whitespace in the id."""


class InvalidRequestError(RequestError):
    """Wire code ``invalid_request`` (HTTP 400): a field has a value the service cannot use."""

    code = "invalid_request"


class OutOfRangeError(RequestError):
    """Wire code ``validation_error`` (HTTP 422): a value outside a bound that the published schema states
    from the running settings (``top_k`` up to ``HINDSIGHT_GATEWAY_MAX_TOP_K``, history ``limit`` up to
    ``HINDSIGHT_GATEWAY_HISTORY_MAX``; ``/openapi.json`` and the MCP tool schemas carry the maximum), so it
    is a schema violation like any other."""

    code = "validation_error"

    def __init__(self, message: str, *, field: str, fix: str) -> None:
        super().__init__(message, field=field, fix=fix, status_code=422)


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


class PayloadTooLargeError(RequestError):
    """Wire code ``payload_too_large`` (HTTP 413): the event is larger than the broker accepts."""

    code = "payload_too_large"

    def __init__(self, message: str, *, field: str, fix: str) -> None:
        super().__init__(message, field=field, fix=fix, status_code=413)


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
        description="Wire code: invalid_request (400), invalid_encoding (400: the body is not UTF-8), "
        "validation_error (422), unauthenticated (401), forbidden (403), not_found (404), conflict (409), "
        "payload_too_large (413), http_error (405 and other protocol errors), unavailable (503) or internal "
        "(500)."
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


_FIXES = {
    "missing": "add the required field '{field}'",
    "extra_forbidden": "remove '{field}': it is not a parameter of this call",
    "timezone_aware": "send '{field}' with a UTC offset, e.g. 2026-03-02T09:30:00+08:00 or ...Z",
}


_PATTERNS: Final[dict[str, tuple[str, str]]] = {
    NOT_BLANK: ("must not be blank", "send a '{field}' with at least one non-whitespace character"),
    SCOPE: (
        "must be 'global' or 'agent:<id>'",
        "send '{field}' as 'global' (every agent of the tenant) or 'agent:<id>' (that agent only)",
    ),
}
"""Pattern -> (message, fix) for the patterns of our fields: words instead of the regular expression."""


def _fix(kind: str, field: str, msg: str, ctx: Mapping[str, Any] | None) -> tuple[str, str]:
    """``(field, fix)`` for one pydantic error type: JSON syntax and body shape get a real remedy."""
    if kind == "json_invalid":
        return "body", f"send a syntactically valid JSON object ({msg})"
    if field in ("", "body") and kind in ("model_attributes_type", "dict_type", "missing"):
        return "body", "send a JSON object with the header 'Content-Type: application/json'"
    known = _PATTERNS.get((ctx or {}).get("pattern", "")) if kind == "string_pattern_mismatch" else None
    if known is not None:
        return field, known[1].format(field=field)
    return field, _FIXES.get(kind, "send a valid '{field}': {msg}").format(field=field, msg=msg)


def _readable(error: Mapping[str, Any]) -> str:
    """Pydantic's message of ``error``, except where it would show a regular expression or a Python
    type: a blank text, a malformed scope, a body that is not a JSON object."""
    kind = error.get("type")
    known = (
        _PATTERNS.get((error.get("ctx") or {}).get("pattern", ""))
        if kind == "string_pattern_mismatch"
        else None
    )
    if known is not None:
        return known[0]
    loc = [str(part) for part in error.get("loc", ())]
    if kind in ("model_attributes_type", "dict_type") and loc in (["body"], []):
        return "not a JSON object (send one, with 'Content-Type: application/json')"
    return str(error.get("msg"))


def validation_detail(errors: Sequence[Mapping[str, Any]]) -> ErrorDetail:
    """The ``validation_error`` detail of pydantic ``errors`` (HTTP 422 and MCP argument errors alike):
    the first error names the field and the fix; the message lists every error.

    A leading ``body``/``query``/``path``/``header`` in an error's location (FastAPI's) is dropped,
    so a field is named the same over HTTP and MCP.
    """
    first = errors[0] if errors else {"loc": (), "msg": "invalid request", "type": ""}

    def name(error: Mapping[str, Any]) -> str:
        loc = [str(part) for part in error.get("loc", ())]
        return ".".join(loc[1:] if len(loc) > 1 and loc[0] in _LOCATIONS else loc)

    kind = str(first.get("type", ""))
    ctx = first.get("ctx")
    field, fix = _fix(
        kind,
        "body" if kind == "json_invalid" else name(first),
        str(first.get("msg")),
        ctx if isinstance(ctx, Mapping) else None,
    )
    missing = [name(e) for e in errors if e.get("type") == "missing"]
    if kind == "missing" and len(missing) > 1:
        fix = "add the required fields " + ", ".join(f"'{m}'" for m in missing)

    def line(error: Mapping[str, Any]) -> str:
        if error.get("type") == "json_invalid":
            loc = [str(part) for part in error.get("loc", ())]
            where = f" at character {loc[-1]}" if loc and loc[-1].isdigit() else ""
            reason = (error.get("ctx") or {}).get("error")
            return f"body: not valid JSON{where}" + (f" ({reason})" if reason else "")
        return f"{name(error) or 'body'}: {_readable(error)}"

    return ErrorDetail(
        code="validation_error",
        message="; ".join(line(e) for e in errors) or "invalid request",
        field=field or None,
        fix=fix,
    )
