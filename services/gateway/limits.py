"""A request body size limit for the gateway (pure ASGI: no cost on requests within it)."""

from __future__ import annotations

import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodySizeLimit:
    """Refuse an HTTP request whose body exceeds ``max_bytes`` with 413 and the gateway's error body,
    before the app reads it: at once when ``Content-Length`` says so (a 30 MB body was read and parsed in
    full only to fail the content length check), else while a body without ``Content-Length``
    (``Transfer-Encoding: chunked``) arrives: it is gathered up to ``max_bytes`` and then handed to the
    app, so no request body larger than the limit is ever held or parsed."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or ()).get(b"content-length")
        if length is not None:
            if length.isdigit() and int(length) > self.max_bytes:
                await self._refuse(send, int(length))
                return
            await self.app(scope, receive, send)
            return
        messages: list[Message] = []
        size = 0
        while True:  # a body of unknown length: gather it, bounded
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break  # the client went away: let the app see it
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                await self._refuse(send, size, at_least=True)
                return
            if not message.get("more_body", False):
                break
        replay = iter(messages)

        async def replayed() -> Message:
            return next(replay, None) or await receive()

        await self.app(scope, replayed, send)

    async def _refuse(self, send: Send, length: int, *, at_least: bool = False) -> None:
        size = f"over {self.max_bytes}" if at_least else str(length)
        body: dict[str, Any] = {
            "error": {
                "code": "payload_too_large",
                "message": f"the request body is {size} bytes; this gateway reads at most {self.max_bytes}",
                "field": "body",
                "fix": "send a shorter body; split a long document into several retains "
                "(HINDSIGHT_GATEWAY_MAX_BODY_BYTES sets the limit)",
            }
        }
        payload = json.dumps(body, separators=(",", ":")).encode()  # as JSONResponse renders
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
