"""Guard service app: ``faststream run services.guard.app:create_app --factory``.

Two consumer groups: ``<prefix>-guard`` (``memory.interactions.v1`` -> guarded / quarantine) and
``<prefix>-quarantine`` (``memory.quarantine.v1`` -> the ClickHouse review store).
"""

from __future__ import annotations

from faststream import FastStream

from hindsight.runtime import Resources, service_app
from hindsight.stores.tombstones import Tombstones
from schemas import Topic
from services.guard.claims import ClaimBursts, ClaimBurstSettings, key_prefix
from services.guard.classifier import InstructionClassifier
from services.guard.poisoning import BurstDetector
from services.guard.policy import GuardPolicy
from services.guard.settings import GuardSettings
from services.guard.sink import QuarantineSinkStage
from services.guard.stage import GuardStage


def policy_from(cfg: GuardSettings) -> GuardPolicy:
    """The guard policy the settings describe."""
    return GuardPolicy(
        poisoning=cfg.poisoning_checks,
        instruction_threshold=cfg.instruction_threshold,
        repeat_min_count=cfg.repeat_min_count,
        repeat_min_chars=cfg.repeat_min_chars,
        repeat_phrase_min_chars=cfg.repeat_phrase_min_chars,
        repeat_phrase_min_share=cfg.repeat_phrase_min_share,
        restate_min_share=cfg.restate_min_share,
        restate_min_terms=cfg.restate_min_terms,
        restate_min_cjk_terms=cfg.restate_min_cjk_terms,
        restate_own_min_share=cfg.restate_own_min_share,
        restate_own_min_terms=cfg.restate_own_min_terms,
        hammer_min_count=cfg.hammer_min_count,
        hammer_min_density=cfg.hammer_min_density,
        hammer_max_chars=cfg.hammer_max_chars,
    )


async def register(resources: Resources, settings: GuardSettings | None = None) -> None:
    """Subscribe the guard stage and the quarantine sink; both drop the events of forgotten users
    (Redis tombstones)."""
    cfg = settings or GuardSettings()
    tombstones = Tombstones(await resources.redis())
    claims = ClaimBursts(
        await resources.redis(),
        ClaimBurstSettings(
            window_s=cfg.claim_window_s,
            min_events=cfg.claim_min_events,
            min_origins=cfg.claim_min_origins,
            min_chars=cfg.repeat_min_chars,
        ),
        prefix=key_prefix(resources.settings.kafka.group_prefix),
    )
    stage = GuardStage(
        policy_from(cfg),
        BurstDetector(limit=cfg.burst_limit, window_s=cfg.burst_window_s),
        classifier=InstructionClassifier.load() if cfg.classifier else None,
        claims=claims,
        tombstones=tombstones,
    )
    resources.subscribe(stage, [Topic.INTERACTIONS], "guard")
    sink = QuarantineSinkStage(resources.quarantine(), tombstones=tombstones)
    resources.subscribe(sink, [Topic.QUARANTINE], "quarantine")


def create_app() -> FastStream:
    """App factory: settings are read here, clients opened in the lifespan."""
    return service_app(register)
