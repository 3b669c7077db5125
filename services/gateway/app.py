"""Gateway app: HTTP routes and the MCP streamable-HTTP endpoint on one ASGI app.

- :func:`build_asgi` over already-open :class:`~hindsight.runtime.Resources` (tests, the embedded
  runner);
- :func:`create_app` for ``uvicorn services.gateway.app:create_app --factory``: settings are read
  there, the broker and the resources are opened in the app's lifespan;
- :func:`run_http` to serve :func:`create_app` with uvicorn on ``HINDSIGHT_GATEWAY_HOST``/``_PORT``;
- :func:`run_stdio` for ``hindsight mcp-stdio``: the MCP server over stdin/stdout, authenticated by
  ``HINDSIGHT_API_KEY``.

The MCP endpoint is ``/mcp`` (exactly); the app's lifespan runs the MCP session manager, so the
MCP sub-app's own lifespan is not needed. The gateway only publishes: it has no subscribers.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from hindsight.errors import AuthenticationError, ConfigurationError
from hindsight.observability import configure_logging
from hindsight.runtime import make_broker, open_resources
from hindsight.settings import AllSettings, exit_on_config_error
from services.gateway import console, http
from services.gateway.auth import ApiKeys
from services.gateway.errors import wire_error
from services.gateway.limits import BodySizeLimit
from services.gateway.mcp_server import build_mcp_server
from services.gateway.models import finish_schema
from services.gateway.service import MemoryService
from services.gateway.settings import GatewaySettings
from services.gateway.state import GatewayState

if TYPE_CHECKING:
    from hindsight.runtime import Resources

MCP_PATH = "/mcp"
STDIO_KEY_ENV = "HINDSIGHT_API_KEY"

OpenState = Callable[[], AbstractAsyncContextManager[GatewayState]]


class RequireApiKey:
    """ASGI wrapper answering 401 (``unauthenticated``, naming the header and the fix) to any HTTP
    request without a valid API key, before the wrapped app (the MCP transport) sees it."""

    def __init__(self, app: ASGIApp, keys: ApiKeys) -> None:
        self._app = app
        self._keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Forward authenticated requests; answer the others with 401."""
        if scope["type"] == "http":
            try:
                self._keys.from_headers(Headers(scope=scope))
            except AuthenticationError as exc:
                status, body = wire_error(exc)
                response = JSONResponse(
                    body.model_dump(),
                    status_code=status,
                    headers={"WWW-Authenticate": 'Bearer realm="hindsight"'},
                )
                await response(scope, receive, send)
                return
        await self._app(scope, receive, send)


def gateway_state(resources: Resources, settings: GatewaySettings) -> GatewayState:
    """The state both transports share, over open ``resources``; a tuned similarity floor is applied
    from the tuned-settings file unless the environment sets one."""
    resources.apply_tuned("gateway", settings)
    return GatewayState(
        service=MemoryService(resources, settings),
        keys=ApiKeys(settings.keys()),
        resources=resources,
        settings=settings,
    )


def _assemble(
    settings: GatewaySettings, open_state: OpenState, initial: GatewayState | None = None
) -> FastAPI:
    """The FastAPI app with the HTTP routes, ``/mcp`` and a lifespan that opens the state, then runs
    the MCP session manager."""
    app: FastAPI

    def current() -> GatewayState:
        state: GatewayState = app.state.gateway
        return state

    mcp = build_mcp_server(current, settings.limits())
    mcp_app = mcp.streamable_http_app(
        streamable_http_path=MCP_PATH, host=settings.host, json_response=settings.mcp_json_response
    )

    @asynccontextmanager
    async def lifespan(application: FastAPI) -> AsyncIterator[None]:
        async with open_state() as state:
            application.state.gateway = state
            # the access log drains after the last request and before open_state stops the broker
            async with state.service.access_log.running(), mcp.session_manager.run():
                yield

    app = FastAPI(
        title="Hindsight gateway",
        version="0.1.0",
        summary="Long-term memory for LLM agents: retain, recall, reflect, forget, history.",
        description=(
            "HTTP API of Hindsight. The same operations are MCP tools at `/mcp` (streamable HTTP). "
            "Authenticate with `Authorization: Bearer <key>` or `X-API-Key: <key>`; the key fixes the tenant."
        ),
        lifespan=lifespan,
    )
    if initial is not None:
        app.state.gateway = initial

    def openapi() -> dict[str, Any]:
        """FastAPI's document with this server's settings-dependent bounds and the zone names filled in."""
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title,
                version=app.version,
                summary=app.summary,
                description=app.description,
                routes=app.routes,
            )
            app.openapi_schema = finish_schema(document, settings.limits(), zone_enum=True)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    http.install(app)
    console.install(app)
    app.router.routes.append(
        Route(MCP_PATH, endpoint=RequireApiKey(mcp_app, ApiKeys(settings.keys())), include_in_schema=False)
    )
    return app


def build_asgi(resources: Resources, settings: GatewaySettings) -> FastAPI:
    """The gateway over already-open ``resources`` (the caller owns and closes them, and connects the
    broker). Serve it with its lifespan (uvicorn does; it starts the MCP session manager)."""
    state = gateway_state(resources, settings)

    @asynccontextmanager
    async def reuse() -> AsyncIterator[GatewayState]:
        yield state

    return _assemble(settings, reuse, initial=state)


async def _warm_up(resources: Resources) -> None:
    """Open the vector store and load the embedder before serving, off the event loop (the first
    recall would otherwise pay the model load, ~1 s)."""
    await asyncio.to_thread(resources.vector_store)
    await asyncio.to_thread(resources.embedder)


def create_app() -> FastAPI:
    """App factory for ``uvicorn services.gateway.app:create_app --factory``.

    Settings are read here; the broker is connected (publish only) and resources opened in the
    lifespan, and closed when the server stops.

    A configuration error (no Kafka bootstrap, weak keys in production, an invalid variable) is one
    line on stderr naming the setting, and exit status 2.
    """
    with exit_on_config_error():
        cfg = AllSettings()
        gateway = GatewaySettings()
        broker = make_broker(cfg.kafka)
    configure_logging(cfg.runtime)

    @asynccontextmanager
    async def open_state() -> AsyncIterator[GatewayState]:
        async with open_resources(cfg, broker) as resources:
            await broker.connect()
            try:
                await _warm_up(resources)
                yield gateway_state(resources, gateway)
            finally:
                await broker.stop()

    return _assemble(gateway, open_state)


def run_http() -> None:
    """Serve :func:`create_app` with uvicorn on ``GatewaySettings.host``:``port`` until SIGINT/SIGTERM.

    A configuration error is one line on stderr naming the setting, and exit status 2.
    """
    import uvicorn  # noqa: PLC0415 (only the HTTP server needs it)

    with exit_on_config_error():
        settings = GatewaySettings()
    uvicorn.run(
        f"{__name__}:create_app",
        factory=True,
        host=settings.host,
        port=settings.port,
        ws="none",
        timeout_keep_alive=settings.keep_alive_s,
    )


async def run_stdio() -> None:
    """Serve the MCP tools over stdin/stdout as the principal of ``HINDSIGHT_API_KEY``.

    Raises:
        ConfigurationError: ``HINDSIGHT_API_KEY`` is missing or not a configured key, or the
            settings are unusable.
    """
    cfg = AllSettings()
    gateway = GatewaySettings()
    configure_logging(cfg.runtime)  # logs go to stderr; stdout carries the protocol
    keys = ApiKeys(gateway.keys())
    try:
        principal = keys.principal(os.environ.get(STDIO_KEY_ENV))
    except AuthenticationError as exc:
        raise ConfigurationError(
            f"{STDIO_KEY_ENV}: {exc}; set it to one of the keys of HINDSIGHT_GATEWAY_API_KEYS"
        ) from exc
    broker = make_broker(cfg.kafka)
    async with open_resources(cfg, broker) as resources:
        await broker.connect()
        try:
            await _warm_up(resources)
            resources.apply_tuned("gateway", gateway)
            state = GatewayState(
                service=MemoryService(resources, gateway),
                keys=keys,
                resources=resources,
                settings=gateway,
                stdio_principal=principal,
            )
            async with state.service.access_log.running():
                await build_mcp_server(lambda: state, gateway.limits()).run_stdio_async()
        finally:
            await broker.stop()
