"""The request body limit (pure ASGI logic): bodies with and without ``Content-Length``."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
from starlette.types import Receive, Scope, Send

from services.gateway.limits import BodySizeLimit

LIMIT = 1000


async def _echo_length(scope: Scope, receive: Receive, send: Send) -> None:
    """An app that reads the whole body and answers its length."""
    size, more = 0, True
    while more:
        message = await receive()
        size += len(message.get("body", b""))
        more = message.get("more_body", False)
    payload = str(size).encode()
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(payload))]}
    )
    await send({"type": "http.response.body", "body": payload})


def _client() -> httpx.AsyncClient:
    app = BodySizeLimit(_echo_length, max_bytes=LIMIT)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway")


async def _chunks(n: int, size: int) -> AsyncIterator[bytes]:
    for _ in range(n):
        yield b"x" * size


async def test_a_body_over_the_limit_is_413_whether_or_not_it_says_its_length() -> None:
    async with _client() as client:
        declared = await client.post("/v1/memories", content=b"x" * (LIMIT + 1))
        chunked = await client.post("/v1/memories", content=_chunks(5, 300))  # no Content-Length
    for resp in (declared, chunked):
        assert resp.status_code == 413, resp.text
        error = resp.json()["error"]
        assert (error["code"], error["field"]) == ("payload_too_large", "body")
        assert "HINDSIGHT_GATEWAY_MAX_BODY_BYTES" in error["fix"]
    assert "is 1001 bytes" in declared.json()["error"]["message"]
    assert "over 1000 bytes" in chunked.json()["error"]["message"]
    assert b'{"error":{"code":"payload_too_large"' in declared.content  # rendered as every other error


async def test_a_body_within_the_limit_reaches_the_app_whole_in_either_form() -> None:
    async with _client() as client:
        declared = await client.post("/v1/memories", content=b"x" * LIMIT)
        chunked = await client.post("/v1/memories", content=_chunks(4, 250))
    assert (declared.status_code, declared.text) == (200, str(LIMIT))
    assert (chunked.status_code, chunked.text) == (200, str(LIMIT))
