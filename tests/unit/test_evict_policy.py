"""Eviction decisions (DESIGN.md sections 2 and 4)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.evict.policy import AccessTotals, decide

pytestmark = pytest.mark.unit

NOW = datetime(2026, 1, 31, tzinfo=UTC)
KNOBS = {"expire_below": 0.15, "retention_days": 30.0, "decay_per_day": 0.05}


def payload(importance: float, days_since_access: float, **extra: object) -> dict[str, object]:
    return {
        "status": "active",
        "importance": importance,
        "last_accessed_ts": (NOW - timedelta(days=days_since_access)).timestamp(),
        **extra,
    }


def test_fresh_memory_is_kept() -> None:
    assert decide(payload(0.1, 0), None, 0, NOW, **KNOBS).action == "keep"


def test_stale_unimportant_memory_expires_with_valid_to() -> None:
    d = decide(payload(0.1, 40), None, 0, NOW, **KNOBS)
    assert d.action == "expire"
    assert d.updates["status"] == "expired"
    assert d.updates["valid_to"] == NOW.isoformat()
    assert d.score == pytest.approx(0.04 + 0.3 * 2.718281828**-2)


def test_logged_accesses_rescue_a_stale_memory_and_refresh_counters() -> None:
    last = (NOW - timedelta(days=1)).timestamp()
    d = decide(payload(0.1, 40), AccessTotals(4, last), 4, NOW, **KNOBS)
    assert d.action == "update"
    assert d.updates["access_count"] == 4
    assert d.updates["last_accessed_ts"] == last


def test_merged_duplicates_count_as_accesses() -> None:
    d = decide(payload(0.5, 0, merged_ids=["x", "y"]), None, 2, NOW, **KNOBS)
    assert d.updates["access_count"] == 2


def test_expired_memory_is_deleted_after_retention_only() -> None:
    young = {"status": "expired", "expired_ts": (NOW - timedelta(days=29)).timestamp()}
    old = {"status": "expired", "expired_ts": (NOW - timedelta(days=31)).timestamp()}
    assert decide(young, None, 0, NOW, **KNOBS).action == "keep"
    assert decide(old, None, 0, NOW, **KNOBS).action == "delete"


def test_superseded_memories_are_left_alone() -> None:
    assert decide({"status": "superseded", "importance": 0.0}, None, 0, NOW, **KNOBS).action == "keep"
