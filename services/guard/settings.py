"""Guard settings (env prefix ``HINDSIGHT_GUARD_``); the numbers that chose each default are in
``docs/guard.md`` (measured with ``hindsight bench guard``)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class GuardSettings(BaseSettings):
    """Knobs of the guard stage; the redaction policy itself is :class:`services.guard.policy.GuardPolicy`."""

    model_config = SettingsConfigDict(env_prefix="HINDSIGHT_GUARD_", extra="ignore")

    poisoning_checks: bool = Field(
        True, description="Quarantine poisoning attempts (classifier, repetition)."
    )
    classifier: bool = Field(
        True, description="Use the trained instruction classifier; false = the keyword rules alone."
    )
    instruction_threshold: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="Classifier attack probability that quarantines (sweep in docs/guard.md).",
    )
    repeat_min_count: int = Field(
        3, ge=2, description="Occurrences of one sentence in a text that quarantine."
    )
    repeat_min_chars: int = Field(
        12, ge=1, description="Shortest normalised sentence (letters/digits) that counts as a claim."
    )
    repeat_phrase_min_chars: int = Field(
        8,
        ge=1,
        description="Shortest phrase (3+ words or CJK characters; a CJK character counts 2) that, repeated "
        "repeat_min_count times over 40% of a message, quarantines (docs/guard.md).",
    )
    repeat_phrase_min_share: float = Field(
        0.4, gt=0.0, le=1.0, description="Share of a message's words the repeated phrase must cover."
    )
    restate_min_share: float = Field(
        0.5,
        gt=0.0,
        le=1.0,
        description="Share of a message's sentences (repeat_min_count at least) that must all hold the same "
        "content terms for one claim restated in other words to quarantine (docs/guard.md).",
    )
    restate_min_terms: int = Field(
        3, ge=1, description="Latin content terms (entity and predicate) a restated claim's sentences share."
    )
    restate_min_cjk_terms: int = Field(
        4, ge=1, description="CJK character bigrams a restated claim's sentences share."
    )
    restate_own_min_share: float = Field(
        0.6,
        gt=0.0,
        le=1.0,
        description="restate_min_share for the user's and the assistant's own turns: a user restating a "
        "request is emphasis; repetition poisoning comes from tools, documents and other agents.",
    )
    restate_own_min_terms: int = Field(
        4, ge=1, description="restate_min_terms for the user's and the assistant's own turns."
    )
    hammer_min_count: int = Field(
        4,
        ge=2,
        description="Occurrences of one name that, in a short message about the user from a tool, document "
        "or system note (any source but user and assistant), quarantine (with hammer_min_density; "
        "docs/guard.md, 'A name hammered in').",
    )
    hammer_min_density: float = Field(
        0.12, gt=0.0, le=1.0, description="Share of the message's words that the hammered name must make up."
    )
    hammer_max_chars: int = Field(
        600, ge=1, description="Longest message (characters) the hammered-name rule judges."
    )
    burst_limit: int = Field(
        60,
        ge=1,
        description="Events one (tenant, agent) may send per window before the rest are quarantined.",
    )
    burst_window_s: float = Field(
        60.0, gt=0, description="Burst window in seconds of event time (occurred_at)."
    )
    claim_window_s: float = Field(
        600.0, gt=0, description="Event-time window in which one claim from many events is a burst (s)."
    )
    claim_min_events: int = Field(3, ge=2, description="Events stating one claim within the window: a burst.")
    claim_min_origins: int = Field(
        2, ge=1, description="Distinct origins (agent + tool) among them; 1 would flag a tool polled thrice."
    )
