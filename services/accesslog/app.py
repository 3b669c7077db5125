"""ClickHouse sinks (access log, analytics):
``faststream run services.accesslog.app:create_app --factory``."""

from __future__ import annotations

from faststream import FastStream

from hindsight.runtime import Resources, service_app
from hindsight.stores.tombstones import Tombstones
from hindsight.topology import STAGE_TOPICS
from services.accesslog.analytics import AnalyticsStage
from services.accesslog.stage import AccessLogStage


async def register(resources: Resources) -> None:
    """Subscribe the access-log sink to the recall logs of ``memory.recalls.v1`` and to
    ``memory.access.v1`` (group ``<prefix>-accesslog``) and the analytics sink to recalls, feedback
    and stored memories (group ``<prefix>-analytics``), each at
    most one insert per ``HINDSIGHT_CLICKHOUSE_ACCESS_LOG_INTERVAL_S`` (5 s) while it keeps up: a
    ClickHouse insert costs ~10-30 ms whatever its size, and an insert per recall (its log row and
    ~50 candidate rows) ran beside the next recalls on the same cores (``hindsight bench serve``: the
    gateway's CPU per recall doubled from the pipeline to the service path); a recall that overlaps
    an insert takes about twice as long, so fewer inserts make a shorter p95 tail. Rows of a user
    forgotten since their event was published are dropped (Redis tombstones)."""
    tombstones = Tombstones(await resources.redis())
    interval = resources.settings.clickhouse.access_log_interval_s
    stage = AccessLogStage(resources.access_log(), tombstones=tombstones)
    resources.subscribe(stage, STAGE_TOPICS["accesslog"], "accesslog", min_interval_s=interval)
    analytics = AnalyticsStage(resources.analytics(), tombstones=tombstones)
    resources.subscribe(analytics, STAGE_TOPICS["analytics"], "analytics", min_interval_s=interval)


def create_app() -> FastStream:
    """App factory: settings are read here, clients opened in the lifespan."""
    return service_app(register)
