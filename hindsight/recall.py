"""Recall: filtered vector search, time weighting, similarity floor, dedupe, ordering (DESIGN.md s5).

The pipeline, in order:

1. embed the query (``query:`` prefix) -> ``(384,)`` float32;
2. vector search with every filter pushed down into the store (tenant, user, scope, type, status,
   tags, time window) for ``candidates`` hits;
3. similarity floor on the raw cosine (DESIGN.md section 4, default 0.65);
4. time weight from the memory's ``created_at`` to the query's reference time (step or exp), blended
   with similarity ``0.7 : 0.3`` (DESIGN.md section 4);
5. dedupe: memories whose normalised content is identical collapse to the newest active version;
6. order by final score (or chronologically) and cut at ``top_k`` (default 5, max 15).

:func:`rank` (steps 3-6) is pure and unit-tested; :func:`recall` adds the I/O.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from hindsight import scoring
from hindsight.stores.vector import MemoryFilter, ScoredRecord

if TYPE_CHECKING:
    from hindsight.inference.embedder import Embedder
    from hindsight.stores.vector import VectorStore

SIMILARITY_FLOOR = 0.65
"""Cosine floor below which a candidate is never returned (DESIGN.md section 4)."""
TOP_K_DEFAULT = 5
TOP_K_MAX = 15
"""``top_k`` default 5, max 15 (DESIGN.md section 4)."""
SECONDS_PER_DAY = 86_400.0


@dataclass(frozen=True)
class RecallParams:
    """Ranking knobs; defaults from DESIGN.md section 4."""

    top_k: int = TOP_K_DEFAULT
    candidates: int = 50
    similarity_floor: float = SIMILARITY_FLOOR
    time_mode: Literal["step", "exp"] = "step"
    time_share: float = scoring.TIME_BLEND
    order: Literal["relevance", "chronological"] = "relevance"


@dataclass(frozen=True)
class RecalledMemory:
    """One recalled memory with the scores that explain its rank (the "memory usage report")."""

    id: str
    payload: dict[str, Any]
    similarity: float
    time_weight: float
    final_score: float
    rank: int = 0
    duplicates: tuple[str, ...] = field(default=())


def _norm_content(text: str) -> str:
    return re.sub(r"\W+", " ", text.casefold()).strip()


def _age_days(payload: dict[str, Any], reference: datetime) -> float:
    created_ts = float(payload.get("created_ts", reference.timestamp()))
    return (reference.timestamp() - created_ts) / SECONDS_PER_DAY


def rank(
    hits: Sequence[ScoredRecord], reference_time: datetime, params: RecallParams
) -> list[RecalledMemory]:
    """Floor, time-weight, blend, dedupe, order and cut ``hits`` (steps 3-6 above). Pure.

    Args:
        hits: vector-search hits, any order; ``score`` is cosine similarity and ``payload`` carries
            ``created_ts`` (epoch seconds, UTC) and ``content``.
        reference_time: tz-aware "now" of the query (ages are measured to it).
        params: ranking knobs.

    Returns:
        At most ``params.top_k`` memories with 1-based ``rank``; a dropped near-identical memory's id
        is listed in the kept one's ``duplicates``.
    """
    scored = []
    for hit in hits:
        if hit.score < params.similarity_floor:
            continue
        tw = scoring.time_weight(_age_days(hit.payload, reference_time), params.time_mode)
        scored.append(
            RecalledMemory(
                hit.id, hit.payload, hit.score, tw, scoring.blend(hit.score, tw, params.time_share)
            )
        )
    scored.sort(key=lambda m: (-m.final_score, m.id))
    kept: dict[str, RecalledMemory] = {}
    for mem in scored:
        key = _norm_content(str(mem.payload.get("content", ""))) or mem.id
        current = kept.get(key)
        if current is None:
            kept[key] = mem
            continue
        newer = float(mem.payload.get("created_ts", 0)) > float(current.payload.get("created_ts", 0))
        winner, loser = (mem, current) if newer else (current, mem)
        kept[key] = RecalledMemory(
            winner.id,
            winner.payload,
            max(winner.similarity, loser.similarity),
            winner.time_weight,
            max(winner.final_score, loser.final_score),
            duplicates=(*winner.duplicates, loser.id, *loser.duplicates),
        )
    best = sorted(kept.values(), key=lambda m: (-m.final_score, m.id))[: params.top_k]
    if params.order == "chronological":
        best.sort(key=lambda m: (float(m.payload.get("created_ts", 0)), m.id))
    return [
        RecalledMemory(m.id, m.payload, m.similarity, m.time_weight, m.final_score, i + 1, m.duplicates)
        for i, m in enumerate(best)
    ]


async def recall(
    query: str,
    flt: MemoryFilter,
    *,
    store: VectorStore,
    embedder: Embedder,
    params: RecallParams = RecallParams(),
    reference_time: datetime | None = None,
) -> list[RecalledMemory]:
    """Run the recall pipeline for ``query`` under ``flt`` (filters are pushed into the store).

    Args:
        query: natural-language query (already redacted by the caller if it is logged).
        flt: tenant/user/scope/type/status/tag/time filter; ``tenant_id`` is always set.
        reference_time: tz-aware "now" for time weighting; default the current UTC time.

    Raises:
        StoreUnavailableError / ModelUnavailableError: the store or embedder failed.
    """
    ref = reference_time or datetime.now(UTC)
    vector = (await asyncio.to_thread(embedder.embed_queries, [query]))[0]
    hits = await asyncio.to_thread(store.search, vector, flt, max(params.candidates, params.top_k))
    return rank(hits, ref, params)
