"""Guard service app: ``faststream run services.guard.app:create_app --factory``."""

from __future__ import annotations

from faststream import FastStream

from hindsight.runtime import Resources, service_app
from schemas import Topic
from services.guard.poisoning import BurstDetector
from services.guard.policy import GuardPolicy
from services.guard.settings import GuardSettings
from services.guard.stage import GuardStage


def register(resources: Resources, settings: GuardSettings | None = None) -> None:
    """Subscribe the guard stage to ``memory.interactions.v1`` in group ``<prefix>-guard``."""
    cfg = settings or GuardSettings()
    stage = GuardStage(
        GuardPolicy(poisoning=cfg.poisoning_checks),
        BurstDetector(limit=cfg.burst_limit, window_s=cfg.burst_window_s),
    )
    resources.subscribe(stage, [Topic.INTERACTIONS], "guard")


def create_app() -> FastStream:
    """App factory: settings are read here, clients opened in the lifespan."""
    return service_app(register)
