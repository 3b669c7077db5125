"""``TritonEmbedder``: the :class:`~hindsight.inference.embedder.Embedder` protocol over a Triton server.

Calls the ``embedder`` model of the Hindsight model repository (``infra/triton/``): input rows
``text`` (BYTES) and ``kind`` (BYTES ``query``/``passage``), output ``embedding`` ``(n, dim)`` FP32,
L2-normalised. Texts are sent in requests of at most ``min(batch_size, model max_batch_size)`` rows;
Triton's dynamic batcher merges concurrent requests on the server.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hindsight.errors import ConfigurationError
from hindsight.inference.triton_client import (
    TritonModel,
    TritonTarget,
    batch_limit,
    bytes_column,
    chunks,
)


class TritonEmbedder:
    """Embedder served by Triton over HTTP or gRPC (see :class:`TritonTarget`).

    Nothing is contacted at construction; the first call checks readiness and the model's output
    dimension. Safe to call from several threads (one tritonclient client per thread).

    Args:
        target: server URL, protocol, model name, timeout and retry budget.
        name: model name recorded on every memory (``embedding_model``), e.g. ``multilingual-e5-small-q4``.
        dim: expected embedding dimension ``d``.
        batch_size: texts per request (capped at the model's ``max_batch_size``).
    """

    def __init__(self, target: TritonTarget, *, name: str, dim: int, batch_size: int = 32) -> None:
        self._model = TritonModel(target)
        self._name = name
        self._dim = dim
        self._batch = max(1, batch_size)
        self._checked = False

    @property
    def name(self) -> str:
        """Model name recorded on every memory."""
        return self._name

    @property
    def dim(self) -> int:
        """Embedding dimension ``d`` (e.g. 384)."""
        return self._dim

    @property
    def model(self) -> TritonModel:
        """The underlying Triton model handle (readiness, statistics)."""
        return self._model

    def _limit(self) -> int:
        info = self._model.info()
        if not self._checked:
            dims = info.output_dims.get("embedding")
            if dims is None or dims[-1:] != (self._dim,):
                raise ConfigurationError(
                    f"Triton model '{self._model.target.model}' at {self._model.target.display} outputs "
                    f"'embedding' dims {dims}, but {self._model.target.env_prefix}DIM={self._dim}; "
                    "set the dimension of the served model"
                )
            self._checked = True
        return batch_limit(self._batch, info)

    def _embed(self, texts: Sequence[str], kind: str) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        limit = self._limit()
        out = np.empty((len(texts), self._dim), dtype=np.float32)
        for start, stop in chunks(len(texts), limit):
            part = list(texts[start:stop])
            kinds = np.array([[kind.encode()]] * len(part), dtype=np.object_)
            got = self._model.infer([("text", bytes_column(part)), ("kind", kinds)], ["embedding"])[
                "embedding"
            ]
            out[start:stop] = np.asarray(got, dtype=np.float32).reshape(len(part), self._dim)
        return out

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """``(n, dim)`` float32, L2-normalised; empty input gives ``(0, dim)``.

        Raises:
            ModelUnavailableError: Triton unreachable, timed out or model not ready (after retries).
            ConfigurationError: no such model, wrong tensors, or a dimension other than ``dim``.
        """
        return self._embed(texts, "passage")

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """``(n, dim)`` float32, L2-normalised; empty input gives ``(0, dim)``.

        Raises:
            ModelUnavailableError / ConfigurationError: as :meth:`embed_passages`.
        """
        return self._embed(texts, "query")

    def close(self) -> None:
        """Close the tritonclient connections."""
        self._model.close()
