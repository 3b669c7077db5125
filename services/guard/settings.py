"""Guard settings (env prefix ``HINDSIGHT_GUARD_``)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class GuardSettings(BaseSettings):
    """Knobs of the guard stage; the redaction policy itself is :class:`services.guard.policy.GuardPolicy`."""

    model_config = SettingsConfigDict(env_prefix="HINDSIGHT_GUARD_", extra="ignore")

    poisoning_checks: bool = Field(True, description="Quarantine instruction-like poisoning attempts.")
    burst_limit: int = Field(
        60,
        ge=1,
        description="Events one (tenant, agent) may send per window before the rest are quarantined.",
    )
    burst_window_s: float = Field(
        60.0, gt=0, description="Burst window in seconds of event time (occurred_at)."
    )
