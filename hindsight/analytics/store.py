"""The analytics tables of :mod:`hindsight.analytics.schema` over a caller-owned ``clickhouse-connect``
client: batch inserts for the sink (``services.accesslog``), reads for the gateway (feedback checks,
the console) and for the tuner.

Exactly-once on at-least-once delivery as for the access log: every table is a ``ReplacingMergeTree``
on a deterministic key and every read uses ``FINAL`` (or ``argMax``), and each insert carries an
``insert_deduplication_token`` derived from the batch's keys. Methods are synchronous and blocking;
async callers use ``asyncio.to_thread``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import ClickHouseError

from hindsight.analytics.queries import views
from hindsight.analytics.schema import SchemaNames, migrate
from hindsight.errors import StoreUnavailableError
from schemas import (
    EpisodeEvent,
    Memory,
    MemoryStoredEvent,
    RecallFeedbackEvent,
    RecallLogEvent,
)

_RECALL_COLUMNS = (
    "query_id",
    "tenant_id",
    "user_id",
    "agent_id",
    "query_text",
    "intent",
    "entities",
    "window_start",
    "window_end",
    "wants_recent",
    "top_k",
    "similarity_floor",
    "time_mode",
    "result_order",
    "rerank",
    "token_budget",
    "tokens",
    "truncated",
    "candidates",
    "returned",
    "timings_ms",
    "reference_time",
    "recalled_at",
)
_CANDIDATE_COLUMNS = (
    "query_id",
    "tenant_id",
    "user_id",
    "memory_id",
    "memory_type",
    "kind",
    "outcome",
    "rank",
    "similarity",
    "dense_rank",
    "lexical_rank",
    "lexical_score",
    "rerank_score",
    "relevance",
    "time_weight",
    "final_score",
    "in_time_window",
    "age_days",
    "since_access_days",
    "access_count",
    "importance",
    "confidence",
    "status",
    "version",
    "reference_time",
    "recalled_at",
)
_FEEDBACK_COLUMNS = (
    "feedback_id",
    "query_id",
    "tenant_id",
    "user_id",
    "agent_id",
    "memory_id",
    "label",
    "given_at",
)
_INVENTORY_COLUMNS = (
    "memory_id",
    "tenant_id",
    "user_id",
    "agent_id",
    "session_id",
    "memory_type",
    "kind",
    "source",
    "importance",
    "confidence",
    "status",
    "version",
    "parent_id",
    "created_at",
    "stored_at",
)


def _token(kind: str, keys: Iterable[str]) -> str:
    digest = hashlib.sha256()
    for key in sorted(keys):
        digest.update(key.encode("utf-8"))
        digest.update(b"\0")
    return f"{kind}-{digest.hexdigest()}"


def recall_rows(event: RecallLogEvent) -> tuple[list[Any], list[list[Any]]]:
    """The ``recall_log`` row and the ``recall_candidates`` rows of one recall (column order above)."""
    returned = sum(1 for c in event.candidates if c.outcome == "returned")
    log = [
        event.query_id,
        event.tenant_id,
        event.user_id,
        event.agent_id,
        event.query_text,
        event.intent,
        list(event.entities),
        event.window_start,
        event.window_end,
        event.wants_recent,
        event.top_k,
        event.similarity_floor,
        event.time_mode,
        event.order,
        event.rerank,
        event.token_budget,
        event.tokens,
        event.truncated,
        len(event.candidates),
        returned,
        dict(event.timings_ms),
        event.reference_time,
        event.recalled_at,
    ]
    candidates = [
        [
            event.query_id,
            event.tenant_id,
            event.user_id,
            c.memory_id,
            c.memory_type,
            c.kind,
            c.outcome,
            c.rank,
            c.similarity,
            c.dense_rank,
            c.lexical_rank,
            c.lexical_score,
            c.rerank_score,
            c.relevance,
            c.time_weight,
            c.final_score,
            c.in_time_window,
            c.age_days,
            c.since_access_days,
            c.access_count,
            c.importance,
            c.confidence,
            c.status,
            c.version,
            event.reference_time,
            event.recalled_at,
        ]
        for c in event.candidates
    ]
    return log, candidates


def inventory_row(memory: Memory) -> list[Any]:
    """The ``memory_inventory`` row of a stored memory."""
    return [
        memory.id,
        memory.tenant_id,
        memory.user_id,
        memory.agent_id,
        memory.session_id,
        memory.type,
        memory.kind,
        memory.source,
        memory.importance,
        memory.confidence,
        memory.status,
        memory.version,
        memory.parent_id or "",
        memory.created_at,
        memory.stored_at,
    ]


@dataclass(frozen=True)
class RecallOwner:
    """Who ran a recall and what it returned (feedback is checked against it)."""

    user_id: str
    returned: frozenset[str]


class AnalyticsStore:
    """Recall log, candidates, feedback and inventory tables (module doc).

    Args:
        client: a ``clickhouse_connect`` client (HTTP or chDB), owned by the caller.
        names: database, access log table and TTLs (:class:`~hindsight.analytics.schema.SchemaNames`).
    """

    def __init__(self, client: Client, names: SchemaNames) -> None:
        self.client = client
        self.names = names

    def migrate(self) -> list[int]:
        """Apply missing schema migrations and re-create the views; returns the versions applied.

        Raises:
            StoreUnavailableError: ClickHouse failed.
            ConfigurationError: the database is at a newer schema version than this release.
        """
        return migrate(self.client, self.names, views)

    # -- writes (the sink) -----------------------------------------------------------------------

    def _insert(self, table: str, columns: Sequence[str], rows: list[list[Any]], token: str) -> None:
        if not rows:
            return
        try:
            self.client.insert(
                f"{self.names.database}.{table}",
                rows,
                column_names=list(columns),
                settings={"insert_deduplication_token": token, "async_insert": 0},
            )
        except ClickHouseError as exc:
            raise StoreUnavailableError(f"insert into {table} failed: {exc}") from exc

    def insert_recalls(self, events: Sequence[RecallLogEvent]) -> None:
        """Insert recalls (``recall_log``) and their candidates (``recall_candidates``); durable on return.

        Raises:
            StoreUnavailableError: ClickHouse failed (retry: redelivery is deduplicated).
        """
        logs: list[list[Any]] = []
        candidates: list[list[Any]] = []
        for event in events:
            log, rows = recall_rows(event)
            logs.append(log)
            candidates.extend(rows)
        ids = [f"{e.tenant_id}/{e.query_id}" for e in events]
        self._insert("recall_log", _RECALL_COLUMNS, logs, _token("recall", ids))
        self._insert("recall_candidates", _CANDIDATE_COLUMNS, candidates, _token("candidates", ids))

    def insert_feedback(self, events: Sequence[RecallFeedbackEvent]) -> None:
        """Insert feedback labels (latest ``given_at`` per (query, memory) wins when read).

        Raises:
            StoreUnavailableError: ClickHouse failed.
        """
        rows = [[getattr(e, name) for name in _FEEDBACK_COLUMNS] for e in events]
        keys = [f"{e.feedback_id}/{e.label}/{e.given_at.isoformat()}" for e in events]
        self._insert("recall_feedback", _FEEDBACK_COLUMNS, rows, _token("feedback", keys))

    def insert_memories(self, events: Sequence[MemoryStoredEvent | EpisodeEvent]) -> None:
        """Record stored memories and episodes in ``memory_inventory`` (type, importance, times).

        Raises:
            StoreUnavailableError: ClickHouse failed.
        """
        memories = [e.memory if isinstance(e, MemoryStoredEvent) else e.episode for e in events]
        unique = list({m.id: m for m in memories}.values())
        keys = [f"{m.id}/{m.status}/{m.version}/{m.importance}" for m in unique]
        self._insert(
            "memory_inventory",
            _INVENTORY_COLUMNS,
            [inventory_row(m) for m in unique],
            _token("inventory", keys),
        )

    # -- reads -----------------------------------------------------------------------------------

    def query(self, sql: str, parameters: Mapping[str, Any] | None = None) -> list[tuple[Any, ...]]:
        """Rows of ``sql`` (tz-aware datetimes).

        Raises:
            StoreUnavailableError: ClickHouse failed or refused the query.
        """
        try:
            result = self.client.query(sql, parameters=dict(parameters or {}), tz_mode="aware")
        except ClickHouseError as exc:
            raise StoreUnavailableError(f"analytics query failed: {exc}") from exc
        return [tuple(row) for row in result.result_rows]

    def command(self, sql: str, parameters: Mapping[str, Any] | None = None) -> None:
        """Run a statement (DDL, ``CREATE TABLE ... AS SELECT``).

        Raises:
            StoreUnavailableError: ClickHouse failed or refused it.
        """
        try:
            self.client.command(sql, parameters=dict(parameters or {}))
        except ClickHouseError as exc:
            raise StoreUnavailableError(f"analytics statement failed: {exc}") from exc

    def columns(self, sql: str, parameters: Mapping[str, Any] | None = None) -> dict[str, list[Any]]:
        """``{column: values}`` of ``sql`` (column-oriented, for numpy).

        Raises:
            StoreUnavailableError: ClickHouse failed or refused the query.
        """
        try:
            result = self.client.query(sql, parameters=dict(parameters or {}), tz_mode="aware")
        except ClickHouseError as exc:
            raise StoreUnavailableError(f"analytics query failed: {exc}") from exc
        return {
            name: list(values)
            for name, values in zip(result.column_names, result.result_columns, strict=True)
        }

    def recall_owner(self, tenant_id: str, query_id: str) -> RecallOwner | None:
        """The user and returned memories of recall ``query_id`` of ``tenant_id``; ``None`` when this
        tenant has no such recall logged (another tenant's query id gives ``None`` too).

        Raises:
            StoreUnavailableError: ClickHouse failed.
        """
        rows = self.query(
            f"SELECT user_id, memory_id, outcome FROM {self.names.table('recall_candidates')} FINAL "
            "WHERE tenant_id = {tenant:String} AND query_id = {query:String}",
            {"tenant": tenant_id, "query": query_id},
        )
        if not rows:
            log = self.query(
                f"SELECT user_id FROM {self.names.table('recall_log')} FINAL "
                "WHERE tenant_id = {tenant:String} AND query_id = {query:String} LIMIT 1",
                {"tenant": tenant_id, "query": query_id},
            )
            return RecallOwner(str(log[0][0]), frozenset()) if log else None
        returned = frozenset(str(m) for _, m, outcome in rows if outcome == "returned")
        return RecallOwner(str(rows[0][0]), returned)

    def recent_recalls(self, tenant_id: str, user_id: str | None, limit: int = 50) -> list[dict[str, Any]]:
        """The latest recalls of a tenant (optionally one user), newest first, with their labels.

        Raises:
            StoreUnavailableError: ClickHouse failed.
        """
        user = "AND user_id = {user:String}" if user_id else ""
        rows = self.query(
            f"""SELECT query_id, user_id, agent_id, query_text, intent, returned, candidates,
    timings_ms['total'] AS total_ms, recalled_at
FROM {self.names.table("recall_log")} FINAL
WHERE tenant_id = {{tenant:String}} {user}
ORDER BY recalled_at DESC LIMIT {{limit:UInt32}}""",
            {"tenant": tenant_id, "user": user_id or "", "limit": limit},
        )
        keys = (
            "query_id",
            "user_id",
            "agent_id",
            "query_text",
            "intent",
            "returned",
            "candidates",
            "total_ms",
            "recalled_at",
        )
        return [dict(zip(keys, row, strict=True)) for row in rows]

    def recall_detail(self, tenant_id: str, query_id: str) -> dict[str, Any] | None:
        """One logged recall of ``tenant_id`` with every candidate and its label; ``None`` if unknown.

        Raises:
            StoreUnavailableError: ClickHouse failed.
        """
        log = self.columns(
            f"SELECT * FROM {self.names.table('recall_log')} FINAL "
            "WHERE tenant_id = {tenant:String} AND query_id = {query:String} LIMIT 1",
            {"tenant": tenant_id, "query": query_id},
        )
        if not log or not log.get("query_id"):
            return None
        detail = {name: values[0] for name, values in log.items()}
        cand = self.columns(
            f"""SELECT c.memory_id AS memory_id, c.memory_type AS memory_type, c.outcome AS outcome,
    c.rank AS rank, c.similarity AS similarity, c.dense_rank AS dense_rank, c.lexical_rank AS lexical_rank,
    c.rerank_score AS rerank_score, c.relevance AS relevance, c.time_weight AS time_weight,
    c.final_score AS final_score, c.age_days AS age_days, f.label AS label
FROM {self.names.table("recall_candidates")} AS c FINAL
LEFT JOIN (SELECT memory_id, argMax(label, given_at) AS label FROM {self.names.table("recall_feedback")}
           WHERE tenant_id = {{tenant:String}} AND query_id = {{query:String}} GROUP BY memory_id) AS f
    ON c.memory_id = f.memory_id
WHERE c.tenant_id = {{tenant:String}} AND c.query_id = {{query:String}}
ORDER BY isNull(c.rank), c.rank, c.final_score DESC, c.similarity DESC""",
            {"tenant": tenant_id, "query": query_id},
        )
        names = list(cand)
        count = len(cand[names[0]]) if names else 0
        detail["candidates"] = [{n: cand[n][i] for n in names} for i in range(count)]
        return detail

    def memory_accesses(self, tenant_id: str, memory_id: str, limit: int = 50) -> list[dict[str, Any]]:
        """Recalls that considered ``memory_id`` (newest first) with outcome, rank, scores and label.

        Raises:
            StoreUnavailableError: ClickHouse failed.
        """
        rows = self.query(
            f"""SELECT c.query_id, c.outcome, c.rank, c.similarity, c.final_score, c.recalled_at, f.label
FROM {self.names.table("recall_candidates")} AS c FINAL
LEFT JOIN (SELECT query_id, argMax(label, given_at) AS label FROM {self.names.table("recall_feedback")}
           WHERE tenant_id = {{tenant:String}} AND memory_id = {{memory:String}} GROUP BY query_id) AS f
    ON c.query_id = f.query_id
WHERE c.tenant_id = {{tenant:String}} AND c.memory_id = {{memory:String}}
ORDER BY c.recalled_at DESC LIMIT {{limit:UInt32}}""",
            {"tenant": tenant_id, "memory": memory_id, "limit": limit},
        )
        keys = ("query_id", "outcome", "rank", "similarity", "final_score", "recalled_at", "label")
        return [dict(zip(keys, row, strict=True)) for row in rows]

    def users(self, tenant_id: str, limit: int = 500) -> list[tuple[str, int, datetime | None]]:
        """``(user_id, stored memories, last stored)`` of a tenant from the inventory, busiest first.

        Raises:
            StoreUnavailableError: ClickHouse failed.
        """
        rows = self.query(
            "SELECT user_id, count() AS n, max(stored_at) "
            f"FROM {self.names.table('memory_inventory')} FINAL WHERE tenant_id = {{tenant:String}} "
            "GROUP BY user_id ORDER BY n DESC, user_id LIMIT {limit:UInt32}",
            {"tenant": tenant_id, "limit": limit},
        )
        return [(str(u), int(n), last) for u, n, last in rows]
