"""Reranker interface, the in-process stand-in, and :func:`build_reranker` (DESIGN.md sections 4, 5, 7).

A reranker scores (query, passage) pairs; recall reorders its top candidates by the scores.
Production serves a cross-encoder (BAAI/bge-reranker-v2-m3) from Triton
(:class:`~hindsight.inference.triton_reranker.TritonReranker`). No cross-encoder ships in a registry
package here, so the ``local`` backend and the CPU Triton repository serve a STAND-IN:
:class:`EmbeddingCosineReranker`, the cosine of the e5 query and passage embeddings. It keeps the
contract and the plumbing honest; it cannot improve on dense retrieval the way a cross-encoder does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from hindsight.errors import ConfigurationError

if TYPE_CHECKING:
    from hindsight.inference.embedder import Embedder
    from hindsight.settings import RerankerSettings


class Reranker(Protocol):
    """Scores (query, passage) pairs; higher means more relevant. Scores are comparable only within
    one call (a cross-encoder's logits are not calibrated probabilities)."""

    @property
    def name(self) -> str:
        """Model name, reported in recall explanations."""
        ...

    def score(
        self,
        query: str,
        passages: Sequence[str],
        *,
        query_vector: np.ndarray | None = None,
        passage_vectors: np.ndarray | None = None,
    ) -> np.ndarray:
        """``(n,)`` float32: one score per passage, in input order; empty input gives ``(0,)``.

        ``query_vector`` ``(d,)`` and ``passage_vectors`` ``(n, d)`` (float32, L2-normalised) are the
        recall embedder's vectors of the same texts when the caller has them (recall does: the
        store returns them): a reranker that scores from those embeddings uses them instead of
        recomputing; a cross-encoder ignores them.

        Raises:
            ModelUnavailableError: the model backend failed transiently (retry later).
        """
        ...


class EmbeddingCosineReranker:
    """STAND-IN reranker: cosine of ``embed_queries([query])`` and ``embed_passages(passages)``.

    Identical to the CPU Triton repository's ``reranker`` model when built over the local e5
    embedder (name ``standin-e5-cosine``). Scores lie in [-1, 1]. When recall passes the vectors it
    already holds (the store's passage vectors are the same model's embeddings of the same texts,
    bit-identical), nothing is embedded again: 30 passages cost ~0.1 ms instead of ~300 ms on two
    cores. It therefore adds no information over the dense list; it keeps the contract exercised.
    """

    def __init__(self, embedder: Embedder, *, name: str = "standin-e5-cosine") -> None:
        self._embedder = embedder
        self._name = name

    @property
    def name(self) -> str:
        """``standin-e5-cosine`` unless given."""
        return self._name

    def score(
        self,
        query: str,
        passages: Sequence[str],
        *,
        query_vector: np.ndarray | None = None,
        passage_vectors: np.ndarray | None = None,
    ) -> np.ndarray:
        """``(n,)`` float32 cosines in [-1, 1]; given vectors (see :class:`Reranker`) are used as is.

        Raises:
            ValueError: ``passage_vectors`` has not one row per passage.
            ModelUnavailableError: the embedder failed transiently.
        """
        if not passages:
            return np.zeros((0,), dtype=np.float32)
        if passage_vectors is not None and len(passage_vectors) != len(passages):
            raise ValueError(f"passage_vectors has {len(passage_vectors)} rows for {len(passages)} passages")
        q = self._embedder.embed_queries([query])[0] if query_vector is None else query_vector
        p = self._embedder.embed_passages(list(passages)) if passage_vectors is None else passage_vectors
        return np.ascontiguousarray(np.einsum("ij,j->i", p, q), dtype=np.float32)


def build_reranker(settings: RerankerSettings, *, embedder: Embedder | None = None) -> Reranker:
    """Reranker selected by ``HINDSIGHT_RERANKER_BACKEND``: ``local`` (in-process stand-in) or ``triton``.

    Args:
        settings: the reranker settings (``enabled`` is the caller's to check).
        embedder: for ``local``, an e5 embedder to share (one engine per process); a new
            :class:`~hindsight.inference.embedder.LocalE5Embedder` is loaded when None.

    Raises:
        ConfigurationError: unknown backend.
    """
    if settings.backend == "triton":
        from hindsight.inference.triton_client import TritonTarget  # noqa: PLC0415
        from hindsight.inference.triton_reranker import TritonReranker  # noqa: PLC0415

        target = TritonTarget.from_settings(settings)
        return TritonReranker(target, name=settings.model, batch_size=settings.batch_size)
    if settings.backend != "local":
        raise ConfigurationError(
            f"HINDSIGHT_RERANKER_BACKEND must be 'local' or 'triton', not {settings.backend!r}"
        )
    if embedder is None:
        from hindsight.inference.embedder import LocalE5Embedder  # noqa: PLC0415

        embedder = LocalE5Embedder(threads=settings.threads, batch_size=settings.batch_size)
    return EmbeddingCosineReranker(embedder, name=settings.model)
