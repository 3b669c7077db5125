"""The operator console (``/console``): server-rendered Jinja2 pages with htmx (vendored, served from
``/console/static``), charts as PNGs drawn on the server (DESIGN.md section 10).

Pages: overview (users, recent recalls, consumer lag per stage, tuned settings), a user's memories on
a timeline by type and status with a paged table, one memory (version chain, provenance back to
events, the recalls that considered it and their labels), the "why" of a recall typed in (every
candidate's component scores and what became of it, nothing logged), a logged recall by query id,
quarantine items with their reasons, and tuning (plots, current vs tuned settings, run the tuner).

Access: admin API keys only (``KEY=TENANT@admin``; in local mode the dev key is an admin). The key is
typed once into the login form; the browser then holds an HttpOnly, SameSite=Strict session cookie
that is an HMAC of the key under a per-process secret (the key itself never sits in the browser, and
sessions end when the gateway restarts). ``Authorization: Bearer <admin key>`` works too (scripts).
Every page is confined to the key's tenant. Each response carries ``Server-Timing: render;dur=<ms>``.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from hindsight.brokers.admin import lag_reader
from hindsight.errors import AuthenticationError, HindsightError, RequestError
from hindsight.topology import STAGE_TOPICS
from services.gateway.auth import Principal, key_from_headers
from services.gateway.console import data
from services.gateway.console.charts import size_px, timeline_png
from services.gateway.state import GatewayState

HERE = Path(__file__).parent
STATIC = {"htmx.min.js": "text/javascript", "console.css": "text/css"}
COOKIE = "hindsight_console"
LAG_TIMEOUT_S = 5.0

templates = Jinja2Templates(directory=str(HERE / "templates"))
templates.env.filters["when"] = data.when
router = APIRouter(prefix="/console", include_in_schema=False)


class ConsoleSessions:
    """Admin keys -> session tokens (HMAC-SHA256 under a random per-process secret)."""

    def __init__(self, keys: dict[str, Principal]) -> None:
        self._secret = secrets.token_bytes(32)
        self._admins = {self.token(k): p for k, p in keys.items() if p.role == "admin"}

    def token(self, key: str) -> str:
        """The session token of ``key``."""
        return hmac.new(self._secret, key.encode(), hashlib.sha256).hexdigest()

    def principal(self, token: str | None) -> Principal | None:
        """The admin principal of a session token (``None``: unknown or not an admin)."""
        if not token:
            return None
        for known, principal in self._admins.items():
            if hmac.compare_digest(known, token):
                return principal
        return None


class NeedLogin(Exception):  # noqa: N818 (a control-flow signal, not an error)
    """No admin session: the handler redirects to the login page."""


def _state(request: Request) -> GatewayState:
    state: GatewayState = request.app.state.gateway
    return state


def _sessions(request: Request) -> ConsoleSessions:
    sessions: ConsoleSessions | None = getattr(request.app.state, "console_sessions", None)
    if sessions is None:
        sessions = ConsoleSessions(_state(request).settings.keys())
        request.app.state.console_sessions = sessions
    return sessions


def _timelines(request: Request) -> data.TimelineCache:
    cache: data.TimelineCache | None = getattr(request.app.state, "console_timelines", None)
    if cache is None:
        cache = data.TimelineCache()
        request.app.state.console_timelines = cache
    return cache


def admin(request: Request) -> Principal:
    """The admin principal of this request (session cookie or ``Authorization`` header).

    Raises:
        NeedLogin: neither holds an admin key.
    """
    sessions = _sessions(request)
    found = sessions.principal(request.cookies.get(COOKIE))
    if found is None:
        key = key_from_headers(dict(request.headers))
        if key:
            found = sessions.principal(sessions.token(key))
    if found is None:
        raise NeedLogin
    return found


def _page(request: Request, name: str, started: float, **context: Any) -> HTMLResponse:
    response = templates.TemplateResponse(request, name, {"request": request, **context})
    response.headers["Server-Timing"] = f"render;dur={(time.perf_counter() - started) * 1000:.1f}"
    return response


T = TypeVar("T")


async def _run(call: Callable[..., T], *args: Any) -> T:
    return await asyncio.to_thread(call, *args)


# -- static, login ---------------------------------------------------------------------------------------


@router.get("/static/{name}")
async def static(name: str) -> Response:
    """Vendored htmx and the stylesheet (nothing else is served from the folder)."""
    if name not in STATIC:
        return Response(status_code=404)
    return FileResponse(
        HERE / "static" / name, media_type=STATIC[name], headers={"Cache-Control": "max-age=3600"}
    )


@router.get("/login")
async def login_form(request: Request, error: str | None = None) -> HTMLResponse:
    """The login form (an admin API key)."""
    return _page(request, "login.html", time.perf_counter(), error=error)


@router.post("/login")
async def login(request: Request, key: Annotated[str, Form()]) -> Response:
    """Check the key; an admin key gets a session cookie and goes to the overview."""
    sessions = _sessions(request)
    token = sessions.token(key.strip())
    if sessions.principal(token) is None:
        try:
            _state(request).keys.principal(key.strip())
            message = "this API key is not an admin key (KEY=TENANT@admin in HINDSIGHT_GATEWAY_API_KEYS)"
        except AuthenticationError:
            message = "unknown API key"
        return _page(request, "login.html", time.perf_counter(), error=message)
    response = RedirectResponse("/console", status_code=303)
    secure = request.url.scheme == "https"
    response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/console", secure=secure)
    return response


@router.post("/logout")
async def logout() -> Response:
    """Drop the session cookie."""
    response = RedirectResponse("/console/login", status_code=303)
    response.delete_cookie(COOKIE, path="/console")
    return response


# -- pages -----------------------------------------------------------------------------------------------


@router.get("")
async def overview(request: Request) -> HTMLResponse:
    """Users of the tenant, recent recalls, tuned settings; consumer lag loads by htmx."""
    started = time.perf_counter()
    principal = admin(request)
    analytics = _state(request).resources.analytics()
    users, recalls, tuning = await asyncio.gather(
        _run(analytics.users, principal.tenant_id),
        _run(analytics.recent_recalls, principal.tenant_id, None, 20),
        _run(data.tuning_view, _state(request).resources),
    )
    return _page(
        request, "index.html", started, principal=principal, users=users, recalls=recalls, tuning=tuning
    )


@router.get("/lag")
async def lag(request: Request) -> HTMLResponse:
    """Fragment: consumer lag (messages not yet committed) of every stage, per topic."""
    started = time.perf_counter()
    admin(request)
    resources = _state(request).resources
    stages = resources.stage_topics or STAGE_TOPICS  # a lone gateway runs no stage: the pipeline's
    rows: list[dict[str, Any]] = []
    error = None
    if not resources.bootstrap:
        error = "no Kafka bootstrap known to this process"
    else:
        try:
            async with (
                asyncio.timeout(LAG_TIMEOUT_S),
                lag_reader(resources.bootstrap, LAG_TIMEOUT_S) as reader,
            ):
                for stage, topics in stages.items():
                    group = resources.settings.kafka.group(stage)
                    per_partition = await reader.lag(group, topics)
                    by_topic: dict[str, int] = {}
                    for tp, n in per_partition.items():
                        by_topic[tp.topic] = by_topic.get(tp.topic, 0) + n
                    rows.append(
                        {"stage": stage, "group": group, "lag": sum(by_topic.values()), "topics": by_topic}
                    )
        except (TimeoutError, HindsightError, OSError) as exc:  # the broker is down or slow: say so
            error = f"Kafka did not answer: {exc!r}"
        except Exception as exc:  # noqa: BLE001 (aiokafka's errors share no base with ours; shown, not raised)
            error = f"lag unavailable: {exc!r}"
    return _page(request, "_lag.html", started, rows=rows, error=error)


@router.get("/users/{user_id}")
async def user(
    request: Request,
    user_id: str,
    *,
    page: Annotated[int, Query(ge=1)] = 1,
    status: str | None = None,
    type: str | None = None,
    fresh: bool = False,
) -> HTMLResponse:
    """A user's memories: counts by type and status (facet counts), the timeline chart, a page of the
    table newest first (one ordered scroll); ``fresh``: the chart is read again instead of the one read
    in the last 30 s."""
    started = time.perf_counter()
    principal = admin(request)
    store = _state(request).resources.vector_store()
    counts = await _run(data.read_counts, store, principal.tenant_id, user_id)
    shown = counts.matching(status, type)
    pages = max(1, -(-shown // data.PAGE))
    page = min(page, pages)
    flt = data.user_filter(principal.tenant_id, user_id, status, type)
    rows = await _run(data.page_rows, store, flt, page, data.PAGE, shown) if shown else []
    width, height = size_px()
    return _page(
        request,
        "user.html",
        started,
        principal=principal,
        user_id=user_id,
        total=counts.total,
        counts=counts.by_type,
        statuses=data.STATUSES,
        types=data.TYPES,
        rows=rows,
        page=page,
        pages=pages,
        shown=shown,
        fresh=fresh,
        chart_width=width,
        chart_height=height,
        status=status or "",
        type=type or "",
    )


@router.get("/users/{user_id}/timeline.png")
async def user_timeline(request: Request, user_id: str, fresh: bool = False) -> Response:
    """The timeline chart (PNG) of a user's memories by type and status (reused for 30 s unless
    ``fresh``)."""
    started = time.perf_counter()
    principal = admin(request)
    store = _state(request).resources.vector_store()
    timelines = _timelines(request)
    timeline = await _run(lambda: timelines.get(store, principal.tenant_id, user_id, fresh=fresh))
    title = f"{user_id}: {len(timeline)} memories by created_at"
    tenant = principal.tenant_id
    png = await _run(timelines.chart, timeline, tenant, user_id, lambda t: timeline_png(t, title))
    headers = {
        "Server-Timing": f"render;dur={(time.perf_counter() - started) * 1000:.1f}",
        "Cache-Control": f"private, max-age={int(data.TIMELINE_TTL_S)}",
    }
    return Response(png, media_type="image/png", headers=headers)


@router.get("/memories/{memory_id}")
async def memory(request: Request, memory_id: str) -> HTMLResponse:
    """One memory: record, version chain, provenance, the recalls that considered it."""
    started = time.perf_counter()
    principal = admin(request)
    resources = _state(request).resources
    versions, accesses = await asyncio.gather(
        _run(data.chain, resources.vector_store(), principal.tenant_id, memory_id),
        _run(resources.analytics().memory_accesses, principal.tenant_id, memory_id),
    )
    return _page(request, "memory.html", started, principal=principal, versions=versions, accesses=accesses,
                 memory_id=memory_id)  # fmt: skip


@router.get("/recall")
async def recall_form(request: Request, user_id: str = "", query: str = "") -> HTMLResponse:
    """The "why" page: type a query for a user, see every candidate and its scores."""
    started = time.perf_counter()
    principal = admin(request)
    return _page(request, "recall.html", started, principal=principal, user_id=user_id, query=query, why=None)


@router.post("/recall")
async def recall_why(
    request: Request,
    user_id: Annotated[str, Form()],
    query: Annotated[str, Form()],
    top_k: Annotated[int, Form()] = 10,
) -> HTMLResponse:
    """Run the recall pipeline (nothing logged) and show each candidate's component scores and fate;
    an htmx request gets the fragment, a plain form post the whole page."""
    started = time.perf_counter()
    principal = admin(request)
    why: dict[str, Any]
    try:
        result, params, rows = await _state(request).service.explain(
            principal, query=query, user_id=user_id, top_k=top_k
        )
        payloads = {c.id: c.payload for c in result.found.values()}
        why = {
            "parsed": result.parsed,
            "params": params,
            "timings": result.timings_ms,
            "rows": [{"c": r, "p": payloads.get(r.memory_id, {})} for r in rows],
            "returned": sum(1 for r in rows if r.outcome == "returned"),
            "error": None,
        }
    except RequestError as exc:
        why = {"error": f"{exc} ({exc.field}: {exc.fix})"}
    name = "_why.html" if request.headers.get("HX-Request") else "recall.html"
    return _page(request, name, started, principal=principal, user_id=user_id, query=query, why=why)


@router.get("/recalls/{query_id}")
async def logged_recall(request: Request, query_id: str) -> HTMLResponse:
    """A logged recall (ClickHouse): the redacted query, timings, every candidate and its label."""
    started = time.perf_counter()
    principal = admin(request)
    detail = await _run(_state(request).resources.analytics().recall_detail, principal.tenant_id, query_id)
    return _page(request, "recall_log.html", started, principal=principal, detail=detail, query_id=query_id)


@router.get("/quarantine")
async def quarantine(request: Request, user_id: str | None = None) -> HTMLResponse:
    """Quarantined and blocked interactions of the tenant with their reasons and review status
    (the guard's review store; release or reject them with ``POST /v1/quarantine/{id}/...``)."""
    started = time.perf_counter()
    principal = admin(request)
    store = _state(request).resources.quarantine()
    found = await _run(lambda: store.find(principal.tenant_id, user_id=user_id or None, limit=200))
    items = [
        {
            "id": item.id,
            "status": item.status,
            "quarantined_at": item.record.quarantined_at,
            "user_id": item.record.user_id,
            "agent_id": item.record.agent_id,
            "verdict": item.record.verdict,
            "reasons": item.record.reasons,
            "source": item.record.source,
            "content": item.record.content_redacted,
        }
        for item in found
    ]
    return _page(request, "quarantine.html", started, principal=principal, items=items, user_id=user_id or "")


@router.get("/tuning")
async def tuning(request: Request, message: str | None = None) -> HTMLResponse:
    """Tuning plots, the settings this process loaded vs the tuned file, the last report."""
    started = time.perf_counter()
    principal = admin(request)
    view = await _run(data.tuning_view, _state(request).resources)
    return _page(request, "tuning.html", started, principal=principal, view=view, message=message)


@router.get("/tuning/plots/{name}.png")
async def tuning_plot(request: Request, name: str) -> Response:
    """One PNG of the last tuning run."""
    admin(request)
    path = data.plot_path(_state(request).resources, name)
    if path is None:
        return Response(status_code=404)
    return FileResponse(path, media_type="image/png", headers={"Cache-Control": "no-cache"})


@router.post("/tuning/run")
async def tuning_run(request: Request, write: Annotated[bool, Form()] = False) -> Response:
    """Run ``hindsight tune`` in this process (it holds the embedded ClickHouse); ``write`` also writes a
    new tuned-settings version (services apply it at their next start)."""
    admin(request)
    from hindsight.tuning import settings_file  # noqa: PLC0415
    from hindsight.tuning.run import Current, TuneOptions, run_and_write  # noqa: PLC0415

    resources = _state(request).resources
    path = settings_file.TuningSettings().path(resources.settings.runtime.data_dir)
    effective: dict[str, Any] = {}
    for applied in resources.tuned.values():
        effective.update(applied.effective)
    current = Current(**{k: v for k, v in effective.items() if k in Current.__dataclass_fields__})
    outcome = await _run(
        lambda: run_and_write(
            resources.analytics(), TuneOptions(), current, tuned_path=path, plots_dir=None, write=write
        )
    )
    fitted = ", ".join(sorted(outcome.report.proposed())) or "nothing (see the refusals below)"
    wrote = f"; wrote version {outcome.written.version}" if outcome.written is not None else ""
    return RedirectResponse(f"/console/tuning?message=fitted {fitted}{wrote}", status_code=303)


async def _login_redirect(request: Request, exc: Exception) -> Response:
    del exc
    if request.headers.get("HX-Request"):
        return Response(status_code=401, headers={"HX-Redirect": "/console/login"})
    return RedirectResponse("/console/login", status_code=303)


def exception_handlers() -> dict[type[Exception], Callable[[Request, Exception], Awaitable[Response]]]:
    """Handlers the app installs for the console."""
    return {NeedLogin: _login_redirect}
