"""Lessons from outcomes (services.reflect.lessons): when, what text, confidence, provenance."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from schemas import SessionClosedEvent
from services.reflect.lessons import LessonText, confidence, fallback_lessons, lesson_memories, wants_lessons

pytestmark = pytest.mark.unit

T0 = datetime(2026, 2, 1, 18, 0, tzinfo=UTC)


def close(**kw: Any) -> SessionClosedEvent:
    fields: dict[str, Any] = {
        "event_id": "close-1",
        "tenant_id": "t",
        "user_id": "u",
        "agent_id": "travel",
        "session_id": "s1",
        "closed_at": T0,
    } | kw
    return SessionClosedEvent(**fields)


def test_lessons_need_feedback_or_a_task_with_a_known_outcome() -> None:
    assert wants_lessons(close(feedback="never a middle seat again"))
    assert wants_lessons(close(task="book a flight", outcome="failure"))
    assert wants_lessons(close(task="book a flight", outcome="success"))
    assert not wants_lessons(close(task="book a flight"))  # outcome unknown
    assert not wants_lessons(close(outcome="failure"))  # nothing to learn it for
    assert not wants_lessons(close(feedback="   "))


def test_confidence_follows_the_feedback_score_and_source_trust() -> None:
    assert confidence(close(feedback="great", feedback_score=1.0)) == pytest.approx(0.6)
    assert confidence(close(feedback="bad", feedback_score=-1.0)) == pytest.approx(0.6)
    assert confidence(close(feedback="meh", feedback_score=0.0)) == pytest.approx(0.36)
    assert confidence(close(feedback="no score")) == pytest.approx(0.48)
    assert confidence(close(task="x", outcome="failure")) == pytest.approx(0.32)


def test_without_a_writer_the_feedback_is_the_lesson_and_failure_means_avoid() -> None:
    assert fallback_lessons(close(feedback=" Never put me\nin a middle seat again. ", outcome="failure")) == [
        LessonText("Never put me in a middle seat again.", "avoid")
    ]
    assert fallback_lessons(close(feedback="Perfect, one page.", feedback_score=0.9)) == [
        LessonText("Perfect, one page.", "do")
    ]
    assert fallback_lessons(close(task="x", outcome="failure")) == []


def test_lesson_memories_name_the_task_in_the_lessons_language_with_provenance() -> None:
    c = close(
        task="book a flight to Paris", outcome="failure", feedback="never a middle seat", feedback_score=-0.8
    )
    en, zh = lesson_memories(
        c,
        [
            LessonText("The user wants an aisle seat, never a middle seat.", "preference"),
            LessonText("摘要用中文。", "do"),
        ],
        episode=None,
        scope="agent:travel",
        stored_at=T0,
        model="m",
    )
    assert en.content == (
        'The user wants an aisle seat, never a middle seat. (learned from the task "book a flight to Paris", '
        "outcome: failure)"
    )
    assert zh.content == "摘要用中文。（来自任务“book a flight to Paris”，结果：失败）"
    assert (en.kind, en.type, en.scope, en.source, en.created_at) == (
        "lesson",
        "semantic",
        "agent:travel",
        "user",
        T0,
    )
    assert en.provenance.event_ids == ("close-1",)
    assert en.confidence == pytest.approx(0.6 * (0.6 + 0.4 * 0.8))
    assert {"lesson", "failure", "preference"} <= set(en.tags)
    again = lesson_memories(c, [LessonText("x")], episode=None, scope="global", stored_at=T0, model=None)
    assert again[0].id == en.id  # deterministic: a redelivered close rewrites the same lesson


def test_at_most_two_lessons_and_empty_texts_are_skipped() -> None:
    texts = [LessonText(""), LessonText("a"), LessonText("b"), LessonText("c")]
    out = lesson_memories(close(feedback="f"), texts, episode=None, scope="global", stored_at=T0, model=None)
    assert [m.content for m in out] == ["a", "b"]


def test_task_and_feedback_are_redacted_before_they_reach_episode_or_lesson() -> None:
    from services.reflect.stage import redacted  # noqa: PLC0415

    clean = redacted(close(task="Email bob@example.com the invoice", feedback="Call me at +44 7700 900123"))
    assert "bob@example.com" not in (clean.task or "")
    assert "[REDACTED:email]" in (clean.task or "")
    assert "7700" not in (clean.feedback or "")
    untouched = close(task="Book a flight")
    assert redacted(untouched) == untouched
