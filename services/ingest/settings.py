"""Ingest settings (env prefix ``HINDSIGHT_INGEST_``); defaults from DESIGN.md sections 2 and 4."""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


class IngestSettings(BaseSettings):
    """Write-trigger, working memory and embed-stage knobs."""

    model_config = SettingsConfigDict(env_prefix="HINDSIGHT_INGEST_", extra="ignore")

    keep_threshold: float = Field(0.2, ge=0.0, le=1.0, description="Importance needed to keep a turn.")
    working_capacity: int = Field(8, ge=1, description="Working memory items per session (DESIGN.md s2).")
    working_lambda: float = Field(0.1, ge=0.0, description="Working memory decay per turn (DESIGN.md s2).")
    dedupe_cosine: float = Field(0.95, ge=0.0, le=1.0, description="Near-duplicate threshold (DESIGN.md s4).")
    consistency_check: bool = Field(
        True,
        description="Hold back low-trust candidates that overturn safety-critical or strongly supported "
        "memories (hindsight.consistency; issue 10).",
    )
    consistency_min_cosine: float = Field(
        0.80, ge=0.0, le=1.0, description="Nearest memories at or above this cosine are checked."
    )
    stages: Annotated[tuple[Literal["trigger", "embed"], ...], NoDecode] = Field(
        ("trigger", "embed"),
        description="Stages this process runs: 'trigger', 'embed' or both ('trigger,embed').",
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
