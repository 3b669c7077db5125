"""Revision judge and fact extractor: the contracts reconcile and reflection code against.

Reconcile (ingest) asks a :class:`Judge` what a newer memory is to an older one of the same user and
scope; reflection and reconcile ask a :class:`FactExtractor` which durable facts a turn states.
Backends (an LLM through Triton or an OpenAI-compatible endpoint, a local CPU model shipped in a
registry package) implement these protocols; the pipeline does not know which serves it, as with
:class:`~hindsight.inference.embedder.Embedder`.

Every method is synchronous and blocking; async callers use ``asyncio.to_thread``. A backend that
cannot answer transiently raises :class:`~hindsight.errors.ModelUnavailableError`; a reply it cannot
parse after its retries becomes a verdict of ``"unsure"``, never an exception.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Literal, Protocol

from hindsight.errors import ConfigurationError

if TYPE_CHECKING:
    from hindsight.inference.chat import ChatModel
    from hindsight.settings import JudgeSettings, LLMSettings

Relation = Literal["same", "update", "refinement", "unrelated", "unsure"]
"""What the newer statement is to the older one:

- ``same``: the same information (merge: no new memory, the older one is reinforced);
- ``update``: the newer replaces or contradicts the older (supersede: version chain);
- ``refinement``: adds detail or a related fact; both stay active and are linked;
- ``unrelated``: about something else (look-alikes: another person, another address);
- ``unsure``: the judge cannot tell; both stay active and recall reports them as a conflict.
"""


@dataclass(frozen=True)
class Statement:
    """One side of a pair: the memory text and what is known about it.

    Attributes:
        text: redacted memory text (a turn, a fact statement or a lesson).
        occurred_at: event time of the statement (timezone-aware).
        source: ``user`` / ``assistant`` / ``tool`` / ``system``.
        speaker: display name of the speaker, if any.
        entity: for facts, who or what it is about (e.g. ``user``, ``user's daughter``).
        attribute: for facts, the attribute (e.g. ``employer``, ``home city``).
    """

    text: str
    occurred_at: datetime
    source: str = "user"
    speaker: str | None = None
    entity: str | None = None
    attribute: str | None = None


@dataclass(frozen=True)
class JudgePair:
    """An older and a newer statement (by event time) that candidate search paired up.

    Attributes:
        older: the statement with the earlier ``occurred_at``.
        newer: the statement with the later ``occurred_at``.
        cosine: dense cosine similarity of the two memories' embeddings, -1..1.
    """

    older: Statement
    newer: Statement
    cosine: float


@dataclass(frozen=True)
class Verdict:
    """The judge's answer for one pair.

    Attributes:
        relation: see :data:`Relation`.
        confidence: 0..1, the backend's calibrated confidence in ``relation``.
        reason: short explanation (model output or feature summary), for logs and the API.
        backend: name of the backend that decided.
    """

    relation: Relation
    confidence: float
    reason: str
    backend: str


class Judge(Protocol):
    """Classifies candidate pairs; answers in input order, one verdict per pair."""

    @property
    def name(self) -> str:
        """Backend and model name, recorded with each decision."""
        ...

    def judge(self, pairs: Sequence[JudgePair]) -> list[Verdict]:
        """One :class:`Verdict` per pair, in order.

        Raises:
            ModelUnavailableError: the backend is unreachable or timed out (retry later).
        """
        ...


@dataclass(frozen=True)
class Fact:
    """A durable statement about the user extracted from a turn.

    Attributes:
        entity: who or what it is about (``user``, ``user's sister Anna``, ...).
        attribute: normalised attribute name (``employer``, ``home city``, ``diet``, ``allergy``, ...).
        value: the value stated (``Siemens``, ``Berlin``, ``8,000 CNY``).
        statement: a short self-contained sentence in the turn's language (what is stored and embedded).
        category: ``preference`` / ``relationship`` / ``job`` / ``home`` / ``health`` / ``plan`` / ``other``.
        negated: the turn retracts or cancels it ("no longer", "不再", "取消").
    """

    entity: str
    attribute: str
    value: str
    statement: str
    category: str = "other"
    negated: bool = False


class FactExtractor(Protocol):
    """Extracts durable facts about the user from turn texts."""

    @property
    def name(self) -> str:
        """Backend and model name."""
        ...

    def extract(self, texts: Sequence[Statement]) -> list[list[Fact]]:
        """For each input statement, the facts it states (possibly none), in input order.

        Raises:
            ModelUnavailableError: the backend is unreachable or timed out (retry later).
        """
        ...


@dataclass(frozen=True)
class Lesson:
    """A reusable lesson from a finished task's outcome and feedback.

    Attributes:
        text: one short sentence in the feedback's language ("The user prefers aisle seats.").
        kind: ``preference`` (about the user), ``do`` (repeat this) or ``avoid`` (never again).
    """

    text: str
    kind: str = "preference"


class LessonWriter(Protocol):
    """Phrases lessons from a finished task (reflection calls it when a session closes)."""

    @property
    def name(self) -> str:
        """Backend and model name."""
        ...

    def lessons(self, task: str, outcome: str, feedback: str) -> list[Lesson]:
        """Up to 2 lessons (possibly none).

        Raises:
            ModelUnavailableError: the backend is unreachable or timed out (retry later).
        """
        ...


def build_chat_model(settings: JudgeSettings, llm: LLMSettings | None = None) -> ChatModel:
    """The chat model the judge and the extractor share, by ``HINDSIGHT_JUDGE_BACKEND``:

    - ``local``: the GGUF at ``HINDSIGHT_JUDGE_MODEL_PATH`` run in-process by llama.cpp (loads it:
      ~3.5 s, ~1.9 GB RAM; call once per process, from a lifespan, and ``close()`` it);
    - ``llm``: the ``HINDSIGHT_LLM_*`` backend: ``openai`` (any OpenAI-compatible endpoint,
      schema-constrained) or ``triton`` (the ``llm`` model, ChatML text); contacts nothing here.

    Raises:
        ConfigurationError: the model file is missing, or ``llm`` is chosen with the stand-in LLM.
    """
    if settings.backend == "local":
        from hindsight.inference.chat import LlamaCppChat  # noqa: PLC0415

        return LlamaCppChat(
            settings.resolved_model_path(),
            name=settings.model,
            threads=settings.threads,
            nice=settings.nice,
            n_ctx=settings.n_ctx,
            slots=2,
            timeout_s=settings.timeout_s,
        )
    if settings.backend != "llm":
        raise ConfigurationError(
            f"HINDSIGHT_JUDGE_BACKEND must be 'local' or 'llm', not {settings.backend!r}"
        )
    from hindsight.settings import LLMSettings as _LLMSettings  # noqa: PLC0415

    cfg = llm or _LLMSettings()
    if cfg.backend == "openai":
        from hindsight.inference.chat import OpenAIChat  # noqa: PLC0415
        from hindsight.inference.llm_openai import OpenAILLM  # noqa: PLC0415

        key = cfg.openai_api_key.get_secret_value() if cfg.openai_api_key else None
        return OpenAIChat(
            OpenAILLM(
                cfg.openai_base_url,
                model=cfg.model,
                api_key=key,
                timeout_s=cfg.timeout_s,
                max_attempts=cfg.max_attempts,
            )
        )
    if cfg.backend == "triton":
        from hindsight.inference.chat import TextLLMChat  # noqa: PLC0415
        from hindsight.inference.llm import build_llm  # noqa: PLC0415

        return TextLLMChat(build_llm(cfg))
    raise ConfigurationError(
        "HINDSIGHT_JUDGE_BACKEND=llm needs a real language model: set HINDSIGHT_LLM_BACKEND to 'openai' "
        "or 'triton' (the 'local' LLM is a stand-in that cannot judge), or use HINDSIGHT_JUDGE_BACKEND=local"
    )


def build_judge(
    settings: JudgeSettings, llm: LLMSettings | None = None, *, chat: ChatModel | None = None
) -> Judge:
    """The judge selected by ``HINDSIGHT_JUDGE_*`` (see :func:`build_chat_model`).

    Pass ``chat`` to share one loaded model with :func:`build_fact_extractor`.

    Raises:
        ConfigurationError: as :func:`build_chat_model`.
    """
    from hindsight.inference.llm_judge import JudgePolicy, LLMJudge  # noqa: PLC0415

    model = chat or build_chat_model(settings, llm)
    per_prompt = settings.pairs_per_prompt if settings.backend == "llm" else 1
    return LLMJudge(
        model,
        policy=JudgePolicy(
            update_threshold=settings.update_threshold,
            cue_update_threshold=settings.cue_update_threshold,
            min_confidence=settings.min_confidence,
            fallback_confidence=settings.fallback_confidence,
        ),
        pairs_per_prompt=per_prompt,
        max_attempts=settings.max_attempts,
        use_features=settings.use_features,
    )


def build_fact_extractor(
    settings: JudgeSettings, llm: LLMSettings | None = None, *, chat: ChatModel | None = None
) -> FactExtractor:
    """The fact extractor (also a :class:`LessonWriter`) on the same backend as the judge.

    Raises:
        ConfigurationError: as :func:`build_chat_model`.
    """
    from hindsight.inference.llm_judge import LLMFactExtractor  # noqa: PLC0415

    model = chat or build_chat_model(settings, llm)
    return LLMFactExtractor(model, max_attempts=settings.max_attempts, max_tokens=settings.fact_max_tokens)
