"""Query parsing: time expressions in the caller's zone, entities (jieba for Chinese), intent."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from hindsight.recall.query import parse, time_window

pytestmark = pytest.mark.unit

REF = datetime(2026, 11, 29, 23, 30, tzinfo=UTC)  # already Nov 30, 07:30 in Shanghai


def test_yesterday_is_a_different_day_in_shanghai_than_in_utc() -> None:
    utc = time_window("What did I do yesterday?", REF, "UTC")
    sh = time_window("What did I do yesterday?", REF, "Asia/Shanghai")
    assert utc is not None
    assert sh is not None
    assert (utc.start, utc.end) == (datetime(2026, 11, 28, tzinfo=UTC), datetime(2026, 11, 29, tzinfo=UTC))
    # Nov 29 in Shanghai = [Nov 28 16:00Z, Nov 29 16:00Z)
    assert (sh.start, sh.end) == (
        datetime(2026, 11, 28, 16, tzinfo=UTC),
        datetime(2026, 11, 29, 16, tzinfo=UTC),
    )


def test_chinese_last_week_is_the_whole_previous_week() -> None:
    window = time_window("我上周在北京做了什么", REF, "Asia/Shanghai")
    assert window is not None
    assert window.period == "week"
    # local Monday 2026-11-23 00:00 +08:00 to Monday 2026-11-30 00:00 +08:00
    assert (window.start, window.end) == (
        datetime(2026, 11, 22, 16, tzinfo=UTC),
        datetime(2026, 11, 29, 16, tzinfo=UTC),
    )


def test_named_month_is_the_whole_month() -> None:
    window = time_window("What happened in May 2023?", REF, "UTC")
    assert window is not None
    assert (window.start, window.end, window.period) == (
        datetime(2023, 5, 1, tzinfo=UTC),
        datetime(2023, 6, 1, tzinfo=UTC),
        "month",
    )


def test_words_dateparser_misreads_are_not_time_expressions() -> None:
    assert time_window("When did Caroline go to the support group?", REF) is None
    assert time_window("What do you like to do?", REF) is None


def test_naive_reference_time_and_unknown_zone_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        time_window("yesterday", datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="Mars/Olympus"):
        time_window("yesterday", REF, "Mars/Olympus")
    with pytest.raises(ValueError, match="Mars/Olympus"):  # no time word: still checked
        parse("seats by the window", REF, "Mars/Olympus")


def test_entities_intent_and_recency() -> None:
    parsed = parse("What is the latest news about Jon Snow in New York?", REF)
    assert parsed.entities == ("Jon Snow", "New York")
    assert parsed.wants_recent
    chinese = parse("我最近在北京故宫看了什么展览", REF)
    assert "北京" in chinese.entities
    assert "故宫" in chinese.entities
    assert "什么" not in chinese.entities
    assert chinese.wants_recent
    assert not parse("When did Caroline paint a sunrise?", REF).wants_recent
