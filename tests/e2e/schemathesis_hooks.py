"""Schemathesis hooks for ``test_interop.py`` (loaded with ``SCHEMATHESIS_HOOKS``): the rules of the
HTTP API that JSON Schema cannot state, so the OpenAPI document states them in words.

- ``POST /v1/recall``: ``time_from`` must be before ``time_to`` (the window is ``[time_from,
  time_to)``); the server answers 400 ``invalid_request`` naming ``time_from`` otherwise. A generated
  request with both times gets its window put in order (``time_to`` one day after ``time_from``), so
  "schema-valid data is accepted" is checked against what the server documents, and the 400 itself is
  tested in ``tests/integration/test_gateway.py``.
- ``POST /v1/recall/{query_id}/feedback``: one label per memory, so the same id in two lists is a 400
  naming the second list; a generated body keeps each id in its first list only.
- ``time_zone`` is an enum of every IANA zone name the server knows (~600): the coverage phase would
  send one real recall per name. A fixed sample of zones (whole, half and quarter hours, both
  hemispheres, and every 25th name by CRC-32) keeps the phase bounded; the fuzzing phase still draws
  from all of them.
"""

from __future__ import annotations

import zlib
from datetime import datetime, timedelta
from typing import Any

import schemathesis


def _instant(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


SAMPLE_ZONES = frozenset(
    {"UTC", "Asia/Shanghai", "Asia/Kolkata", "Asia/Kathmandu", "America/St_Johns", "Pacific/Chatham"}
)


def _sampled(zone: str) -> bool:
    return zone in SAMPLE_ZONES or zlib.crc32(zone.encode()) % 25 == 0


def _positive_coverage(case: Any) -> bool:
    meta = getattr(case, "meta", None)
    return (
        meta is not None
        and type(meta.phase.data).__name__ == "CoveragePhaseData"
        and meta.generation.mode.is_positive
    )


@schemathesis.hook
def filter_case(context: Any, case: Any) -> bool:
    """Positive coverage-phase recalls: only the sampled time zones (invalid names all go)."""
    operation = getattr(context, "operation", None)
    if operation is None or operation.path != "/v1/recall" or not isinstance(case.body, dict):
        return True
    zone = case.body.get("time_zone")
    return not (_positive_coverage(case) and isinstance(zone, str) and not _sampled(zone))


LABELS = ("used", "unused", "wrong", "outdated")


def _one_label_per_id(body: dict[str, Any]) -> dict[str, Any]:
    seen: set[Any] = set()
    out = dict(body)
    for name in LABELS:
        ids = body.get(name)
        if isinstance(ids, list):
            kept = [i for i in ids if not (isinstance(i, str) and i in seen)]
            seen.update(i for i in kept if isinstance(i, str))
            out[name] = kept
    return out


@schemathesis.hook
def map_case(context: Any, case: Any) -> Any:
    """Order a recall's time window; one label per id in feedback; every other request unchanged."""
    operation = getattr(context, "operation", None)
    if operation is not None and operation.path.endswith("/feedback") and isinstance(case.body, dict):
        case.body = _one_label_per_id(case.body)
        return case
    if operation is None or operation.path != "/v1/recall" or not isinstance(case.body, dict):
        return case
    start, end = _instant(case.body.get("time_from")), _instant(case.body.get("time_to"))
    if start is not None and end is not None and start >= end:
        case.body = {**case.body, "time_to": (start + timedelta(days=1)).isoformat()}
    return case
