"""The recall pipeline (DESIGN.md section 5), wiring the pure steps to the store and the models.

1. embed the query (alone: work running beside the embedder's threads slows it down on two cores),
   then, in one worker-thread hop, parse it (entities, intent, time expression in the caller's
   zone) and
2. fetch two candidate lists with every filter pushed down into the engine: dense (cosine,
   ``query:`` prefix, vectors returned with the hits) and lexical (BM25 sparse vectors in the same
   engine);
3. every candidate's vector: dense hits carry theirs, lexical-only hits get theirs by one
   payload-free lookup (their cosine, for the floor; vectors for near-duplicate dedupe);
4. optional rerank of the best ``rerank_top_n`` fused candidates (the reranker contract);
5. scoring, floor, dedupe, a fact folded with the turns it was extracted from (its evidence),
   the newer of two conflicting memories first, order (:mod:`hindsight.recall.rank`), the evidence
   turns of returned facts that were not among the candidates (one lookup), token budget
   (:mod:`hindsight.recall.budget`, evidence included);
6. conflict pairs (``conflicts_with``, written by reconcile when its judge was unsure) that involve
   a returned memory, with the partner's payload.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from hindsight.inference.embedder import embed_queries_async
from hindsight.recall import budget, rank
from hindsight.recall.query import ParsedQuery, parse
from hindsight.recall.rank import Candidate, RecalledMemory, RecallParams

if TYPE_CHECKING:
    from hindsight.inference.embedder import Embedder
    from hindsight.inference.reranker import Reranker
    from hindsight.lexical import LexicalEncoder
    from hindsight.stores.vector import MemoryFilter, ScoredRecord, VectorStore


@dataclass(frozen=True)
class Conflict:
    """Two active memories the revision judge could not reconcile (``conflicts_with``): the agent
    decides. ``memory_id`` was returned; ``other_id`` may not have been (its payload is here)."""

    memory_id: str
    other_id: str
    other: dict[str, Any]


@dataclass(frozen=True)
class RecallResult:
    """Memories (best first, or chronological), what the query meant, tokens and timings."""

    memories: list[RecalledMemory]
    parsed: ParsedQuery
    tokens: int
    truncated: bool
    timings_ms: dict[str, float] = field(default_factory=dict)
    """Milliseconds per step: ``embed``, ``parse_and_search``, ``rerank``, ``rank`` (scoring, dedupe,
    order, budget) and ``total``."""
    conflicts: list[Conflict] = field(default_factory=list)
    """Conflict pairs that involve a returned memory, each once."""
    found: Mapping[str, Candidate] = field(default_factory=dict)
    """Every candidate of both lists, by id (what :func:`hindsight.recall.trace.trace` explains)."""
    scored: Sequence[RecalledMemory] = ()
    """Candidates above the similarity floor, scored, best first (before dedupe)."""
    deduped: Sequence[RecalledMemory] = ()
    """``scored`` after near-duplicate dedupe (before the ``top_k`` cut)."""
    ordered: Sequence[RecalledMemory] = ()
    """The ``top_k`` cut, in the requested order (before the token budget)."""
    reference_time: datetime | None = None
    """The "now" ages and time weights were measured to."""


def _candidates(dense: list[ScoredRecord], lexical: list[ScoredRecord]) -> dict[str, Candidate]:
    found: dict[str, Candidate] = {}
    for i, hit in enumerate(dense, start=1):
        found[hit.id] = Candidate(hit.id, hit.payload, hit.score, vector=hit.vector, dense_rank=i)
    for i, hit in enumerate(lexical, start=1):
        prior = found.get(hit.id)
        if prior is None:
            found[hit.id] = Candidate(
                hit.id, hit.payload, cosine=-1.0, lexical_rank=i, lexical_score=hit.score
            )
        else:
            found[hit.id] = replace(prior, lexical_rank=i, lexical_score=hit.score)
    return found


def _with_vectors(found: dict[str, Candidate], store: VectorStore, query: np.ndarray) -> dict[str, Candidate]:
    """Fill the vector (and so the cosine, for the floor) of lexical-only hits; dense hits carry theirs."""
    missing = [c.id for c in found.values() if c.vector is None]
    if not missing:
        return found
    vectors = store.dense_vectors(missing)
    out = dict(found)
    for item, vec in vectors.items():
        c = out[item]
        cosine = c.cosine if c.dense_rank is not None else float(np.dot(vec, query))
        out[item] = replace(c, cosine=cosine, vector=vec)
    return out


def _with_evidence(memories: list[RecalledMemory], store: VectorStore) -> list[RecalledMemory]:
    """Facts carry the turns they rest on: those not among the candidates are fetched (one lookup)."""
    missing: dict[str, list[str]] = {}
    for mem in memories:
        if mem.payload.get("kind") != "fact":
            continue
        have = {i for i, _ in mem.evidence}
        wanted = [str(i) for i in (mem.payload.get("provenance") or {}).get("memory_ids") or ()]
        missing[mem.id] = [i for i in wanted if i not in have]
    ids = sorted({i for ids in missing.values() for i in ids})
    if not ids:
        return memories
    fetched = {r.id: r.payload for r in store.retrieve(ids)}
    out = []
    for mem in memories:
        extra = tuple((i, fetched[i]) for i in missing.get(mem.id, ()) if i in fetched)
        out.append(replace(mem, evidence=(*mem.evidence, *extra)) if extra else mem)
    return out


def _conflicts(
    memories: list[RecalledMemory], found: dict[str, Candidate], store: VectorStore
) -> list[Conflict]:
    """Each active conflict partner of a returned memory, once per pair (partners fetched if needed)."""
    wanted: list[tuple[str, str]] = []
    for mem in memories:
        for other in mem.payload.get("conflicts_with") or ():
            pair = (mem.id, str(other))
            if (pair[1], pair[0]) not in wanted and pair not in wanted:
                wanted.append(pair)
    if not wanted:
        return []
    payloads = {i: c.payload for i, c in found.items()}
    payloads |= {m.id: m.payload for m in memories}
    missing = sorted({o for _, o in wanted if o not in payloads})
    if missing:
        payloads |= {r.id: r.payload for r in store.retrieve(missing)}
    owner = memories[0].payload
    return [
        Conflict(a, b, payloads[b])
        for a, b in wanted
        if b in payloads
        and payloads[b].get("status") == "active"
        and payloads[b].get("tenant_id") == owner.get("tenant_id")
        and payloads[b].get("user_id") == owner.get("user_id")
    ]


def _rerank(
    found: dict[str, Candidate],
    query: str,
    query_vector: np.ndarray,
    reranker: Reranker,
    params: RecallParams,
) -> dict[str, Candidate]:
    # the best rerank_top_n by the fused score of both lists (ties by id, as rank.fuse orders them)
    best = sorted(
        found.values(), key=lambda c: (-rank.rrf(c.dense_rank, c.lexical_rank, k=params.rrf_k), c.id)
    )
    ids = [c.id for c in best[: params.rerank_top_n]]
    texts = [budget.payload_text(found[i].payload) for i in ids]
    vectors = [v for v in (found[i].vector for i in ids) if v is not None]
    if ids and len(vectors) == len(ids):
        scores = reranker.score(query, texts, query_vector=query_vector, passage_vectors=np.stack(vectors))
    else:
        scores = reranker.score(query, texts)
    order = sorted(range(len(ids)), key=lambda j: -float(scores[j]))
    out = dict(found)
    for position, j in enumerate(order, start=1):
        out[ids[j]] = replace(out[ids[j]], rerank_rank=position, rerank_score=float(scores[j]))
    return out


def _parse_and_search(
    query: str,
    vector: np.ndarray,
    flt: MemoryFilter,
    store: VectorStore,
    lexical: LexicalEncoder | None,
    *,
    ref: datetime,
    time_zone: str | None,
    limit: int,
) -> tuple[ParsedQuery, dict[str, Candidate]]:
    """The parsed query, both candidate lists and every candidate's vector (one worker-thread hop)."""
    parsed = parse(query, ref, time_zone)
    dense = store.search(vector, flt, limit, with_vectors=True)
    sparse = lexical.query(query) if lexical is not None else None
    lexical_hits = store.search_sparse(sparse, flt, limit) if sparse else []
    return parsed, _with_vectors(_candidates(dense, lexical_hits), store, vector)


async def recall(
    query: str,
    flt: MemoryFilter,
    *,
    store: VectorStore,
    embedder: Embedder,
    lexical: LexicalEncoder | None = None,
    reranker: Reranker | None = None,
    params: RecallParams | None = None,
    reference_time: datetime | None = None,
    time_zone: str | None = None,
    counter: budget.TokenCounter = budget.count_tokens,
) -> RecallResult:
    """Run the pipeline for ``query`` under ``flt`` (every filter is pushed into the store).

    Args:
        query: natural-language query.
        flt: tenant/user/scope/type/status/tag/time filter; ``tenant_id`` is always set.
        lexical: BM25 encoder; ``None`` searches dense only.
        reranker: used when ``params.rerank`` is set.
        params: ranking knobs (defaults: :class:`RecallParams`).
        reference_time: tz-aware "now" for time expressions and time weighting; default UTC now.
        time_zone: the caller's IANA zone for time expressions ("yesterday" in Asia/Shanghai).

    Raises:
        ValueError: naive ``reference_time`` or unknown ``time_zone``.
        StoreUnavailableError / ModelUnavailableError: the store or a model failed.
    """
    params = params or RecallParams()
    started = time.perf_counter()
    ref = reference_time or datetime.now(UTC)
    # The embedding runs alone: its OpenMP team uses both cores and every parallel region waits for
    # its slowest thread, so concurrent parsing or searching measured +6 ms at p95 (bench scale).
    vector = (await embed_queries_async(embedder, [query]))[0]
    t_embed = time.perf_counter()
    parsed, found = await asyncio.to_thread(
        _parse_and_search,
        query,
        vector,
        flt,
        store,
        lexical,
        ref=ref,
        time_zone=time_zone,
        limit=params.candidates,
    )
    t_search = time.perf_counter()
    if params.rerank and reranker is not None and found:
        found = await asyncio.to_thread(_rerank, found, query, vector, reranker, params)
    t_rerank = time.perf_counter()
    window = None if parsed.window is None else (parsed.window.start, parsed.window.end)
    scored = rank.score(
        list(found.values()),
        ref,
        params,
        wants_recent=parsed.wants_recent,
        window=window,
        entities=parsed.entities,
    )
    vectors_by_id = {c.id: c.vector for c in found.values() if c.vector is not None}
    # a turn folded into the fact drawn from it is traced as a duplicate (it is returned as evidence)
    deduped = rank.newest_first_in_versions(rank.fold_evidence(rank.dedupe(scored, vectors_by_id)))
    ordered = rank.order(deduped, params)
    if any(m.payload.get("kind") == "fact" for m in ordered):
        ordered = await asyncio.to_thread(_with_evidence, ordered, store)
    kept, tokens, truncated = budget.fit(ordered, params.token_budget, counter)
    conflicts: list[Conflict] = []
    if any(m.payload.get("conflicts_with") for m in kept):
        conflicts = await asyncio.to_thread(_conflicts, kept, found, store)
    done = time.perf_counter()
    timings = {
        "embed": (t_embed - started) * 1000,
        "parse_and_search": (t_search - t_embed) * 1000,
        "rerank": (t_rerank - t_search) * 1000,
        "rank": (done - t_rerank) * 1000,
        "total": (done - started) * 1000,
    }
    return RecallResult(
        kept,
        parsed,
        tokens,
        truncated,
        timings,
        conflicts=conflicts,
        found=found,
        scored=scored,
        deduped=deduped,
        ordered=ordered,
        reference_time=ref,
    )
