"""Evict settings (env prefix ``HINDSIGHT_EVICT_``); defaults from DESIGN.md sections 2 and 4."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class EvictSettings(BaseSettings):
    """Decay scoring and deletion knobs."""

    model_config = SettingsConfigDict(env_prefix="HINDSIGHT_EVICT_", extra="ignore")

    interval_s: float = Field(3600.0, gt=0, description="Seconds between eviction runs.")
    expire_below: float = Field(0.15, ge=0.0, le=1.0, description="Soft-delete below this eviction score.")
    retention_days: float = Field(30.0, ge=0.0, description="Hard-delete this many days after expiry.")
    decay_per_day: float = Field(
        0.05, ge=0.0, description="Recency decay per day (about a 14-day half-life)."
    )
    decay_per_day_by_type: dict[str, float] = Field(
        default_factory=dict,
        description="Decay per day of one memory type (working/episodic/semantic), over decay_per_day; "
        "JSON, e.g. '{\"semantic\": 0.02}'. Usually written by `hindsight tune`.",
    )

    def decay_for(self, memory_type: str | None) -> float:
        """The decay per day of ``memory_type`` (its own, else ``decay_per_day``)."""
        return self.decay_per_day_by_type.get(memory_type or "", self.decay_per_day)
