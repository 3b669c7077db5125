"""Synthetic-but-realistic memories for the benchmarks (the scale generator), queries and ingest texts.

Memories: many users in a few tenants with a skewed number of memories per user; contents are real
LoCoMo turns plus template facts and episode summaries; payloads are real :class:`schemas.Memory`
records through :func:`hindsight.records.to_payload`. Vectors are real multilingual-e5-small passage
embeddings, but of a POOL of a few thousand distinct texts computed once and cached under
``.cache/bench/`` (embedding 100k distinct texts would take ~1.5 h on 2 cores): memories reuse pool
vectors across users, each with a small random perturbation (so no two points are identical).

The function a changing ingest touches is :func:`make_record` (what a loaded point holds: dense
vector, payload, and a sparse BM25 vector when the store supports it).
"""

from __future__ import annotations

import inspect
import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hindsight.eval import locomo
from hindsight.eval.baselines import CACHE_DIR, EmbeddingCache

if TYPE_CHECKING:
    from hindsight.inference.embedder import Embedder
    from hindsight.stores.vector import MemoryFilter, VectorRecord
    from hindsight.stores.vector_edge import EdgeVectorStore

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

    sparse = sparse_encoder()
    if sparse is not None:
        return VectorRecord(memory_id, vector, payload, sparse=sparse.document(text))
    return VectorRecord(memory_id, vector, payload)


_ENCODER: list[Any] = []


def sparse_encoder() -> Any:
    """The BM25 encoder ingest uses for sparse vectors (one per process), or None when this tree's
    ``VectorRecord`` has no ``sparse`` field or :mod:`hindsight.lexical` is missing."""
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
# queries and ingest texts


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
