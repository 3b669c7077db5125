"""ClickHouse sinks (access log, analytics):
``faststream run services.accesslog.app:create_app --factory``."""

from __future__ import annotations

from faststream import FastStream

from hindsight.runtime import Resources, service_app
from schemas import Topic
from services.accesslog.analytics import TOPICS, AnalyticsStage
from services.accesslog.stage import AccessLogStage


def register(resources: Resources) -> None:
    """Subscribe the access-log sink to ``memory.access.v1`` (group ``<prefix>-accesslog``, at most
    one insert per ``HINDSIGHT_CLICKHOUSE_ACCESS_LOG_INTERVAL_S``) and the analytics sink to recalls,
    feedback and stored memories (group ``<prefix>-analytics``)."""
    interval = resources.settings.clickhouse.access_log_interval_s
    stage = AccessLogStage(resources.access_log())
    resources.subscribe(stage, [Topic.ACCESS], "accesslog", min_interval_s=interval)
    resources.subscribe(AnalyticsStage(resources.analytics()), list(TOPICS), "analytics")


def create_app() -> FastStream:
    """App factory: settings are read here, clients opened in the lifespan."""
    return service_app(register)
