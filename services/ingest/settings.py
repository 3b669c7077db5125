"""Ingest settings (env prefix ``HINDSIGHT_INGEST_``); defaults from DESIGN.md sections 2 and 4."""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

FactsMode = Literal["all", "revisions", "off"]
"""Which turns reconcile extracts facts from (:mod:`services.ingest.reconcile`)."""


class IngestSettings(BaseSettings):
    """Write-trigger, working memory and embed-stage knobs."""

    model_config = SettingsConfigDict(env_prefix="HINDSIGHT_INGEST_", extra="ignore")

    keep_threshold: float = Field(0.2, ge=0.0, le=1.0, description="Importance needed to keep a turn.")
    working_capacity: int = Field(8, ge=1, description="Working memory items per session (DESIGN.md s2).")
    working_lambda: float = Field(0.1, ge=0.0, description="Working memory decay per turn (DESIGN.md s2).")
    consistency_check: bool = Field(
        True,
        description="Hold back low-trust candidates that overturn safety-critical or strongly supported "
        "memories (hindsight.consistency; issue 10).",
    )
    consistency_min_cosine: float = Field(
        0.80, ge=0.0, le=1.0, description="Nearest memories at or above this cosine are checked."
    )
    consistency_judge: Literal["rules", "model"] = Field(
        "rules",
        description="Who decides whether a gated pair overturns the protected memory: 'rules' (the "
        "correction rules, microseconds) or 'model' (the revision judge, HINDSIGHT_JUDGE_*: seconds per "
        "pair on CPU; only low-trust candidates near a safety-critical or strongly supported memory "
        "reach it).",
    )
    store_slice: int = Field(
        8,
        ge=1,
        description="Embed stage: candidates embedded, stored and announced together; a burst's first "
        "memories are searchable after one slice, not the whole consumer batch (services/ingest/embed.py).",
    )
    stages: Annotated[tuple[Literal["trigger", "embed", "reconcile"], ...], NoDecode] = Field(
        ("trigger", "embed", "reconcile"),
        description="Stages this process runs: any of 'trigger', 'embed', 'reconcile' ('trigger,embed').",
    )
    reconcile_turn_cosine: float = Field(
        0.80,
        ge=0.0,
        le=1.0,
        description="Reconcile: least e5 cosine for two turns to be a candidate pair (docs/reconcile.md).",
    )
    reconcile_fact_cosine: float = Field(
        0.88, ge=0.0, le=1.0, description="Reconcile: least cosine for two facts to be a candidate pair."
    )
    reconcile_lesson_cosine: float = Field(
        0.88, ge=0.0, le=1.0, description="Reconcile: least cosine for two lessons to be a candidate pair."
    )
    reconcile_max_pairs: int = Field(
        3,
        ge=1,
        le=16,
        description="Reconcile: most candidate pairs judged per memory (the closest; a chain's facts all "
        "pair).",
    )
    reconcile_min_update_confidence: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="Reconcile: an 'update' verdict below this confidence is treated as 'unsure' (conflict).",
    )
    reconcile_facts: FactsMode = Field(
        "revisions",
        description="Reconcile: which turns' facts are extracted: 'all' durable statements (an LLM "
        "served on a GPU), 'revisions' (turns the judge put into a chain or conflict; CPU default) or 'off'.",
    )

    @field_validator("stages", mode="before")
    @classmethod
    def _split_stages(cls, value: object) -> object:
        """Accept ``trigger``, ``trigger,embed`` or JSON ``["trigger"]`` (env) as well as a sequence."""
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                return tuple(json.loads(text))
            return tuple(part.strip() for part in text.split(",") if part.strip())
        return value
