"""ClickHouse sinks (access log, analytics):
``faststream run services.accesslog.app:create_app --factory``."""

from __future__ import annotations

from faststream import FastStream

from hindsight.runtime import Resources, service_app
from hindsight.stores.tombstones import Tombstones
from schemas import Topic
from services.accesslog.analytics import TOPICS, AnalyticsStage
from services.accesslog.stage import AccessLogStage


async def register(resources: Resources) -> None:
    """Subscribe the access-log sink to ``memory.access.v1`` (group ``<prefix>-accesslog``) and the
    analytics sink to recalls, feedback and stored memories (group ``<prefix>-analytics``); rows of a
    user forgotten since their event was published are dropped (Redis tombstones)."""
    tombstones = Tombstones(await resources.redis())
    resources.subscribe(
        AccessLogStage(resources.access_log(), tombstones=tombstones), [Topic.ACCESS], "accesslog"
    )
    analytics = AnalyticsStage(resources.analytics(), tombstones=tombstones)
    resources.subscribe(analytics, list(TOPICS), "analytics")


def create_app() -> FastStream:
    """App factory: settings are read here, clients opened in the lifespan."""
    return service_app(register)
