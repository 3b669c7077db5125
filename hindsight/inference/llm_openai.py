"""``OpenAILLM``: the :class:`~hindsight.inference.llm.LLM` protocol over any OpenAI-compatible server.

Calls ``POST {base_url}/chat/completions`` (vLLM's OpenAI server, Ollama, hosted services) with the
prompt as one user message, streamed (``stream: true``, server-sent events ending with
``data: [DONE]``) or whole. httpx; the client is created by the constructor (no connection until the
first call) or passed in by the caller.

Errors: a refused connection, a timeout, 408/429 or a 5xx answer is
:class:`~hindsight.errors.ModelUnavailableError` (retried with bounded backoff until the first
piece, then raised); 400/401/403/404 and other 4xx are :class:`~hindsight.errors.ConfigurationError`
(wrong URL, key or model name), with the URL and model named.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from hindsight.errors import ConfigurationError, HindsightError, ModelUnavailableError
from hindsight.inference.llm import SamplingParams
from hindsight.inference.streaming import retry_until_first

_TRANSIENT_STATUS = {408, 409, 425, 429}


class OpenAILLM:
    """LLM behind an OpenAI-compatible ``/chat/completions`` endpoint.

    Args:
        base_url: e.g. ``http://127.0.0.1:8000/v1`` (vLLM) or ``http://127.0.0.1:11434/v1`` (Ollama).
        model: model id sent with every request, e.g. ``Qwen/Qwen2.5-7B-Instruct``.
        api_key: bearer token, if the server wants one.
        timeout_s: bound on one whole request or stream (s).
        max_attempts: attempts until the first piece arrives (1 = no retry).
        defaults: sampling parameters used when a call gives none.
        client: an httpx client to use (tests pass one with a mock transport); closed by :meth:`close`.
    """

    def __init__(
        self,
        base_url: str,
        *,
        model: str,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        max_attempts: int = 3,
        defaults: SamplingParams | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._model = model
        self._timeout_s = timeout_s
        self._max_attempts = max(1, max_attempts)
        self._defaults = defaults or SamplingParams()
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = client or httpx.Client(timeout=httpx.Timeout(timeout_s))
        self._headers = headers

    @property
    def name(self) -> str:
        """The model id."""
        return self._model

    def _retrying(self) -> Retrying:
        return Retrying(
            retry=retry_if_exception_type(ModelUnavailableError),
            stop=stop_after_attempt(self._max_attempts),
            wait=wait_exponential(multiplier=0.2, max=5.0),
            reraise=True,
        )

    def _body(self, prompt: str, p: SamplingParams, *, stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self._model,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": p.max_tokens,
            "temperature": p.temperature,
            "stream": stream,
        }
        if p.stop:
            body["stop"] = list(p.stop)
        return body

    def _error(self, status: int | None, detail: str) -> HindsightError:
        where = f"OpenAI-compatible server {self._url} (model '{self._model}')"
        if status is None or status >= 500 or status in _TRANSIENT_STATUS:
            return ModelUnavailableError(
                f"{where} failed: {detail}; check that it is running and reachable "
                "(HINDSIGHT_LLM_OPENAI_BASE_URL) and not overloaded"
            )
        return ConfigurationError(
            f"{where} refused the request (HTTP {status}): {detail}; check HINDSIGHT_LLM_OPENAI_BASE_URL, "
            "HINDSIGHT_LLM_OPENAI_API_KEY and HINDSIGHT_LLM_MODEL"
        )

    def stream(self, prompt: str, params: SamplingParams | None = None) -> Iterator[str]:
        """Yield the reply's new text piece by piece (``choices[0].delta.content``).

        Raises:
            ModelUnavailableError: unreachable, timed out, 408/429/5xx, or the stream broke.
            ConfigurationError: other 4xx (URL, key or model wrong), or not an OpenAI-style answer.
        """
        p = params or self._defaults
        return retry_until_first(lambda: self._session(prompt, p), self._retrying())

    def _session(self, prompt: str, p: SamplingParams) -> Iterator[str]:
        deadline = time.monotonic() + self._timeout_s
        try:
            with self._client.stream(
                "POST", self._url, json=self._body(prompt, p, stream=True), headers=self._headers
            ) as response:
                if response.status_code != httpx.codes.OK:
                    response.read()
                    raise self._error(response.status_code, response.text[:500])
                for line in response.iter_lines():
                    if time.monotonic() > deadline:
                        raise self._error(None, f"stream exceeded {self._timeout_s} s")
                    if not line.startswith("data:"):
                        continue
                    data = line[len("data:") :].strip()
                    if data == "[DONE]":
                        return
                    piece = self._delta(data)
                    if piece:
                        yield piece
        except httpx.TransportError as exc:
            raise self._error(None, f"{type(exc).__name__}: {exc}") from exc

    def _delta(self, data: str) -> str:
        try:
            event = json.loads(data)
            if "error" in event:
                raise self._error(500, str(event["error"])[:500])
            choices = event.get("choices") or [{}]
            return str((choices[0].get("delta") or {}).get("content") or "")
        except (json.JSONDecodeError, AttributeError, TypeError, IndexError) as exc:
            raise ConfigurationError(
                f"{self._url} sent an event that is not an OpenAI chat chunk: {data[:200]!r}"
            ) from exc

    def complete(self, prompt: str, params: SamplingParams | None = None) -> str:
        """The whole reply (``choices[0].message.content``), one non-streamed request.

        Raises:
            ModelUnavailableError / ConfigurationError: as :meth:`stream`.
        """
        p = params or self._defaults
        return self._retrying()(self._complete_once, prompt, p)

    def _complete_once(self, prompt: str, p: SamplingParams) -> str:
        try:
            response = self._client.post(
                self._url, json=self._body(prompt, p, stream=False), headers=self._headers
            )
        except httpx.TransportError as exc:
            raise self._error(None, f"{type(exc).__name__}: {exc}") from exc
        if response.status_code != httpx.codes.OK:
            raise self._error(response.status_code, response.text[:500])
        try:
            return str(response.json()["choices"][0]["message"]["content"] or "")
        except (json.JSONDecodeError, KeyError, IndexError, TypeError) as exc:
            raise ConfigurationError(
                f"{self._url} answered without choices[0].message.content: {response.text[:200]!r}"
            ) from exc

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        """Send a whole ``/chat/completions`` request body (``model`` filled in) and return the
        response JSON; for callers that need fields :meth:`complete` does not expose
        (``response_format``, ``logprobs``).

        Raises:
            ModelUnavailableError / ConfigurationError: as :meth:`stream`; ConfigurationError also
                for an answer that is not a JSON object.
        """
        return self._retrying()(self._chat_once, {**body, "model": self._model, "stream": False})

    def _chat_once(self, body: dict[str, Any]) -> dict[str, Any]:
        try:
            response = self._client.post(self._url, json=body, headers=self._headers)
        except httpx.TransportError as exc:
            raise self._error(None, f"{type(exc).__name__}: {exc}") from exc
        if response.status_code != httpx.codes.OK:
            raise self._error(response.status_code, response.text[:500])
        try:
            data = response.json()
        except json.JSONDecodeError as exc:
            raise ConfigurationError(f"{self._url} answered with non-JSON: {response.text[:200]!r}") from exc
        if not isinstance(data, dict):
            raise ConfigurationError(f"{self._url} answered with a non-object: {response.text[:200]!r}")
        return data

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()
