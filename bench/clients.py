"""Real HTTP and MCP clients driving the gateway, run as their own process (``python -m bench.clients``).

The client runs apart from the gateway so that its CPU is not counted as the gateway's and its
event loop does not share the server's (and several client processes share the callers, so that
one client's CPU does not queue them: an MCP client call costs a few ms of CPU). It reads one JSON
spec on one line of stdin::

    {"url": "http://127.0.0.1:PORT", "transport": "http" | "mcp", "concurrency": 4,
     "warmup": 2, "requests": [{"key": "...", "body": {"query": "...", "user_id": "..."}}, ...],
     "warmup_requests": [...same shape, other queries...]}

With ``"barrier": true`` it prints ``ready`` once every caller is warmed up and starts measuring
when a line arrives on stdin. It writes one JSON object on stdout: ``latencies_ms`` (one per
measured request, in completion order), ``memories`` (returned per request), ``errors`` (first few
messages), ``started_at`` and ``ended_at`` (wall-clock epoch seconds of the measured phase: after
every caller's warm-up) and ``client_cpu_s`` (this process's CPU time in that phase).

Callers are closed loops: each takes the next request from a shared list as soon as its previous
answer arrived. Each caller has its own connections, one per API key of the spec (each tenant has
its key), opened and warmed up before the measured phase: an ``httpx.AsyncClient`` (HTTP/1.1
keep-alive) posting to ``/v1/recall``, or an MCP session (the official ``mcp`` SDK over streamable
HTTP) calling the ``recall`` tool with the same arguments.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

Call = Callable[[dict[str, Any]], Awaitable[int]]
"""One recall: takes the request body, returns the number of memories in the answer."""


@asynccontextmanager
async def http_caller(url: str, key: str) -> AsyncIterator[Call]:
    """A caller posting to ``/v1/recall`` with ``key`` over its own keep-alive connection.

    Raises:
        httpx.HTTPStatusError: the gateway answered with an error.
    """
    import httpx  # noqa: PLC0415

    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60.0) as client:

        async def call(body: dict[str, Any]) -> int:
            response = await client.post("/v1/recall", json=body)
            response.raise_for_status()
            return len(response.json()["memories"])

        yield call


@asynccontextmanager
async def mcp_caller(url: str, key: str) -> AsyncIterator[Call]:
    """A caller with its own MCP session over streamable HTTP, calling the ``recall`` tool.

    Raises:
        RuntimeError: the tool answered with an error result.
    """
    import httpx2  # noqa: PLC0415
    from mcp.client import Client  # noqa: PLC0415
    from mcp.client.streamable_http import streamable_http_client  # noqa: PLC0415

    headers = {"Authorization": f"Bearer {key}"}
    async with AsyncExitStack() as stack:
        http_client = await stack.enter_async_context(httpx2.AsyncClient(headers=headers, timeout=60.0))
        transport = streamable_http_client(f"{url}/mcp", http_client=http_client)
        client = await stack.enter_async_context(Client(transport))

        async def call(body: dict[str, Any]) -> int:
            result = await client.call_tool("recall", body)
            if result.is_error:
                raise RuntimeError(f"recall tool error: {result.content}")
            content = result.structured_content or {}
            return len(content.get("memories", []))

        yield call


async def drive(spec: dict[str, Any]) -> dict[str, Any]:
    """Run the spec's requests through ``concurrency`` closed-loop callers (see the module doc)."""
    requests: list[dict[str, Any]] = spec["requests"]
    concurrency = int(spec["concurrency"])
    warmup = int(spec.get("warmup", 2))
    factory = mcp_caller if spec["transport"] == "mcp" else http_caller
    latencies: list[float] = []
    returned: list[int] = []
    errors: list[str] = []
    ready = 0
    all_ready = asyncio.Event()
    next_index = 0
    window: dict[str, float] = {}

    keys = sorted({r["key"] for r in requests})
    warm_requests: list[dict[str, Any]] = spec.get("warmup_requests") or requests
    by_key = {
        k: [r for r in warm_requests if r["key"] == k] or [r for r in requests if r["key"] == k] for k in keys
    }

    async def caller(n: int) -> None:
        nonlocal ready, next_index
        async with AsyncExitStack() as stack:
            calls: dict[str, Call] = {}
            for key in keys:  # one connection (HTTP) or session (MCP) per tenant key, warmed up
                calls[key] = await stack.enter_async_context(factory(spec["url"], key))
                for j in range(warmup):
                    own = by_key[key]
                    await calls[key](own[(n + j * concurrency) % len(own)]["body"])
            ready += 1
            if ready == concurrency:
                if spec.get("barrier"):  # other client processes: start measuring all at once
                    print("ready", flush=True)
                    await asyncio.to_thread(sys.stdin.readline)
                window["started_at"] = time.time()
                cpu_at_start.append(time.process_time())
                all_ready.set()
            await all_ready.wait()
            while next_index < len(requests):
                request = requests[next_index]
                next_index += 1
                started = time.perf_counter()
                try:
                    count = await calls[request["key"]](request["body"])
                except Exception as exc:  # noqa: BLE001 (a benchmark client reports every failure)
                    if len(errors) < 5:
                        errors.append(repr(exc)[:300])
                    continue
                latencies.append((time.perf_counter() - started) * 1000)
                returned.append(count)

    cpu_at_start: list[float] = []
    await asyncio.gather(*(caller(n) for n in range(concurrency)))
    window["ended_at"] = time.time()
    return {
        "latencies_ms": latencies,
        "memories": returned,
        "errors": errors,
        "failed": len(requests) - len(latencies),
        "client_cpu_s": time.process_time() - cpu_at_start[0],
        **window,
    }


def main() -> int:
    """Read the spec from stdin, print the result JSON on stdout."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    for name in ("httpx", "httpx2", "mcp"):  # per-request INFO lines would cost the client CPU
        logging.getLogger(name).setLevel(logging.WARNING)
    spec = json.loads(sys.stdin.readline())
    print(json.dumps(asyncio.run(drive(spec))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
