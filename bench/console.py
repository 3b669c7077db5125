"""``hindsight bench console``: render time of the operator console for a user with 10,000 memories.

Seeds one user with ``--memories`` memories in a fresh embedded Qdrant engine (random unit vectors for
the bulk, real e5 embeddings for a few hundred so the "why" page has real candidates), with a version
chain, their inventory rows and a few hundred logged recalls in chDB; serves the gateway (console
included) with uvicorn on loopback; then requests every page ``--repeat`` times and prints one JSON
line per page with the client wall time and the server's own ``Server-Timing`` render time (p50/p95,
ms). Goal: every page under 500 ms. No Kafka is started: the lag fragment is not part of the timing
(it asks the broker; the pipeline benchmarks cover Kafka). The user page's counts and table are read
from the store on every request (facet counts, one ordered scroll; also measured on its next-to-last
page, which skips all but 100 memories as ids); its chart is measured cold (``?fresh=true``: every
memory's ``created_ts`` read from the store and binned) and warm (the bins read in the last 30 s).
"""

from __future__ import annotations

import asyncio
import socket
import sys
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import arg_parser, latency_summary, loadavg, print_line, scratch_dir

ADMIN = "dev-bench-console-admin"
TENANT = "bench-console"
USER = "heavy-user"
REAL = 300


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _seed(resources: Any, n: int, seed: int) -> list[str]:
    from hindsight.ids import stable_id  # noqa: PLC0415
    from hindsight.records import to_payload  # noqa: PLC0415
    from hindsight.stores.vector import VectorRecord  # noqa: PLC0415
    from schemas import Memory, MemoryStoredEvent, Provenance, RecallCandidate, RecallLogEvent  # noqa: PLC0415

    rng = np.random.default_rng(seed)
    now = datetime.now(UTC)
    topics = ["flights", "allergies", "her cat Miso", "climbing", "the Lisbon trip", "night shifts", "jazz"]
    statuses = ["active"] * 85 + ["expired"] * 10 + ["superseded"] * 5
    memories = []
    for i in range(n):
        at = now - timedelta(days=float(rng.uniform(0, 365)))
        topic = topics[i % len(topics)]
        memories.append(
            Memory(
                id=stable_id("bench-console", str(i)),
                tenant_id=TENANT,
                user_id=USER,
                agent_id="agent",
                session_id=f"s-{i // 25}",
                type=("episodic", "episodic", "semantic", "working")[i % 4],
                kind="turn",
                content=f"Memory {i}: the user talked about {topic} and said something worth keeping ({i}).",
                source="user",
                importance=float(rng.uniform(0.2, 0.9)),
                confidence=0.6,
                created_at=at,
                stored_at=at,
                last_accessed_at=at,
                status=statuses[i % len(statuses)],
                version=2 if i == 1 else 1,
                parent_id=stable_id("bench-console", "0") if i == 1 else None,
                provenance=Provenance(event_ids=(f"evt-{i}",), external_refs=(f"D{i}:1",)),
            )
        )
    real = resources.embedder().embed_passages([m.content for m in memories[:REAL]])
    bulk = rng.normal(size=(n - REAL, resources.settings.embedder.dim)).astype(np.float32)
    bulk /= np.linalg.norm(bulk, axis=1, keepdims=True)
    vectors = list(real) + list(bulk)
    store = resources.vector_store()
    for start in range(0, n, 1000):
        store.upsert(
            [
                VectorRecord(m.id, v, to_payload(m))
                for m, v in zip(memories[start : start + 1000], vectors[start : start + 1000], strict=True)
            ]
        )
    analytics = resources.analytics()
    analytics.insert_memories([MemoryStoredEvent(memory=m, candidate_id=m.id) for m in memories])
    recalls = []
    for k in range(300):
        picks = rng.choice(n, size=10, replace=False)
        recalls.append(
            RecallLogEvent(
                query_id=str(uuid.uuid4()),
                tenant_id=TENANT,
                user_id=USER,
                agent_id="agent",
                query_text=f"question {k} about {topics[k % len(topics)]}",
                intent="question",
                top_k=10,
                similarity_floor=0.65,
                time_mode="step",
                order="relevance",
                token_budget=2000,
                candidates=tuple(
                    RecallCandidate(
                        memory_id=memories[int(p)].id,
                        memory_type=memories[int(p)].type,
                        outcome="returned",
                        rank=r + 1,
                        similarity=0.8 - 0.01 * r,
                        age_days=10.0,
                        since_access_days=10.0,
                    )
                    for r, p in enumerate(picks)
                ),
                timings_ms={"total": 20.0},
                reference_time=now,
                recalled_at=now - timedelta(minutes=k),
            )
        )
    analytics.insert_recalls(recalls)
    return [m.id for m in memories]


async def _measure(client: Any, method: str, path: str, repeat: int, **kwargs: Any) -> dict[str, Any]:
    walls: list[float] = []
    renders: list[float] = []
    status = 0
    size = 0
    for _ in range(repeat):
        started = time.perf_counter()
        resp = await client.request(method, path, **kwargs)
        walls.append((time.perf_counter() - started) * 1000)
        status, size = resp.status_code, len(resp.content)
        timing = resp.headers.get("server-timing", "")
        if "dur=" in timing:
            renders.append(float(timing.split("dur=")[1]))
    line: dict[str, Any] = {"bench": "console", "page": path if method == "GET" else f"{method} {path}"}
    line["status"] = status
    line["bytes"] = size
    line.update({f"wall_{k}": v for k, v in latency_summary(walls).items()})
    if renders:
        line.update({f"render_{k}": v for k, v in latency_summary(renders).items()})
    line["goal_met"] = line.get("wall_p95_ms", 1e9) < 500.0
    return line


async def run(memories: int, repeat: int, workdir: Path, seed: int) -> list[dict[str, Any]]:
    """Seed, serve, request every page; JSON-ready lines."""
    import httpx  # noqa: PLC0415
    import uvicorn  # noqa: PLC0415

    from hindsight.runtime import make_broker, open_resources  # noqa: PLC0415
    from hindsight.settings import AllSettings  # noqa: PLC0415
    from services.gateway.app import build_asgi  # noqa: PLC0415
    from services.gateway.auth import Principal  # noqa: PLC0415
    from services.gateway.settings import GatewaySettings  # noqa: PLC0415

    cfg = AllSettings()
    cfg.runtime.data_dir = workdir
    broker = make_broker(cfg.kafka, "127.0.0.1:9")  # never connected: the console's pages need no broker
    lines: list[dict[str, Any]] = []
    async with open_resources(cfg, broker) as resources:
        started = time.perf_counter()
        ids = await asyncio.to_thread(_seed, resources, memories, seed)
        seed_s = time.perf_counter() - started
        gw = GatewaySettings(api_keys={ADMIN: Principal(tenant_id=TENANT, role="admin")})
        port = _free_port()
        server = uvicorn.Server(
            uvicorn.Config(
                build_asgi(resources, gw), host="127.0.0.1", port=port, log_level="warning", ws="none"
            )
        )
        task = asyncio.create_task(server.serve())
        while not server.started:  # noqa: ASYNC110 (uvicorn exposes a flag, not an event)
            await asyncio.sleep(0.02)
        headers = {"Authorization": f"Bearer {ADMIN}"}
        try:
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=60
            ) as c:
                pages: list[tuple[str, str, dict[str, Any]]] = [
                    ("GET", "/console", {}),
                    ("GET", f"/console/users/{USER}?fresh=true", {}),
                    ("GET", f"/console/users/{USER}", {}),
                    ("GET", f"/console/users/{USER}/timeline.png?fresh=true", {}),
                    ("GET", f"/console/users/{USER}/timeline.png", {}),
                    ("GET", f"/console/users/{USER}?status=expired&page=3", {}),
                    ("GET", f"/console/users/{USER}?page={memories // 50 - 1}", {}),
                    ("GET", f"/console/memories/{ids[1]}", {}),
                    (
                        "POST",
                        "/console/recall",
                        {"data": {"user_id": USER, "query": "What about her cat Miso?"}},
                    ),
                    ("GET", "/console/quarantine", {}),
                    ("GET", "/console/tuning", {}),
                ]
                for method, path, kwargs in pages:
                    await c.request(method, path, **kwargs)  # warm-up
                    line = await _measure(c, method, path, repeat, **kwargs)
                    line.update({"memories": memories, "repeat": repeat, "seed_s": round(seed_s, 1)})
                    lines.append(line)
        finally:
            server.should_exit = True
            await task
    for line in lines:
        line["load_avg"] = loadavg()
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """``bench console`` command line: one JSON line per page."""
    parser = arg_parser("hindsight bench console", __doc__)
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--workdir", type=Path, default=None, help="Keep the stores here (default: temp).")
    args = parser.parse_args(argv)
    with scratch_dir("hindsight-bench-console-", args.workdir) as work:
        for line in asyncio.run(run(args.memories, args.repeat, work, args.seed)):
            print_line(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
