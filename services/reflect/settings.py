"""Reflect settings (env prefix ``HINDSIGHT_REFLECT_``); defaults from DESIGN.md section 4."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class ReflectSettings(BaseSettings):
    """Episode consolidation and K-of-M abstraction knobs."""

    model_config = SettingsConfigDict(env_prefix="HINDSIGHT_REFLECT_", extra="ignore")

    k: int = Field(3, ge=1, description="Episodes an entity must appear in to become semantic (K).")
    m: int = Field(10, ge=1, description="How many recent episodes are looked at (M).")
    close_grace_s: float = Field(
        30.0, ge=0.0, description="Max seconds to wait for a session's turns before consolidating anyway."
    )
    recheck_s: float = Field(
        0.5, gt=0.0, description="First wait before a parked close is checked again (doubles, at most 5 s)."
    )
    sweep_interval_s: float = Field(
        5.0,
        gt=0.0,
        description="Longest wait (seconds) between two looks at the parked closes; a close this process "
        "parks, or the earliest parked close coming due, ends the wait sooner. Closes reopened by a late "
        "turn in another process are seen within it.",
    )
    key_points: int = Field(5, ge=1, description="Most important turns quoted in an episode summary.")
    batch_size: int = Field(
        4, ge=1, description="Session closes per consumed batch (each costs an embedding)."
    )
