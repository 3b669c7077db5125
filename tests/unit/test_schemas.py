"""Wire schemas: versioned, strict where it matters, tolerant of unknown fields, docs in sync."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from pydantic import ValidationError

from schemas import KNOWN_VERSIONS, InteractionEvent, Topic, partition_key
from schemas.v1 import PUBLIC_EVENTS

pytestmark = pytest.mark.unit

DOCS = Path(__file__).resolve().parents[2] / "docs" / "schemas"
SHANGHAI = timezone(timedelta(hours=8))


def interaction(**kw: object) -> InteractionEvent:
    fields: dict[str, object] = {
        "event_id": "e-1",
        "tenant_id": "acme",
        "user_id": "u-1",
        "agent_id": "bot",
        "session_id": "s-1",
        "occurred_at": datetime(2026, 11, 29, 10, 0, tzinfo=SHANGHAI),
        "source": "user",
        "content": "hi",
    }
    fields.update(kw)
    return InteractionEvent(**fields)  # type: ignore[arg-type]


def test_interaction_dump_is_exact_and_keeps_the_users_offset() -> None:
    assert json.loads(interaction().model_dump_json()) == {
        "schema_version": "1",
        "tenant_id": "acme",
        "user_id": "u-1",
        "agent_id": "bot",
        "session_id": "s-1",
        "event_id": "e-1",
        "occurred_at": "2026-11-29T10:00:00+08:00",
        "source": "user",
        "content": "hi",
        "speaker": None,
        "tool_name": None,
        "tool_result": None,
        "turn_index": None,
        "scope": "global",
        "tags": [],
        "external_ref": None,
        "metadata": {},
    }


def test_naive_times_unknown_sources_and_bad_scopes_are_rejected_by_field() -> None:
    with pytest.raises(ValidationError, match="occurred_at"):
        interaction(occurred_at=datetime(2026, 11, 29, 10, 0))
    with pytest.raises(ValidationError, match="source"):
        interaction(source="robot")
    with pytest.raises(ValidationError, match="scope"):
        interaction(scope="team:x")
    with pytest.raises(ValidationError, match="content"):
        interaction(content="")
    with pytest.raises(ValidationError, match="content"):  # would compress to an empty memory
        interaction(content=" \n\t ")
    assert interaction(content=" x ").content == " x "


def test_unknown_fields_are_ignored_so_producers_can_add_optional_ones() -> None:
    raw = json.loads(interaction().model_dump_json()) | {"new_optional_field": 1}
    assert InteractionEvent.model_validate(raw) == interaction()


def test_events_are_frozen() -> None:
    with pytest.raises(ValidationError):
        interaction().content = "changed"  # type: ignore[misc]


def test_topics_are_versioned_and_keys_group_a_users_events() -> None:
    assert all(t.value.startswith("memory.") and t.value.endswith(".v1") for t in Topic)
    assert partition_key("acme", "u-1") == b"acme:u-1"
    assert KNOWN_VERSIONS == ("1",)


@pytest.mark.parametrize("model", PUBLIC_EVENTS, ids=lambda m: m.__name__)
def test_exported_json_schema_is_in_sync(model: type) -> None:
    exported = json.loads((DOCS / f"{model.__name__}.v1.json").read_text())
    assert exported == model.model_json_schema(), "run: uv run hindsight schemas export"


@pytest.mark.parametrize("model", PUBLIC_EVENTS, ids=lambda m: m.__name__)
def test_every_field_is_described(model: type) -> None:
    for name, field in model.model_fields.items():
        assert field.description, f"{model.__name__}.{name} has no description"


def test_utc_datetimes_round_trip() -> None:
    ev = interaction(occurred_at=datetime(2026, 1, 1, tzinfo=UTC))
    assert InteractionEvent.model_validate_json(ev.model_dump_json()).occurred_at.utcoffset() == timedelta(0)
