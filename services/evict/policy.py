"""Eviction decisions for one memory: keep, refresh counters, expire, or delete (DESIGN.md s2, s4). Pure.

- ``access_count`` is the recall accesses logged in ClickHouse plus near-duplicates merged into the
  memory on write (each is a reinforcement, DESIGN.md section 4 "bump access_count");
- ``last_accessed_at`` is the latest of the stored value and the last logged access; a memory never
  recalled counts from when it was stored, so freshly ingested history is not expired at once;
- an active memory whose :func:`hindsight.scoring.eviction_score` falls below ``expire_below`` becomes
  ``expired`` (soft delete, ``valid_to`` set); an expired one is deleted ``retention_days`` after.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from hindsight.scoring import eviction_score

SECONDS_PER_DAY = 86_400.0


@dataclass(frozen=True)
class AccessTotals:
    """Logged recall accesses of one memory."""

    count: int
    last_ts: float | None
    """Epoch seconds (UTC) of the last logged access, if any."""


@dataclass(frozen=True)
class EvictionDecision:
    """What to do with one memory."""

    action: Literal["keep", "update", "expire", "delete"]
    score: float
    updates: dict[str, Any]


def effective_access_count(payload: dict[str, Any], logged: AccessTotals | None) -> int:
    """Logged accesses plus merged near-duplicates."""
    return (logged.count if logged else 0) + len(payload.get("merged_ids", []))


def decide(
    payload: dict[str, Any],
    logged: AccessTotals | None,
    max_access_count: int,
    now: datetime,
    *,
    expire_below: float,
    retention_days: float,
    decay_per_day: float,
) -> EvictionDecision:
    """Decide for one memory payload (as stored: ``status``, ``importance``, ``*_ts`` fields)."""
    status = payload.get("status", "active")
    now_ts = now.timestamp()
    if status == "expired":
        expired_ts = float(payload.get("expired_ts", now_ts))
        if (now_ts - expired_ts) / SECONDS_PER_DAY >= retention_days:
            return EvictionDecision("delete", 0.0, {})
        return EvictionDecision("keep", 0.0, {})
    if status != "active":
        return EvictionDecision("keep", 0.0, {})
    count = effective_access_count(payload, logged)
    last_ts = max(
        float(payload.get("last_accessed_ts", now_ts)), logged.last_ts if logged and logged.last_ts else 0.0
    )
    score = eviction_score(
        float(payload.get("importance", 0.0)),
        (now_ts - last_ts) / SECONDS_PER_DAY,
        count,
        max_access_count,
        decay_per_day=decay_per_day,
    )
    updates: dict[str, Any] = {}
    if count != int(payload.get("access_count", 0)):
        updates["access_count"] = count
    if last_ts != float(payload.get("last_accessed_ts", now_ts)):
        updates["last_accessed_ts"] = last_ts
        updates["last_accessed_at"] = datetime.fromtimestamp(last_ts, tz=now.tzinfo).isoformat()
    if score < expire_below:
        updates |= {
            "status": "expired",
            "expired_ts": now_ts,
            "valid_to": now.isoformat(),
            "eviction_score": round(score, 4),
        }
        return EvictionDecision("expire", score, updates)
    if updates:
        updates["eviction_score"] = round(score, 4)
        return EvictionDecision("update", score, updates)
    return EvictionDecision("keep", score, {})
