"""LLM interface, the in-process stand-in, and :func:`build_llm` (DESIGN.md section 7).

The LLM serves reflection, the write-trigger and contradiction checks. Backends
(``HINDSIGHT_LLM_BACKEND``), one interface:

- ``local``: :class:`StandinLLM`, a deterministic STAND-IN generator, not a language model. No LLM
  that runs here without a ~6 minute native build ships in a registry package, so CI and the
  embedded default use this to exercise the plumbing. It says ``"[stand-in] <N> words; last:
  <the prompt's last 12 words>"``, one word per streamed piece, cut at ``max_tokens`` words or
  before a ``stop`` string; the CPU Triton repository's ``llm`` model says exactly the same.
- ``triton``: :class:`~hindsight.inference.llm_triton.TritonLLM`, the decoupled ``llm`` model with
  the vLLM backend's tensors (production: Qwen/Qwen2.5-7B-Instruct on vLLM).
- ``openai``: :class:`~hindsight.inference.llm_openai.OpenAILLM`, any OpenAI-compatible
  ``/chat/completions`` endpoint (vLLM, Ollama, hosted services).

The Triton path sends ``prompt`` as raw text (vLLM's backend applies no chat template); the OpenAI
path sends it as one user message (the server applies the model's template).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from hindsight.errors import ConfigurationError

if TYPE_CHECKING:
    from hindsight.settings import LLMSettings

STANDIN_TAIL_WORDS = 12
DEFAULT_MAX_TOKENS = 16
"""vLLM's default ``max_tokens`` when a request gives none."""


@dataclass(frozen=True)
class SamplingParams:
    """Generation parameters (vLLM / OpenAI names).

    Attributes:
        max_tokens: most tokens to generate (the stand-in counts words).
        temperature: 0 = greedy.
        stop: strings that end the reply (not included in it).
    """

    max_tokens: int = 256
    temperature: float = 0.0
    stop: tuple[str, ...] = ()

    def as_vllm(self) -> dict[str, object]:
        """The ``sampling_parameters`` JSON object of Triton's vLLM backend."""
        params: dict[str, object] = {"max_tokens": self.max_tokens, "temperature": self.temperature}
        if self.stop:
            params["stop"] = list(self.stop)
        return params


class LLM(Protocol):
    """Text generation, whole or streamed."""

    @property
    def name(self) -> str:
        """Model name (recorded with LLM-derived memories)."""
        ...

    def stream(self, prompt: str, params: SamplingParams | None = None) -> Iterator[str]:
        """Yield the reply in pieces as they are generated (new text only, never the prompt).

        Raises:
            ModelUnavailableError: the backend failed transiently (before or during the stream).
            ConfigurationError: the backend rejected the request (wrong model, bad parameters).
        """
        ...

    def complete(self, prompt: str, params: SamplingParams | None = None) -> str:
        """The whole reply (without the prompt).

        Raises:
            ModelUnavailableError / ConfigurationError: as :meth:`stream`.
        """
        ...


def standin_pieces(
    prompt: str, max_tokens: int = DEFAULT_MAX_TOKENS, stop: Sequence[str] = ()
) -> tuple[list[str], str]:
    """Pieces and finish reason (``length`` or ``stop``) of the stand-in reply to ``prompt``.

    Same function as ``standin_pieces`` in ``infra/triton/cpu/llm/1/model.py``.
    """
    words = prompt.split()
    reply = ["[stand-in]", str(len(words)), "words;", "last:", *words[-STANDIN_TAIL_WORDS:]]
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


class StandinLLM:
    """In-process deterministic STAND-IN generator (see module doc); never fails."""

    def __init__(self, *, name: str = "standin-echo", defaults: SamplingParams | None = None) -> None:
        self._name = name
        self._defaults = defaults or SamplingParams()

    @property
    def name(self) -> str:
        """``standin-echo`` unless given."""
        return self._name

    def stream(self, prompt: str, params: SamplingParams | None = None) -> Iterator[str]:
        """Yield the stand-in reply word by word."""
        p = params or self._defaults
        pieces, _ = standin_pieces(prompt, p.max_tokens, p.stop)
        yield from pieces

    def complete(self, prompt: str, params: SamplingParams | None = None) -> str:
        """The whole stand-in reply."""
        return "".join(self.stream(prompt, params))


def build_llm(settings: LLMSettings) -> LLM:
    """LLM selected by ``HINDSIGHT_LLM_BACKEND``: ``local`` (stand-in), ``triton`` or ``openai``.

    Nothing is contacted here.

    Raises:
        ConfigurationError: unknown backend.
    """
    defaults = SamplingParams(max_tokens=settings.max_tokens, temperature=settings.temperature)
    if settings.backend == "local":
        return StandinLLM(name=settings.model, defaults=defaults)
    if settings.backend == "triton":
        from hindsight.inference.llm_triton import TritonLLM  # noqa: PLC0415
        from hindsight.inference.triton_client import TritonTarget  # noqa: PLC0415

        target = TritonTarget.from_settings(settings)
        return TritonLLM(target, name=settings.model, defaults=defaults)
    if settings.backend == "openai":
        from hindsight.inference.llm_openai import OpenAILLM  # noqa: PLC0415

        key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
        return OpenAILLM(
            settings.openai_base_url,
            model=settings.model,
            api_key=key,
            timeout_s=settings.timeout_s,
            max_attempts=settings.max_attempts,
            defaults=defaults,
        )
    raise ConfigurationError(
        f"HINDSIGHT_LLM_BACKEND must be 'local', 'triton' or 'openai', not {settings.backend!r}"
    )
