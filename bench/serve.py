"""``hindsight bench serve``: recall latency as agents see it, through HTTP and MCP (issue 12).

Starts the embedded default (guard, ingest, reflect, access log, eviction and the gateway in this
process; the Kafka broker and Valkey beside it) over a store preloaded with ``--memories`` synthetic memories
(the scale generator of :mod:`bench.synth`: many users in 5 tenants, skewed activity, real e5
vectors of a cached pool of real texts, BM25 sparse vectors, HNSW built after loading as a
long-running store has it), then measures the same recall queries (real LoCoMo questions, one user
each) four ways, at each of ``--concurrency`` closed-loop callers, with ingest idle and then with
~1 KB events published at a steady rate:

- ``pipeline``: the recall pipeline in this process (what the gateway's service runs for the
  request: same filter, knobs, store and embedder), no response building;
- ``service``: the gateway's service core in this process (validation, pipeline, response models,
  recall log queued): what the HTTP route and the MCP tool call;
- ``http``: a real HTTP client (``httpx``) posting ``/v1/recall``;
- ``mcp``: a real MCP client (the ``mcp`` SDK, streamable HTTP) calling the ``recall`` tool.

The clients run in their own process (:mod:`bench.clients`), so the gateway's CPU per recall is
this process's CPU time from the start of the measured window until the recalls' logs are in
ClickHouse (their deferred cost counts), minus its rate with no traffic sampled just before,
divided by the recalls. The paths take turns: the queries are cut into ``--rounds`` slices (default
4; fewer where a slice would give a caller under 10 recalls, so one round at 16 callers of 200) and
each round runs every path on its slice, so a slow minute of a shared machine falls on every path
alike instead of on whichever ran then. Each block starts once the previous one's recall logs are
stored, and the query-embedding cache is cleared before it, so every recall embeds its query. The
ratio of each transport's p95 to the ``pipeline`` p95 of the same queries at the same concurrency
and ingest state is the number that counts: it is what the transport and the service add to
recall. A ``serve-costs`` line gives the serialisation and validation costs around the pipeline.

``--idle-seconds N`` (default 60) first runs ``hindsight up`` as a child process with no traffic
and reports its CPU time (and its children's: the Kafka broker, Valkey) over N seconds.

With ``--url`` it targets a running gateway instead (``--key`` per tenant as ``tenant=key``; only
``http`` and ``mcp``, no in-process baseline, nothing loaded: the queries use the generator's users).

Run: ``uv run hindsight bench serve --memories 10000`` (JSON lines on stdout).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import (
    DEFAULT_DATA,
    REPO_ROOT,
    arg_parser,
    latency_summary,
    loadavg,
    print_line,
    rounded,
    scratch_dir,
)
from bench.stack import IngestProbe, embedded
from bench.synth import (
    UserInfo,
    build_pool,
    generate_memories,
    ingest_texts,
    load_store,
    make_queries,
    make_users,
)
from hindsight.eval import locomo
from hindsight.eval.baselines import CACHE_DIR

if TYPE_CHECKING:
    from services.cli.embedded import Stack
    from services.gateway.service import MemoryService

log = logging.getLogger("hindsight.bench.serve")

PATHS = ("pipeline", "service", "http", "mcp")
TENANTS = 5
TOP_K = 10


@dataclass
class ServeConfig:
    """What one ``bench serve`` run does (see the module docstring and ``--help``)."""

    memories: int = 10_000
    users: int = 1000
    queries: int = 200
    concurrency: Sequence[int] = (1, 4, 16)
    paths: Sequence[str] = PATHS
    ingest: bool = True
    ingest_rate: float | None = None
    """Events/s while measuring with ingest running; default half the embedder's standalone rate."""
    idle_seconds: float = 60.0
    data: Path = DEFAULT_DATA
    pool_size: int = 2400
    cache_dir: Path = CACHE_DIR
    workdir: Path | None = None
    url: str | None = None
    keys: dict[str, str] = field(default_factory=dict)
    """Tenant -> API key, with ``url``."""
    warmup: int = 3
    rounds: int = 4
    """Interleaved rounds per cell (see :func:`rounds_for`): each runs every path on its own slice."""
    drain_timeout_s: float = 300.0
    """Most seconds to wait, after the ingest-running half, for the events published to be stored."""


class CpuSampler:
    """This process's CPU time (all threads) sampled every 50 ms with the wall clock, so the CPU
    spent inside any window of wall-clock time can be read afterwards."""

    def __init__(self) -> None:
        self._samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-cpu-sampler", daemon=True)

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._samples.append((time.time(), time.process_time()))
            self._stop.wait(0.05)

    def cpu_between(self, start: float, end: float) -> float:
        """CPU seconds between wall-clock times ``start`` and ``end`` (nearest samples)."""
        inside = [(t, c) for t, c in self._samples if start <= t <= end]
        if len(inside) < 2:
            return 0.0
        return inside[-1][1] - inside[0][1]


def process_tree_cpu_s(pid: int) -> dict[int, tuple[str, float]]:
    """CPU seconds (user + system, all threads) of ``pid`` and each of its descendants, by pid."""
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, str, float]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
        except OSError:
            continue
        name = raw[raw.index("(") + 1 : raw.rindex(")")]
        fields = raw[raw.rindex(")") + 2 :].split()
        stats[int(entry.name)] = (int(fields[1]), name, (int(fields[11]) + int(fields[12])) / tick)
    tree, frontier = {pid}, [pid]
    while frontier:
        parent = frontier.pop()
        for child, (ppid, _, _) in stats.items():
            if ppid == parent and child not in tree:
                tree.add(child)
                frontier.append(child)
    return {p: (stats[p][1], stats[p][2]) for p in tree if p in stats}


def measure_idle_cpu(seconds: float, settle_s: float = 20.0) -> dict[str, Any]:
    """Run ``hindsight up`` with no traffic; its CPU (and its children's) over ``seconds`` after
    ``settle_s`` seconds of start-up (consumer groups joined, models loaded)."""
    from bench.procs import ServiceProcess  # noqa: PLC0415

    with scratch_dir("hindsight-bench-idle-") as work:
        argv = [sys.executable, "-c", "from services.cli.main import main; main()", "up"]
        argv += ["--data-dir", str(work / "data"), "--port", "0"]
        up = ServiceProcess("up", "hindsight up", {}, work / "up.log", argv=argv).start()
        try:
            deadline = time.monotonic() + 180
            while "hindsight up: gateway" not in up.log_tail(20_000):
                if not up.alive or time.monotonic() > deadline:
                    raise RuntimeError(f"`hindsight up` did not start:\n{up.log_tail()}")
                time.sleep(0.5)
            time.sleep(settle_s)
            pid = up.pid
            if pid is None:
                raise RuntimeError(f"`hindsight up` exited during start-up:\n{up.log_tail()}")
            before = process_tree_cpu_s(pid)
            t0 = time.monotonic()
            time.sleep(seconds)
            after = process_tree_cpu_s(pid)
            wall = time.monotonic() - t0
        finally:
            up.terminate(60.0)
    per = {
        f"{name}[{pid}]": round(100 * (after[pid][1] - before.get(pid, (name, 0.0))[1]) / wall, 2)
        for pid, (name, _) in after.items()
    }
    own = after[pid][1] - before[pid][1]
    total = sum(after[p][1] - before.get(p, ("", after[p][1]))[1] for p in after)
    return {
        "bench": "serve-idle",
        "seconds": round(wall, 1),
        "settle_seconds": settle_s,
        "up_cpu_percent_of_core": round(100 * own / wall, 2),
        "with_children_cpu_percent_of_core": round(100 * total / wall, 2),
        "by_process_percent_of_core": per,
        "goal_percent_of_core": 2.0,
        "load_avg": loadavg(),
    }


def _summary(latencies: Sequence[float]) -> dict[str, Any]:
    s = latency_summary(latencies)
    return {
        "p50_ms": s["p50_ms"],
        "p95_ms": s["p95_ms"],
        "p99_ms": s["p99_ms"],
        "max_ms": max(latencies) if latencies else None,
        "n": s["n"],
    }


async def _in_process(
    service: MemoryService,
    principals: dict[str, Any],
    requests: Sequence[tuple[str, UserInfo]],
    warm: Sequence[tuple[str, UserInfo]],
    concurrency: int,
    *,
    pipeline_only: bool,
) -> tuple[list[float], list[int], float, float]:
    """Closed-loop callers in this process (after unmeasured ``warm`` recalls of other queries);
    latencies, memories returned, wall start/end."""
    latencies: list[float] = []
    returned: list[int] = []
    index = 0

    async def one(query: str, user: UserInfo) -> int:
        principal = principals[user.tenant_id]
        if pipeline_only:
            plan = service.plan_recall(principal, query=query, user_id=user.user_id, top_k=TOP_K)
            return len((await service.run_recall(plan)).memories)
        response = await service.recall(principal, query=query, user_id=user.user_id, top_k=TOP_K)
        return len(response.memories)

    async def caller() -> None:
        nonlocal index
        while index < len(requests):
            query, user = requests[index]
            index += 1
            started = time.perf_counter()
            count = await one(query, user)
            latencies.append((time.perf_counter() - started) * 1000)
            returned.append(count)

    for query, user in warm[: max(2, concurrency)]:  # warm-up, other queries, unmeasured
        await one(query, user)
    t0 = time.time()
    await asyncio.gather(*(caller() for _ in range(concurrency)))
    return latencies, returned, t0, time.time()


async def serialisation_costs(
    service: MemoryService,
    principals: dict[str, Any],
    requests: Sequence[tuple[str, UserInfo]],
    reps: int = 50,
) -> dict[str, Any]:
    """Microseconds per recall (median over ``reps`` recalls) of the work around the pipeline, on
    real results of this run: request validation, the wire view of the hits, the response JSON
    (HTTP) and the MCP tool result (structured content plus its JSON text). The recall log, built
    after the answer, has its own histogram (``hindsight_recall_log_build_seconds``)."""
    import statistics  # noqa: PLC0415

    from services.gateway.models import RecallRequest, RecallResponse  # noqa: PLC0415
    from services.gateway.service import wire_memory  # noqa: PLC0415

    parts: dict[str, list[float]] = {}

    def timed(name: str, fn: Callable[..., Any], *args: Any) -> Any:
        started = time.perf_counter()
        out = fn(*args)
        parts.setdefault(name, []).append((time.perf_counter() - started) * 1e6)
        return out

    def mcp_result(response: Any) -> str:
        return json.dumps(response.model_dump(mode="json"), ensure_ascii=False)

    hits = 0
    for query, user in requests[:reps]:
        body = {"query": query, "user_id": user.user_id, "top_k": TOP_K}
        timed("request_validation_us", RecallRequest.model_validate, body)
        plan = service.plan_recall(principals[user.tenant_id], query=query, user_id=user.user_id, top_k=TOP_K)
        result = await service.run_recall(plan)
        hits += len(result.memories)
        memories = timed("wire_view_us", lambda r: [wire_memory(h) for h in r.memories], result)
        response = RecallResponse(query_id="q", memories=memories, tokens=result.tokens, truncated=False)
        timed("http_response_json_us", response.model_dump_json)
        timed("mcp_tool_result_us", mcp_result, response)
    recalls = len(parts.get("wire_view_us", []))
    line: dict[str, Any] = {
        "bench": "serve-costs",
        "recalls": recalls,
        "mean_memories": hits / max(1, recalls),
    }
    line.update({name: statistics.median(values) for name, values in parts.items()})
    line["note"] = (
        "microseconds per recall, median; the MCP figure approximates the SDK's structured content "
        "plus its JSON text"
    )
    return line


CALLERS_PER_CLIENT = 4
"""Callers per client process: one process's CPU (an MCP client call costs a few ms of it) must not
queue its callers behind each other, as separate agents would not be."""


async def _clients(
    *,
    url: str,
    transport: str,
    concurrency: int,
    keys: dict[str, str],
    requests: Sequence[tuple[str, UserInfo]],
    warm: Sequence[tuple[str, UserInfo]],
    warmup: int,
) -> dict[str, Any]:
    """Run the callers in ``ceil(concurrency / CALLERS_PER_CLIENT)`` :mod:`bench.clients` processes
    (requests dealt round-robin), start their measured phases together, merge their results.

    Raises:
        RuntimeError: a client process failed.
    """

    def body(q: str, u: UserInfo) -> dict[str, Any]:
        return {"key": keys[u.tenant_id], "body": {"query": q, "user_id": u.user_id, "top_k": TOP_K}}

    n_proc = max(1, -(-concurrency // CALLERS_PER_CLIENT))
    procs = []
    for i in range(n_proc):
        callers = concurrency // n_proc + (1 if i < concurrency % n_proc else 0)
        spec = {
            "url": url,
            "transport": transport,
            "concurrency": callers,
            "warmup": warmup,
            "barrier": True,
            "requests": [body(q, u) for q, u in requests[i::n_proc]],
            "warmup_requests": [body(q, u) for q, u in warm if u.tenant_id in keys],
        }
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.clients",
            cwd=REPO_ROOT,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=2**26,
        )
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(spec).encode() + b"\n")
        await proc.stdin.drain()
        procs.append(proc)
    try:
        for proc in procs:
            assert proc.stdout is not None
            if (await proc.stdout.readline()).strip() != b"ready":
                raise RuntimeError("a bench.clients process failed to warm up")
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write(b"go\n")
            await proc.stdin.drain()
        results = []
        for proc in procs:
            out, err = await proc.communicate()
            if proc.returncode != 0:
                raise RuntimeError(f"bench.clients failed ({proc.returncode}):\n{err.decode()[-3000:]}")
            results.append(json.loads(out.decode().strip().splitlines()[-1]))
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    return {
        "latencies_ms": [x for r in results for x in r["latencies_ms"]],
        "memories": [x for r in results for x in r["memories"]],
        "errors": [e for r in results for e in r["errors"]][:5],
        "client_cpu_s": sum(r["client_cpu_s"] for r in results),
        "started_at": min(r["started_at"] for r in results),
        "ended_at": max(r["ended_at"] for r in results),
        "client_processes": n_proc,
    }


MIN_RECALLS_PER_CALLER = 10
"""A round gives each closed-loop caller at least this many recalls, so the callers' ramp-down at the
end of a block (fewer than ``concurrency`` still calling) stays a small share of it."""


def rounds_for(queries: int, concurrency: int, rounds: int) -> int:
    """How many interleaved rounds a cell runs: ``rounds`` (``--rounds``), fewer where a round
    would give a caller under :data:`MIN_RECALLS_PER_CALLER` recalls, at least 1.

    >>> rounds_for(200, 1, 4), rounds_for(200, 4, 4), rounds_for(200, 16, 4), rounds_for(6, 1, 4)
    (4, 4, 1, 1)
    """
    return max(1, min(rounds, queries // max(1, concurrency * MIN_RECALLS_PER_CALLER)))


def blocks(requests: Sequence[Any], rounds: int) -> list[Sequence[Any]]:
    """``requests`` cut into ``rounds`` consecutive slices as even as possible (none empty while
    there are at least ``rounds`` requests), in order: their concatenation is ``requests``.

    >>> [list(b) for b in blocks(list(range(7)), 3)]
    [[0, 1, 2], [3, 4], [5, 6]]
    """
    n = max(1, min(rounds, len(requests)))
    size, extra = divmod(len(requests), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(requests[start:end])
        start = end
    return out


@dataclass(frozen=True)
class _Target:
    """What one cell measures against: the embedded stack and service (None with ``--url``), the
    principals of the in-process paths, the gateway URL and keys of the clients, the CPU sampler."""

    stack: Stack | None
    service: MemoryService | None
    principals: dict[str, Any]
    url: str
    keys: dict[str, str]
    sampler: CpuSampler


@dataclass
class _PathRun:
    """One path's recalls in one cell, summed over its blocks."""

    latencies: list[float] = field(default_factory=list)
    returned: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    cpu_s: float = 0.0
    client_cpu_s: float = 0.0
    client_processes: int | None = None
    base_rate: float | None = None


class ServeBench:
    """One run against an embedded stack (or a ``--url``), emitting lines as they are measured."""

    def __init__(self, cfg: ServeConfig, emit: Callable[[dict[str, Any]], None]) -> None:
        self.cfg = cfg
        self.emit = emit
        self.people = make_users(cfg.users, tenants=TENANTS)
        self.requests = make_queries(cfg.data, self.people, cfg.queries)
        measured = {q for q, _ in self.requests}
        # warm-up recalls use other questions, so they never fill the query cache for measured ones
        others = make_queries(cfg.data, self.people, 400, seed=99)
        self.warm = [(q, u) for q, u in others if q not in measured]
        if cfg.url is not None:
            self.requests = [(q, u) for q, u in self.requests if u.tenant_id in cfg.keys]
            if not self.requests:
                raise RuntimeError(f"--key names none of the tenants tenant-0..tenant-{TENANTS - 1}")

    async def _idle_rate(self, seconds: float = 2.0) -> float:
        """This process's CPU seconds per second with no recall traffic (consumers, ingest if any)."""
        c0, t0 = time.process_time(), time.perf_counter()
        await asyncio.sleep(seconds)
        return (time.process_time() - c0) / (time.perf_counter() - t0)

    async def _settle(self, stack: Stack | None, service: MemoryService | None) -> None:
        """Wait until the recall logs of the recalls so far are in ClickHouse (publishers idle, the
        access-log and analytics groups at lag 0), so their deferred cost is not charged to the next
        path."""
        if stack is None:
            return
        from hindsight.brokers.admin import wait_for_zero_lag  # noqa: PLC0415
        from schemas import Topic  # noqa: PLC0415

        if service is not None:
            await service.access_log.wait_sent()
        await asyncio.sleep(0.3)  # the gateway's own publisher sends within milliseconds
        kafka = stack.resources.settings.kafka
        # only the recall logs: the analytics group also reads memory.stored.v1, which ingest feeds
        groups = {kafka.group(g): [str(Topic.RECALLS)] for g in ("accesslog", "analytics")}
        await wait_for_zero_lag(stack.bootstrap, groups, timeout_s=120, poll_s=0.1)

    def _clear_cache(self, stack: Stack | None) -> None:
        if stack is None:
            return
        cache = stack.resources.embedder()
        clear = getattr(cache, "clear", None)
        if clear is not None:
            clear()

    async def measure(
        self,
        *,
        ingest: str,
        concurrency: int,
        stack: Stack | None,
        service: MemoryService | None,
        principals: dict[str, Any],
        url: str,
        keys: dict[str, str],
        sampler: CpuSampler,
        extra: dict[str, Any],
    ) -> dict[str, dict[str, Any]]:
        """Every path at one concurrency and ingest state, in interleaved rounds (:func:`rounds_for`:
        each round runs every path on its own slice of the queries, so a slow minute of a shared
        machine falls on every path alike); emits one line per path."""
        paths = [p for p in self.cfg.paths if service is not None or p not in ("pipeline", "service")]
        rounds = rounds_for(len(self.requests), concurrency, self.cfg.rounds)
        runs = {path: _PathRun() for path in paths}
        target = _Target(stack, service, principals, url, keys, sampler)
        for block in blocks(self.requests, rounds):
            for path in paths:
                await self._block(path, block, runs[path], concurrency, target)
        cell: dict[str, dict[str, Any]] = {}
        for path, run in runs.items():
            lat = run.latencies
            cell[path] = {
                "bench": "serve-recall",
                "path": path,
                "concurrency": concurrency,
                "ingest": ingest,
                **_summary(lat),
                "rounds": rounds,
                "recalls_per_s": len(lat) / max(1e-6, run.wall_s),
                "mean_memories": sum(run.returned) / max(1, len(run.returned)),
                "errors": run.errors[:5],
                "gateway_cpu_ms_per_recall": None if stack is None else 1000 * run.cpu_s / max(1, len(lat)),
                "client_cpu_ms_per_recall": None
                if run.client_processes is None
                else 1000 * run.client_cpu_s / max(1, len(lat)),
                "client_processes": run.client_processes,
                "no_traffic_cpu_cores": run.base_rate,
                **extra,
                "load_avg": loadavg(),
            }
        base = cell.get("pipeline")
        for line in cell.values():
            if base is not None and base["p95_ms"] and line["p95_ms"] is not None:
                line["p95_vs_pipeline"] = round(line["p95_ms"] / base["p95_ms"], 3)
            self.emit(rounded(line))
        return cell

    async def _block(
        self,
        path: str,
        requests: Sequence[tuple[str, UserInfo]],
        run: _PathRun,
        concurrency: int,
        target: _Target,
    ) -> None:
        """One path over one slice of the queries, added to ``run``. The process's rate with no
        traffic is sampled before the path's first block (once per path and cell)."""
        stack, service, sampler = target.stack, target.service, target.sampler
        await self._settle(stack, service)
        self._clear_cache(stack)
        if run.base_rate is None:
            run.base_rate = await self._idle_rate()
        base_rate = run.base_rate
        if path in ("pipeline", "service"):
            assert service is not None
            lat, returned, t0, t1 = await _in_process(
                service, target.principals, requests, self.warm, concurrency, pipeline_only=path == "pipeline"
            )
        else:
            result = await _clients(
                url=target.url,
                transport=path,
                concurrency=concurrency,
                keys=target.keys,
                requests=requests,
                warm=self.warm,
                warmup=self.cfg.warmup,
            )
            lat, returned = result["latencies_ms"], result["memories"]
            t0, t1 = result["started_at"], result["ended_at"]
            run.errors += result["errors"]
            run.client_cpu_s += result["client_cpu_s"]
            run.client_processes = result["client_processes"]
        run.latencies += lat
        run.returned += returned
        run.wall_s += t1 - t0
        if stack is not None:
            # the window runs on until the logs of these recalls are in ClickHouse:
            # that deferred work is part of what a recall costs the process
            await self._settle(stack, service)
            t2 = time.time()
            run.cpu_s += max(0.0, sampler.cpu_between(t0, t2) - base_rate * (t2 - t0))

    async def run(self) -> None:
        """Load (embedded mode), then measure idle and under ingest; emit a summary line."""
        if self.cfg.url is not None:
            await self._run_remote()
            return
        await self._run_embedded()

    async def _run_remote(self) -> None:
        assert self.cfg.url is not None
        with CpuSampler() as sampler:
            results = {}
            for c in self.cfg.concurrency:
                results[(c, "idle")] = await self.measure(
                    ingest="not controlled",
                    concurrency=c,
                    stack=None,
                    service=None,
                    principals={},
                    url=self.cfg.url,
                    keys=self.cfg.keys,
                    sampler=sampler,
                    extra={"target": self.cfg.url},
                )

    async def _run_embedded(self) -> None:
        from hindsight.inference.embedder import LocalE5Embedder  # noqa: PLC0415
        from hindsight.settings import AllSettings  # noqa: PLC0415
        from services.gateway.auth import Principal  # noqa: PLC0415
        from services.gateway.service import MemoryService  # noqa: PLC0415
        from services.gateway.settings import GatewaySettings  # noqa: PLC0415

        cfg = self.cfg
        with scratch_dir("hindsight-bench-serve-", cfg.workdir) as work:
            pool = build_pool(cfg.data, cfg.pool_size, LocalE5Embedder(query_lane=False), cfg.cache_dir)
            settings = AllSettings()
            data_dir = work / "data"
            store, load_s, count = load_store(
                data_dir / "qdrant" / settings.qdrant.collection,
                pool.vectors.shape[1],
                generate_memories(cfg.memories, pool, self.people),
            )
            started = time.perf_counter()
            store.optimize()
            optimize_s = time.perf_counter() - started
            store.close()
            keys = {f"tenant-{t}": f"dev-bench-serve-{t}" for t in range(TENANTS)}
            async with embedded(data_dir, {k: t for t, k in keys.items()}, settings=settings) as stack:
                await stack.wait_caught_up(timeout_s=120)
                gateway = GatewaySettings(port=0, api_keys={k: t for t, k in keys.items()})
                service = MemoryService(stack.resources, gateway)
                principals = {t: Principal(tenant_id=t) for t in keys}
                texts = ingest_texts(cfg.data)
                standalone = await self._embedder_rate(stack, [t for _, t in texts[:12]])
                rate = cfg.ingest_rate or round(0.5 * standalone, 2)
                self.emit(
                    rounded(
                        {
                            "bench": "serve-setup",
                            "memories": count,
                            "users": len(self.people),
                            "tenants": TENANTS,
                            "queries": len(self.requests),
                            "top_k": TOP_K,
                            "load_seconds": load_s,
                            "optimize_seconds": optimize_s,
                            "embedder_standalone_texts_per_s": standalone,
                            "ingest_rate_events_per_s": rate,
                            "gateway": stack.gateway_url,
                            "cpus": os.cpu_count(),
                            "load_avg": loadavg(),
                        }
                    )
                )
                async with service.access_log.running():
                    self.emit(rounded(await serialisation_costs(service, principals, self.warm)))
                    await self._cells(
                        stack=stack, service=service, principals=principals, keys=keys, rate=rate, texts=texts
                    )

    async def _embedder_rate(self, stack: Stack, texts: Sequence[str]) -> float:
        """Texts/s of the stack's own embedder on ~1 KB texts, one at a time (as ingest sends them)."""
        from hindsight.inference.embedder import embed_passages_async  # noqa: PLC0415

        embedder = stack.resources.embedder()
        await embed_passages_async(embedder, texts[:1])
        started = time.perf_counter()
        for text in texts[1:]:
            await embed_passages_async(embedder, [text])
        return (len(texts) - 1) / (time.perf_counter() - started)

    async def _cells(
        self,
        *,
        stack: Stack,
        service: MemoryService,
        principals: dict[str, Any],
        keys: dict[str, str],
        rate: float,
        texts: Sequence[tuple[str, str]],
    ) -> None:
        cells: dict[tuple[str, int], dict[str, dict[str, Any]]] = {}
        with CpuSampler() as sampler:
            for c in self.cfg.concurrency:
                cells[("idle", c)] = await self.measure(
                    ingest="idle",
                    concurrency=c,
                    stack=stack,
                    service=service,
                    principals=principals,
                    url=stack.gateway_url,
                    keys=keys,
                    sampler=sampler,
                    extra={},
                )
            if self.cfg.ingest:
                async with IngestProbe(stack, self.people[:50], texts) as probe:
                    stop = asyncio.Event()
                    publishing = asyncio.create_task(probe.publish_until(rate, stop))
                    await asyncio.sleep(5.0)  # the pipeline reaches its steady state first
                    for c in self.cfg.concurrency:
                        cells[("running", c)] = await self.measure(
                            ingest="running",
                            concurrency=c,
                            stack=stack,
                            service=service,
                            principals=principals,
                            url=stack.gateway_url,
                            keys=keys,
                            sampler=sampler,
                            extra={"ingest_rate_events_per_s": rate},
                        )
                    stop.set()
                    ids = await publishing
                    await probe.wait_stored(ids, self.cfg.drain_timeout_s)
                    line = {"bench": "serve-ingest", "rate_events_per_s": rate, **probe.searchable(ids)}
                    self.emit(rounded(line))
        self.emit(rounded(summary(cells), 3))


def summary(cells: dict[tuple[str, int], dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """The goals of issue 12 against this run's lines (None where not measured)."""

    def p95(ingest: str, c: int, path: str) -> float | None:
        line = cells.get((ingest, c), {}).get(path)
        return None if line is None else line["p95_ms"]

    out: dict[str, Any] = {"bench": "serve-summary"}
    for path in ("http", "mcp"):
        one, base = p95("idle", 1, path), p95("idle", 1, "pipeline")
        out[f"{path}_p95_c1_idle_ms"] = one
        out[f"{path}_p95_vs_pipeline_c1_idle"] = None if not (one and base) else round(one / base, 3)
        out[f"{path}_p95_c16_idle_ms"] = p95("idle", 16, path)
        worst = [
            cells[("running", c)][path]["max_ms"] / idle_p95
            for (state, c), cell in cells.items()
            if state == "idle"
            and path in cell
            and (idle_p95 := cell[path]["p95_ms"])
            and ("running", c) in cells
            and path in cells[("running", c)]
        ]
        out[f"{path}_max_under_ingest_vs_idle_p95"] = round(max(worst), 3) if worst else None
    out["goals"] = {
        "p95_vs_pipeline_c1_idle_at_most": 1.3,
        "p95_c1_idle_below_ms": 30,
        "p95_c16_below_ms": 100,
        "max_under_half_rate_ingest_vs_idle_p95_at_most": 2.0,
    }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``bench serve`` command line: prints one JSON line per measurement as it completes."""
    parser = arg_parser("hindsight bench serve", __doc__)
    parser.add_argument("--memories", type=int, default=10_000, help="Memories preloaded (e.g. 100000).")
    parser.add_argument("--users", type=int, default=1000, help="Users the memories belong to.")
    parser.add_argument("--queries", type=int, default=200, help="Recalls per path and concurrency.")
    parser.add_argument("--concurrency", default="1,4,16", help="Closed-loop callers, comma-separated.")
    parser.add_argument(
        "--paths",
        default=",".join(PATHS),
        help="Comma-separated paths to measure, of pipeline,service,http,mcp.",
    )
    parser.add_argument(
        "--no-ingest", dest="ingest", action="store_false", help="Skip the cells with ingest running."
    )
    parser.add_argument("--ingest-rate", type=float, default=None, help="Events/s (default: embedder's / 2).")
    parser.add_argument("--idle-seconds", type=float, default=60.0, help="Idle CPU window of `up` (0: skip).")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo file (texts, questions).")
    parser.add_argument("--pool-size", type=int, default=2400, help="Distinct texts of the memories.")
    parser.add_argument("--cache-dir", type=Path, default=CACHE_DIR, help="Cache of the pool embeddings.")
    parser.add_argument("--workdir", type=Path, default=None, help="Scratch folder (default: a temp dir).")
    parser.add_argument(
        "--rounds",
        type=int,
        default=4,
        help="Rounds per (ingest state, callers) cell; each round runs every path on its slice.",
    )
    parser.add_argument("--drain-timeout-s", type=float, default=300.0, help="Wait for ingest to drain.")
    parser.add_argument("--url", default=None, help="A running gateway instead of the embedded default.")
    parser.add_argument("--key", action="append", default=[], help="With --url: TENANT=KEY (repeat).")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    cfg = ServeConfig(
        memories=args.memories,
        users=args.users,
        queries=args.queries,
        concurrency=[int(c) for c in args.concurrency.split(",") if c.strip()],
        paths=[p.strip() for p in args.paths.split(",") if p.strip()],
        ingest=args.ingest,
        ingest_rate=args.ingest_rate,
        idle_seconds=args.idle_seconds,
        data=args.data,
        pool_size=args.pool_size,
        cache_dir=args.cache_dir,
        workdir=args.workdir,
        url=args.url,
        keys=dict(k.split("=", 1) for k in args.key),
        drain_timeout_s=args.drain_timeout_s,
        rounds=max(1, args.rounds),
    )
    unknown = set(cfg.paths) - set(PATHS)
    if unknown:
        parser.error(f"unknown --paths {sorted(unknown)}: use {','.join(PATHS)}")
    try:
        if cfg.idle_seconds > 0 and cfg.url is None:
            print_line(measure_idle_cpu(cfg.idle_seconds))
        asyncio.run(ServeBench(cfg, print_line).run())
    except (locomo.DatasetError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
