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
