"""ClickHouse access log: one row per memory returned by a recall (DESIGN.md sections 3, 4).

The gateway publishes one log event per recall to ``memory.recalls.v1``; the access-log consumer
inserts a row per memory it returned here, in batches (and a row per :class:`~schemas.AccessEvent`
of ``memory.access.v1``, for producers that publish those). Operators tune decay and thresholds
from this table, and the evict job reads ``access_count`` / ``last_accessed_at`` /
``max_access_count`` for the frequency and recency terms of the eviction score (DESIGN.md section 4).

Exactly-once on top of at-least-once delivery, in two layers:

1. ``ReplacingMergeTree`` ordered by ``(tenant_id, user_id, accessed_at, access_id)``: a redelivered
   event (same deterministic ``access_id`` and ``accessed_at``) collapses into one row when parts
   merge, and every read here uses ``FINAL``, so counts are exact before any merge.
2. Each insert carries an ``insert_deduplication_token`` derived from the batch's access ids, and the
   table keeps a ``non_replicated_deduplication_window``: a batch redelivered whole is skipped at
   insert time (saves writes; correctness does not depend on it).

The client is a ``clickhouse-connect`` client created by the caller: an HTTP ClickHouse in
production, or chDB in-process for the embedded default and tests
(``clickhouse_connect.get_client(dsn="chdb:///abs/dir")``). Every method is synchronous and
blocking; async callers run them with ``asyncio.to_thread``. chDB allows one data directory per
process (a second path raises) and serialises calls on its handle: create one client per process and
share it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import ClickHouseError

from hindsight.errors import StoreUnavailableError

# name -> ClickHouse type, in table order. Every insert row must give all of them.
REQUIRED_COLUMNS: dict[str, str] = {
    "access_id": "String",
    "tenant_id": "String",
    "user_id": "String",
    "agent_id": "String",
    "memory_id": "String",
    "memory_type": "LowCardinality(String)",
    "query_id": "String",
    "query_text": "String",
    "rank": "UInt16",
    "similarity": "Float32",
    "time_weight": "Float32",
    "final_score": "Float32",
    "accessed_at": "DateTime64(3, 'UTC')",
}
"""Columns every access row carries; ``query_text`` must already be redacted (DESIGN.md section 6)."""

OPTIONAL_COLUMNS: dict[str, tuple[str, Any]] = {
    "session_id": ("String", ""),
    "scope": ("LowCardinality(String)", ""),
}
"""Columns a row may omit: name -> (ClickHouse type, value used when omitted)."""

_TABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")
_DEDUP_WINDOW_BLOCKS = 1000
_INSERT_COLUMNS: tuple[str, ...] = (*REQUIRED_COLUMNS, *OPTIONAL_COLUMNS)
_INSERT_TYPES: tuple[str, ...] = (
    *REQUIRED_COLUMNS.values(),
    *(ch_type for ch_type, _ in OPTIONAL_COLUMNS.values()),
)


class AccessStat(NamedTuple):
    """Deduplicated access statistics of one memory."""

    memory_id: str
    access_count: int
    last_accessed_at: datetime  # timezone-aware, UTC


def _quote_table(table: str) -> str:
    if not _TABLE_NAME.fullmatch(table):
        raise ValueError(f"table must be [db.]identifier (letters, digits, _), got {table!r}")
    return ".".join(f"`{part}`" for part in table.split("."))


def _batch_token(rows: Sequence[Mapping[str, Any]]) -> str:
    digest = hashlib.sha256()
    for access_id in sorted(str(row["access_id"]) for row in rows):
        digest.update(access_id.encode("utf-8"))
        digest.update(b"\0")
    return f"access-batch-{digest.hexdigest()}"


def _row_values(row: Mapping[str, Any]) -> list[Any]:
    missing = [name for name in REQUIRED_COLUMNS if name not in row]
    if missing:
        raise ValueError(f"access row lacks columns {missing}")
    unknown = sorted(set(row) - set(_INSERT_COLUMNS))
    if unknown:
        raise ValueError(f"access row has unknown columns {unknown}")
    accessed_at = row["accessed_at"]
    if not isinstance(accessed_at, datetime) or accessed_at.utcoffset() is None:
        raise ValueError(f"accessed_at must be a timezone-aware datetime, got {accessed_at!r}")
    return [
        *(row[name] for name in REQUIRED_COLUMNS),
        *(row.get(name, default) for name, (_, default) in OPTIONAL_COLUMNS.items()),
    ]


class AccessLogStore:
    """The ``access_log`` table over a caller-owned ``clickhouse-connect`` client.

    Args:
        client: a ``clickhouse_connect`` client (HTTP or chDB).
        table: table name, ``identifier`` or ``database.identifier`` (default ``access_log``).
        fsync: create the table with ``fsync_after_insert = 1``, so an acknowledged insert survives
            a power cut (measured on chDB: a few ms per insert). Only read by :meth:`ensure_schema`.

    Raises:
        ValueError: the table name is not a plain identifier.
    """

    def __init__(self, client: Client, table: str = "access_log", *, fsync: bool = True) -> None:
        self._client = client
        self.table = table
        self._quoted = _quote_table(table)
        self._fsync = fsync

    def ensure_schema(self) -> None:
        """Create the table if it does not exist (an existing table is left unchanged).

        Raises:
            StoreUnavailableError: ClickHouse did not answer or refused the DDL.
        """
        self._command(self.ddl())

    def ddl(self) -> str:
        """The ``CREATE TABLE IF NOT EXISTS`` statement of this table (see :meth:`ddl_for`)."""
        return self.ddl_for(self.table, fsync=self._fsync)

    @staticmethod
    def ddl_for(table: str, *, fsync: bool = True) -> str:
        """``CREATE TABLE IF NOT EXISTS`` of an access log table named ``table`` (``[db.]identifier``);
        migration 1 of :mod:`hindsight.analytics.schema` runs it.

        Raises:
            ValueError: ``table`` is not a plain (optionally qualified) identifier.
        """
        quoted = _quote_table(table)
        columns = ",\n    ".join(
            [f"`{name}` {ch_type}" for name, ch_type in REQUIRED_COLUMNS.items()]
            + [
                f"`{name}` {ch_type} DEFAULT {default!r}"
                for name, (ch_type, default) in OPTIONAL_COLUMNS.items()
            ]
            + ["`ingested_at` DateTime64(3, 'UTC') DEFAULT now64(3, 'UTC')"]
        )
        settings = [f"non_replicated_deduplication_window = {_DEDUP_WINDOW_BLOCKS}"]
        if fsync:
            settings.append("fsync_after_insert = 1")
        return (
            f"CREATE TABLE IF NOT EXISTS {quoted} (\n    {columns}\n)\n"
            "ENGINE = ReplacingMergeTree\n"
            "PARTITION BY toYYYYMM(accessed_at)\n"
            "ORDER BY (tenant_id, user_id, accessed_at, access_id)\n"
            f"SETTINGS {', '.join(settings)}"
        )

    def insert(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert ``rows`` as one batch; on return ClickHouse has written it (durable).

        Each row maps every name in :data:`REQUIRED_COLUMNS` (and optionally those in
        :data:`OPTIONAL_COLUMNS`) to a value; ``accessed_at`` is a timezone-aware datetime (stored
        in UTC, millisecond precision). Redelivered rows and batches deduplicate (see module doc).
        An empty batch does nothing.

        Raises:
            ValueError: a row lacks a column, has an unknown one, or a naive ``accessed_at``.
            StoreUnavailableError: ClickHouse did not answer or refused the insert.
        """
        if not rows:
            return
        data = [_row_values(row) for row in rows]
        try:
            self._client.insert(
                self.table,
                data,
                column_names=list(_INSERT_COLUMNS),
                column_type_names=list(_INSERT_TYPES),
                settings={"insert_deduplication_token": _batch_token(rows), "async_insert": 0},
            )
        except ClickHouseError as exc:
            raise StoreUnavailableError(f"access log insert into {self.table} failed: {exc}") from exc

    def count(self, tenant_id: str | None = None) -> int:
        """Number of distinct access events (after dedup), optionally of one tenant.

        Raises:
            StoreUnavailableError: ClickHouse did not answer.
        """
        where, params = self._filter(tenant_id, None)
        rows = self._query(f"SELECT count() FROM {self._quoted} FINAL {where}", params)
        return int(rows[0][0])

    def user_rows(self, tenant_id: str, user_id: str) -> int:
        """Rows of one user (before dedup: every copy counts), for erasure reports.

        Raises:
            StoreUnavailableError: ClickHouse did not answer.
        """
        where, params = self._filter(tenant_id, user_id)
        return int(self._query(f"SELECT count() FROM {self._quoted} {where}", params)[0][0])

    def erase_user(self, tenant_id: str, user_id: str) -> None:
        """Delete every row of one user (a synchronous mutation: gone when this returns).

        Raises:
            StoreUnavailableError: ClickHouse did not answer.
        """
        where, params = self._filter(tenant_id, user_id)
        try:
            self._client.command(
                f"ALTER TABLE {self._quoted} DELETE {where} SETTINGS mutations_sync = 1", parameters=params
            )
        except ClickHouseError as exc:
            raise StoreUnavailableError(f"access log erase on {self.table} failed: {exc}") from exc

    def access_stats(self, tenant_id: str, user_id: str | None = None) -> list[AccessStat]:
        """Per-memory access count and last access time (after dedup), ordered by ``memory_id``.

        Args:
            tenant_id: the tenant to aggregate.
            user_id: one user of that tenant, or ``None`` for all its users.

        Returns:
            One :class:`AccessStat` per accessed memory; ``last_accessed_at`` is aware UTC.

        Raises:
            StoreUnavailableError: ClickHouse did not answer.
        """
        where, params = self._filter(tenant_id, user_id)
        rows = self._query(
            "SELECT memory_id, count() AS access_count, max(accessed_at) AS last_accessed_at "
            f"FROM {self._quoted} FINAL {where} GROUP BY memory_id ORDER BY memory_id",
            params,
        )
        return [AccessStat(str(m), int(c), last) for m, c, last in rows]

    def max_access_count(self, tenant_id: str, user_id: str) -> int:
        """Largest ``access_count`` over one user's memories (0 when none were accessed).

        The normaliser of the eviction score's frequency term,
        ``log(access_count+1) / log(max_access_count+1)`` (DESIGN.md section 4).

        Raises:
            StoreUnavailableError: ClickHouse did not answer.
        """
        where, params = self._filter(tenant_id, user_id)
        rows = self._query(
            "SELECT max(access_count) FROM "
            f"(SELECT count() AS access_count FROM {self._quoted} FINAL {where} GROUP BY memory_id)",
            params,
        )
        value = rows[0][0] if rows else None
        return int(value) if value is not None else 0

    @staticmethod
    def _filter(tenant_id: str | None, user_id: str | None) -> tuple[str, dict[str, str]]:
        clauses: list[str] = []
        params: dict[str, str] = {}
        if tenant_id is not None:
            clauses.append("tenant_id = {tenant_id:String}")
            params["tenant_id"] = tenant_id
        if user_id is not None:
            clauses.append("user_id = {user_id:String}")
            params["user_id"] = user_id
        return ("WHERE " + " AND ".join(clauses) if clauses else ""), params

    def _command(self, sql: str) -> None:
        try:
            self._client.command(sql)
        except ClickHouseError as exc:
            raise StoreUnavailableError(f"access log DDL on {self.table} failed: {exc}") from exc

    def _query(self, sql: str, params: Mapping[str, str]) -> Sequence[Sequence[Any]]:
        try:
            result = self._client.query(sql, parameters=dict(params), tz_mode="aware")
        except ClickHouseError as exc:
            raise StoreUnavailableError(f"access log query on {self.table} failed: {exc}") from exc
        return result.result_rows
