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

Run: ``.venv/bin/python -m services.cli.bench_scale --sizes 10000,100000``.

The two functions a changing recall API touches are :func:`make_record` (what a loaded point holds:
dense vector, payload, and a sparse BM25 vector when the store supports it) and
:func:`call_recall` (the one call into the recall pipeline).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import json
import logging
import os
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hindsight.eval import locomo
from hindsight.eval.baselines import CACHE_DIR, EmbeddingCache
from hindsight.eval.metrics import latency_summary

if TYPE_CHECKING:
    from hindsight.inference.embedder import Embedder
    from hindsight.stores.vector import MemoryFilter, VectorRecord
    from hindsight.stores.vector_edge import EdgeVectorStore

log = logging.getLogger("hindsight.bench.scale")

DEFAULT_DATA = Path("../shared/data/locomo_dev.json")
REFERENCE_TIME = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
"""'Now' of the synthetic world: memories are spread over the year before it."""
TAGS = ("health", "travel", "work", "family", "food", "hobby", "finance", "pets")
NAMES = (
    "Ana", "Bruno", "Chen Wei", "Dmitri", "Elif", "Farah", "Gustavo", "Hana", "Ivan", "Jun",
    "Kofi", "Lena", "Mateo", "Nadia", "Omar", "Priya", "Quentin", "Rosa", "Sven", "Tariq",
)  # fmt: skip
CITIES = ("Lisbon", "Kyoto", "Nairobi", "Toronto", "Hangzhou", "Oslo", "Lima", "Cairo", "Seoul", "Porto")
MONTHS = ("January", "March", "May", "July", "September", "November")
TEMPLATES = (
    ("semantic", "fact", "{n} prefers {a} over {b} and tries to avoid {c}."),
    ("semantic", "fact", "{n} is allergic to {c} and always asks restaurants about it."),
    ("semantic", "fact", "{n}'s {r} moved to {city} in {m} {y} to work as a {job}."),
    ("semantic", "fact", "{n} adopted a {pet} named {pn} in {m} {y}."),
    ("semantic", "fact", "{n} plans a trip to {city} in {m} {y} and wants a window seat."),
    ("episodic", "episode", "Session summary: {n} talked about {t1} and {t2}; follow up on {t3} next time."),
    ("episodic", "episode", "Session summary: {n} asked for help with {t1} after a stressful week at work."),
)
_FILL = {
    "a": ("green tea", "black coffee", "spicy food", "sushi", "hiking", "jazz", "early flights", "novels"),
    "b": ("soda", "decaf", "bland food", "pizza", "running", "techno", "late flights", "podcasts"),
    "c": ("peanuts", "shellfish", "gluten", "dairy", "loud bars", "long layovers", "cats", "pollen"),
    "r": ("sister", "brother", "mother", "father", "cousin", "best friend", "partner", "daughter"),
    "job": ("nurse", "data analyst", "teacher", "chef", "architect", "pilot", "lawyer", "designer"),
    "pet": ("beagle", "tabby cat", "parrot", "golden retriever", "rabbit", "turtle"),
    "pn": ("Max", "Luna", "Milo", "Coco", "Pixel", "Biscuit", "Nori", "Rex"),
    "t": ("a job interview", "a marathon plan", "tax forms", "a new apartment", "a wedding speech",
          "learning Mandarin", "a broken laptop", "a family reunion", "a pottery class"),
}  # fmt: skip


# --------------------------------------------------------------------------------------------------
# the pool of real embeddings


@dataclass(frozen=True)
class PoolItem:
    """One distinct text of the pool."""

    content: str
    speaker: str | None
    type: str
    kind: str

    @property
    def embed_text(self) -> str:
        """What the pipeline embeds: ``"speaker: content"`` when there is a speaker."""
        return f"{self.speaker}: {self.content}" if self.speaker else self.content


def _template_items(count: int, rng: random.Random) -> list[PoolItem]:
    items: dict[str, PoolItem] = {}
    attempts = 0
    while len(items) < count and attempts < count * 50:
        attempts += 1
        mem_type, kind, template = rng.choice(TEMPLATES)
        t1, t2, t3 = rng.sample(_FILL["t"], 3)
        text = template.format(
            n=rng.choice(NAMES),
            a=rng.choice(_FILL["a"]),
            b=rng.choice(_FILL["b"]),
            c=rng.choice(_FILL["c"]),
            r=rng.choice(_FILL["r"]),
            job=rng.choice(_FILL["job"]),
            pet=rng.choice(_FILL["pet"]),
            pn=rng.choice(_FILL["pn"]),
            city=rng.choice(CITIES),
            m=rng.choice(MONTHS),
            y=rng.choice((2022, 2023, 2024)),
            t1=t1,
            t2=t2,
            t3=t3,
        )
        items.setdefault(text, PoolItem(text, None, mem_type, kind))
    return list(items.values())


def pool_items(data: Path, size: int, *, template_share: float = 0.15, seed: int = 7) -> list[PoolItem]:
    """``size`` distinct texts: LoCoMo turns in file order (as the pipeline would store them, so the
    recall bench's cached embeddings are reused) plus ``template_share`` template facts/episodes."""
    rng = random.Random(seed)
    templates = _template_items(int(size * template_share), rng)
    turns: dict[str, PoolItem] = {}
    from schemas import InteractionEvent  # noqa: PLC0415

    for sample in locomo.load(data):
        for event in locomo.conversation(sample).events:
            if isinstance(event, InteractionEvent) and len(turns) < size - len(templates):
                item = PoolItem(event.content, event.speaker, "episodic", "turn")
                turns.setdefault(item.embed_text, item)
    return [*turns.values(), *templates]


@dataclass
class Pool:
    """Distinct texts and their real (cached) e5 passage embeddings ``(n, 384)``."""

    items: list[PoolItem]
    vectors: np.ndarray
    embed_seconds: float
    cached_before: int


def build_pool(data: Path, size: int, embedder: Embedder, cache_dir: Path = CACHE_DIR) -> Pool:
    """Texts of :func:`pool_items` with their embeddings (computed only when not cached)."""
    items = pool_items(data, size)
    cache = EmbeddingCache(embedder, cache_dir)
    before = sum(cache.key(i.embed_text) in cache._vectors for i in items)
    started = time.perf_counter()
    vectors = cache.passages([i.embed_text for i in items], progress=True)
    return Pool(items, vectors, time.perf_counter() - started, before)


# --------------------------------------------------------------------------------------------------
# synthetic memories


@dataclass(frozen=True)
class UserInfo:
    """A synthetic user: tenant, the agents that serve it, and how many memories it has."""

    tenant_id: str
    user_id: str
    agents: tuple[str, ...]
    weight: float


def make_users(users: int, *, tenants: int = 5, skew: float = 0.6, seed: int = 11) -> list[UserInfo]:
    """``users`` users over ``tenants`` tenants; user ``r`` (0-based) has weight ``(r + 1) ** -skew``
    (a few heavy users, a long tail), normalised to sum 1."""
    rng = random.Random(seed)
    raw = [(r + 1) ** -skew for r in range(users)]
    total = sum(raw)
    out = []
    for r in range(users):
        tenant = f"tenant-{r % tenants}"
        agents = tuple(f"{tenant}-agent-{a}" for a in rng.sample(range(6), rng.randint(1, 3)))
        out.append(UserInfo(tenant, f"user-{r:05d}", agents, raw[r] / total))
    return out


def make_record(memory_id: str, vector: np.ndarray, payload: dict[str, Any], text: str) -> VectorRecord:
    """A loadable point: dense vector, payload, and a sparse BM25 vector of ``text`` when this tree's
    ``VectorRecord`` has a ``sparse`` field and :mod:`hindsight.lexical` exists (as ingest stores it).

    ADAPT HERE when what ingest writes per point changes.
    """
    from hindsight.stores.vector import VectorRecord  # noqa: PLC0415

    sparse = _sparse_encoder()
    if sparse is not None:
        return VectorRecord(memory_id, vector, payload, sparse=sparse.document(text))
    return VectorRecord(memory_id, vector, payload)


_ENCODER: list[Any] = []


def _sparse_encoder() -> Any:
    if not _ENCODER:
        encoder = None
        try:
            from hindsight.stores.vector import VectorRecord  # noqa: PLC0415

            if "sparse" in inspect.signature(VectorRecord).parameters:
                from hindsight.lexical import LexicalEncoder  # noqa: PLC0415

                encoder = LexicalEncoder()
        except ImportError:
            encoder = None
        _ENCODER.append(encoder)
    return _ENCODER[0]


def generate_memories(
    n: int,
    pool: Pool,
    users: Sequence[UserInfo],
    *,
    seed: int = 3,
    noise: float = 0.05,
    model: str = "multilingual-e5-small-q4",
) -> Iterator[VectorRecord]:
    """``n`` memory points, deterministic for a seed.

    Each memory: a user drawn by weight; a pool text not yet used by that user when possible; the
    pool vector plus Gaussian noise of norm ~``noise`` (cosine ~0.999 to the original), L2-normalised;
    ``created_at`` uniform over the year before :data:`REFERENCE_TIME`; status 92% active, 5%
    superseded, 3% expired; scope mostly global, sometimes one of the user's agents; 0-2 tags;
    provenance with one event id and one LoCoMo-like external ref (episodes: 12 refs).
    """
    from hindsight.ids import stable_id  # noqa: PLC0415
    from hindsight.records import to_payload  # noqa: PLC0415
    from schemas import Memory, Provenance  # noqa: PLC0415

    rng = np.random.default_rng(seed)
    dim = pool.vectors.shape[1]
    weights = np.array([u.weight for u in users])
    picks = rng.choice(len(users), size=n, p=weights / weights.sum())
    used: dict[int, set[int]] = {}
    statuses = rng.choice(3, size=n, p=[0.92, 0.05, 0.03])
    ages = rng.uniform(0, 365 * 86_400, size=n)
    for i in range(n):
        u = users[int(picks[i])]
        seen = used.setdefault(int(picks[i]), set())
        idx = int(rng.integers(len(pool.items)))
        for _ in range(8):
            if idx not in seen:
                break
            idx = int(rng.integers(len(pool.items)))
        seen.add(idx)
        item = pool.items[idx]
        vec = pool.vectors[idx] + rng.normal(0.0, noise / np.sqrt(dim), size=dim).astype(np.float32)
        vec = (vec / np.linalg.norm(vec)).astype(np.float32)
        created = REFERENCE_TIME - timedelta(seconds=float(ages[i]))
        stored = created + timedelta(seconds=2)
        agent = u.agents[i % len(u.agents)]
        event_id = f"{u.user_id}:ev{i}"
        refs = (
            (f"D{i % 30 + 1}:{i % 17 + 1}",)
            if item.kind == "turn"
            else tuple(f"D{i % 30 + 1}:{j}" for j in range(1, 13))
        )
        tags = tuple(TAGS[t] for t in rng.choice(len(TAGS), size=int(rng.integers(0, 3)), replace=False))
        memory = Memory(
            id=stable_id("bench", u.tenant_id, event_id),
            tenant_id=u.tenant_id,
            user_id=u.user_id,
            agent_id=agent,
            session_id=f"{u.user_id}:s{int(ages[i] // 86_400)}",
            type=item.type,
            kind=item.kind,
            content=item.content,
            source="user" if item.kind == "turn" else "system",
            speaker=item.speaker,
            scope="global" if i % 5 else f"agent:{agent}",
            tags=tags,
            intent="fact" if item.kind == "fact" else None,
            importance=round(float(rng.uniform(0.2, 0.9)), 3),
            confidence=round(float(rng.uniform(0.5, 0.95)), 3),
            created_at=created,
            stored_at=stored,
            last_accessed_at=stored,
            access_count=int(rng.poisson(1.0)),
            status=("active", "superseded", "expired")[int(statuses[i])],
            version=1,
            provenance=Provenance(event_ids=(event_id,), external_refs=refs),
            embedding_model=model,
        )
        yield make_record(memory.id, vec, to_payload(memory), item.embed_text)


def load_store(
    path: Path, dim: int, records: Iterator[VectorRecord], *, batch: int = 1000
) -> tuple[EdgeVectorStore, float, int]:
    """Open a fresh :class:`EdgeVectorStore` at ``path`` (no flush per write) and upsert ``records``
    in batches; returns the store, the seconds spent (generation included) and the point count."""
    from hindsight.stores.vector_edge import EdgeVectorStore  # noqa: PLC0415

    store = EdgeVectorStore(path, dim, flush_on_write=False)
    started = time.perf_counter()
    chunk: list[VectorRecord] = []
    count = 0
    for record in records:
        chunk.append(record)
        if len(chunk) >= batch:
            store.upsert(chunk)
            count += len(chunk)
            chunk = []
    if chunk:
        store.upsert(chunk)
        count += len(chunk)
    store.flush()
    return store, time.perf_counter() - started, count


# --------------------------------------------------------------------------------------------------
# recall latency


def user_filter(user: UserInfo) -> MemoryFilter:
    """The filter the gateway pushes down for one user's recall: tenant, user, the global scope and
    the agent's own scope, status active."""
    from hindsight.stores.vector import MemoryFilter  # noqa: PLC0415

    return MemoryFilter(
        tenant_id=user.tenant_id,
        user_id=user.user_id,
        scopes=("global", f"agent:{user.agents[0]}"),
        statuses=("active",),
    )


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


def make_queries(
    data: Path, users: Sequence[UserInfo], count: int, *, seed: int = 5
) -> list[tuple[str, UserInfo]]:
    """``count`` (question, user) pairs: real LoCoMo questions, users drawn by activity weight."""
    rng = random.Random(seed)
    questions = [q.question for s in locomo.load(data) for q in locomo.conversation(s).questions]
    rng.shuffle(questions)
    weights = [u.weight for u in users]
    chosen = rng.choices(list(users), weights=weights, k=count)
    return [(questions[i % len(questions)], u) for i, u in enumerate(chosen)]


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


def _r(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (round(v, 2) if isinstance(v, float) else v) for k, v in d.items()}


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


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
        "sparse_vectors": _sparse_encoder() is not None,
        "rerank_mode": rerank_mode(),
    }
    emit(
        _r(
            {
                **base,
                "phase": "load",
                "load_seconds": load_s,
                "points_per_s": count / load_s,
                "load_avg": _loadavg(),
            }
        )
    )
    setup = RecallSetup(store, embedder, reranker, lexical=_sparse_encoder())
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
                    _r(
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
                            "load_avg": _loadavg(),
                        }
                    )
                )
    finally:
        store.close()


# --------------------------------------------------------------------------------------------------
# ingest


def ingest_texts(data: Path, *, target_chars: int = 1000, seed: int = 9) -> list[tuple[str, str]]:
    """Distinct ~``target_chars`` texts: non-overlapping runs of consecutive turns of one LoCoMo
    session (``"Speaker: text"`` lines), cut at a word boundary; with the speaker of the first turn."""
    out: list[tuple[str, str]] = []
    from schemas import InteractionEvent  # noqa: PLC0415

    for sample in locomo.load(data):
        run: list[str] = []
        speaker = ""
        session = ""
        for event in locomo.conversation(sample).events:
            if not isinstance(event, InteractionEvent):
                continue
            if event.session_id != session:
                run, session = [], event.session_id
            if not run:
                speaker = event.speaker or "user"
            run.append(f"{event.speaker}: {event.content}")
            text = "\n".join(run)
            if len(text) >= target_chars:
                cut = text[: target_chars + 80]
                cut = cut[: cut.rfind(" ")] if len(cut) > target_chars else cut
                out.append((speaker, cut))
                run = []
    random.Random(seed).shuffle(out)
    return out


class _IngestProbe:
    """Publishes events into a running stack and timestamps their ``memory.stored.v1`` arrival."""

    def __init__(self, stack: Any, users: Sequence[UserInfo], texts: Sequence[tuple[str, str]]) -> None:
        from hindsight.ids import turn_memory_id  # noqa: PLC0415

        self.stack = stack
        self.users = list(users)
        self.texts = list(texts)
        self.run_id = uuid.uuid4().hex[:8]
        self.published: dict[str, float] = {}
        self.stored: dict[str, float] = {}
        self.deduplicated = 0
        self.sent_bytes: list[int] = []
        self._counter = 0
        self._per_user: dict[str, int] = {}
        self._arrived = asyncio.Event()
        self._turn_id = turn_memory_id
        self._producer: Any = None
        self._consumer: Any = None
        self._task: asyncio.Task[None] | None = None
        self._stop = False

    async def __aenter__(self) -> _IngestProbe:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # noqa: PLC0415

        from schemas import Topic  # noqa: PLC0415

        self._producer = AIOKafkaProducer(bootstrap_servers=self.stack.bootstrap, acks="all", linger_ms=0)
        self._consumer = AIOKafkaConsumer(
            str(Topic.STORED),
            bootstrap_servers=self.stack.bootstrap,
            group_id=None,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=10,
        )
        await self._producer.start()
        await self._consumer.start()
        self._task = asyncio.create_task(self._consume())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stop = True
        if self._task is not None:
            await self._task
        await self._consumer.stop()
        await self._producer.stop()

    async def _consume(self) -> None:
        while not self._stop:
            batches = await self._consumer.getmany(timeout_ms=50)
            now = time.perf_counter()
            for records in batches.values():
                for rec in records:
                    body = json.loads(rec.value)
                    cid = body.get("candidate_id")
                    if cid in self.published and cid not in self.stored:
                        self.stored[cid] = now
                        self.deduplicated += bool(body.get("deduplicated"))
            if batches:
                self._arrived.set()

    def _event(self) -> Any:
        from schemas import InteractionEvent  # noqa: PLC0415

        i = self._counter
        self._counter += 1
        u = self.users[i % len(self.users)]
        n = self._per_user.get(u.user_id, 0)
        self._per_user[u.user_id] = n + 1
        # each user walks the text list from its own offset: no two events of one user share a text
        speaker, text = self.texts[(n + 37 * (i % len(self.users))) % len(self.texts)]
        self.sent_bytes.append(len(text.encode()))
        return InteractionEvent(
            event_id=f"bench-{self.run_id}-{i}",
            tenant_id=u.tenant_id,
            user_id=u.user_id,
            agent_id=u.agents[0],
            session_id=f"{u.user_id}:bench-{self.run_id}",
            occurred_at=datetime.now(UTC),
            source="user",
            content=text,
            speaker=speaker,
            turn_index=n,
        )

    async def send_next(self) -> tuple[str, Any]:
        """Publish the next event (not awaiting the ack); returns its memory id and ack future."""
        from schemas import Topic, partition_key  # noqa: PLC0415

        ev = self._event()
        mid = self._turn_id(ev.tenant_id, ev.event_id)
        self.published[mid] = time.perf_counter()
        future = await self._producer.send(
            str(Topic.INTERACTIONS),
            ev.model_dump_json().encode(),
            key=partition_key(ev.tenant_id, ev.user_id),
        )
        return mid, future

    async def wait_stored(self, ids: Sequence[str], timeout_s: float) -> float:
        """Wait until every id arrived on ``memory.stored.v1``, or every stage has consumed everything
        (lag 0: what is still missing was dropped by the write-trigger as not worth remembering),
        or the timeout; returns the time."""
        deadline = time.perf_counter() + timeout_s
        while not all(i in self.stored for i in ids):
            left = deadline - time.perf_counter()
            if left <= 0 or not any((await self.lag()).values()):
                break
            self._arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), timeout=min(left, 1.0))
        return time.perf_counter()

    async def lag(self) -> dict[str, int]:
        """Consumer lag of guard, write-trigger and embed groups."""
        from hindsight.brokers.admin import consumer_lag  # noqa: PLC0415

        groups = {
            g: t
            for g, t in self.stack.groups().items()
            if g.endswith(("guard", "ingest-trigger", "ingest-embed"))
        }
        return {g: await consumer_lag(self.stack.bootstrap, g, t) for g, t in groups.items()}

    async def steady(self, rate: float, seconds: float, drain_timeout_s: float) -> dict[str, Any]:
        """Publish at ``rate`` for ``seconds``, then drain; the steady-rate result line."""
        n_events = int(rate * seconds)
        futures, measured = [], []
        load_start = _loadavg()
        t0 = time.perf_counter()
        for j in range(n_events):
            delay = t0 + j / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            mid, future = await self.send_next()
            futures.append(future)
            measured.append(mid)
        t_end = time.perf_counter()
        await asyncio.gather(*futures)
        lag_end = await self.lag()
        in_window = sum(1 for m in measured if m in self.stored and self.stored[m] <= t_end)
        t_done = await self.wait_stored(measured, drain_timeout_s)
        lag_after = await self.lag()
        ok = [m for m in measured if m in self.stored]
        lat = [(self.stored[m] - self.published[m]) * 1000 for m in ok]
        summary = latency_summary(lat)
        sample = ok[:: max(1, len(ok) // 50)]
        present = len(await asyncio.to_thread(self.stack.resources.vector_store().retrieve, sample))
        return {
            "bench": "scale-ingest",
            "mode": "steady",
            "offered_events_per_s": rate,
            "published_events_per_s": n_events / (t_end - t0),
            "events": n_events,
            "event_bytes_mean": float(np.mean(self.sent_bytes)),
            "stored": len(ok),
            "stored_deduplicated": self.deduplicated,
            "not_stored_after_drain": n_events - len(ok),
            "not_stored_reason": "still queued" if any(lag_after.values()) else "write-trigger dropped",
            "stored_within_publish_window": in_window,
            "achieved_events_per_s": len(ok) / (max(self.stored[m] for m in ok) - t0) if ok else 0.0,
            "sustained": not any(lag_after.values()) and in_window >= 0.9 * len(ok),
            "searchable_p50_ms": summary["p50_ms"],
            "searchable_p95_ms": summary["p95_ms"],
            "searchable_p99_ms": summary["p99_ms"],
            "searchable_max_ms": max(lat) if lat else None,
            "lag_when_publishing_ended": lag_end,
            "lag_after_drain": lag_after,
            "drain_seconds": t_done - t_end,
            "store_check": f"{present}/{len(sample)} sampled stored ids retrievable",
            "optimize_called": False,
            "load_avg_start": load_start,
            "load_avg_end": _loadavg(),
        }

    async def burst(self, count: int, drain_timeout_s: float) -> dict[str, Any]:
        """Publish ``count`` events at once; the drain throughput line.

        Throughput counts every ``memory.stored.v1`` arrival while the burst drains (a backlog left
        by an earlier measurement included) over the time from the first publish to the last arrival.
        """
        backlog = len(self.published) - len(self.stored)
        t0 = time.perf_counter()
        sent = [await self.send_next() for _ in range(count)]
        await asyncio.gather(*(f for _, f in sent))
        t_pub = time.perf_counter()
        ids = [m for m, _ in sent]
        t_done = await self.wait_stored(ids, drain_timeout_s)
        arrivals = [t for t in self.stored.values() if t >= t0]
        end = max(arrivals) if arrivals else t_done
        return {
            "bench": "scale-ingest",
            "mode": "burst",
            "events": count,
            "backlog_before": backlog,
            "publish_seconds": t_pub - t0,
            "stored": sum(i in self.stored for i in ids),
            "throughput_events_per_s": len(arrivals) / (end - t0) if arrivals else 0.0,
            "drain_seconds": t_done - t0,
            "load_avg_end": _loadavg(),
        }


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
    from services.cli.embedded import embedded_stack  # noqa: PLC0415
    from services.gateway.settings import GatewaySettings  # noqa: PLC0415

    cfg = AllSettings()
    cfg.runtime.data_dir = workdir / "ingest"
    preload_s = 0.0
    if preload:
        store, preload_s, _ = load_store(
            cfg.runtime.data_dir / "qdrant" / cfg.qdrant.collection,
            pool.vectors.shape[1],
            generate_memories(preload, pool, users, seed=99),
        )
        store.close()
    gateway = GatewaySettings(port=0, api_keys={"dev-bench-scale-key": "tenant-0"})
    results: list[dict[str, Any]] = []
    async with (
        embedded_stack(cfg, gateway) as stack,
        _IngestProbe(stack, users[:ingest_users], ingest_texts(data, target_chars=event_chars)) as probe,
    ):
        # warm-up: the first events pay one-off costs (model threads, connections)
        warm = [await probe.send_next() for _ in range(5)]
        await probe.wait_stored([m for m, _ in warm], 120)
        for offered in rates:
            # each rate starts from an idle pipeline: what the previous one left is drained first
            await probe.wait_stored(list(probe.published), drain_timeout_s)
            line = await probe.steady(offered, seconds, drain_timeout_s)
            line.update({"preloaded_memories": preload, "preload_seconds": preload_s})
            results.append(_r(line))
        await probe.wait_stored(list(probe.published), drain_timeout_s)
        if burst:
            results.append(_r(await probe.burst(burst, drain_timeout_s)))
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

    with tempfile.TemporaryDirectory(prefix="hindsight-bench-scale-", ignore_cleanup_errors=True) as scratch:
        work = workdir or Path(scratch)
        embedder = LocalE5Embedder()
        pool = build_pool(data, pool_size, embedder, cache_dir)
        _emit(
            _r(
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
    parser = argparse.ArgumentParser(prog="hindsight bench scale", description=__doc__.split("\n")[0])
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
            emit=lambda d: print(json.dumps(d), flush=True),
        )
    except locomo.DatasetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
