"""Guard policy and the guard decision for one message (DESIGN.md sections 3, 4 and 6).

:func:`evaluate` is the guard verdict for one piece of text, as a pure function; the stage applies
it to every free-text field of an event (:func:`redact_event` for the fields that are only
redacted). Layers, each with its own reason:

1. PII/secrets (:mod:`hindsight.pii`, shared so the gateway redacts queries with the same rules):
   every finding gets its type's action. A ``block`` finding (secrets by default) makes the verdict
   ``block`` (reason ``secret:<type>``): the message goes to ``memory.quarantine.v1`` and is never
   stored (DESIGN.md sections 3 and 6).
2. Source-aware instruction detection (:class:`services.guard.classifier.InstructionClassifier`):
   attack probability at or above ``policy.instruction_threshold`` quarantines with reason
   ``poisoning:<kind>`` (``indirect_injection``, ``fake_authority``, ``safety_override``,
   ``directive``). Without a classifier the keyword rules of :mod:`services.guard.poisoning` decide
   (reason ``poisoning:<rule>``), as before.
3. Repetition (:func:`services.guard.claims.repeated_claims`, ``repeated_phrase``, ``restated_claim``
   and, for sources other than the user and the assistant, ``hammered_name``): reason
   ``poisoning:repetition``.
4. Bursts (the caller's verdicts): ``burst`` (events per agent) and ``burst:claim`` (one claim from
   many events and origins), and ``unknown_source`` for a source missing from the trust table.

The returned content is always the redacted text, whatever the verdict, so no copy of a message
(quarantine included) carries raw PII or a secret. The findings summary holds types and counts only,
never matched text, so it is safe to log.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from hindsight.folding import simplified
from hindsight.pii import DEFAULT_ACTIONS, Action, PiiType, redact
from services.guard.announced import announced_repeat
from services.guard.claims import (
    hammered_name,
    repeated_claims,
    repeated_phrase,
    restated_claim,
    restated_consent,
    without_quiet_log_lines,
)
from services.guard.classifier import InstructionClassifier
from services.guard.poisoning import detect_poisoning

Verdict = Literal["pass", "quarantine", "block"]
"""``pass``: to memory.guarded.v1; ``quarantine``/``block``: to memory.quarantine.v1 (DESIGN.md s3)."""

FIRST_PARTY_SOURCES: Final[frozenset[str]] = frozenset({"user", "assistant"})
"""Sources whose turns are the conversation itself: a restated request there is emphasis ("a flight to
Lisbon in May ... the flight to Lisbon in early May ..."), so the restated-claim rule asks more of them
(``restate_own_*``); 195 of the 205 repetition attacks of the sets come from tools."""
DEFAULT_TRUST: Final[Mapping[str, float]] = MappingProxyType(
    {"tool": 0.8, "user": 0.6, "assistant": 0.4, "system": 0.7}
)
"""Initial confidence by source. tool 0.8, user 0.6, assistant 0.4 are DESIGN.md section 4; system 0.7
is our choice (operator-authored, more trusted than a user statement, less than a tool result)."""

Trust = Annotated[float, Field(ge=0.0, le=1.0)]


class GuardPolicy(BaseModel):
    """What the guard does: per-type PII actions, source trust table, poisoning checks on/off.

    Partial ``actions`` and ``trust`` mappings are merged over the defaults, so
    ``GuardPolicy(actions={"ip": "keep"})`` changes IP handling only. Unknown PII types or actions are
    rejected at validation time.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    actions: dict[PiiType, Action] = Field(
        default_factory=lambda: dict(DEFAULT_ACTIONS),
        description="Action per PII/secret type: redact, mask, block or keep (DESIGN.md section 6).",
    )
    trust: dict[str, Trust] = Field(
        default_factory=lambda: dict(DEFAULT_TRUST),
        description="Initial confidence by event source (DESIGN.md section 4; 'system' is our choice).",
    )
    poisoning: bool = Field(
        default=True,
        description="Quarantine instruction-like content aimed at future behaviour (DESIGN.md section 6).",
    )
    quarantine_unknown_sources: bool = Field(
        default=True,
        description="Quarantine content whose source is not in the trust table (DESIGN.md section 6).",
    )
    instruction_threshold: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="Attack probability of the instruction classifier that quarantines (see GuardSettings).",
    )
    repeat_min_count: int = Field(
        3, ge=2, description="Times one sentence must occur in a text to quarantine."
    )
    repeat_min_chars: int = Field(
        12, ge=1, description="Shortest normalised sentence that counts as a claim."
    )
    repeat_phrase_min_chars: int = Field(
        8, ge=1, description="Shortest hammered phrase (claim_length: a CJK character counts 2)."
    )
    repeat_phrase_min_share: float = Field(
        0.4, gt=0.0, le=1.0, description="Share of a message's words a hammered phrase must cover."
    )
    restate_min_share: float = Field(
        0.5, gt=0.0, le=1.0, description="Share of a message's sentences a restated claim's terms must be in."
    )
    restate_min_terms: int = Field(
        3, ge=1, description="Latin content terms a restated claim's sentences must share."
    )
    restate_min_cjk_terms: int = Field(
        4, ge=1, description="CJK character bigrams a restated claim's sentences must share."
    )
    restate_own_min_share: float = Field(
        0.6, gt=0.0, le=1.0, description="restate_min_share for user and assistant turns."
    )
    restate_own_min_terms: int = Field(4, ge=1, description="restate_min_terms for user and assistant turns.")
    hammer_min_count: int = Field(
        4, ge=2, description="Occurrences of one name in a short message about the user (not first-party)."
    )
    hammer_min_density: float = Field(
        0.12, gt=0.0, le=1.0, description="Share of the message's words that one hammered name must make up."
    )
    hammer_max_chars: int = Field(600, ge=1, description="Longest message the hammered-name rule judges.")

    @field_validator("actions", mode="after")
    @classmethod
    def _merge_actions(cls, value: dict[PiiType, Action]) -> dict[PiiType, Action]:
        return {**DEFAULT_ACTIONS, **value}

    @field_validator("trust", mode="after")
    @classmethod
    def _merge_trust(cls, value: dict[str, float]) -> dict[str, float]:
        return {**DEFAULT_TRUST, **value}


class GuardDecision(BaseModel):
    """The guard's verdict on one message; safe to log and to publish (no raw PII inside)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    verdict: Verdict = Field(description="pass, quarantine or block (DESIGN.md sections 3 and 6).")
    content: str = Field(description="The content with every finding redacted/masked per the policy.")
    findings: dict[str, int] = Field(description="PII/secret type -> number of findings; never the values.")
    reasons: tuple[str, ...] = Field(description="Why the verdict is not pass, e.g. 'secret:api_key'.")
    trust: float = Field(
        description="Initial confidence of the source (DESIGN.md section 4); 0.0 if unknown."
    )
    scores: dict[str, float] = Field(default_factory=dict, description="Detector scores, e.g. instruction.")


def repeated(content: str, *, own: bool, policy: GuardPolicy) -> bool:
    """Whether ``content`` hammers one claim in (reason ``poisoning:repetition``): an exact sentence
    (:func:`repeated_claims`), a phrase (:func:`repeated_phrase`), a claim restated in other words
    (:func:`restated_claim`, stricter for the user's and the assistant's ``own`` turns) or, from any
    other source, a name hammered into a message about the user (:func:`hammered_name`) or a claim said
    again after announcing it (:func:`.announced.announced_repeat`). Quiet log
    lines are left out first (:func:`without_quiet_log_lines`). The rules read Traditional Chinese as
    Simplified (:func:`hindsight.folding.simplified`): their word lists are Simplified."""
    content = simplified(content)
    unlogged = without_quiet_log_lines(content)
    return bool(
        repeated_claims(unlogged, min_count=policy.repeat_min_count, min_chars=policy.repeat_min_chars)
        or repeated_phrase(
            unlogged,
            min_count=policy.repeat_min_count,
            min_chars=policy.repeat_phrase_min_chars,
            min_share=policy.repeat_phrase_min_share,
        )
        or restated_claim(
            unlogged,
            min_count=policy.repeat_min_count,
            min_share=policy.restate_own_min_share if own else policy.restate_min_share,
            min_terms=policy.restate_own_min_terms if own else policy.restate_min_terms,
            min_cjk_terms=policy.restate_min_cjk_terms,
        )
        or (
            not own
            and (
                hammered_name(
                    content,
                    min_count=policy.hammer_min_count,
                    min_density=policy.hammer_min_density,
                    max_chars=policy.hammer_max_chars,
                )
                or restated_consent(content, max_chars=policy.hammer_max_chars)
                or announced_repeat(unlogged) is not None
            )
        )
    )


def evaluate(
    content: str,
    source: str,
    policy: GuardPolicy,
    *,
    burst: bool = False,
    classifier: InstructionClassifier | None = None,
) -> GuardDecision:
    """Judge one message from ``source`` under ``policy`` (DESIGN.md section 6).

    ``burst`` is the caller's ``BurstDetector.observe`` result for this event; it quarantines with
    reason ``burst``. Reasons, in order: ``secret:<type>`` (or ``block:<type>``) per blocking type,
    ``unknown_source``, ``poisoning:<kind>`` from the classifier (or ``poisoning:<rule>`` per fired
    rule without one), ``poisoning:repetition``, ``burst``. Verdict: ``block`` if anything blocks,
    else ``quarantine`` if there is any other reason, else ``pass``.
    """
    redaction = redact(content, policy.actions)
    reasons: list[str] = list(redaction.block_reasons)

    known_source = source in policy.trust
    if not known_source and policy.quarantine_unknown_sources:
        reasons.append("unknown_source")
    scores: dict[str, float] = {}
    if policy.poisoning:
        own = source in FIRST_PARTY_SOURCES  # stricter restated-claim thresholds: emphasis, not poisoning
        if classifier is not None:
            score = classifier.score(content, source)
            scores["instruction"] = round(score.attack, 4)
            if score.attack >= policy.instruction_threshold:
                reasons.append(f"poisoning:{score.kind}")
        else:
            reasons.extend(f"poisoning:{signal.rule}" for signal in detect_poisoning(simplified(content)))
        if repeated(content, own=own, policy=policy):
            reasons.append("poisoning:repetition")
    if burst:
        reasons.append("burst")

    verdict: Verdict = "block" if redaction.blocked else "quarantine" if reasons else "pass"
    return GuardDecision(
        verdict=verdict,
        content=redaction.text,
        findings=dict(sorted(Counter(f.type for f in redaction.findings).items())),
        reasons=tuple(reasons),
        trust=policy.trust.get(source, 0.0),
        scores=scores,
    )


def redact_field(value: str, policy: GuardPolicy) -> tuple[str, Counter[str], list[str]]:
    """One metadata field redacted: ``(text, finding counts, block reasons)``."""
    result = redact(value, policy.actions)
    return result.text, Counter(f.type for f in result.findings), list(result.block_reasons)
