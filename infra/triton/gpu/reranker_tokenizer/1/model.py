"""Tokenizer step of the GPU embedder/reranker ensembles (python backend, HF ``tokenizers``).

``mode`` parameter:
- ``e5``: ``text`` rows with ``kind`` ``query``/``passage`` -> "query: <text>" / "passage: <text>";
- ``pair``: ``text`` carries the query and ``kind`` the passage of a cross-encoder pair.

Outputs ``input_ids`` and ``attention_mask`` (INT64, ``(rows, L)``), truncated at ``max_length``
and padded to a multiple of 32 tokens. Reads ``tokenizer.json`` next to this file
(``infra/triton/gpu/fetch_models.sh`` puts it there). Same file in ``reranker_tokenizer/1/``.
"""

import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils

_BUCKET = 32


class TritonPythonModel:
    """Batch tokenisation for the ONNX encoders."""

    def initialize(self, args):
        from tokenizers import Tokenizer  # noqa: PLC0415

        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        self._mode = params.get("mode", "e5")
        self._max = int(params.get("max_length", "512"))
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tokenizer.json")
        self._tok = Tokenizer.from_file(path)
        self._tok.enable_truncation(self._max)
        self._pad_id = self._tok.token_to_id("<pad>") or 0

    def _encode(self, texts, kinds):
        if self._mode == "pair":
            return self._tok.encode_batch(list(zip(texts, kinds, strict=True)))
        prefixed = [
            ("query: " if k == "query" else "passage: ") + t for t, k in zip(texts, kinds, strict=True)
        ]
        return self._tok.encode_batch(prefixed)

    def execute(self, requests):
        responses = []
        for request in requests:
            texts = [
                bytes(x).decode("utf-8", "replace")
                for x in pb_utils.get_input_tensor_by_name(request, "text").as_numpy().reshape(-1)
            ]
            kinds = [
                bytes(x).decode("utf-8", "replace")
                for x in pb_utils.get_input_tensor_by_name(request, "kind").as_numpy().reshape(-1)
            ]
            encodings = self._encode(texts, kinds)
            longest = max(len(e.ids) for e in encodings)
            width = min(self._max, -(-longest // _BUCKET) * _BUCKET)
            ids = np.full((len(encodings), width), self._pad_id, dtype=np.int64)
            mask = np.zeros((len(encodings), width), dtype=np.int64)
            for i, e in enumerate(encodings):
                n = min(len(e.ids), width)
                ids[i, :n] = e.ids[:n]
                mask[i, :n] = 1
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[
                        pb_utils.Tensor("input_ids", ids),
                        pb_utils.Tensor("attention_mask", mask),
                    ]
                )
            )
        return responses
