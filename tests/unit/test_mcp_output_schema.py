"""The MCP tools' compact output schema accepts exactly what pydantic's own schema accepts.

:func:`services.gateway.mcp_server.output_schema` rewrites ``X | None`` as a type list and inlines
nested models so that clients validate results faster; these tests hold it congruent with the
schema pydantic derives (the one the SDK would publish) on valid results and on mutations of them.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any, Literal

import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel, Field

from schemas.v1 import Provenance
from services.gateway.mcp_server import TOOLS, _inline_refs, output_schema
from services.gateway.models import ConflictPair, Evidence, MemoryView, RecalledMemory, RecallResponse, Scores

NOW = datetime(2026, 12, 2, 9, 30, tzinfo=UTC)


def _view(i: int, **extra: Any) -> dict[str, Any]:
    return {
        "id": f"00000000-0000-0000-0000-00000000000{i}",
        "user_id": "u1",
        "content": f"memory {i}",
        "type": "semantic" if i % 2 else "episodic",
        "kind": "fact" if i % 2 else "turn",
        "source": "user",
        "speaker": None if i % 2 else "Caroline",
        "session_id": "s1",
        "created_at": NOW,
        "valid_from": NOW,
        "valid_to": NOW if i == 3 else None,
        "status": "superseded" if i == 3 else "active",
        "version": 2 if i == 3 else 1,
        "parent_id": "p" if i == 3 else None,
        "entity": "user" if i % 2 else None,
        "attribute": "employer" if i % 2 else None,
        "value": "Siemens" if i % 2 else None,
        "confidence": 0.9,
        "provenance": Provenance(
            event_ids=("e1",), passage=1 if i == 1 else None, span=(0, 4) if i == 1 else None
        ),
        **extra,
    }


def _recall() -> dict[str, Any]:
    memories = [
        RecalledMemory(
            **_view(i),
            scores=Scores(
                similarity=0.8, relevance=0.03, dense_rank=i, lexical_rank=None, time_weight=1.0, final=0.7
            ),
            rank=i,
            evidence=[Evidence(id="t1", content="I moved", created_at=NOW)] if i % 2 else [],
        )
        for i in range(1, 5)
    ]
    other = MemoryView(**_view(5))
    response = RecallResponse(
        query_id="q1",
        memories=memories,
        time_window=[NOW, NOW],
        conflicts=[ConflictPair(memory_ids=[memories[0].id, other.id], other=other)],
    )
    return response.model_dump(mode="json", by_alias=True)


def _mutations(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    """(path, replacement) pairs: each leaf set to null, to a number, to a string, to a list."""
    if isinstance(value, dict):
        return [m for k, v in value.items() for m in _mutations(v, (*path, k))] + [(path, None)] * bool(path)
    if isinstance(value, list):
        return [m for i, v in enumerate(value) for m in _mutations(v, (*path, i))] + [(path, None)]
    return [(path, r) for r in (None, 7, "zz-not-an-enum", [1]) if r != value]


def _replace(doc: Any, path: tuple[Any, ...], new: Any) -> Any:
    out = copy.deepcopy(doc)
    target = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = new
    return out


def _drops(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths of every object key (to delete one at a time)."""
    if isinstance(value, dict):
        return [(*path, k) for k in value] + [p for k, v in value.items() for p in _drops(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _drops(v, (*path, i))]
    return []


def test_recall_result_mutations_get_the_same_verdict_from_both_schemas() -> None:
    reference = Draft202012Validator(RecallResponse.model_json_schema())
    compact = Draft202012Validator(output_schema(RecallResponse))
    doc = _recall()
    assert compact.is_valid(doc)
    assert reference.is_valid(doc)
    candidates = [_replace(doc, p, r) for p, r in _mutations(doc)]
    for path in _drops(doc):
        dropped = copy.deepcopy(doc)
        target = dropped
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]
        candidates.append(dropped)
    verdicts = [(reference.is_valid(c), compact.is_valid(c)) for c in candidates]
    disagreements = [json.dumps(c)[:200] for c, (a, b) in zip(candidates, verdicts, strict=True) if a != b]
    assert not disagreements
    # the mutations exercise both answers: nullable fields take null, required ones refuse it
    assert sum(a for a, _ in verdicts) > 50
    assert sum(not a for a, _ in verdicts) > 200


def test_every_tool_schema_is_compact_and_accepts_a_dump_of_its_model() -> None:
    doc = _recall()
    for spec in TOOLS:
        schema = output_schema(spec.result)
        text = json.dumps(schema)
        assert "$ref" not in text, spec.name
        assert "$defs" not in text, spec.name
        Draft202012Validator.check_schema(schema)
    schema = output_schema(RecallResponse)
    speaker = schema["properties"]["memories"]["items"]["properties"]["speaker"]
    assert speaker["type"] == ["string", "null"]
    assert "anyOf" not in speaker
    status = schema["properties"]["memories"]["items"]["properties"]["status"]
    assert None not in status["enum"]  # status is not nullable: no null added
    assert Draft202012Validator(schema).is_valid(doc)


def test_a_recursive_definition_is_refused_rather_than_inlined_forever() -> None:
    defs = {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}}
    with pytest.raises(ValueError, match="recursive model 'Node'"):
        _inline_refs({"$ref": "#/$defs/Node", "$defs": defs}, defs)


class _Optional(BaseModel):
    colour: Literal["red", "green"] | None = None
    count: int | None = Field(None, ge=1)
    pair: tuple[int, int] | None = None
    view: Scores | None = None


@pytest.mark.parametrize(
    ("doc", "valid"),
    [
        ({}, True),
        ({"colour": None, "count": None, "pair": None, "view": None}, True),
        ({"colour": "red", "count": 3, "pair": [1, 2]}, True),
        ({"colour": "blue"}, False),
        ({"colour": 3}, False),
        ({"count": 0}, False),
        ({"count": "3"}, False),
        ({"pair": [1]}, False),
        ({"view": {"similarity": 1}}, False),
    ],
)
def test_nullable_enums_bounds_and_models_keep_their_meaning(doc: dict[str, Any], valid: bool) -> None:
    compact = output_schema(_Optional)
    assert compact["properties"]["colour"]["enum"] == ["red", "green", None]
    assert Draft202012Validator(_Optional.model_json_schema()).is_valid(doc) is valid
    assert Draft202012Validator(compact).is_valid(doc) is valid
