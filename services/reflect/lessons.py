"""Lessons from outcomes: what a finished task teaches for the next similar one (issue 9 item 4).

When a session closes with feedback, or with a task that succeeded, failed or was abandoned,
reflection writes semantic memories of kind ``lesson`` ("The user wants an aisle seat, never a
middle seat.", "Confirm the price before ordering.", "摘要用中文，一页以内。"). The lesson text comes
from the lesson writer (the judge's model, :mod:`hindsight.inference.judge`) when one is configured;
without one, the feedback itself is the lesson. Each lesson names the task it was learned from, so a
later similar task finds it by similarity, and carries provenance to the session (its close event
and its episode).

Confidence = source trust x (0.6 + 0.4 x strength): trust 0.6 for the user's own feedback, 0.4 for
a bare outcome (DESIGN.md section 4: user statement 0.6, generated 0.4); strength = |feedback
score| when given, else 0.5. So explicit, strong feedback gives 0.6, a bare failure 0.32. A lesson
stated again is merged into the first by reconcile and its confidence rises
(:func:`hindsight.scoring.reinforced_confidence`); a contradicting one supersedes it. Pure functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from hindsight.ids import lesson_memory_id
from hindsight.text import cjk_count, features
from schemas import Memory, Provenance, SessionClosedEvent

FEEDBACK_TRUST = 0.6
"""A user's feedback is a user statement (DESIGN.md section 4)."""
OUTCOME_TRUST = 0.4
"""An outcome without feedback is the agent's own report (DESIGN.md section 4: generated content)."""
MAX_LESSONS = 2
_OUTCOME_ZH = {"success": "成功", "failure": "失败", "abandoned": "放弃", "unknown": "未知"}


@dataclass(frozen=True)
class LessonText:
    """One lesson sentence and whether it is about the user (``preference``), to ``do`` or to ``avoid``."""

    text: str
    kind: str = "preference"


def wants_lessons(close: SessionClosedEvent) -> bool:
    """Feedback text, or a task with a known outcome."""
    return bool(close.feedback and close.feedback.strip()) or (
        bool(close.task) and close.outcome in ("success", "failure", "abandoned")
    )


def confidence(close: SessionClosedEvent) -> float:
    """Initial confidence of the session's lessons (module doc)."""
    trust = FEEDBACK_TRUST if close.feedback and close.feedback.strip() else OUTCOME_TRUST
    strength = abs(close.feedback_score) if close.feedback_score is not None else 0.5
    return round(trust * (0.6 + 0.4 * strength), 4)


def fallback_lessons(close: SessionClosedEvent) -> list[LessonText]:
    """Without a lesson writer: the feedback itself (the user's own words), else nothing."""
    feedback = " ".join((close.feedback or "").split())
    if not feedback:
        return []
    kind = "avoid" if close.outcome in ("failure", "abandoned") or (close.feedback_score or 0) < 0 else "do"
    return [LessonText(feedback, kind)]


def _with_context(text: str, close: SessionClosedEvent) -> str:
    """The lesson sentence followed by the task it was learned from (in the lesson's language)."""
    text = " ".join(text.split())
    if not close.task:
        return text
    task = " ".join(close.task.split())
    if cjk_count(text):
        outcome = _OUTCOME_ZH[close.outcome]
        return f"{text}（来自任务“{task}”，结果：{outcome}）"
    return f'{text} (learned from the task "{task}", outcome: {close.outcome})'


def lesson_memories(
    close: SessionClosedEvent,
    lessons: Sequence[LessonText],
    *,
    episode: Memory | None,
    scope: str,
    stored_at: datetime,
    model: str | None,
) -> list[Memory]:
    """The ``lesson`` memories of a closed session (at most :data:`MAX_LESSONS`, empty texts skipped).

    Ids are ``lesson_memory_id(tenant, user, session, i)``: a redelivered close rewrites nothing.
    """
    out: list[Memory] = []
    conf = confidence(close)
    texts = [lesson for lesson in lessons if lesson.text.strip()][:MAX_LESSONS]
    for i, lesson in enumerate(texts):
        content = _with_context(lesson.text, close)
        found = features(content)
        out.append(
            Memory(
                id=lesson_memory_id(close.tenant_id, close.user_id, close.session_id, i),
                tenant_id=close.tenant_id,
                user_id=close.user_id,
                agent_id=close.agent_id,
                session_id=close.session_id,
                type="semantic",
                kind="lesson",
                content=content,
                source="user" if close.feedback else "system",
                scope=scope,
                tags=tuple(dict.fromkeys(("lesson", close.outcome, lesson.kind, *found.tags))),
                entities=found.entities,
                intent="lesson",
                importance=0.7,
                confidence=conf,
                created_at=close.closed_at,
                stored_at=stored_at,
                valid_from=close.closed_at,
                last_accessed_at=stored_at,
                provenance=Provenance(
                    event_ids=(close.event_id,), memory_ids=(episode.id,) if episode is not None else ()
                ),
                embedding_model=model,
            )
        )
    return out
