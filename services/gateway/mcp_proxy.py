"""``hindsight mcp-stdio`` against a running Hindsight: MCP over stdio, forwarded to the gateway's
``/mcp`` (streamable HTTP).

The embedded stores allow one process per data directory (qdrant-edge, chDB, the broker's log), so
a second process must not open them while ``hindsight up`` runs (issue 13, defects 1 and 8). An
MCP client that speaks only stdio (a desktop assistant, an IDE) therefore reaches the running
service through this proxy: every ``tools/list`` and ``tools/call`` is forwarded to the gateway
with ``Authorization: Bearer $HINDSIGHT_API_KEY`` and the answer returned unchanged, so the tools,
their schemas, their validation and their errors are exactly the gateway's, and the tenant comes
from the key as over HTTP. The proxy holds no store and no broker connection.

The gateway is found from ``HINDSIGHT_GATEWAY_URL``, else from the file a running ``hindsight up``
keeps in its data directory (:mod:`services.cli.discovery`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import mcp_types as types
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from hindsight.errors import ConfigurationError

log = logging.getLogger("hindsight.mcp_proxy")

GATEWAY_URL_ENV = "HINDSIGHT_GATEWAY_URL"
"""Base URL of the gateway to forward to (e.g. ``http://127.0.0.1:8080``)."""
API_KEY_ENV = "HINDSIGHT_API_KEY"
"""The API key the proxy sends with every request (it fixes the tenant)."""
REQUEST_TIMEOUT_S = 120.0
"""Longest a forwarded call may take (a recall with rerank on a busy CPU, a retain awaiting Kafka)."""


@asynccontextmanager
async def _upstream(url: str, api_key: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {api_key}"}
    async with httpx2.AsyncClient(headers=headers, timeout=REQUEST_TIMEOUT_S) as http:
        transport = streamable_http_client(f"{url.rstrip('/')}/mcp", http_client=http)
        async with Client(transport) as client:
            yield client


def proxy_server(upstream: Client) -> Server[Any]:
    """A low-level MCP server whose tools are ``upstream``'s, every call forwarded to it.

    A call that fails on the way (the gateway stopped, a timeout) is answered as a tool error
    ``unavailable: ...`` naming the gateway, never as a protocol error, like the gateway's own
    outage errors.
    """

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return await upstream.list_tools(cursor=params.cursor if params is not None else None)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        try:
            return await upstream.call_tool(params.name, params.arguments)
        except (httpx2.HTTPError, OSError) as exc:
            log.warning("forwarding a tool call failed", extra={"tool": params.name, "error": repr(exc)})
            text = (
                f"unavailable: the Hindsight gateway did not answer ({exc!r}) "
                "(fix: check that 'hindsight up' runs, then retry)"
            )
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)

    return Server(
        "hindsight",
        instructions=upstream.instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def run_stdio_proxy(url: str, api_key: str | None) -> None:
    """Serve MCP on stdin/stdout, forwarding every tool call to the gateway at ``url``.

    Raises:
        ConfigurationError: no API key (``HINDSIGHT_API_KEY``), or the gateway at ``url`` cannot be
            reached or refuses the key (the message names the URL).
    """
    if not api_key:
        raise ConfigurationError(
            f"{API_KEY_ENV} is not set: the gateway needs an API key (it fixes the tenant)"
        )
    logging.getLogger("httpx2").setLevel(logging.WARNING)  # a line per forwarded request otherwise
    try:
        async with _upstream(url, api_key) as upstream:
            await upstream.list_tools()  # fail fast on a wrong URL or key, before the client waits
            server = proxy_server(upstream)
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())
    except (httpx2.HTTPError, OSError) as exc:
        raise ConfigurationError(
            f"cannot reach the Hindsight gateway at {url} ({exc!r}): start 'hindsight up' or fix "
            f"{GATEWAY_URL_ENV}"
        ) from exc
