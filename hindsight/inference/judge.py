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
from typing import Literal, Protocol

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
