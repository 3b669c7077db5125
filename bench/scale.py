"""``hindsight bench scale``: recall latency at 10k / 100k memories and ingest throughput (issue 4).

Two measurements, each printed as JSON lines:

1. **Recall latency at scale.** A generator writes N synthetic-but-realistic memories (many users
   in a few tenants, with a skewed number of memories per user; contents are real LoCoMo turns plus
   template facts and episode summaries; payloads are real :class:`schemas.Memory` records through
   :func:`hindsight.records.to_payload`) straight into an :class:`EdgeVectorStore` in a temp dir.
   Vectors are real multilingual-e5-small passage embeddings, but of a POOL of a few thousand distinct
   texts computed once and cached under ``.cache/bench/`` (embedding 100k distinct texts would take
   ~1.5 h on these 2 cores): memories reuse pool vectors across users, each with a small random
   perturbation (so no two points are identical). Then 200+ single-user queries (real LoCoMo
   questions) with the gateway's filters (tenant, user, scopes, status active) go through the
   in-process recall function, query embedding INCLUDED, with and without rerank, first on the
   plain (unindexed, exact) segments right after loading, then again after ``optimize()`` (HNSW);
   ``optimize()`` is timed and runs in the load phase only, never during an ingest measurement.
2. **Ingest.** The embedded stack (guard -> write-trigger -> embed -> store, the embedded default)
   on a store preloaded with synthetic memories; events of ~1 KB (consecutive real LoCoMo turns of
   one session) are published with aiokafka at a steady offered rate; each event's
   ingest-to-searchable latency is the time from its publish to the arrival of its
   ``memory.stored.v1`` event (published by the embed stage after the upsert returned, so the memory
   is searchable by then; a sample is re-checked in the store). Reports offered vs achieved rate,
   consumer lag when publishing ends and after the drain, and a burst throughput (events/s through
   guard, ingest and store with a backlog).

Run: ``.venv/bin/python -m bench.scale --sizes 10000,100000``.

The two functions a changing recall API touches are :func:`bench.synth.make_record` (what a loaded
point holds: dense vector, payload, and a sparse BM25 vector when the store supports it) and
:func:`call_recall` (the one call into the recall pipeline). The generator lives in
:mod:`bench.synth`, the ingest probe in :mod:`bench.stack`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.common import DEFAULT_DATA, arg_parser, latency_summary, loadavg, print_line, rounded, scratch_dir
from bench.stack import IngestProbe, embedded
from bench.synth import (
    REFERENCE_TIME,
    Pool,
    UserInfo,
    build_pool,
    generate_memories,
    ingest_texts,
    load_store,
    make_queries,
    make_users,
    sparse_encoder,
    user_filter,
)
from hindsight.eval import locomo
from hindsight.eval.baselines import CACHE_DIR

if TYPE_CHECKING:
    from hindsight.inference.embedder import Embedder
    from hindsight.stores.vector import MemoryFilter, VectorRecord

log = logging.getLogger("hindsight.bench.scale")


@dataclass
class RecallSetup:
    """What :func:`call_recall` needs besides the query."""

    store: Any
    embedder: Any
    reranker: Any
    top_k: int = 10
    rerank_top_n: int = 30
    lexical: Any = None
    """BM25 encoder for the lexical list, when this tree has one (:mod:`hindsight.lexical`)."""


def rerank_mode() -> str:
    """``"recall"`` when this tree's recall reranks itself (``RecallParams.rerank`` or a ``rerank`` /
    ``reranker`` argument), else ``"bench-side"`` (recall's top ``rerank_top_n`` reordered here by
    the reranker, then cut to ``top_k``)."""
    import dataclasses  # noqa: PLC0415

    from hindsight.recall import RecallParams, recall  # noqa: PLC0415

    args = inspect.signature(recall).parameters
    fields = {f.name for f in dataclasses.fields(RecallParams)}
    return "recall" if ("rerank" in fields or "rerank" in args or "reranker" in args) else "bench-side"


async def call_recall(
    query: str, flt: MemoryFilter, setup: RecallSetup, *, rerank: bool
) -> tuple[list[Any], dict[str, float]]:
    """THE one call into the recall pipeline (query embedding included). ADAPT HERE when it changes.

    Works with both shapes of ``hindsight.recall.recall`` seen so far: the dense-only one returning a
    list, and the hybrid one (``lexical=``, ``reranker=``, ``RecallParams.rerank``) returning a
    ``RecallResult``. Without a native rerank option and with ``rerank``, reranks recall's top
    ``rerank_top_n`` with ``setup.reranker`` and keeps ``top_k``. Returns the memories and the
    pipeline's own step timings (empty when it reports none).
    """
    import dataclasses  # noqa: PLC0415

    from hindsight.recall import RecallParams, recall  # noqa: PLC0415

    args = inspect.signature(recall).parameters
    fields = {f.name for f in dataclasses.fields(RecallParams)}
    kwargs: dict[str, Any] = {}
    knobs: dict[str, Any] = {"top_k": setup.top_k}
    if "rerank" in fields:
        knobs["rerank"] = rerank
        if "rerank_top_n" in fields:
            knobs["rerank_top_n"] = setup.rerank_top_n
    if "rerank" in args:
        kwargs["rerank"] = rerank
    if "reranker" in args:
        kwargs["reranker"] = setup.reranker if rerank else None
    if "lexical" in args and setup.lexical is not None:
        kwargs["lexical"] = setup.lexical
    native = "rerank" in fields or "rerank" in args or "reranker" in args
    if rerank and not native:
        knobs["top_k"] = max(setup.top_k, setup.rerank_top_n)
    result = await recall(
        query,
        flt,
        store=setup.store,
        embedder=setup.embedder,
        params=RecallParams(**knobs),
        reference_time=REFERENCE_TIME,
        **kwargs,
    )
    found: Any = result
    memories = list(getattr(found, "memories", found))
    timings = dict(getattr(result, "timings_ms", {}) or {})
    if rerank and not native and memories:
        scores = await asyncio.to_thread(
            setup.reranker.score, query, [str(m.payload.get("content", "")) for m in memories]
        )
        order = np.argsort(-np.asarray(scores), kind="stable")
        memories = [memories[int(i)] for i in order[: setup.top_k]]
    return memories, timings


async def measure_recall(
    setup: RecallSetup, queries: Sequence[tuple[str, UserInfo]], *, rerank: bool, warmup: int = 5
) -> dict[str, Any]:
    """Latency of :func:`call_recall` over ``queries`` (after ``warmup`` unmeasured calls)."""
    for text, user in queries[:warmup]:
        await call_recall(text, user_filter(user), setup, rerank=rerank)
    latencies = []
    returned = 0
    steps: dict[str, list[float]] = {}
    for text, user in queries:
        flt = user_filter(user)
        started = time.perf_counter()
        out, timings = await call_recall(text, flt, setup, rerank=rerank)
        latencies.append((time.perf_counter() - started) * 1000)
        returned += len(out)
        for step, ms in timings.items():
            steps.setdefault(step, []).append(float(ms))
    summary = latency_summary(latencies)
    line: dict[str, Any] = {**summary, "mean_returned": returned / max(1, len(queries))}
    for step, values in steps.items():
        part = latency_summary(values)
        line[f"recall_{step}_p50_ms"] = part["p50_ms"]
        line[f"recall_{step}_p95_ms"] = part["p95_ms"]
    return line


def profile_parts(
    setup: RecallSetup, queries: Sequence[tuple[str, UserInfo]], candidates: int = 50
) -> dict[str, Any]:
    """Embedding alone and filtered dense search alone (``candidates`` hits), p50/p95 ms each."""
    embed_ms, search_ms = [], []
    vectors = []
    for text, _ in queries:
        t0 = time.perf_counter()
        vectors.append(setup.embedder.embed_queries([text])[0])
        embed_ms.append((time.perf_counter() - t0) * 1000)
    for vec, (_, user) in zip(vectors, queries, strict=True):
        flt = user_filter(user)
        t0 = time.perf_counter()
        setup.store.search(vec, flt, candidates)
        search_ms.append((time.perf_counter() - t0) * 1000)
    e, s = latency_summary(embed_ms), latency_summary(search_ms)
    return {
        "embed_p50_ms": e["p50_ms"],
        "embed_p95_ms": e["p95_ms"],
        "search_p50_ms": s["p50_ms"],
        "search_p95_ms": s["p95_ms"],
        "search_p99_ms": s["p99_ms"],
    }


def _shard_info(store: Any) -> dict[str, Any]:
    """Segments and HNSW-indexed vector count of an edge store (empty when not available)."""
    try:
        info = store._shard.info()
    except Exception:  # noqa: BLE001  (diagnostics only)
        return {}
    return {"segments": info.segments_count, "indexed_vectors": info.indexed_vectors_count}


def recall_at_size(
    size: int,
    pool: Pool,
    users: Sequence[UserInfo],
    queries: Sequence[tuple[str, UserInfo]],
    *,
    embedder: Embedder,
    reranker: Any,
    rerank_queries: int,
    workdir: Path,
    optimize: bool = True,
    emit: Callable[[dict[str, Any]], None],
) -> None:
    """Load ``size`` memories, measure recall latency (plain segments, then after ``optimize()``)."""
    counts: dict[str, int] = {}

    def counted(records: Iterator[VectorRecord]) -> Iterator[VectorRecord]:
        for record in records:
            counts[record.payload["user_id"]] = counts.get(record.payload["user_id"], 0) + 1
            yield record

    store, load_s, count = load_store(
        workdir / f"store-{size}", pool.vectors.shape[1], counted(generate_memories(size, pool, users))
    )
    per_user = np.array([counts.get(u.user_id, 0) for u in users])
    index_of = {u.user_id: i for i, u in enumerate(users)}
    queried = [index_of[u.user_id] for _, u in queries]
    base = {
        "bench": "scale-recall",
        "size": count,
        "users": len(users),
        "memories_per_user_max": int(per_user.max()),
        "memories_per_user_median": float(np.median(per_user)),
        "queried_user_memories_median": float(np.median(per_user[queried])),
        "pool_texts": len(pool.items),
        "vectors": "real e5 passage embeddings of the pool texts, reused across users with noise",
        "sparse_vectors": sparse_encoder() is not None,
        "rerank_mode": rerank_mode(),
    }
    emit(
        rounded(
            {
                **base,
                "phase": "load",
                "load_seconds": load_s,
                "points_per_s": count / load_s,
                "load_avg": loadavg(),
            }
        )
    )
    setup = RecallSetup(store, embedder, reranker, lexical=sparse_encoder())
    phases = ["plain"] + (["hnsw"] if optimize else [])
    try:
        for phase in phases:
            extra: dict[str, Any] = {}
            if phase == "hnsw":
                started = time.perf_counter()
                changed = store.optimize()
                extra = {
                    "optimize_seconds": round(time.perf_counter() - started, 1),
                    "optimize_changed": changed,
                }
            extra.update(_shard_info(store))
            parts = profile_parts(setup, queries)
            for rerank in (False, True):
                qs = queries if not rerank else queries[:rerank_queries]
                res = asyncio.run(measure_recall(setup, qs, rerank=rerank))
                emit(
                    rounded(
                        {
                            **base,
                            "phase": phase,
                            "index": "exact (plain segments)"
                            if phase == "plain"
                            else "hnsw (after optimize)",
                            "rerank": rerank,
                            "queries": len(qs),
                            **res,
                            **parts,
                            **extra,
                            "load_avg": loadavg(),
                        }
                    )
                )
    finally:
        store.close()


# --------------------------------------------------------------------------------------------------
# ingest


async def _ingest(
    data: Path,
    *,
    rates: Sequence[float],
    seconds: float,
    burst: int,
    ingest_users: int,
    preload: int,
    pool: Pool,
    users: Sequence[UserInfo],
    workdir: Path,
    drain_timeout_s: float,
    event_chars: int = 1000,
) -> list[dict[str, Any]]:
    from hindsight.settings import AllSettings  # noqa: PLC0415

    cfg = AllSettings()
    data_dir = workdir / "ingest"
    preload_s = 0.0
    if preload:
        store, preload_s, _ = load_store(
            data_dir / "qdrant" / cfg.qdrant.collection,
            pool.vectors.shape[1],
            generate_memories(preload, pool, users, seed=99),
        )
        store.close()
    results: list[dict[str, Any]] = []
    async with (
        embedded(data_dir, {"dev-bench-scale-key": "tenant-0"}, settings=cfg) as stack,
        IngestProbe(stack, users[:ingest_users], ingest_texts(data, target_chars=event_chars)) as probe,
    ):
        # warm-up: the first events pay one-off costs (model threads, connections)
        warm = [await probe.send_next() for _ in range(5)]
        await probe.wait_stored([m for m, _ in warm], 120)
        for offered in rates:
            # each rate starts from an idle pipeline: what the previous one left is drained first
            await probe.wait_stored(list(probe.published), drain_timeout_s)
            line = await probe.steady(offered, seconds, drain_timeout_s)
            line.update({"preloaded_memories": preload, "preload_seconds": preload_s})
            results.append(rounded(line))
        await probe.wait_stored(list(probe.published), drain_timeout_s)
        if burst:
            results.append(rounded(await probe.burst(burst, drain_timeout_s)))
    return results


# --------------------------------------------------------------------------------------------------
# entry points


def run_scale_bench(
    sizes: Sequence[int] = (10_000, 100_000),
    users: int = 1000,
    rate: float | Sequence[float] = 15.0,
    seconds: float = 60.0,
    *,
    data: Path = DEFAULT_DATA,
    queries: int = 200,
    rerank_queries: int | None = None,
    pool_size: int = 2400,
    tenants: int = 5,
    user_skew: float = 0.6,
    optimize: bool = True,
    ingest: bool = True,
    preload: int = 10_000,
    ingest_users: int = 50,
    burst: int = 150,
    drain_timeout_s: float = 300.0,
    event_chars: int = 1000,
    cache_dir: Path = CACHE_DIR,
    workdir: Path | None = None,
    emit: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Run the scale benchmark; returns (and passes to ``emit`` as they are produced) result dicts.

    Args:
        sizes: memory counts to measure recall latency at (one fresh store each).
        users: synthetic users (over ``tenants`` tenants, activity skew ``user_skew``).
        rate: offered ingest rate (events/s) of the steady ingest measurement, or several rates
            (each measured from an idle pipeline, in order).
        seconds: how long the steady ingest publishes.
        queries: single-user recall queries per size and index state (without rerank).
        rerank_queries: queries with rerank (default ``queries``).
        pool_size: distinct texts with real embeddings (computed once, cached in ``cache_dir``).
        optimize: also measure after ``optimize()`` (HNSW build, timed, in the load phase).
        ingest: run the ingest measurement.
        preload: synthetic memories in the ingest store before it starts.
        ingest_users: users the ingest events are spread over.
        burst: events of the burst throughput measurement (0: skip).
        drain_timeout_s: most seconds to wait for the pipeline to store what was published.
        event_chars: size of each ingest event's text (characters; the issue's "about 1 KB").

    Raises:
        locomo.DatasetError: the LoCoMo file (texts and questions) is missing.
    """
    from hindsight.inference.embedder import LocalE5Embedder  # noqa: PLC0415

    out: list[dict[str, Any]] = []

    def _emit(d: dict[str, Any]) -> None:
        out.append(d)
        if emit is not None:
            emit(d)

    with scratch_dir("hindsight-bench-scale-", workdir) as work:
        embedder = LocalE5Embedder()
        pool = build_pool(data, pool_size, embedder, cache_dir)
        _emit(
            rounded(
                {
                    "bench": "scale-pool",
                    "pool_texts": len(pool.items),
                    "cached_before": pool.cached_before,
                    "embed_seconds": pool.embed_seconds,
                    "note": "memories reuse the real e5 vectors of this pool across users (+ small noise); "
                    "100k distinct embeddings would take ~1.5 h here",
                }
            )
        )
        people = make_users(users, tenants=tenants, skew=user_skew)
        qs = make_queries(data, people, queries)
        reranker = _reranker(embedder)
        embedder.embed_queries(["warm-up"])
        for size in sizes:
            recall_at_size(
                size,
                pool,
                people,
                qs,
                embedder=embedder,
                reranker=reranker,
                rerank_queries=queries if rerank_queries is None else rerank_queries,
                workdir=work,
                optimize=optimize,
                emit=_emit,
            )
        if ingest:
            for line in asyncio.run(
                _ingest(
                    data,
                    rates=[rate] if isinstance(rate, int | float) else list(rate),
                    seconds=seconds,
                    burst=burst,
                    ingest_users=ingest_users,
                    preload=preload,
                    pool=pool,
                    users=people,
                    workdir=work,
                    drain_timeout_s=drain_timeout_s,
                    event_chars=event_chars,
                )
            ):
                _emit(line)
    return out


def _reranker(embedder: Embedder) -> Any:
    try:
        from hindsight.inference.reranker import build_reranker  # noqa: PLC0415
        from hindsight.settings import AllSettings  # noqa: PLC0415
    except ImportError:  # pragma: no cover - a tree without the reranker interface
        return None
    return build_reranker(AllSettings().reranker, embedder=embedder)


def main(argv: Sequence[str] | None = None) -> int:
    """``bench scale`` command line: prints one JSON line per measurement as it completes."""
    parser = arg_parser("hindsight bench scale", __doc__)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo file (texts, questions).")
    parser.add_argument("--sizes", default="10000,100000", help="Comma-separated memory counts.")
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--rate", default="15", help="Offered ingest rate(s), events/s, comma-separated.")
    parser.add_argument("--seconds", type=float, default=60.0, help="Steady ingest duration.")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rerank-queries", type=int, default=None)
    parser.add_argument("--pool-size", type=int, default=2400)
    parser.add_argument("--preload", type=int, default=10_000, help="Memories in the ingest store first.")
    parser.add_argument("--burst", type=int, default=150, help="Burst throughput events (0: skip).")
    parser.add_argument("--drain-timeout-s", type=float, default=300.0)
    parser.add_argument("--event-chars", type=int, default=1000, help="Characters of each ingest event.")
    parser.add_argument("--no-optimize", dest="optimize", action="store_false")
    parser.add_argument("--no-ingest", dest="ingest", action="store_false")
    parser.add_argument("--no-recall", dest="recall", action="store_false", help="Only the ingest part.")
    parser.add_argument("--cache-dir", type=Path, default=CACHE_DIR)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()] if args.recall else []
    try:
        run_scale_bench(
            sizes,
            args.users,
            [float(r) for r in args.rate.split(",") if r.strip()],
            args.seconds,
            data=args.data,
            queries=args.queries,
            rerank_queries=args.rerank_queries,
            pool_size=args.pool_size,
            optimize=args.optimize,
            ingest=args.ingest,
            preload=args.preload,
            burst=args.burst,
            drain_timeout_s=args.drain_timeout_s,
            event_chars=args.event_chars,
            cache_dir=args.cache_dir,
            workdir=args.workdir,
            emit=print_line,
        )
    except locomo.DatasetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
