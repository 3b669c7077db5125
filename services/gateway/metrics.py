"""Prometheus metrics of the gateway (exposed at ``/metrics``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import Counter, Histogram

from hindsight.errors import RequestError, RetryableError
from services.gateway.errors import wire_code

CALLS = Counter(
    "hindsight_gateway_calls_total",
    "Gateway calls by operation and outcome (ok or wire error code)",
    ["operation", "outcome"],
)
CALL_SECONDS = Histogram("hindsight_gateway_call_seconds", "Wall time per gateway call (s)", ["operation"])
RECALLED = Counter("hindsight_gateway_recalled_memories_total", "Memories returned by recall")
LOG_BUILD = Histogram(
    "hindsight_recall_log_build_seconds",
    "Time to build a recall's access and recall-log events after its response (s)",
    buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025),
)


@contextmanager
def observe(operation: str) -> Iterator[None]:
    """Count one call of ``operation`` with its outcome and time it (seconds)."""
    start = time.perf_counter()
    outcome = "internal"
    try:
        yield
        outcome = "ok"
    except RequestError as exc:
        outcome = wire_code(exc)
        raise
    except RetryableError:
        outcome = "unavailable"
        raise
    finally:
        CALLS.labels(operation, outcome).inc()
        CALL_SECONDS.labels(operation).observe(time.perf_counter() - start)
