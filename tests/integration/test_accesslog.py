"""Access log on real ClickHouse (chDB 26.9 in-process): dedup of redelivery, stats, time zones, and
the sink's rows from recall logs."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from clickhouse_connect.driver.client import Client

from hindsight.consumer import Envelope
from hindsight.errors import StoreUnavailableError
from hindsight.ids import access_id
from hindsight.stores.accesslog import AccessLogStore, AccessStat
from schemas import AccessEvent, RecallCandidate, RecallLogEvent, Topic
from services.accesslog.stage import AccessLogStage, access_rows

pytestmark = pytest.mark.integration

_CST = timezone(timedelta(hours=8))


def _store(client: Client) -> AccessLogStore:
    store = AccessLogStore(client, table=f"access_log_{uuid.uuid4().hex[:12]}")
    store.ensure_schema()
    return store


def _row(query_id: str, memory_id: str, rank: int, at: datetime, *, user_id: str = "u1") -> dict[str, Any]:
    return {
        "access_id": access_id(query_id, memory_id),
        "tenant_id": "t1",
        "user_id": user_id,
        "agent_id": "agent-a",
        "memory_id": memory_id,
        "memory_type": "episodic",
        "query_id": query_id,
        "query_text": "推荐个餐厅 [REDACTED:phone]",
        "rank": rank,
        "similarity": 0.82,
        "time_weight": 1.0,
        "final_score": 0.874,
        "accessed_at": at,
    }


def _batch() -> list[dict[str, Any]]:
    t0 = datetime(2026, 3, 2, 9, 30, 15, 123000, tzinfo=_CST)
    return [
        _row("q1", "m-allergy", 1, t0),
        _row("q1", "m-sushi", 2, t0),
        _row("q2", "m-allergy", 1, t0 + timedelta(minutes=5)),
        _row("q3", "m-allergy", 1, t0 + timedelta(days=1)),
        _row("q3", "m-window-seat", 2, t0 + timedelta(days=1), user_id="u2"),
    ]


def test_redelivered_batch_is_counted_once(clickhouse_client: Client) -> None:
    store = _store(clickhouse_client)
    batch = _batch()
    store.insert(batch)
    store.insert(batch)  # the whole batch redelivered
    store.insert(batch[1:3])  # part of it redelivered in a different batch
    store.ensure_schema()  # idempotent
    assert store.count() == 5
    assert store.count("t1") == 5
    assert store.count("other-tenant") == 0
    # Raw rows, bypassing FINAL: the batch token skipped the whole-batch redelivery at insert time,
    # and FINAL collapses the re-batched rows.
    raw = clickhouse_client.query(f"SELECT count() FROM {store.table}").result_rows[0][0]
    assert raw in (5, 7)


def test_access_stats_values(clickhouse_client: Client) -> None:
    store = _store(clickhouse_client)
    batch = _batch()
    store.insert(batch)
    store.insert(list(reversed(batch)))

    day2 = datetime(2026, 3, 3, 1, 30, 15, 123000, tzinfo=UTC)
    assert store.access_stats("t1", "u1") == [
        AccessStat("m-allergy", 3, day2),
        AccessStat("m-sushi", 1, datetime(2026, 3, 2, 1, 30, 15, 123000, tzinfo=UTC)),
    ]
    assert store.access_stats("t1") == [
        AccessStat("m-allergy", 3, day2),
        AccessStat("m-sushi", 1, datetime(2026, 3, 2, 1, 30, 15, 123000, tzinfo=UTC)),
        AccessStat("m-window-seat", 1, day2),
    ]
    assert store.access_stats("t2") == []
    assert store.max_access_count("t1", "u1") == 3
    assert store.max_access_count("t1", "u2") == 1
    assert store.max_access_count("t1", "nobody") == 0


def test_datetime64_round_trips_aware_utc(clickhouse_client: Client) -> None:
    store = _store(clickhouse_client)
    at = datetime(2026, 3, 2, 23, 59, 59, 987000, tzinfo=_CST)  # a different UTC date
    store.insert([_row("q9", "m-tz", 1, at)])
    [stat] = store.access_stats("t1", "u1")
    assert stat.last_accessed_at == at
    assert stat.last_accessed_at.tzinfo is not None
    assert stat.last_accessed_at.utcoffset() == timedelta(0)
    assert stat.last_accessed_at == datetime(2026, 3, 2, 15, 59, 59, 987000, tzinfo=UTC)


def test_rejects_malformed_rows(clickhouse_client: Client) -> None:
    store = _store(clickhouse_client)
    naive = _row("q1", "m1", 1, datetime(2026, 3, 2, 9, 30))  # naive on purpose
    with pytest.raises(ValueError, match="timezone-aware"):
        store.insert([naive])
    missing = _row("q1", "m1", 1, datetime(2026, 3, 2, tzinfo=UTC))
    del missing["rank"]
    with pytest.raises(ValueError, match="lacks columns"):
        store.insert([missing])
    with pytest.raises(ValueError, match="unknown columns"):
        store.insert([{**_row("q1", "m1", 1, datetime(2026, 3, 2, tzinfo=UTC)), "bogus": 1}])
    store.insert([])
    assert store.count() == 0
    with pytest.raises(ValueError, match="identifier"):
        AccessLogStore(clickhouse_client, table="access_log; DROP TABLE x")


def test_missing_table_is_store_unavailable(clickhouse_client: Client) -> None:
    store = AccessLogStore(clickhouse_client, table=f"never_created_{uuid.uuid4().hex[:8]}")
    with pytest.raises(StoreUnavailableError):
        store.count()


def _recall_log(query_id: str, at: datetime) -> RecallLogEvent:
    def candidate(memory_id: str, outcome: str, rank: int | None) -> RecallCandidate:
        returned = outcome == "returned"
        return RecallCandidate.model_validate(
            {
                "memory_id": memory_id,
                "memory_type": "semantic" if memory_id == "m-allergy" else "episodic",
                "outcome": outcome,
                "rank": rank,
                "similarity": 0.9 - 0.1 * (rank or 5),
                "time_weight": 1.0 if returned else None,
                "final_score": 0.8 - 0.1 * (rank or 5) if returned else None,
                "relevance": 0.5 if returned else None,
                "age_days": 3.0,
                "since_access_days": 3.0,
            }
        )

    return RecallLogEvent.model_validate(
        {
            "query_id": query_id,
            "tenant_id": "t1",
            "user_id": "u1",
            "agent_id": "agent-a",
            "query_text": "what am I allergic to",
            "intent": "fact",
            "top_k": 2,
            "similarity_floor": 0.65,
            "time_mode": "step",
            "order": "relevance",
            "token_budget": 2000,
            "candidates": [
                candidate("m-allergy", "returned", 1),
                candidate("m-sushi", "returned", 2),
                candidate("m-seat", "below_top_k", None),
                candidate("m-old", "below_floor", None),
            ],
            "reference_time": at,
            "recalled_at": at,
        }
    )


def _envelope(topic: str, event: Any, offset: int) -> Envelope[Any]:
    return Envelope(event=event, topic=topic, partition=0, offset=offset, key=b"t1:u1", raw=b"")


async def test_the_recall_log_gives_one_row_per_returned_memory_and_meets_access_events_once(
    clickhouse_client: Client,
) -> None:
    store = _store(clickhouse_client)
    stage = AccessLogStage(store)
    at = datetime(2026, 3, 2, 9, 30, 15, 123000, tzinfo=UTC)
    log = _recall_log("q-log", at)
    rows = access_rows(log)
    assert [(r["memory_id"], r["rank"], r["memory_type"]) for r in rows] == [
        ("m-allergy", 1, "semantic"),
        ("m-sushi", 2, "episodic"),
    ]
    assert rows[0]["access_id"] == access_id("q-log", "m-allergy")
    assert rows[0]["accessed_at"] == at
    assert rows[1]["final_score"] == pytest.approx(0.6)
    # an older gateway published the same accesses as AccessEvents: the same access ids, one count
    legacy = AccessEvent.model_validate(_row("q-log", "m-allergy", 1, at))
    await stage.handle(
        [_envelope(Topic.RECALLS, log, 0), _envelope(Topic.ACCESS, legacy, 0)],
        out=None,  # type: ignore[arg-type]
    )
    await stage.handle([_envelope(Topic.RECALLS, log, 0)], out=None)  # type: ignore[arg-type]  # redelivered
    stats = {s.memory_id: s for s in store.access_stats("t1")}
    assert {m: s.access_count for m, s in stats.items()} == {"m-allergy": 1, "m-sushi": 1}
    assert stats["m-sushi"].last_accessed_at == at
    assert stage.parse(Topic.RECALLS, log.model_dump_json().encode()) == log
    assert isinstance(stage.parse(Topic.ACCESS, legacy.model_dump_json().encode()), AccessEvent)
    broken = log.model_dump(mode="json")
    broken["candidates"][1]["final_score"] = None
    with pytest.raises(ValueError, match=r"candidates\[1\] \(m-sushi\) was returned but has no final_score"):
        stage.parse(Topic.RECALLS, json.dumps(broken).encode())
