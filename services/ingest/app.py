"""Ingest service app: ``faststream run services.ingest.app:create_app --factory``.

Two stages, two consumer groups: the write-trigger (``memory.guarded.v1`` -> candidates) and the
embed stage (``memory.candidates.v1`` -> vector store). ``HINDSIGHT_INGEST_STAGES`` picks which run
in this process (default both), so they scale independently.
"""

from __future__ import annotations

from faststream import FastStream

from hindsight.consistency import ConsistencyCheck, ConsistencySettings
from hindsight.runtime import Resources, service_app
from hindsight.stores.session_ledger import SessionLedger
from hindsight.stores.working_memory import WorkingMemory
from schemas import Topic
from services.ingest.embed import EmbedStage
from services.ingest.settings import IngestSettings
from services.ingest.trigger import WriteTriggerStage


async def register(resources: Resources, settings: IngestSettings | None = None) -> None:
    """Subscribe the write-trigger and/or embed stage (groups ``<prefix>-ingest-trigger``/``-embed``)."""
    cfg = settings or IngestSettings()
    if "trigger" in cfg.stages:
        redis = await resources.redis()
        working = WorkingMemory(redis, capacity=cfg.working_capacity, lam=cfg.working_lambda)
        stage = WriteTriggerStage(working, SessionLedger(redis), threshold=cfg.keep_threshold)
        resources.subscribe(stage, [Topic.GUARDED], "ingest-trigger")
    if "embed" in cfg.stages:
        ledger = SessionLedger(await resources.redis())
        store = resources.vector_store()
        consistency = (
            ConsistencyCheck(store, settings=ConsistencySettings(min_cosine=cfg.consistency_min_cosine))
            if cfg.consistency_check
            else None
        )
        embed = EmbedStage(
            store,
            resources.embedder(),
            ledger,
            dedupe_cosine=cfg.dedupe_cosine,
            lexical=resources.lexical(),
            consistency=consistency,
        )
        resources.subscribe(embed, [Topic.CANDIDATES], "ingest-embed")


def create_app() -> FastStream:
    """App factory: settings are read here, clients opened in the lifespan."""
    return service_app(register)
