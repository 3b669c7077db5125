"""Structured logging (structlog over the standard library) and Prometheus metrics helpers.

Log records carry their ``extra`` fields (stage, topic, partition, offset, event id) as keys: console
lines locally, one JSON object per line with ``HINDSIGHT_LOG_JSON=true``. Configured by the app
factory or the CLI, never at import.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING

import structlog

if TYPE_CHECKING:
    from hindsight.settings import RuntimeSettings


def configure_logging(runtime: RuntimeSettings) -> None:
    """Route every standard-library logger through structlog's formatter (idempotent)."""
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if runtime.log_json
        else structlog.dev.ConsoleRenderer(colors=False, exception_formatter=structlog.dev.plain_traceback)
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[
            structlog.stdlib.add_log_level,
            structlog.stdlib.add_logger_name,
            structlog.stdlib.ExtraAdder(),
            structlog.processors.TimeStamper(fmt="iso", utc=True),
        ],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(runtime.log_level.upper())
    for noisy in ("aiokafka", "hindsight.faststream", "httpx", "uvicorn.access", "mcp"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
