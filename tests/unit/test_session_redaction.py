"""Session-close free text is redacted where reflection reads it (issue 13 defect 5)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from hindsight.redaction import redact_session_close
from schemas import SessionClosedEvent

pytestmark = pytest.mark.unit


def close(**fields: object) -> SessionClosedEvent:
    return SessionClosedEvent(
        tenant_id="t",
        user_id="u",
        agent_id="a",
        session_id="s",
        event_id="e",
        closed_at=datetime(2026, 12, 1, tzinfo=UTC),
        **fields,  # type: ignore[arg-type]
    )


def test_task_and_feedback_are_redacted_and_secrets_do_not_block() -> None:
    raw = close(
        task="send the report to ana@example.org",
        feedback="login works, password is Tr0ub4dor&3; 密码是wxy@2024home",
        outcome="success",
        feedback_score=0.5,
    )
    redacted, findings = redact_session_close(raw)
    assert redacted.task == "send the report to [REDACTED:email]"
    assert redacted.feedback == "login works, password is [REDACTED:password]; 密码是[REDACTED:password]"
    assert findings == {"email": 1, "password": 2}
    assert (redacted.outcome, redacted.feedback_score, redacted.event_id) == ("success", 0.5, "e")


def test_clean_close_is_returned_unchanged() -> None:
    raw = close(task="plan a trip", feedback="thanks, very helpful")
    redacted, findings = redact_session_close(raw)
    assert redacted is raw
    assert findings == {}


def test_operator_actions_apply_but_block_means_redact() -> None:
    raw = close(feedback="mail me at bob@example.com, pin is 4471")
    redacted, _ = redact_session_close(raw, {"email": "mask", "password": "block"})
    assert redacted.feedback == "mail me at ****.com, pin is [REDACTED:password]"
