"""``TritonReranker``: the :class:`~hindsight.inference.reranker.Reranker` protocol over a Triton server.

Calls the ``reranker`` model (``infra/triton/``): one row per pair, inputs ``query`` and
``passage`` (BYTES), output ``score`` FP32 ``[1]``. Production serves a cross-encoder there; the CPU
repository serves the documented stand-in (e5 cosine).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hindsight.inference.triton_client import TritonModel, TritonTarget, batch_limit, bytes_column, chunks


class TritonReranker:
    """Reranker served by Triton over HTTP or gRPC; pairs are sent in requests of at most
    ``min(batch_size, model max_batch_size)`` rows. Nothing is contacted at construction.

    Args:
        target: server URL, protocol, model name, timeout and retry budget.
        name: model name reported in recall explanations.
        batch_size: pairs per request.
    """

    def __init__(self, target: TritonTarget, *, name: str, batch_size: int = 32) -> None:
        self._model = TritonModel(target)
        self._name = name
        self._batch = max(1, batch_size)

    @property
    def name(self) -> str:
        """Model name."""
        return self._name

    @property
    def model(self) -> TritonModel:
        """The underlying Triton model handle (readiness, statistics)."""
        return self._model

    def score(
        self,
        query: str,
        passages: Sequence[str],
        *,
        query_vector: np.ndarray | None = None,
        passage_vectors: np.ndarray | None = None,
    ) -> np.ndarray:
        """``(n,)`` float32 scores in input order; empty input gives ``(0,)``. The served model reads
        the texts (a cross-encoder): ``query_vector`` / ``passage_vectors`` are accepted and unused.

        Raises:
            ModelUnavailableError: Triton unreachable, timed out or model not ready (after retries).
            ConfigurationError: no such model or wrong tensors.
        """
        if not passages:
            return np.zeros((0,), dtype=np.float32)
        limit = batch_limit(self._batch, self._model.info())
        out = np.empty((len(passages),), dtype=np.float32)
        for start, stop in chunks(len(passages), limit):
            part = list(passages[start:stop])
            got = self._model.infer(
                [("query", bytes_column([query] * len(part))), ("passage", bytes_column(part))], ["score"]
            )["score"]
            out[start:stop] = np.asarray(got, dtype=np.float32).reshape(len(part))
        return out

    def close(self) -> None:
        """Close the tritonclient connections."""
        self._model.close()
