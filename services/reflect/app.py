"""Reflect service app: ``faststream run services.reflect.app:create_app --factory``."""

from __future__ import annotations

from faststream import FastStream

from hindsight.runtime import Resources, service_app
from hindsight.stores.session_ledger import SessionLedger
from hindsight.stores.tombstones import Tombstones
from hindsight.stores.working_memory import WorkingMemory
from schemas import Topic
from services.reflect.settings import ReflectSettings
from services.reflect.stage import ReflectStage


async def register(resources: Resources, settings: ReflectSettings | None = None) -> None:
    """Subscribe the reflect stage to ``memory.sessions.v1`` (group ``<prefix>-reflect``) and run the
    sweeper of parked closes in the background."""
    cfg = settings or ReflectSettings()
    redis = await resources.redis()
    stage = ReflectStage(
        resources.vector_store(),
        resources.embedder(),
        SessionLedger(redis),
        WorkingMemory(redis),
        cfg,
        queue=await resources.reflection_queue(),
        lexical=resources.lexical(),
        tombstones=Tombstones(redis),
    )

    async def sweep_parked_closes() -> None:
        await stage.run_sweeper(resources.publisher)

    resources.background.append(sweep_parked_closes)
    # a close costs an embedding and a scan of the user's memories: small batches commit often and
    # keep one batch well inside the consumer's max poll interval
    resources.subscribe(stage, [Topic.SESSIONS], "reflect", max_records=cfg.batch_size)


def create_app() -> FastStream:
    """App factory: settings are read here, clients opened in the lifespan."""
    return service_app(register)
