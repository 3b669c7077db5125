"""Plain retrieval baselines over the raw turns of ONE LoCoMo conversation (issue 4, data README).

What a user would build without Hindsight: one index per conversation, each turn one document
``"speaker: text"`` (with ``[shared an image: caption]`` appended when the turn shared a picture,
exactly the text :func:`hindsight.eval.locomo.turn_content` gives the pipeline), and three systems:

- ``dense``: cosine top-k of the e5 query embedding against the e5 passage embeddings of every turn
  (the same embedder as the pipeline); passage embeddings are computed once and cached on disk
  (:class:`EmbeddingCache`, keyed by model name + text hash) so reruns are fast;
- ``bm25``: the ``bm25s`` library (Lucene BM25, k1=1.5, b=0.75, English stop words, no stemmer);
  turns with score 0 (no query term) are not returned;
- ``hybrid``: reciprocal-rank fusion (k=60) of the two candidate lists (each ``depth`` long).

Each search returns, per system, the ranked provenance refs (``[[dia_id], ...]``), the returned
texts and the latency in ms. Latencies include the query embedding; ``hybrid``'s is the sum of its
parts as one sequential call would spend them (embed + dense search + BM25 + fusion).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hindsight.tokens import count_tokens

if TYPE_CHECKING:
    from hindsight.eval.locomo import Conversation
    from hindsight.inference.embedder import Embedder

log = logging.getLogger("hindsight.eval.baselines")

RRF_K = 60
"""Reciprocal-rank fusion constant (Cormack et al. 2009; the issue's ``k=60``)."""
DEFAULT_DEPTH = 100
"""Candidates taken from each list before fusion."""
CACHE_DIR = Path(".cache/bench")
SYSTEMS = ("dense", "bm25", "hybrid")


class EmbeddingCache:
    """Passage embeddings of one embedder, persisted under ``cache_dir`` and keyed by text hash.

    One ``.npz`` file per model and kind (``<model>-passage.npz``: ``keys`` = sha256 of
    model + kind + text, ``vectors`` = ``(n, d)`` float32). Misses are embedded in chunks and the
    file is rewritten atomically after each chunk, so an interrupted run keeps what it computed.
    """

    def __init__(self, embedder: Embedder, cache_dir: Path = CACHE_DIR, *, chunk: int = 256) -> None:
        self._embedder = embedder
        self._chunk = chunk
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", embedder.name)
        self.path = Path(cache_dir) / f"{safe}-passage.npz"
        self._vectors: dict[str, np.ndarray] = {}
        if self.path.is_file():
            with np.load(self.path, allow_pickle=False) as data:
                for key, vec in zip(data["keys"].tolist(), data["vectors"], strict=True):
                    self._vectors[str(key)] = np.asarray(vec, dtype=np.float32)

    def key(self, text: str) -> str:
        """Cache key of a passage: sha256 of model name, kind and text."""
        return hashlib.sha256(f"{self._embedder.name}\x00passage\x00{text}".encode()).hexdigest()

    def __len__(self) -> int:
        return len(self._vectors)

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys = np.array(list(self._vectors), dtype="U64")
        vecs = (
            np.vstack(list(self._vectors.values())).astype(np.float32)
            if self._vectors
            else np.zeros((0, self._embedder.dim), dtype=np.float32)
        )
        tmp = self.path.with_name(self.path.name + f".{os.getpid()}.tmp.npz")
        np.savez(tmp, keys=keys, vectors=vecs)
        os.replace(tmp, self.path)

    def passages(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        """``(n, d)`` float32 L2-normalised passage embeddings of ``texts``, computing only misses."""
        keys = [self.key(t) for t in texts]
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys, strict=True) if k not in self._vectors))
        if missing:
            log.info("embedding %d passages not in %s", len(missing), self.path)
            bar = None
            if progress:
                from tqdm import tqdm  # noqa: PLC0415

                bar = tqdm(total=len(missing), desc="embed passages", unit="txt", leave=False)
            for start in range(0, len(missing), self._chunk):
                part = missing[start : start + self._chunk]
                vecs = self._embedder.embed_passages(part)
                for text, vec in zip(part, vecs, strict=True):
                    self._vectors[self.key(text)] = np.asarray(vec, dtype=np.float32)
                self._save()
                if bar is not None:
                    bar.update(len(part))
            if bar is not None:
                bar.close()
        if not texts:
            return np.zeros((0, self._embedder.dim), dtype=np.float32)
        return np.ascontiguousarray(np.vstack([self._vectors[k] for k in keys]), dtype=np.float32)


@dataclass(frozen=True)
class Turn:
    """One raw turn as a baseline document."""

    ref: str
    """The turn's ``dia_id`` (its provenance)."""
    text: str
    """``"speaker: text [shared an image: caption]"``."""


def conversation_turns(conv: Conversation) -> list[Turn]:
    """The documents of one conversation, in order (built from the same events the pipeline gets)."""
    from schemas import InteractionEvent  # noqa: PLC0415

    turns = []
    for event in conv.events:
        if isinstance(event, InteractionEvent) and event.external_ref:
            text = f"{event.speaker}: {event.content}" if event.speaker else event.content
            turns.append(Turn(event.external_ref, text))
    return turns


def rrf(rankings: Sequence[Sequence[int]], k: int = RRF_K) -> list[int]:
    """Reciprocal-rank fusion: ``score(d) = sum over lists of 1 / (k + rank)``, rank 1-based.

    Returns the document ids by descending fused score; ties by ascending id (deterministic).
    """
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, doc in enumerate(ranking, start=1):
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (k + rank)
    return sorted(scores, key=lambda d: (-scores[d], d))


@dataclass(frozen=True)
class BaselineResult:
    """One system's answer to one query."""

    system: str
    refs: list[list[str]]
    """Provenance refs of each returned turn, best first (``[[dia_id], ...]``)."""
    texts: list[str]
    latency_ms: float
    tokens: int
    """Tokens of the returned turn texts (e5 tokenizer)."""


class TurnIndex:
    """The three baselines over the turns of one conversation.

    Args:
        turns: the conversation's documents.
        embedder: the embedder (queries are embedded live, passages through ``cache``).
        cache: passage embedding cache for ``embedder`` (a fresh one under ``.cache/bench`` if None).
        depth: candidates taken from each list before fusion.
    """

    def __init__(
        self,
        turns: Sequence[Turn],
        embedder: Embedder,
        cache: EmbeddingCache | None = None,
        *,
        depth: int = DEFAULT_DEPTH,
        progress: bool = False,
    ) -> None:
        import bm25s  # noqa: PLC0415

        if not turns:
            raise ValueError("a baseline index needs at least one turn")
        self.turns = list(turns)
        self._embedder = embedder
        self._depth = depth
        cache = cache or EmbeddingCache(embedder)
        self._matrix = cache.passages([t.text for t in self.turns], progress=progress)
        self._bm25s = bm25s
        self._bm25 = bm25s.BM25()
        self._bm25.index(
            bm25s.tokenize([t.text for t in self.turns], stopwords="en", show_progress=False),
            show_progress=False,
        )
        self._tokens = [count_tokens(t.text) for t in self.turns]

    def dense_ranking(self, query_vector: np.ndarray, depth: int) -> list[int]:
        """Turn indices by descending cosine to ``query_vector`` ``(d,)``, at most ``depth``."""
        scores = self._matrix @ np.asarray(query_vector, dtype=np.float32)
        n = min(depth, len(scores))
        top = np.argpartition(-scores, n - 1)[:n] if n < len(scores) else np.arange(len(scores))
        return sorted(top.tolist(), key=lambda i: (-float(scores[i]), i))

    def bm25_ranking(self, query: str, depth: int) -> list[int]:
        """Turn indices by descending BM25 score (score > 0 only), at most ``depth``."""
        tokens = self._bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)
        if not tokens or not tokens[0]:
            return []
        docs, scores = self._bm25.retrieve(tokens, k=min(depth, len(self.turns)), show_progress=False)
        return [int(d) for d, s in zip(docs[0], scores[0], strict=True) if float(s) > 0.0]

    def _result(self, system: str, ranking: Sequence[int], k: int, ms: float) -> BaselineResult:
        top = list(ranking[:k])
        return BaselineResult(
            system=system,
            refs=[[self.turns[i].ref] for i in top],
            texts=[self.turns[i].text for i in top],
            latency_ms=ms,
            tokens=sum(self._tokens[i] for i in top),
        )

    def search(self, query: str, k: int = 10) -> dict[str, BaselineResult]:
        """``dense``, ``bm25`` and ``hybrid`` top-``k`` for ``query``, each with its latency."""
        depth = max(self._depth, k)
        t0 = time.perf_counter()
        qvec = self._embedder.embed_queries([query])[0]
        dense = self.dense_ranking(qvec, depth)
        t2 = time.perf_counter()
        lexical = self.bm25_ranking(query, depth)
        t3 = time.perf_counter()
        fused = rrf([dense, lexical])
        t4 = time.perf_counter()
        ms = 1000.0
        return {
            "dense": self._result("dense", dense, k, (t2 - t0) * ms),
            "bm25": self._result("bm25", lexical, k, (t3 - t2) * ms),
            "hybrid": self._result("hybrid", fused, k, ((t2 - t0) + (t3 - t2) + (t4 - t3)) * ms),
        }
