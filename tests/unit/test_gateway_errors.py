"""The gateway's error tree maps onto the documented wire shape (pure logic)."""

from __future__ import annotations

from pydantic import ValidationError

from services.gateway.errors import PayloadTooLargeError, validation_detail, wire_error
from services.gateway.models import RecallRequest, RetainRequest


def test_an_event_the_broker_refuses_for_size_is_413_naming_the_field_and_the_fix() -> None:
    status, body = wire_error(
        PayloadTooLargeError("the event is larger than the broker accepts", field="content", fix="send less")
    )
    assert status == 413
    assert body.error.code == "payload_too_large"
    assert body.error.field == "content"
    assert body.error.fix == "send less"


def test_validation_messages_show_no_regular_expression_or_python_type() -> None:
    # a newcomer (2026-12-03, night) saw the blank-text pattern and "a valid dictionary" in messages
    cases: tuple[tuple[type[RecallRequest | RetainRequest], dict[str, str], str, str], ...] = (
        (RecallRequest, {"query": "   ", "user_id": "u1"}, "query", "query: must not be blank"),
        (
            RetainRequest,
            {"content": "hi there", "user_id": "u1", "session_id": "s1", "scope": "team"},
            "scope",
            "scope: must be 'global' or 'agent:<id>'",
        ),
    )
    for model, payload, field, shown in cases:
        try:
            model.model_validate(payload)
        except ValidationError as exc:
            detail = validation_detail(exc.errors())
        else:
            raise AssertionError(payload)
        assert detail.field == field
        assert detail.message == shown
    body = validation_detail(
        [{"type": "dict_type", "loc": ("body",), "msg": "Input should be a valid dictionary"}]
    )
    assert body.message.startswith("body: not a JSON object")
    assert "dictionary" not in body.message
