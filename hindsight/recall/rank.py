"""Ranking of recall candidates: fusion, time weight, boosts, floor, dedupe, order (DESIGN.md s4-5).

Pure functions over :class:`Candidate` lists; the I/O lives in :mod:`hindsight.recall.pipeline`.

Score of a candidate (every term in ``[0, 1]``, weights in :class:`RecallParams`):

``final = (1 - t) * relevance + t * time_weight + w_freq * frequency + w_conf * (confidence - 0.5)
+ window_bonus + entity_bonus - unkept_penalty + lesson_bonus``

- ``relevance``: reciprocal-rank fusion of the dense (cosine) list, the lexical (BM25) list and,
  when a reranker ran, its list, normalised by the best possible fused score. The fusion constant is
  ``RecallParams.rrf_k`` = 10, not the textbook 60: a sweep over k in {2, 5, 10, 20, 30, 60} on the
  LoCoMo dev file (all 7 conversations, ``hindsight bench recall``) gave evidence recall@10 0.644 /
  0.641 / 0.639 / 0.630 / 0.622 / 0.609 with every other knob fixed, and k=10 beat k=60 on 6 of the 7
  conversations one by one (a plateau below 10, so the round value was kept rather than the dev
  optimum). A small k trusts each list's first places: the head of either list is usually right;
  k=60 flattens the top 50 into a narrow band where a hit found by both lists at ranks 30 and 40
  outranks a first place found by one;
- ``time_weight``: DESIGN.md section 4 (step 1.0 / 0.8 / 0.6 at 7 / 30 days, or exponential) from
  the memory's ``created_at`` to the query's reference time;
- ``t``: ``time_share`` (0.3, DESIGN.md section 4) when recency applies: the query asks for the
  current state ("latest", "now", "最近"), the caller orders chronologically, or asks for it
  (``recency="on"``); else ``time_share_neutral`` (0). A memory store answers "when did ..." about any
  period, and a blanket recency prior buries older evidence: fused relevance of adjacent ranks differs
  by ~0.008, so even a 0.05 share reorders ranks, and 0.3 dropped LoCoMo dev recall@10 from 0.50 to
  0.41 on conv-26;
- ``frequency``: ``log(access_count+1)/log(max+1)`` over the candidates (access-frequency boost);
- ``confidence - 0.5``: source trust / support boost (a tool fact over an assistant guess);
- ``window_bonus``: when the query names a time ("last week", "in May 2023") and the memory was
  created inside that window;
- ``entity_bonus``: when the memory's speaker or entities include an entity the query names ("What
  did Caroline ...": Caroline's own words first).

- ``unkept_penalty``: for memories the write-trigger did not keep (tag ``compressed``: chatter such
  as "ok", "thanks", "行", "哈哈" that left working memory unkept and was compressed into episodic
  memory rather than dropped, DESIGN.md section 2). Short chatter sits close to every query in e5
  space ("行" had cosine 0.83 to "用户在哪家公司工作？" and ranked first), so without it filler
  outranks the statements recall exists for; 0.3 leaves it findable when nothing better matches.

Then: the similarity floor (cosine < 0.65 is dropped, DESIGN.md section 4), dedupe (identical
normalised text, or cosine > 0.97 between two candidates, keeps the newest active version), a fact
folded with its evidence turns, the newer of two conflicting memories just above the older, the
order (relevance or chronological) and the ``top_k`` cut.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

import numpy as np

from hindsight import scoring

SIMILARITY_FLOOR = 0.65
"""Cosine floor below which a candidate is never returned (DESIGN.md section 4)."""
TOP_K_DEFAULT = 5
TOP_K_MAX = 15
"""``top_k`` default 5, max 15 (DESIGN.md section 4)."""
RRF_K = 60
"""Reciprocal-rank fusion constant of Cormack et al. 2009 (the usual 60): :func:`rrf` and :func:`fuse`
default to it; recall uses :attr:`RecallParams.rrf_k` (10, module doc)."""
RECALL_RRF_K = 10
"""Fusion constant recall uses (module doc: sweep on the LoCoMo dev file)."""
NEAR_DUPLICATE_COSINE = 0.97
"""Two returned memories closer than this are the same memory twice (newest version wins)."""
SECONDS_PER_DAY = 86_400.0
VERSION_LIFT = 1e-6
"""What the newer of two versions scores above the older (:func:`newest_first_in_versions`)."""
UNKEPT_TAG = "compressed"
"""Tag of a memory the write-trigger did not keep (:func:`hindsight.records.compressed_candidate`)."""


@dataclass(frozen=True)
class RecallParams:
    """Recall knobs; defaults from DESIGN.md section 4 unless the module doc says otherwise."""

    top_k: int = TOP_K_DEFAULT
    candidates: int = 50
    """Hits fetched from each list (dense, lexical) before fusion (DESIGN.md: rerank 20-50)."""
    rrf_k: int = RECALL_RRF_K
    """Reciprocal-rank fusion constant (module doc)."""
    similarity_floor: float = SIMILARITY_FLOOR
    time_mode: Literal["step", "exp"] = "step"
    time_share: float = scoring.TIME_BLEND
    time_share_neutral: float = 0.0
    recency: Literal["auto", "on", "off"] = "auto"
    """``auto``: blend time when the query asks for the current state; ``on`` / ``off``: always / never."""
    frequency_weight: float = 0.05
    confidence_weight: float = 0.05
    window_bonus: float = 0.15
    entity_bonus: float = 0.05
    """Added when the memory's speaker or entities include an entity the query names."""
    unkept_penalty: float = 0.3
    """Subtracted for memories the write-trigger did not keep (tag ``compressed``; module doc)."""
    lesson_bonus: float = 0.3
    """Added to a ``lesson`` above the floor: what a finished task taught must surface for the next
    similar task ahead of that task's own turns (issue 9: default recall includes lessons)."""
    order: Literal["relevance", "chronological"] = "relevance"
    rerank: bool = False
    rerank_top_n: int = 30
    token_budget: int = 2000
    """Most tokens of memory text one response may carry (counted with a real tokenizer)."""


@dataclass(frozen=True)
class Candidate:
    """One memory found by at least one list, with what each list said about it."""

    id: str
    payload: dict[str, Any]
    cosine: float
    vector: np.ndarray | None = None
    dense_rank: int | None = None
    lexical_rank: int | None = None
    lexical_score: float | None = None
    rerank_rank: int | None = None
    rerank_score: float | None = None


@dataclass(frozen=True)
class RecalledMemory:
    """A returned memory with the component scores that explain its rank (the memory usage report)."""

    id: str
    payload: dict[str, Any]
    similarity: float
    relevance: float
    time_weight: float
    final_score: float
    dense_rank: int | None = None
    lexical_rank: int | None = None
    rerank_score: float | None = None
    in_time_window: bool = False
    rank: int = 0
    tokens: int = 0
    duplicates: tuple[str, ...] = field(default=())
    trimmed: bool = False
    """The content is an excerpt: the memory alone was larger than the whole token budget."""
    evidence: tuple[tuple[str, dict[str, Any]], ...] = field(default=())
    """``(id, payload)`` of the turns a fact rests on (its provenance ``memory_ids``)."""


def rrf(*ranks: int | None, k: int = RRF_K) -> float:
    """Reciprocal-rank fusion ``sum(1 / (k + rank))`` over the lists that ranked the item (1-based)."""
    return sum(1.0 / (k + r) for r in ranks if r is not None)


def fuse(dense: Sequence[str], lexical: Sequence[str], k: int = RRF_K) -> list[tuple[str, float]]:
    """Ids of two ranked lists fused by RRF, best first (ties by id): ``[(id, score), ...]``. Pure."""
    ranks: dict[str, list[int | None]] = {}
    for position, item in enumerate(dense, start=1):
        ranks.setdefault(item, [None, None])[0] = position
    for position, item in enumerate(lexical, start=1):
        ranks.setdefault(item, [None, None])[1] = position
    scored = [(item, rrf(*r, k=k)) for item, r in ranks.items()]
    return sorted(scored, key=lambda pair: (-pair[1], pair[0]))


def _age_days(payload: dict[str, Any], reference: datetime) -> float:
    created_ts = float(payload.get("created_ts", reference.timestamp()))
    return (reference.timestamp() - created_ts) / SECONDS_PER_DAY


def _norm_content(text: str) -> str:
    return re.sub(r"\W+", " ", text.casefold()).strip()


def _frequency(count: int, max_count: int) -> float:
    return math.log(count + 1) / math.log(max_count + 1) if max_count > 0 else 0.0


def score(
    candidates: Sequence[Candidate],
    reference_time: datetime,
    params: RecallParams,
    *,
    wants_recent: bool = False,
    window: tuple[datetime, datetime] | None = None,
    entities: Sequence[str] = (),
) -> list[RecalledMemory]:
    """Score every candidate above the similarity floor (module doc formula), best first. Pure."""
    wanted = {e.casefold() for e in entities}

    lists = 2 + (1 if any(c.rerank_rank is not None for c in candidates) else 0)
    best = lists / (params.rrf_k + 1)
    recent = params.recency == "on" or (
        params.recency == "auto" and (wants_recent or params.order == "chronological")
    )
    share = params.time_share if recent else params.time_share_neutral
    max_access = max((int(c.payload.get("access_count", 0)) for c in candidates), default=0)
    window_ts = None if window is None else (window[0].timestamp(), window[1].timestamp())
    out = []
    for c in candidates:
        if c.cosine < params.similarity_floor:
            continue
        relevance = rrf(c.dense_rank, c.lexical_rank, c.rerank_rank, k=params.rrf_k) / best
        tw = scoring.time_weight(_age_days(c.payload, reference_time), params.time_mode)
        created = float(c.payload.get("created_ts", 0.0))
        inside = window_ts is not None and window_ts[0] <= created < window_ts[1]
        named = {str(e).casefold() for e in c.payload.get("entities", ())}
        if c.payload.get("speaker"):
            named.add(str(c.payload["speaker"]).casefold())
        mentions = bool(wanted & named)
        final = (
            (1.0 - share) * relevance
            + share * tw
            + params.frequency_weight * _frequency(int(c.payload.get("access_count", 0)), max_access)
            + params.confidence_weight * (float(c.payload.get("confidence", 0.5)) - 0.5)
            + (params.window_bonus if inside else 0.0)
            + (params.entity_bonus if mentions else 0.0)
            - (params.unkept_penalty if UNKEPT_TAG in (c.payload.get("tags") or ()) else 0.0)
            + (params.lesson_bonus if c.payload.get("kind") == "lesson" else 0.0)
        )
        out.append(
            RecalledMemory(
                c.id,
                c.payload,
                c.cosine,
                relevance,
                tw,
                final,
                c.dense_rank,
                c.lexical_rank,
                c.rerank_score,
                inside,
            )
        )
    out.sort(key=lambda m: (-m.final_score, m.id))
    return out


def _newer(a: RecalledMemory, b: RecalledMemory) -> bool:
    key_a = (int(a.payload.get("version", 1)), float(a.payload.get("created_ts", 0)))
    key_b = (int(b.payload.get("version", 1)), float(b.payload.get("created_ts", 0)))
    return key_a > key_b


def dedupe(
    scored: Sequence[RecalledMemory],
    vectors: dict[str, np.ndarray] | None = None,
    threshold: float = NEAR_DUPLICATE_COSINE,
) -> list[RecalledMemory]:
    """Collapse near-identical memories (same normalised text, or cosine > ``threshold`` when
    ``vectors`` (``{id: (d,) float32}``, L2-normalised) are given); the newest version keeps the
    better score and lists the others. Pure.

    ``scored`` best first; each memory is compared with the groups kept so far (its text against
    every text of a group, its vector against each group's current representative: one ``(g, d)``
    matrix product per memory), so the cost is linear in regex work and one small BLAS call per
    memory (about 1 ms for 100 candidates), not pairwise.
    """
    kept: list[RecalledMemory] = []
    by_text: dict[str, int] = {}
    matrix: np.ndarray | None = None
    rows: list[int] = []
    """``matrix`` row j is the vector of group ``rows[j]``'s representative."""
    for mem in scored:
        text = _norm_content(str(mem.payload.get("content", "")))
        vec = vectors.get(mem.id) if vectors is not None else None
        match = by_text.get(text)
        if match is None and vec is not None and matrix is not None:
            sims = matrix @ vec
            best = int(np.argmax(sims))
            if float(sims[best]) > threshold:
                match = rows[best]
        if match is None:
            by_text[text] = len(kept)
            kept.append(mem)
            if vec is not None:
                matrix = vec[None, :] if matrix is None else np.vstack((matrix, vec))
                rows.append(len(kept) - 1)
            continue
        by_text.setdefault(text, match)
        other = kept[match]
        winner, loser = (mem, other) if _newer(mem, other) else (other, mem)
        if winner is mem and vec is not None:  # the group's representative is now this version
            if match in rows:
                assert matrix is not None
                matrix[rows.index(match)] = vec
            else:
                matrix = vec[None, :] if matrix is None else np.vstack((matrix, vec))
                rows.append(match)
        kept[match] = replace(
            winner,
            final_score=max(winner.final_score, loser.final_score),
            similarity=max(winner.similarity, loser.similarity),
            duplicates=(*winner.duplicates, loser.id, *loser.duplicates),
        )
    return kept


def fold_evidence(scored: Sequence[RecalledMemory]) -> list[RecalledMemory]:
    """A fact and the turns it was extracted from answer with one entry: the fact, at the better of
    their scores, carrying the turns as ``evidence`` (recall prefers the current fact and still
    returns what it rests on). ``scored`` best first; the result keeps that order. Pure."""
    by_id = {m.id: m for m in scored}
    folded: dict[str, str] = {}
    for mem in scored:
        if mem.payload.get("kind") != "fact" or mem.id in folded:
            continue
        for turn_id in (mem.payload.get("provenance") or {}).get("memory_ids") or ():
            turn = by_id.get(str(turn_id))
            if turn is not None and turn.payload.get("kind") == "turn" and turn.id not in folded:
                folded[turn.id] = mem.id
    if not folded:
        return list(scored)
    out: list[RecalledMemory] = []
    for mem in scored:
        if mem.id in folded:
            continue
        turns = [by_id[t] for t, fact in folded.items() if fact == mem.id]
        if not turns:
            out.append(mem)
            continue
        group = (mem, *turns)
        out.append(
            replace(
                mem,
                final_score=max(m.final_score for m in group),
                similarity=max(m.similarity for m in group),
                evidence=tuple((t.id, t.payload) for t in turns),
            )
        )
    out.sort(key=lambda m: (-m.final_score, m.id))
    return out


def newest_first_in_versions(scored: Sequence[RecalledMemory]) -> list[RecalledMemory]:
    """Of two versions of one thing returned together, the newer by event time ranks just above the
    older when the older scored higher: recall returns the newest version first (DESIGN.md section 4).
    Two kinds of pair:

    - a conflict (``conflicts_with``: the revision judge was unsure whether the newer replaces the
      older, both stay active); the pair is also reported for the agent to decide;
    - a version chain's link (``superseded_by``), returned when the caller asked for superseded
      memories too (``include_superseded``): its time weight alone could put the old value first.

    A fact stands for the evidence turns folded into it (their pairs are its pairs). A chain of three
    returned versions comes out newest first whatever their scores. ``scored`` best first; returns the
    same memories, re-sorted. Pure."""
    entry_of: dict[str, int] = {}
    for i, mem in enumerate(scored):
        entry_of[mem.id] = i
        for turn_id, _ in mem.evidence:
            entry_of.setdefault(turn_id, i)
    out = list(scored)
    oldest_first = sorted(range(len(scored)), key=lambda i: (_created(scored[i]), scored[i].id))
    for i in oldest_first:  # a chain's links are lifted from its oldest version up
        mem = scored[i]
        partners = _partners(mem.payload)
        for _, turn in mem.evidence:
            partners |= _partners(turn)
        for partner in sorted(partners):
            j = entry_of.get(partner)
            if j is None or j == i:
                continue
            a, b = out[i], out[j]
            newer, older = (a, b) if _created(a) > _created(b) else (b, a)
            if _created(newer) > _created(older) and older.final_score >= newer.final_score:
                lifted = replace(newer, final_score=older.final_score + VERSION_LIFT)
                out[i if newer is a else j] = lifted
    out.sort(key=lambda m: (-m.final_score, m.id))
    return out


def _partners(payload: dict[str, Any]) -> set[str]:
    """Ids of the memories this one is a version pair with (:func:`newest_first_in_versions`)."""
    found = {str(p) for p in payload.get("conflicts_with") or ()}
    if payload.get("superseded_by"):
        found.add(str(payload["superseded_by"]))
    return found


def _created(mem: RecalledMemory) -> float:
    return float(mem.payload.get("created_ts", 0.0))


def order(memories: Sequence[RecalledMemory], params: RecallParams) -> list[RecalledMemory]:
    """Best ``top_k`` by final score, then in the requested order, with 1-based ranks. Pure."""
    best = sorted(memories, key=lambda m: (-m.final_score, m.id))[: params.top_k]
    if params.order == "chronological":
        best.sort(key=lambda m: (float(m.payload.get("created_ts", 0)), m.id))
    return [replace(m, rank=i + 1) for i, m in enumerate(best)]
