"""``TritonLLM``: the :class:`~hindsight.inference.llm.LLM` protocol over Triton's decoupled ``llm`` model.

The model speaks the vLLM backend's tensors: ``text_input`` (BYTES), ``stream`` (BOOL),
``sampling_parameters`` (BYTES, a JSON object), ``exclude_input_in_output`` (BOOL) ->
``text_output`` (BYTES). Decoupled models answer with any number of responses per request, so:

- over gRPC the client uses ``stream_infer`` (tritonclient's bidirectional stream, one fresh client
  per call: a tritonclient client holds at most one stream) and reads responses until the one
  flagged ``triton_final_response``;
- over HTTP it uses Triton's generate extension, ``POST /v2/models/<model>/generate_stream``,
  which answers with server-sent events (``data: {...}`` lines), through httpx (tritonclient's
  HTTP client does not support decoupled models).

Every wait is bounded by ``timeout_s`` for the whole stream. Attempts are retried (bounded, with
backoff) until the first piece arrives, never after (see :mod:`hindsight.inference.streaming`).
"""

from __future__ import annotations

import contextlib
import json
import queue
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
from tritonclient.utils import InferenceServerException

from hindsight.errors import ConfigurationError, HindsightError
from hindsight.inference.llm import SamplingParams
from hindsight.inference.streaming import retry_until_first
from hindsight.inference.triton_client import TritonModel, TritonTarget


class TritonLLM:
    """LLM served by Triton's decoupled ``llm`` model over gRPC or HTTP.

    Nothing is contacted at construction. Safe to use from several threads.

    Args:
        target: server URL, protocol, model name, timeout (whole stream) and retry budget.
        name: model name recorded with LLM-derived memories.
        defaults: sampling parameters used when a call gives none.
    """

    def __init__(self, target: TritonTarget, *, name: str, defaults: SamplingParams | None = None) -> None:
        self._model = TritonModel(target)
        self._name = name
        self._defaults = defaults or SamplingParams()
        self._http: httpx.Client | None = None
        self._http_lock = threading.Lock()

    @property
    def name(self) -> str:
        """Model name."""
        return self._name

    @property
    def model(self) -> TritonModel:
        """The underlying Triton model handle (readiness, statistics)."""
        return self._model

    def stream(self, prompt: str, params: SamplingParams | None = None) -> Iterator[str]:
        """Yield the reply's new text piece by piece, as the server streams it.

        Raises:
            ModelUnavailableError: Triton unreachable, timed out, model not ready, or the stream broke.
            ConfigurationError: no such model, or the model rejected the request.
        """
        p = params or self._defaults
        self._model.info()  # readiness, and a clear error for a missing model
        opener = self._grpc_session if self._model.target.protocol == "grpc" else self._http_session
        return retry_until_first(lambda: opener(prompt, p), self._model.retrying())

    def complete(self, prompt: str, params: SamplingParams | None = None) -> str:
        """The whole reply (without the prompt).

        Raises:
            ModelUnavailableError / ConfigurationError: as :meth:`stream`.
        """
        return "".join(self.stream(prompt, params))

    def close(self) -> None:
        """Close the HTTP and tritonclient connections."""
        if self._http is not None:
            self._http.close()
            self._http = None
        self._model.close()

    # -- gRPC --------------------------------------------------------------------------------------

    def _grpc_inputs(self, prompt: str, p: SamplingParams) -> list[Any]:
        import tritonclient.grpc as grpcclient  # noqa: PLC0415

        def tensor(name: str, value: np.ndarray, dtype: str) -> Any:
            t = grpcclient.InferInput(name, [1], dtype)
            t.set_data_from_numpy(value)
            return t

        return [
            tensor("text_input", np.array([prompt.encode("utf-8")], dtype=np.object_), "BYTES"),
            tensor("stream", np.array([True]), "BOOL"),
            tensor(
                "sampling_parameters", np.array([json.dumps(p.as_vllm()).encode()], dtype=np.object_), "BYTES"
            ),
            tensor("exclude_input_in_output", np.array([True]), "BOOL"),
        ]

    def _grpc_session(self, prompt: str, p: SamplingParams) -> Iterator[str]:
        import tritonclient.grpc as grpcclient  # noqa: PLC0415

        t = self._model.target
        deadline = time.monotonic() + t.timeout_s
        events: queue.Queue[tuple[Any, InferenceServerException | None]] = queue.Queue()
        client = grpcclient.InferenceServerClient(t.url)
        try:
            try:
                client.start_stream(
                    callback=lambda result, error: events.put((result, error)), stream_timeout=t.timeout_s
                )
                client.async_stream_infer(
                    t.model,
                    self._grpc_inputs(prompt, p),
                    request_id=uuid.uuid4().hex,
                    enable_empty_final_response=True,
                )
            except InferenceServerException as exc:
                raise self._model.error_for("stream", exc) from exc
            while True:
                remaining = deadline - time.monotonic()
                try:
                    result, error = events.get(timeout=max(0.0, remaining))
                except queue.Empty:
                    raise self._model.error_for(
                        "stream",
                        InferenceServerException(
                            f"no response within {t.timeout_s} s", status="StatusCode.DEADLINE_EXCEEDED"
                        ),
                    ) from None
                if error is not None:
                    raise self._model.error_for("stream", error)
                text = result.as_numpy("text_output")
                if text is not None:
                    for piece in np.asarray(text).reshape(-1):
                        yield piece.decode("utf-8") if isinstance(piece, bytes) else str(piece)
                final = result.get_response().parameters.get("triton_final_response")
                if final is not None and final.bool_param:
                    return
        finally:
            _stop_quietly(client)

    # -- HTTP --------------------------------------------------------------------------------------

    def _client(self) -> httpx.Client:
        with self._http_lock:
            if self._http is None:
                self._http = httpx.Client(timeout=httpx.Timeout(self._model.target.timeout_s))
            return self._http

    def _http_session(self, prompt: str, p: SamplingParams) -> Iterator[str]:
        t = self._model.target
        url = f"http://{t.url}/v2/models/{t.model}/generate_stream"
        body = {
            "text_input": prompt,
            "stream": True,
            "sampling_parameters": json.dumps(p.as_vllm()),
            "exclude_input_in_output": True,
        }
        deadline = time.monotonic() + t.timeout_s
        try:
            with self._client().stream("POST", url, json=body) as response:
                if response.status_code != httpx.codes.OK:
                    response.read()
                    raise self._http_error(response.status_code, response.text)
                for line in response.iter_lines():
                    if time.monotonic() > deadline:
                        raise self._model.error_for(
                            "stream", TimeoutError(f"stream exceeded {t.timeout_s} s")
                        )
                    if not line.startswith("data:"):
                        continue
                    event = _event(line, t)
                    if "error" in event:
                        raise self._model.error_for(
                            "stream", InferenceServerException(str(event["error"]), status="500")
                        )
                    text = event.get("text_output")
                    if text:
                        yield str(text)
        except httpx.TransportError as exc:
            raise self._model.error_for("stream", exc) from exc

    def _http_error(self, status: int, text: str) -> HindsightError:
        try:
            message = str(json.loads(text).get("error", text))
        except (json.JSONDecodeError, AttributeError):
            message = text
        return self._model.error_for("stream", InferenceServerException(message[:500], status=str(status)))


def _event(line: str, t: TritonTarget) -> dict[str, Any]:
    try:
        event = json.loads(line[len("data:") :])
    except json.JSONDecodeError as exc:
        raise ConfigurationError(
            f"{t.display}/v2/models/{t.model}/generate_stream sent a malformed event {line[:200]!r}; "
            "is it a Triton server?"
        ) from exc
    if not isinstance(event, dict):
        raise ConfigurationError(f"{t.display} sent a non-object event {line[:200]!r}")
    return event


def _stop_quietly(client: Any) -> None:
    with contextlib.suppress(InferenceServerException):
        client.stop_stream(cancel_requests=True)
    with contextlib.suppress(InferenceServerException):
        client.close()
