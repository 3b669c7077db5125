"""Triton python-backend model ``llm`` (CPU variant): a deterministic STAND-IN generator.

It is NOT a language model. It exists so the decoupled streaming path (the vLLM backend's tensors
``text_input``, ``stream``, ``sampling_parameters``, ``exclude_input_in_output`` -> ``text_output``)
is served by a real Triton server in CI without model weights. Production serves
Qwen/Qwen2.5-7B-Instruct with ``backend: "vllm"`` under the same name (``infra/triton/gpu/llm``).

Reply: ``"[stand-in] <N> words; last: <last 12 words of the prompt>"``, one word per streamed
response, cut at ``max_tokens`` words (default 16) or before the first ``stop`` string.
``hindsight.inference.llm.standin_pieces`` is the same function for the in-process backend.
Like vLLM: streamed responses carry only the new text; a non-streamed response carries the prompt
followed by the reply unless ``exclude_input_in_output`` is true.
"""

import json

import numpy as np
import triton_python_backend_utils as pb_utils

_TAIL_WORDS = 12
_DEFAULT_MAX_TOKENS = 16


def standin_pieces(prompt, max_tokens=_DEFAULT_MAX_TOKENS, stop=()):
    """Streamed pieces and finish reason ("length" or "stop") of the stand-in reply to ``prompt``."""
    words = prompt.split()
    reply = ["[stand-in]", str(len(words)), "words;", "last:", *words[-_TAIL_WORDS:]]
    pieces = [w if i == 0 else " " + w for i, w in enumerate(reply)]
    finish = "stop"
    if len(pieces) > max_tokens:
        pieces, finish = pieces[:max_tokens], "length"
    full = "".join(pieces)
    hits = [full.find(s) for s in stop if s and s in full]
    if not hits:
        return pieces, finish
    cut, kept, used = min(hits), [], 0
    for piece in pieces:
        if used + len(piece) > cut:
            if cut > used:
                kept.append(piece[: cut - used])
            break
        kept.append(piece)
        used += len(piece)
    return kept, "stop"


def _optional_bool(request, name, default):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return default if tensor is None else bool(tensor.as_numpy().reshape(-1)[0])


def _parse(request):
    prompt = bytes(pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy().reshape(-1)[0])
    params_tensor = pb_utils.get_input_tensor_by_name(request, "sampling_parameters")
    params = {}
    if params_tensor is not None:
        raw = bytes(params_tensor.as_numpy().reshape(-1)[0]).decode("utf-8")
        params = json.loads(raw) if raw.strip() else {}
        if not isinstance(params, dict):
            raise ValueError("sampling_parameters must be a JSON object")
    stop = params.get("stop") or ()
    stop = (stop,) if isinstance(stop, str) else tuple(stop)
    max_tokens = int(params.get("max_tokens", _DEFAULT_MAX_TOKENS))
    if max_tokens < 1:
        raise ValueError("max_tokens must be at least 1")
    return prompt.decode("utf-8", "replace"), max_tokens, stop


class TritonPythonModel:
    """Decoupled stand-in generator with the vLLM backend's tensors."""

    def initialize(self, args):
        config = json.loads(args["model_config"])
        if not pb_utils.using_decoupled_model_transaction_policy(config):
            raise pb_utils.TritonModelException("the llm model must be decoupled (as vLLM's backend is)")

    def _response(self, text, finish, n_tokens, request):
        outputs = [pb_utils.Tensor("text_output", np.array([text.encode("utf-8")], dtype=np.object_))]
        if finish is not None and _optional_bool(request, "return_finish_reason", False):
            outputs.append(pb_utils.Tensor("finish_reason", np.array([finish.encode()], dtype=np.object_)))
        if _optional_bool(request, "return_num_output_tokens", False):
            outputs.append(pb_utils.Tensor("num_output_tokens", np.array([n_tokens], dtype=np.uint32)))
        return pb_utils.InferenceResponse(output_tensors=outputs)

    def execute(self, requests):
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        for request in requests:
            sender = request.get_response_sender()
            try:
                prompt, max_tokens, stop = _parse(request)
            except (ValueError, TypeError, UnicodeDecodeError) as exc:
                sender.send(
                    pb_utils.InferenceResponse(error=pb_utils.TritonError(f"bad request: {exc}")), flags=final
                )
                continue
            pieces, finish = standin_pieces(prompt, max_tokens, stop)
            if _optional_bool(request, "stream", False):
                if not pieces:
                    sender.send(self._response("", finish, 0, request), flags=final)
                for i, piece in enumerate(pieces):
                    last = i == len(pieces) - 1
                    sender.send(
                        self._response(piece, finish if last else None, 1, request),
                        flags=final if last else 0,
                    )
            else:
                prefix = "" if _optional_bool(request, "exclude_input_in_output", False) else prompt
                sender.send(
                    self._response(prefix + "".join(pieces), finish, len(pieces), request), flags=final
                )
