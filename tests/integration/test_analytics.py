"""The analytics tables on real ClickHouse (chDB in-process): versioned migrations, the sink stage's
inserts (redelivery stored once), feedback idempotent per (query, memory) and tenant-isolated, and the
tuning views answering over them."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from clickhouse_connect.driver.client import Client

from hindsight.analytics.queries import TuningSql, views
from hindsight.analytics.schema import MIGRATIONS, SchemaNames, applied_versions, migrate, render_all
from hindsight.analytics.store import AnalyticsStore
from hindsight.consumer import Envelope
from hindsight.errors import ConfigurationError
from hindsight.ids import stable_id
from hindsight.publisher import EventPublisher
from schemas import (
    Memory,
    MemoryStoredEvent,
    Provenance,
    RecallCandidate,
    RecallFeedbackEvent,
    RecallLogEvent,
    Topic,
)
from services.accesslog.analytics import AnalyticsStage

pytestmark = pytest.mark.integration

T0 = (datetime.now(UTC) - timedelta(days=10)).replace(microsecond=0)
"""Within every table's TTL: ClickHouse drops rows past their TTL soon after insert."""


@pytest.fixture
def store(clickhouse_client: Client) -> AnalyticsStore:
    names = SchemaNames(f"analytics_{uuid.uuid4().hex[:10]}")
    analytics = AnalyticsStore(clickhouse_client, names)
    analytics.migrate()
    return analytics


def _candidate(memory_id: str, outcome: str, similarity: float, rank: int | None = None) -> RecallCandidate:
    scored = outcome != "below_floor"
    return RecallCandidate(
        memory_id=memory_id,
        memory_type="episodic",
        outcome=outcome,  # type: ignore[arg-type]
        rank=rank,
        similarity=similarity,
        dense_rank=1,
        relevance=0.8 if scored else None,
        time_weight=1.0 if scored else None,
        final_score=0.8 if scored else None,
        age_days=3.0,
        since_access_days=3.0,
        importance=0.5,
        confidence=0.6,
    )


def _recall(tenant: str, query_id: str, at: datetime, candidates: list[RecallCandidate]) -> RecallLogEvent:
    return RecallLogEvent(
        query_id=query_id,
        tenant_id=tenant,
        user_id="u1",
        agent_id="agent",
        query_text="call me at [REDACTED:phone]",
        intent="question",
        top_k=5,
        similarity_floor=0.65,
        time_mode="step",
        order="relevance",
        token_budget=2000,
        candidates=tuple(candidates),
        timings_ms={"embed": 9.5, "total": 20.0},
        reference_time=at,
        recalled_at=at,
    )


def _feedback(tenant: str, query_id: str, memory_id: str, label: str, at: datetime) -> RecallFeedbackEvent:
    return RecallFeedbackEvent(
        feedback_id=stable_id("feedback", tenant, query_id, memory_id),
        query_id=query_id,
        tenant_id=tenant,
        user_id="u1",
        agent_id="agent",
        memory_id=memory_id,
        label=label,  # type: ignore[arg-type]
        given_at=at,
    )


def _envelopes(events: list[Any], topic: str) -> list[Envelope[Any]]:
    return [Envelope(e, topic, 0, i, b"t:u1", b"{}") for i, e in enumerate(events)]


def test_migrations_apply_once_and_twice_is_a_no_op(clickhouse_client: Client) -> None:
    names = SchemaNames(f"migr_{uuid.uuid4().hex[:10]}")
    first = migrate(clickhouse_client, names, views)
    second = migrate(clickhouse_client, names, views)
    assert first == [m.version for m in MIGRATIONS]
    assert second == []
    assert applied_versions(clickhouse_client, names) == [m.version for m in MIGRATIONS]
    tables = {
        r[0]
        for r in clickhouse_client.query(
            "SELECT name FROM system.tables WHERE database = {db:String}", parameters={"db": names.database}
        ).result_rows
    }
    assert {"access_log", "recall_log", "recall_candidates", "recall_feedback", "memory_inventory"} <= tables
    assert {"v_floor_curve", "v_reuse_gaps", "v_recall_latency"} <= tables
    ddl = dict(
        clickhouse_client.query(
            "SELECT name, create_table_query FROM system.tables WHERE database = {db:String}",
            parameters={"db": names.database},
        ).result_rows
    )
    assert "TTL toDateTime(recalled_at) + toIntervalDay(90)" in ddl["recall_candidates"]
    assert "toIntervalDay(365)" in ddl["access_log"]


def test_a_current_database_still_gets_a_newly_configured_access_log_table(clickhouse_client: Client) -> None:
    # HINDSIGHT_CLICKHOUSE_TABLE names the access-log table: a second configuration over a database
    # whose ledger is current must still find its table (two stacks over one chDB once lost every
    # access event of the second to "unknown table" retries)
    database = f"migr_{uuid.uuid4().hex[:10]}"
    migrate(clickhouse_client, SchemaNames(database))
    other = SchemaNames(database, f"access_log_{uuid.uuid4().hex[:6]}")
    assert migrate(clickhouse_client, other) == []
    ddl = clickhouse_client.query(
        "SELECT create_table_query FROM system.tables WHERE database = {db:String} AND name = {t:String}",
        parameters={"db": database, "t": other.access_log},
    ).result_rows
    assert len(ddl) == 1
    assert "toIntervalDay(365)" in ddl[0][0]  # created at the current schema (its TTL step too)


def test_a_newer_schema_than_this_release_is_refused(clickhouse_client: Client) -> None:
    names = SchemaNames(f"migr_{uuid.uuid4().hex[:10]}")
    migrate(clickhouse_client, names)
    clickhouse_client.insert(
        f"{names.database}.schema_migrations", [[999, "from the future"]], column_names=["version", "name"]
    )
    with pytest.raises(ConfigurationError, match="999"):
        migrate(clickhouse_client, names)


def test_the_rendered_script_matches_the_shipped_infra_file() -> None:
    from pathlib import Path  # noqa: PLC0415

    shipped = Path(__file__).resolve().parents[2] / "infra" / "clickhouse" / "schema.sql"
    assert shipped.read_text(encoding="utf-8") == render_all(SchemaNames("hindsight"), views), (
        "infra/clickhouse/schema.sql is stale: run `uv run hindsight tune sql`"
    )


async def test_sink_stores_each_row_once_and_feedback_is_idempotent_per_query_and_memory(
    store: AnalyticsStore,
) -> None:
    stage = AnalyticsStage(store)
    recall = _recall(
        "t1",
        "q1",
        T0,
        [
            _candidate("m1", "returned", 0.83, 1),
            _candidate("m2", "returned", 0.78, 2),
            _candidate("m3", "below_top_k", 0.74),
            _candidate("m4", "below_floor", 0.61),
        ],
    )
    feedback = [_feedback("t1", "q1", "m1", "used", T0 + timedelta(seconds=5))]
    out = EventPublisher.__new__(EventPublisher)  # the stage publishes nothing
    for _ in range(2):  # redelivered batch
        await stage.handle(_envelopes([recall], Topic.RECALLS), out)
        await stage.handle(_envelopes(feedback, Topic.FEEDBACK), out)
    await stage.handle(_envelopes(feedback, Topic.FEEDBACK), out)  # the agent sent it again

    db = store.names.database
    assert store.query(f"SELECT count() FROM {db}.recall_log FINAL")[0][0] == 1
    assert store.query(f"SELECT count() FROM {db}.recall_candidates FINAL")[0][0] == 4
    assert store.query(f"SELECT count() FROM {db}.recall_feedback FINAL")[0][0] == 1
    row = store.query(f"SELECT query_text, timings_ms['embed'], candidates, returned FROM {db}.recall_log")[0]
    assert row == ("call me at [REDACTED:phone]", pytest.approx(9.5), 4, 2)

    # a later label for the same memory replaces the earlier one
    await stage.handle(
        _envelopes([_feedback("t1", "q1", "m1", "wrong", T0 + timedelta(minutes=1))], Topic.FEEDBACK), out
    )
    labels = {row[2]: row[3] for row in store.query(TuningSql(store.names).latest_feedback())}
    assert labels == {"m1": "wrong"}
    assert store.query(f"SELECT count() FROM {db}.recall_feedback FINAL")[0][0] == 1

    owner = store.recall_owner("t1", "q1")
    assert owner is not None
    assert owner.user_id == "u1"
    assert owner.returned == frozenset({"m1", "m2"})
    assert store.recall_owner("t2", "q1") is None  # another tenant never sees it
    assert store.recall_owner("t1", "nope") is None


async def test_labels_views_and_tuning_queries_answer_over_the_sink(store: AnalyticsStore) -> None:
    stage = AnalyticsStage(store)
    out = EventPublisher.__new__(EventPublisher)
    recalls, feedback = [], []
    for i in range(6):
        qid = f"q{i}"
        at = T0 + timedelta(days=i)
        recalls.append(
            _recall(
                "t1",
                qid,
                at,
                [_candidate("m-used", "returned", 0.85, 1), _candidate(f"m-other-{i}", "returned", 0.72, 2)],
            )
        )
        feedback.append(_feedback("t1", qid, "m-used", "used", at))
    recalls.append(_recall("t2", "q-other-tenant", T0, [_candidate("m-x", "returned", 0.9, 1)]))
    memory = Memory(
        id="m-used",
        tenant_id="t1",
        user_id="u1",
        agent_id="a",
        session_id="s",
        type="episodic",
        content="x",
        source="user",
        importance=0.6,
        confidence=0.6,
        created_at=T0 - timedelta(days=2),
        stored_at=T0 - timedelta(days=2),
        last_accessed_at=T0 - timedelta(days=2),
        provenance=Provenance(),
    )
    await stage.handle(_envelopes(recalls, Topic.RECALLS), out)
    await stage.handle(_envelopes(feedback, Topic.FEEDBACK), out)
    await stage.handle(
        _envelopes([MemoryStoredEvent(memory=memory, candidate_id="m-used")], Topic.STORED), out
    )

    db = store.names.database
    curve = store.query(f"SELECT threshold, recall, precision FROM {db}.v_floor_curve ORDER BY threshold")
    assert [round(r[0], 3) for r in curve] == [0.72, 0.85]
    assert curve[0][1:] == (1.0, 0.5)  # floor 0.72 keeps every used memory, half of what it keeps is used
    assert curve[1][1:] == (1.0, 1.0)

    sql = TuningSql(store.names, tenant="t1")
    summary = store.columns(sql.summary(), {"tenant": "t1"})
    assert summary["recalls"] == [6]
    assert summary["returned"] == [12]
    assert summary["recalls_with_feedback"] == [6]
    assert summary["positive_labels"] == [6]
    assert summary["negative_labels"] == [6]
    assert summary["uses"] == [6]
    # m-used: born 2 days before the first use, then used daily; the last gap is censored at the end
    gaps = store.query(sql.reuse_gaps(), {"tenant": "t1"})
    by_bin = {(int(b), int(c)): (int(n), round(float(s), 3)) for _, b, c, n, s in gaps}
    assert by_bin == {(2, 0): (1, 2.0), (1, 0): (5, 5.0), (0, 1): (1, 0.0)}
    # cuts are fractions of the user's recall window (days 0..5): 0.5 -> day 2.5 looking up to day 3
    # (0.6; no use in [2.5, 3)), 0.6 -> day 3 looking to the end
    replay = store.columns(sql.replay(), {"tenant": "t1", "cuts": [0.5, 0.6], "horizons": [0.6, 2.0]})
    assert replay["cut_day"][0] == pytest.approx([_days(T0 + timedelta(days=d)) for d in (2.5, 3.0)])
    assert replay["uses_before"] == [[3, 3]]
    assert replay["accesses_before"] == [[3, 3]]  # every use was a return too
    assert replay["used_after"] == [[False, True]]
    assert replay["last_access_before"][0][1] == pytest.approx(_days(T0 + timedelta(days=2)), abs=1e-6)
    assert store.users("t1")[0][:2] == ("u1", 1)


def _days(at: datetime) -> float:
    return at.timestamp() / 86_400.0
