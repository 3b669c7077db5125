"""MemoryFilter: validation, compilation into store-neutral conditions, and what each adapter's
translation lets through (in-process engines only: qdrant-edge in tmp_path, qdrant-client ``:memory:``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
import qdrant_edge as qe
from qdrant_client import QdrantClient, models

from hindsight.stores.vector import (
    AnyOf,
    FilterSpec,
    FloatRange,
    MemoryFilter,
    VectorRecord,
    VectorStore,
    compile_filter,
)
from hindsight.stores.vector_edge import EdgeVectorStore, edge_filter
from hindsight.stores.vector_qdrant import QdrantVectorStore, qdrant_filter

pytestmark = [
    pytest.mark.unit,
    # qdrant-client local mode warns once that payload indexes have no effect there.
    pytest.mark.filterwarnings("ignore:Payload indexes have no effect in the local Qdrant:UserWarning"),
]

DIM = 8
T0 = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)


def _vector(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def _record(seed: int, **payload: object) -> VectorRecord:
    base: dict[str, object] = {
        "tenant_id": "t1",
        "user_id": "u1",
        "scope": "global",
        "type": "episodic",
        "status": "active",
        "session_id": "s1",
        "tags": [],
        "created_ts": T0.timestamp(),
    }
    base.update(payload)
    return VectorRecord(id=str(uuid.UUID(int=seed + 1)), vector=_vector(seed), payload=base)


# --- validation ------------------------------------------------------------------------------


def test_filter_requires_a_tenant() -> None:
    with pytest.raises(ValueError, match="tenant_id"):
        MemoryFilter(tenant_id="")


def test_filter_rejects_a_single_str_where_a_sequence_is_expected() -> None:
    with pytest.raises(TypeError, match="scopes"):
        MemoryFilter(tenant_id="t1", scopes="global")


def test_filter_rejects_naive_time_bounds() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        MemoryFilter(tenant_id="t1", created_from=datetime(2026, 3, 2, 9, 30))


def test_filter_stores_sequences_as_tuples_and_defaults_to_active() -> None:
    flt = MemoryFilter(tenant_id="t1", scopes=["global", "agent:a1"])
    assert flt.scopes == ("global", "agent:a1")
    assert flt.statuses == ("active",)


# --- compilation -----------------------------------------------------------------------------


def test_minimal_filter_compiles_to_tenant_and_active_status() -> None:
    assert compile_filter(MemoryFilter(tenant_id="t1")) == FilterSpec(
        must=(AnyOf("tenant_id", ("t1",)), AnyOf("status", ("active",)))
    )


def test_every_field_compiles_to_one_condition() -> None:
    flt = MemoryFilter(
        tenant_id="t1",
        user_id="u1",
        scopes=["global", "agent:a1"],
        types=["episodic"],
        statuses=["active", "superseded"],
        session_id="s1",
        tags_any=["travel"],
        tags_exclude=["health"],
        created_from=T0,
        created_to=T0 + timedelta(days=7),
    )
    assert compile_filter(flt) == FilterSpec(
        must=(
            AnyOf("tenant_id", ("t1",)),
            AnyOf("user_id", ("u1",)),
            AnyOf("session_id", ("s1",)),
            AnyOf("scope", ("global", "agent:a1")),
            AnyOf("type", ("episodic",)),
            AnyOf("status", ("active", "superseded")),
            AnyOf("tags", ("travel",)),
            FloatRange("created_ts", gte=T0.timestamp(), lt=(T0 + timedelta(days=7)).timestamp()),
        ),
        must_not=(AnyOf("tags", ("health",)),),
    )


def test_statuses_none_means_any_status_and_empty_exclude_means_nothing_excluded() -> None:
    spec = compile_filter(MemoryFilter(tenant_id="t1", statuses=None, tags_exclude=[]))
    assert spec == FilterSpec(must=(AnyOf("tenant_id", ("t1",)),))


def test_time_bounds_in_another_offset_compile_to_the_same_instant() -> None:
    beijing = T0.astimezone(timezone(timedelta(hours=8)))
    assert compile_filter(MemoryFilter(tenant_id="t1", created_from=beijing)) == compile_filter(
        MemoryFilter(tenant_id="t1", created_from=T0)
    )


def test_qdrant_translation_uses_match_value_for_one_value_and_match_any_for_several() -> None:
    spec = compile_filter(
        MemoryFilter(tenant_id="t1", scopes=["global", "agent:a1"], tags_exclude=["health"])
    )
    assert qdrant_filter(spec) == models.Filter(
        must=[
            models.FieldCondition(key="tenant_id", match=models.MatchValue(value="t1")),
            models.FieldCondition(key="scope", match=models.MatchAny(any=["global", "agent:a1"])),
            models.FieldCondition(key="status", match=models.MatchValue(value="active")),
        ],
        must_not=[models.FieldCondition(key="tags", match=models.MatchValue(value="health"))],
    )


def test_edge_translation_has_the_same_shape() -> None:
    spec = compile_filter(MemoryFilter(tenant_id="t1", created_from=T0, tags_exclude=["a", "b"]))
    translated = edge_filter(spec)
    must = translated.must or []
    must_not = translated.must_not or []
    assert [c.key for c in must if isinstance(c, qe.FieldCondition)] == ["tenant_id", "status", "created_ts"]
    assert [c.key for c in must_not if isinstance(c, qe.FieldCondition)] == ["tags"]
    time_range = must[2].range if isinstance(must[2], qe.FieldCondition) else None
    assert isinstance(time_range, qe.RangeFloat)
    assert (time_range.gte, time_range.lt) == (T0.timestamp(), None)


# --- semantics on both engines -----------------------------------------------------------------


@pytest.fixture(params=["edge", "qdrant-local"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorStore]:
    opened: VectorStore
    if request.param == "edge":
        opened = EdgeVectorStore(tmp_path / "edge", DIM)
    else:
        opened = QdrantVectorStore(QdrantClient(":memory:"), "memories", DIM)
    yield opened
    opened.close()


def test_user_filter_never_returns_another_users_memory(store: VectorStore) -> None:
    mine, theirs = _record(1, user_id="u1"), _record(2, user_id="u2")
    other_tenant = _record(3, tenant_id="t2", user_id="u1")
    store.upsert([mine, theirs, other_tenant])
    flt = MemoryFilter(tenant_id="t1", user_id="u1")
    # Query with u2's own vector: the best match overall must still not come back.
    assert theirs.vector is not None
    assert [h.id for h in store.search(theirs.vector, flt, limit=10)] == [mine.id]
    assert store.count(flt) == 1
    page, _ = store.scroll(flt, limit=10)
    assert [r.id for r in page] == [mine.id]


def test_created_from_is_inclusive_and_created_to_exclusive(store: VectorStore) -> None:
    start, end = T0, T0 + timedelta(hours=1)
    records = {
        "before": _record(1, created_ts=start.timestamp() - 0.001),
        "at_start": _record(2, created_ts=start.timestamp()),
        "just_before_end": _record(3, created_ts=end.timestamp() - 0.001),
        "at_end": _record(4, created_ts=end.timestamp()),
    }
    store.upsert(list(records.values()))
    # Bounds given in the user's own offset select the same instants.
    offset = timezone(timedelta(hours=8))
    flt = MemoryFilter(
        tenant_id="t1", created_from=start.astimezone(offset), created_to=end.astimezone(offset)
    )
    found = {h.id for h in store.search(_vector(0), flt, limit=10)}
    assert found == {records["at_start"].id, records["just_before_end"].id}
    assert store.count(flt) == 2


def test_tags_any_and_tags_exclude_filter_on_tag_arrays(store: VectorStore) -> None:
    travel = _record(1, tags=["travel", "food"])
    health = _record(2, tags=["health", "food"])
    untagged = _record(3, tags=[])
    store.upsert([travel, health, untagged])
    assert {h.id for h in store.search(_vector(0), MemoryFilter("t1", tags_any=["food"]), 10)} == {
        travel.id,
        health.id,
    }
    assert {h.id for h in store.search(_vector(0), MemoryFilter("t1", tags_exclude=["health"]), 10)} == {
        travel.id,
        untagged.id,
    }


def test_empty_allow_list_matches_nothing(store: VectorStore) -> None:
    store.upsert([_record(1), _record(2, scope="agent:a1")])
    assert store.count(MemoryFilter("t1", scopes=[])) == 0
    assert store.search(_vector(0), MemoryFilter("t1", scopes=[]), 10) == []


def test_default_filter_hides_non_active_memories(store: VectorStore) -> None:
    active, expired = _record(1), _record(2, status="expired")
    store.upsert([active, expired])
    assert store.count(MemoryFilter("t1")) == 1
    assert store.count(MemoryFilter("t1", statuses=None)) == 2
    assert store.count(MemoryFilter("t1", statuses=["expired"])) == 1
