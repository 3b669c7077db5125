"""A request body size limit for the gateway (pure ASGI: no cost on requests within it)."""

from __future__ import annotations

import json
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send


class BodySizeLimit:
    """Refuse an HTTP request whose ``Content-Length`` exceeds ``max_bytes`` with 413 and the
    gateway's error body, before the body is read (a 30 MB body was read and parsed in full only to
    fail the content length check). A chunked body without ``Content-Length`` is bounded by the
    fields' own limits after it is read."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            length = dict(scope.get("headers") or ()).get(b"content-length")
            if length is not None and length.isdigit() and int(length) > self.max_bytes:
                await self._refuse(send, int(length))
                return
        await self.app(scope, receive, send)

    async def _refuse(self, send: Send, length: int) -> None:
        body: dict[str, Any] = {
            "error": {
                "code": "payload_too_large",
                "message": f"the request body is {length} bytes; this gateway reads at most {self.max_bytes}",
                "field": "body",
                "fix": "send a shorter body; split a long document into several retains "
                "(HINDSIGHT_GATEWAY_MAX_BODY_BYTES sets the limit)",
            }
        }
        payload = json.dumps(body).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})
