"""The judge, fact extractor and lesson writer over any :class:`~hindsight.inference.chat.ChatModel`.

One implementation serves every backend (the in-process llama.cpp model, an OpenAI-compatible
endpoint, the Triton ``llm`` model): a fixed instruction + few-shot prefix
(:mod:`hindsight.inference.judge_prompts`, cached by the server), then the pair(s) or turn; the
reply is JSON validated against a pydantic schema (sent as ``response_format`` where the backend
enforces it). A reply that does not validate is asked again (``max_attempts`` in all, later attempts
at a small temperature so they can differ); after that the pair is ``unsure`` (the judge) or has no
facts (the extractor), never an exception.

Confidence. Where the backend returns per-token log-probabilities, the judge reads the model's
distribution over the four relations at the token where the relation is written (renormalised
over the tokens that begin a relation name) and decides:

- ``update`` only when P(update) >= ``update_threshold`` (a false supersede hides a true memory, so
  it needs more evidence than the other relations), or P(update) >= ``cue_update_threshold`` when
  the newer statement carries a change word ("now", "no longer", "cancelled", "改成", "不再", ...:
  :attr:`~hindsight.inference.judge_features.PairFeatures.retraction`). On the labelled set's dev
  split such a word was in 68 % of updates, in no look-alike and in 1.6 % of other non-updates;
  both thresholds were chosen on dev only (``hindsight bench judge``, docs/inference.md);
- otherwise the most likely of the other relations when its probability >= ``min_confidence``;
- otherwise ``unsure`` (both memories stay active and recall reports a conflict).

Without log-probabilities the schema-valid answer is taken with ``fallback_confidence``.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hindsight.inference.chat import ChatModel, ChatReply, ChatRequest, TokenLogprob
from hindsight.inference.judge import Fact, JudgePair, Lesson, Relation, Statement, Verdict
from hindsight.inference.judge_features import PairFeatures, pair_features
from hindsight.inference.judge_prompts import (
    FACT_EXAMPLES,
    FACT_SYSTEM,
    JUDGE_EXAMPLES,
    JUDGE_SYSTEM,
    JUDGE_SYSTEM_BATCH,
    LESSON_EXAMPLES,
    LESSON_SYSTEM,
)

log = logging.getLogger("hindsight.inference.judge")

ModelRelation = Literal["update", "refinement", "same", "unrelated"]
MODEL_RELATIONS: tuple[ModelRelation, ...] = ("update", "refinement", "same", "unrelated")

_EXAMPLE_OLD = datetime(2024, 3, 4, tzinfo=UTC)
_EXAMPLE_NEW = datetime(2024, 9, 17, tzinfo=UTC)
"""Dates shown with the few-shot pairs."""

_WARM_PAIR = JudgePair(Statement("ok", _EXAMPLE_OLD), Statement("ok", _EXAMPLE_NEW), cosine=1.0)

JUDGE_SLOT = 0
FACT_SLOT = 1
"""llama.cpp prefix-cache slots: the judge's and the extractor's (and lesson writer's) prefixes."""


class RelationReply(BaseModel):
    """The judge's reply for one pair."""

    model_config = ConfigDict(extra="forbid")
    relation: ModelRelation


class RelationsReply(BaseModel):
    """The judge's reply for a batch of pairs (one relation each, in order)."""

    model_config = ConfigDict(extra="forbid")
    relations: list[ModelRelation]


class FactReply(BaseModel):
    """One extracted fact (see :class:`~hindsight.inference.judge.Fact`)."""

    model_config = ConfigDict(extra="forbid")
    entity: str = Field(min_length=1, max_length=80)
    attribute: str = Field(min_length=1, max_length=60)
    value: str = Field(min_length=1, max_length=120)
    statement: str = Field(min_length=1, max_length=240)
    category: Literal["preference", "relationship", "job", "home", "health", "plan", "other"]
    negated: bool


class FactsReply(BaseModel):
    """The extractor's reply for one turn."""

    model_config = ConfigDict(extra="forbid")
    facts: list[FactReply] = Field(max_length=4)


class LessonReply(BaseModel):
    """One lesson (see :class:`~hindsight.inference.judge.Lesson`)."""

    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=3, max_length=200)
    kind: Literal["preference", "do", "avoid"]


class LessonsReply(BaseModel):
    """The lesson writer's reply for one finished task."""

    model_config = ConfigDict(extra="forbid")
    lessons: list[LessonReply] = Field(max_length=2)


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema sent as ``response_format`` (pydantic's, inlined, no titles)."""

    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k != "title"}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                return inline(defs[ref.rsplit("/", 1)[-1]])
            return {k: inline(v) for k, v in node.items()}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    return strip(inline(schema))  # type: ignore[no-any-return]


_RELATION_GRAMMAR = 'root ::= ("update" | "refinement" | "same" | "unrelated") "\\"}"'
"""GBNF of the single-pair reply after its prefilled opening ``{"relation":"``."""


def _batch_schema(n: int) -> dict[str, Any]:
    schema = _schema(RelationsReply)
    schema["properties"]["relations"]["minItems"] = n
    schema["properties"]["relations"]["maxItems"] = n
    return schema


def _describe(statement: Statement) -> str:
    who = f" ({statement.speaker})" if statement.speaker else ""
    about = ""
    if statement.entity or statement.attribute:
        about = f" [about {statement.entity or '?'} / {statement.attribute or '?'}]"
    return f"{who}{about}: {statement.text.strip()}"


def pair_text(pair: JudgePair) -> str:
    """The pair as the judge's prompt shows it (two lines)."""
    return f"OLDER{_describe(pair.older)}\nNEWER{_describe(pair.newer)}"


def relation_probabilities(tokens: Sequence[TokenLogprob], text: str) -> list[dict[str, float]]:
    """For each relation name written in ``text`` (a judge reply), the model's distribution over the
    four relations at the token where that name begins.

    The top alternatives at that position are mapped to the relations whose name they begin
    (``"ref"`` -> refinement; an ambiguous prefix such as ``"u"`` counts for none) and renormalised.
    Returns an empty list when the tokens do not line up with ``text`` (no log-probabilities).
    """
    if not tokens or "".join(t.token for t in tokens) != text:
        return []
    starts = []
    offset = 0
    for token in tokens:
        starts.append(offset)
        offset += len(token.token)
    out: list[dict[str, float]] = []
    cursor = 0
    for name in _written_relations(text):
        at = text.find(name, cursor)
        cursor = at + len(name)
        index = max(i for i, s in enumerate(starts) if s <= at)
        mass = dict.fromkeys(MODEL_RELATIONS, 0.0)
        for alt, logprob in tokens[index].top or ((tokens[index].token, tokens[index].logprob),):
            piece = alt.lstrip(' "').lower()
            hits = [r for r in MODEL_RELATIONS if piece and r.startswith(piece)]
            if len(hits) == 1:
                mass[hits[0]] += math.exp(logprob)
        total = sum(mass.values())
        if total <= 0:
            return []
        out.append({r: p / total for r, p in mass.items()})
    return out


def _written_relations(text: str) -> list[str]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return []
    if isinstance(data, dict) and isinstance(data.get("relation"), str):
        return [data["relation"]]
    if isinstance(data, dict) and isinstance(data.get("relations"), list):
        return [str(r) for r in data["relations"]]
    return []


@dataclass(frozen=True)
class JudgePolicy:
    """Thresholds that turn the model's relation probabilities into a verdict.

    Attributes:
        update_threshold: least P(update) for ``update`` (guards look-alikes against supersede).
        cue_update_threshold: least P(update) for ``update`` when the newer statement has a change
            word (never above ``update_threshold`` in effect).
        min_confidence: least probability for any other relation; below it the verdict is ``unsure``.
        fallback_confidence: confidence given to a schema-valid answer without log-probabilities.
    """

    update_threshold: float = 0.8
    cue_update_threshold: float = 0.4
    min_confidence: float = 0.4
    fallback_confidence: float = 0.6

    def decide(
        self, probs: dict[str, float] | None, answered: ModelRelation, *, cue: bool = False
    ) -> tuple[Relation, float]:
        """``(relation, confidence)`` from the distribution (or the bare answer when None); ``cue``:
        the newer statement has a change word."""
        needed = min(self.update_threshold, self.cue_update_threshold) if cue else self.update_threshold
        if probs is None:
            if answered == "update" and self.fallback_confidence < needed:
                return "unsure", self.fallback_confidence
            return answered, self.fallback_confidence
        p_update = probs.get("update", 0.0)
        if p_update >= needed:
            return "update", p_update
        others = {r: p for r, p in probs.items() if r != "update"}
        best = max(others, key=lambda r: others[r])
        if answered == "update" or others[best] < self.min_confidence:
            return "unsure", max(p_update, others[best])  # leaned to update without enough evidence
        return best, others[best]  # type: ignore[return-value]


class LLMJudge:
    """:class:`~hindsight.inference.judge.Judge` over a chat model (few-shot, schema-constrained).

    Args:
        chat: the model.
        policy: thresholds (see :class:`JudgePolicy`).
        pairs_per_prompt: pairs sent in one request (1 for small local models: they lose track in
            longer batches; 4-8 for a served 7B+ model).
        max_attempts: requests per batch when the reply does not validate (then ``unsure``).
        use_features: add the hand-written cues (:mod:`hindsight.inference.judge_features`) to
            each pair's prompt.
    """

    def __init__(
        self,
        chat: ChatModel,
        *,
        policy: JudgePolicy | None = None,
        pairs_per_prompt: int = 1,
        max_attempts: int = 2,
        use_features: bool = False,
    ) -> None:
        self._chat = chat
        self._policy = policy or JudgePolicy()
        self._per_prompt = max(1, pairs_per_prompt)
        self._attempts = max(1, max_attempts)
        self._features = use_features
        self._prefix = self._build_prefix()
        self.calls = 0
        self.seconds = 0.0

    @property
    def name(self) -> str:
        """``llm-judge:<model>``."""
        return f"llm-judge:{self._chat.name}"

    @property
    def chat_model(self) -> ChatModel:
        """The underlying chat model."""
        return self._chat

    def _show(self, pair: JudgePair) -> str:
        text = pair_text(pair)
        if self._features:
            cues = pair_features(pair).cues()
            if cues:
                text += f"\nCUES: {cues}"
        return text

    def _build_prefix(self) -> tuple[dict[str, str], ...]:
        n = self._per_prompt
        messages = [{"role": "system", "content": JUDGE_SYSTEM if n == 1 else JUDGE_SYSTEM_BATCH}]
        examples = [
            JudgePair(Statement(older, _EXAMPLE_OLD), Statement(newer, _EXAMPLE_NEW), cosine=0.0)
            for older, newer, _ in JUDGE_EXAMPLES
        ]
        labels = [label for _, _, label in JUDGE_EXAMPLES]
        for start in range(0, len(examples), n):
            chunk, answer = examples[start : start + n], labels[start : start + n]
            messages.append({"role": "user", "content": self._user(chunk)})
            reply = {"relation": answer[0]} if n == 1 else {"relations": answer}
            messages.append({"role": "assistant", "content": json.dumps(reply, separators=(",", ":"))})
        return tuple(messages)

    def _user(self, pairs: Sequence[JudgePair]) -> str:
        if len(pairs) == 1 and self._per_prompt == 1:
            return self._show(pairs[0])
        return "\n".join(f"{i}. {self._show(p)}" for i, p in enumerate(pairs, 1))

    def warm(self) -> float:
        """Evaluate the fixed prefix once so the first real call only pays for its pair (the local
        model's prefix is ~600 tokens: ~17 s on two quiet cores, minutes on a saturated machine).
        Call it from a background task at startup. Returns the seconds it took.

        Raises:
            ModelUnavailableError: the model timed out or is unreachable.
        """
        started = time.monotonic()
        self.judge([_WARM_PAIR])
        return time.monotonic() - started

    def judge(self, pairs: Sequence[JudgePair]) -> list[Verdict]:
        """One verdict per pair, in order (see the module doc for how it is decided).

        Raises:
            ModelUnavailableError: the model timed out or is unreachable.
        """
        return [verdict for verdict, _ in self.judge_detailed(pairs)]

    def judge_detailed(self, pairs: Sequence[JudgePair]) -> list[tuple[Verdict, dict[str, float] | None]]:
        """:meth:`judge` with the model's relation distribution behind each verdict (None when the
        backend gave no log-probabilities or the reply was invalid); for calibration.

        Raises:
            ModelUnavailableError: the model timed out or is unreachable.
        """
        out: list[tuple[Verdict, dict[str, float] | None]] = []
        for start in range(0, len(pairs), self._per_prompt):
            out.extend(self._judge_chunk(pairs[start : start + self._per_prompt]))
        return out

    def _judge_chunk(self, pairs: Sequence[JudgePair]) -> list[tuple[Verdict, dict[str, float] | None]]:
        n = len(pairs)
        single = self._per_prompt == 1
        request = ChatRequest(
            messages=(*self._prefix, {"role": "user", "content": self._user(pairs)}),
            schema=_schema(RelationReply) if single else _batch_schema(n),
            max_tokens=12 if single else 8 + 6 * n,
            logprobs=True,
            slot=JUDGE_SLOT,
            prefill='{"relation":"' if single else "",
            grammar=_RELATION_GRAMMAR if single else None,
        )
        problem = ""
        for attempt in range(self._attempts):
            started = time.monotonic()
            reply = self._chat.chat(request)
            self.calls += 1
            self.seconds += time.monotonic() - started
            answers = self._parse(reply, n, single)
            if answers is not None:
                found = relation_probabilities(reply.logprobs, reply.text)
                out: list[tuple[Verdict, dict[str, float] | None]] = []
                for i, answered in enumerate(answers):
                    probs = found[i] if len(found) == n else None
                    cue = pair_features(pairs[i]).retraction
                    relation, confidence = self._policy.decide(probs, answered, cue=cue)
                    reason = f"model said {answered}" + ("; change word in newer" if cue else "")
                    if probs is not None:
                        reason += " (" + ", ".join(f"{r} {p:.2f}" for r, p in probs.items()) + ")"
                    out.append((Verdict(relation, round(confidence, 4), reason, self.name), probs))
                return out
            problem = reply.text[:200]
            request = replace(request, temperature=0.3 * (attempt + 1))
        log.warning("judge reply invalid after %d attempts: %r", self._attempts, problem)
        return [(Verdict("unsure", 0.0, f"invalid reply: {problem!r}", self.name), None) for _ in pairs]

    @staticmethod
    def _parse(reply: ChatReply, n: int, single: bool) -> list[ModelRelation] | None:
        try:
            if single:
                return [RelationReply.model_validate_json(reply.text).relation]
            relations = RelationsReply.model_validate_json(reply.text).relations
        except ValidationError:
            return None
        return relations if len(relations) == n else None

    def features(self, pair: JudgePair) -> PairFeatures:
        """The hand-written cues of ``pair`` (for logs and measurement)."""
        return pair_features(pair)


class LLMFactExtractor:
    """:class:`~hindsight.inference.judge.FactExtractor` and
    :class:`~hindsight.inference.judge.LessonWriter` over a chat model.

    One request per turn (small models mix turns up in batches); replies are validated
    (:class:`FactsReply`); an invalid reply after ``max_attempts`` gives no facts for that turn.

    Args:
        chat: the model (may be shared with an :class:`LLMJudge`).
        max_attempts: requests per turn when the reply does not validate.
        max_tokens: bound on one reply (a fact costs ~45 tokens).
    """

    def __init__(self, chat: ChatModel, *, max_attempts: int = 2, max_tokens: int = 200) -> None:
        self._chat = chat
        self._attempts = max(1, max_attempts)
        self._max_tokens = max_tokens
        self._fact_prefix = _few_shot(FACT_SYSTEM, FACT_EXAMPLES)
        self._lesson_prefix = _few_shot(LESSON_SYSTEM, LESSON_EXAMPLES)
        self.calls = 0
        self.seconds = 0.0

    @property
    def name(self) -> str:
        """``llm-facts:<model>``."""
        return f"llm-facts:{self._chat.name}"

    def _ask(self, prefix: tuple[dict[str, str], ...], user: str, model: type[BaseModel]) -> BaseModel | None:
        request = ChatRequest(
            messages=(*prefix, {"role": "user", "content": user}),
            schema=_schema(model),
            max_tokens=self._max_tokens,
            slot=FACT_SLOT,
        )
        text = ""
        for attempt in range(self._attempts):
            started = time.monotonic()
            reply = self._chat.chat(request)
            self.calls += 1
            self.seconds += time.monotonic() - started
            text = reply.text
            try:
                return model.model_validate_json(text)
            except ValidationError:
                request = replace(request, temperature=0.3 * (attempt + 1))
        log.warning("%s reply invalid after %d attempts: %r", model.__name__, self._attempts, text[:200])
        return None

    def warm(self) -> float:
        """Evaluate the extractor's fixed prefix once (see :meth:`LLMJudge.warm`); seconds taken.

        Raises:
            ModelUnavailableError: the model timed out or is unreachable.
        """
        started = time.monotonic()
        self.extract([Statement("ok", _EXAMPLE_OLD)])
        return time.monotonic() - started

    def extract(self, texts: Sequence[Statement]) -> list[list[Fact]]:
        """Facts per turn, in order (an empty list for filler or an invalid reply).

        Raises:
            ModelUnavailableError: the model timed out or is unreachable.
        """
        out: list[list[Fact]] = []
        for statement in texts:
            reply = self._ask(self._fact_prefix, statement.text.strip(), FactsReply)
            facts = reply.facts if isinstance(reply, FactsReply) else []
            out.append(
                [
                    Fact(
                        entity=f.entity.strip(),
                        attribute=f.attribute.strip().lower(),
                        value=f.value.strip(),
                        statement=f.statement.strip(),
                        category=f.category,
                        negated=f.negated,
                    )
                    for f in facts
                    if f.value.strip() and "REDACTED" not in f.value and grounded(f.value, statement.text)
                ]
            )
        return out

    def lessons(self, task: str, outcome: str, feedback: str) -> list[Lesson]:
        """Up to 2 reusable lessons from a finished task (empty when nothing is to be learned or the
        reply is invalid).

        Args:
            task: what the user asked for.
            outcome: ``success`` / ``failure`` / free text.
            feedback: the user's feedback (may be empty).

        Raises:
            ModelUnavailableError: the model timed out or is unreachable.
        """
        user = f"Task: {task.strip()}\nOutcome: {outcome.strip()}\nFeedback: {feedback.strip()}"
        reply = self._ask(self._lesson_prefix, user, LessonsReply)
        if not isinstance(reply, LessonsReply):
            return []
        return [Lesson(text=item.text.strip(), kind=item.kind) for item in reply.lessons]


_WORD = re.compile(r"[^\W\d_]{3,}|\d+", re.UNICODE)
_CJK = re.compile(r"[\u3400-\u9fff]")


def grounded(value: str, text: str) -> bool:
    """Whether an extracted value rests on the turn: a Latin word (3+ letters) or number of the
    value occurs in the text (case-insensitive), or two consecutive CJK characters of it do.

    Drops what a small model copies from its few-shot examples instead of reading the turn (a
    measured failure: a Chinese turn about summaries came back with the example's nurse and
    vegetarian facts); costs translated values (an English value for a Chinese turn), which the
    prompt asks the model not to produce anyway.
    """
    low = text.lower()
    cjk = "".join(ch if _CJK.match(ch) else " " for ch in value).split()
    if any(run[i : i + 2] in text for run in cjk for i in range(max(1, len(run) - 1))):
        return True
    return any(word.lower() in low for word in _WORD.findall(value) if not _CJK.search(word))


def _few_shot(system: str, examples: Sequence[tuple[str, str]]) -> tuple[dict[str, str], ...]:
    messages = [{"role": "system", "content": system}]
    for user, answer in examples:
        messages.append({"role": "user", "content": user})
        messages.append({"role": "assistant", "content": answer})
    return tuple(messages)
