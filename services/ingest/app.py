"""Ingest service app: ``faststream run services.ingest.app:create_app --factory``.

Three stages, three consumer groups: the write-trigger (``memory.guarded.v1`` -> candidates), the
embed stage (``memory.candidates.v1`` -> vector store, searchable) and reconcile
(``memory.stored.v1`` -> version chains, facts, merges, conflicts). ``HINDSIGHT_INGEST_STAGES``
picks which run in this process (default all three), so they scale independently.
"""

from __future__ import annotations

from faststream import FastStream

from hindsight.consistency import ConsistencyCheck, ConsistencySettings
from hindsight.runtime import Resources, service_app
from hindsight.stores.session_ledger import SessionLedger
from hindsight.stores.tombstones import Tombstones
from hindsight.stores.working_memory import WorkingMemory
from schemas import Topic
from services.ingest.embed import EmbedStage
from services.ingest.reconcile import ReconcileStage
from services.ingest.revisions import Thresholds
from services.ingest.settings import IngestSettings
from services.ingest.trigger import WriteTriggerStage


async def register(resources: Resources, settings: IngestSettings | None = None) -> None:
    """Subscribe the configured stages (groups ``<prefix>-ingest-trigger`` / ``-embed`` /
    ``-reconcile``); a tuned keep threshold is applied from the tuned-settings file unless the
    environment sets one."""
    cfg = settings or IngestSettings()
    resources.apply_tuned("ingest", cfg)
    if "trigger" in cfg.stages:
        redis = await resources.redis()
        working = WorkingMemory(redis, capacity=cfg.working_capacity, lam=cfg.working_lambda)
        stage = WriteTriggerStage(
            working,
            SessionLedger(redis),
            threshold=cfg.keep_threshold,
            reflections=await resources.reflection_queue(),
            tombstones=Tombstones(redis),
        )
        resources.subscribe(stage, [Topic.GUARDED], "ingest-trigger")
    if "embed" in cfg.stages:
        ledger = SessionLedger(await resources.redis())
        store = resources.vector_store()
        consistency = (
            ConsistencyCheck(
                store,
                judge=resources.judge() if cfg.consistency_judge == "model" else None,
                settings=ConsistencySettings(min_cosine=cfg.consistency_min_cosine),
            )
            if cfg.consistency_check
            else None
        )
        embed = EmbedStage(
            store,
            resources.embedder(),
            ledger,
            lexical=resources.lexical(),
            consistency=consistency,
            tombstones=Tombstones(await resources.redis()),
            slice_size=cfg.store_slice,
        )
        resources.subscribe(embed, [Topic.CANDIDATES], "ingest-embed")
    if "reconcile" in cfg.stages:
        reconcile = ReconcileStage(
            resources.vector_store(),
            resources.embedder(),
            resources.judge(),
            resources.fact_extractor() if cfg.reconcile_facts != "off" else None,
            Thresholds(
                turn=cfg.reconcile_turn_cosine,
                fact=cfg.reconcile_fact_cosine,
                lesson=cfg.reconcile_lesson_cosine,
                max_pairs=cfg.reconcile_max_pairs,
                min_update_confidence=cfg.reconcile_min_update_confidence,
            ),
            lexical=resources.lexical(),
            facts=cfg.reconcile_facts,
        )
        resources.subscribe(
            reconcile,
            [Topic.STORED],
            "ingest-reconcile",
            max_records=RECONCILE_MAX_RECORDS,
            max_poll_interval_ms=RECONCILE_MAX_POLL_INTERVAL_MS,
        )


RECONCILE_MAX_RECORDS = 4
"""Stored memories per reconcile batch. Each durable turn costs a fact-extraction call (~14 s on two
busy cores with the local model) and each candidate pair a judge call (~2.5 s): 16 records took over
5 minutes in `bench updates`, past Kafka's default max poll interval, so the group rebalanced every
~5 minutes and the batch's uncommitted work was redone. Four keep a batch near a minute on CPU."""
RECONCILE_MAX_POLL_INTERVAL_MS = 30 * 60 * 1000
"""Longest a reconcile batch may run before its consumer counts as failed (30 min): a slow CPU judge
under load must not be mistaken for a dead consumer; a dead process is still found by the session
timeout (heartbeats run beside the batch)."""


def create_app() -> FastStream:
    """App factory: settings are read here, clients opened in the lifespan."""
    return service_app(register)
