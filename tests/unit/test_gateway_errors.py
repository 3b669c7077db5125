"""The gateway's error tree maps onto the documented wire shape (pure logic)."""

from __future__ import annotations

from services.gateway.errors import PayloadTooLargeError, wire_error


def test_an_event_the_broker_refuses_for_size_is_413_naming_the_field_and_the_fix() -> None:
    status, body = wire_error(
        PayloadTooLargeError("the event is larger than the broker accepts", field="content", fix="send less")
    )
    assert status == 413
    assert body.error.code == "payload_too_large"
    assert body.error.field == "content"
    assert body.error.fix == "send less"
