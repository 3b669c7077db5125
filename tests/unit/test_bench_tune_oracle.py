"""The LoCoMo replay's eviction arms and expiry oracle (``bench.tune``) on hand-computed cases.

Eviction score (DESIGN.md section 4): ``0.4 * importance + 0.3 * exp(-decay * days) + 0.3 * frequency``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bench.tune import ORACLE_DECAYS, _arm, expiry_oracle

CUT = datetime(2026, 6, 1, tzinfo=UTC)


def _memory(importance: float, age_days: float, user: str = "u1") -> dict[str, Any]:
    born = CUT - timedelta(days=age_days)
    return {
        "tenant_id": "t",
        "user_id": user,
        "type": "episodic",
        "status": "active",
        "importance": importance,
        "created_ts": born.timestamp(),
        "last_accessed_ts": born.timestamp(),
        "access_count": 0,
    }


def test_arm_expires_what_the_policy_scores_under_the_threshold() -> None:
    payloads = {
        "old-dull": _memory(0.1, 100),  # 0.04 + 0.3 * e^-5 = 0.042
        "old-important": _memory(0.6, 100),  # 0.24 + 0.002 = 0.242
        "new-dull": _memory(0.1, 1),  # 0.04 + 0.285 = 0.325
        "future": _memory(0.0, -1),  # born after the cut: never judged
    }
    gone = _arm(payloads, {}, CUT, decay=0.05, decay_by_type={}, expire_below=0.15, keep_threshold=None)
    assert gone == {"old-dull"}
    # a use 2 days before the cut protects the old dull memory (recency from the use, frequency 1.0)
    used = {"old-dull": [(CUT - timedelta(days=2)).timestamp()]}
    kept = _arm(payloads, used, CUT, decay=0.05, decay_by_type={}, expire_below=0.15, keep_threshold=None)
    assert kept == set()
    # a keep threshold drops low-importance memories whatever their score
    assert _arm(payloads, {}, CUT, decay=0.05, decay_by_type={}, expire_below=0.0, keep_threshold=0.2) == {
        "old-dull",
        "new-dull",
    }


def test_oracle_finds_the_largest_zero_regret_threshold() -> None:
    payloads = {
        "later": _memory(0.5, 100),
        "never-low": _memory(0.1, 100),
        "never-high": _memory(0.9, 100),
    }
    line = expiry_oracle(payloads, {}, CUT, later_used={"later"}, never_used={"never-low", "never-high"})
    no_decay = next(r for r in line["zero_regret_by_decay"] if r["decay_per_day"] == 0.0)
    assert no_decay["threshold"] == pytest.approx(0.5)  # 0.4 * 0.5 + 0.3: the later-used memory's score
    assert no_decay["never_used_expired_share"] == 0.5  # never-low (0.34) only
    assert line["best_zero_regret_never_used_expired_share"] == 0.5
    assert line["keep_threshold_zero_regret"] == 0.5
    assert line["keep_threshold_never_used_expired_share"] == 0.5
    assert line["goal_reachable"] is True
    assert len(line["zero_regret_by_decay"]) == len(ORACLE_DECAYS)


def test_oracle_says_unreachable_when_later_used_memories_score_lowest() -> None:
    payloads = {
        "later-dull": _memory(0.05, 300),
        "never-a": _memory(0.3, 300),
        "never-b": _memory(0.5, 10),
    }
    line = expiry_oracle(payloads, {}, CUT, later_used={"later-dull"}, never_used={"never-a", "never-b"})
    assert line["best_zero_regret_never_used_expired_share"] == 0.0
    assert line["keep_threshold_never_used_expired_share"] == 0.0
    assert line["goal_reachable"] is False
