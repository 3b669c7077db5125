"""ClickHouse quarantine store: every quarantined or blocked event, redacted, with its review status.

Why ClickHouse (issue 10 item 3): quarantined items are an append-mostly audit trail that operators
query by tenant, user, source, reason and time (``hindsight audit`` aggregates quarantine rates by
source and reason over weeks); the access log already lives there, so no new store is needed. The
vector store was the alternative (status ``quarantined``) but would need an embedding per item and
put suspect content one filter away from recall and history; Redis keeps no long history.

Layout: one ``ReplacingMergeTree(version)`` table ordered by ``(tenant_id, item_id)``. The sink
inserts an item with ``version = 0`` (status ``pending``); a review inserts the same item again
with ``version`` = the review time in ms and status ``released`` or ``rejected``. Reads use
``FINAL``, so the newest version wins; a redelivered sink insert (version 0) never overrides a
review. Content is stored redacted only (``content_redacted``, and the redacted record as JSON for
release); blocked items keep no content at all.

Every method is synchronous; async callers use ``asyncio.to_thread``. The client is shared with the
access log (chDB allows one data directory per process).
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal

from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import ClickHouseError

from hindsight.errors import StoreUnavailableError
from schemas import QuarantineRecord

Status = Literal["pending", "released", "rejected"]
_TABLE_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")
_NAMESPACE: Final = uuid.UUID("6f1c2a8e-4b1d-4c55-9a0e-2d9b4f7c1e33")

COLUMNS: Final[dict[str, str]] = {
    "tenant_id": "String",
    "item_id": "String",
    "user_id": "String",
    "agent_id": "String",
    "session_id": "String",
    "event_id": "String",
    "stage": "LowCardinality(String)",
    "verdict": "LowCardinality(String)",
    "reasons": "Array(String)",
    "findings": "String",
    "source": "LowCardinality(String)",
    "trust": "Float32",
    "tool_name": "String",
    "external_ref": "String",
    "scores": "String",
    "content_redacted": "String",
    "record": "String",
    "status": "LowCardinality(String)",
    "reviewed_by": "String",
    "quarantined_at": "DateTime64(3, 'UTC')",
    "reviewed_at": "DateTime64(3, 'UTC')",
    "version": "UInt64",
}


def item_id(record: QuarantineRecord) -> str:
    """Deterministic id of a quarantine item: UUIDv5 of tenant, event id and stage."""
    return str(uuid.uuid5(_NAMESPACE, f"{record.tenant_id}\0{record.event_id}\0{record.stage}"))


@dataclass(frozen=True)
class QuarantineItem:
    """One item as the review API shows it (the record is redacted; ``None`` content when blocked)."""

    id: str
    record: QuarantineRecord
    status: Status
    reviewed_by: str | None
    reviewed_at: datetime | None


def _quote(table: str) -> str:
    if not _TABLE_NAME.fullmatch(table):
        raise ValueError(f"table must be [db.]identifier, got {table!r}")
    return ".".join(f"`{p}`" for p in table.split("."))


class QuarantineStore:
    """The quarantine table over a caller-owned ``clickhouse-connect`` client.

    Args:
        client: HTTP ClickHouse or chDB client (shared with the access log).
        table: table name (default ``quarantine``).

    Raises:
        ValueError: the table name is not a plain identifier.
    """

    def __init__(self, client: Client, table: str = "quarantine") -> None:
        self._client = client
        self.table = table
        self._quoted = _quote(table)

    def ensure_schema(self) -> None:
        """Create the table if missing.

        Raises:
            StoreUnavailableError: ClickHouse refused the DDL.
        """
        cols = ",\n    ".join(f"`{n}` {t}" for n, t in COLUMNS.items())
        self._command(
            f"CREATE TABLE IF NOT EXISTS {self._quoted} (\n    {cols}\n)\n"
            "ENGINE = ReplacingMergeTree(version)\nORDER BY (tenant_id, item_id)\n"
            "SETTINGS non_replicated_deduplication_window = 1000"
        )

    def _row(
        self, record: QuarantineRecord, status: Status, version: int, by: str, at: datetime | None
    ) -> list[Any]:
        return [
            record.tenant_id,
            item_id(record),
            record.user_id,
            record.agent_id,
            record.session_id,
            record.event_id,
            record.stage,
            record.verdict,
            list(record.reasons),
            json.dumps(record.findings, sort_keys=True),
            record.source,
            record.trust if record.trust is not None else -1.0,
            record.tool_name or "",
            record.external_ref or "",
            json.dumps(record.scores, sort_keys=True),
            record.content_redacted or "",
            record.model_dump_json(),
            status,
            by,
            record.quarantined_at,
            at or datetime.fromtimestamp(0, UTC),
            version,
        ]

    def _insert(self, rows: list[list[Any]], token: str) -> None:
        try:
            self._client.insert(
                self.table,
                rows,
                column_names=list(COLUMNS),
                column_type_names=list(COLUMNS.values()),
                settings={"insert_deduplication_token": token, "async_insert": 0},
            )
        except ClickHouseError as exc:
            raise StoreUnavailableError(f"quarantine insert into {self.table} failed: {exc}") from exc

    def add(self, records: Sequence[QuarantineRecord]) -> None:
        """Insert new items as ``pending`` (idempotent: a redelivered record changes nothing).

        Raises:
            StoreUnavailableError: ClickHouse failed.
        """
        if not records:
            return
        digest = hashlib.sha256("\0".join(sorted(item_id(r) for r in records)).encode()).hexdigest()
        self._insert([self._row(r, "pending", 0, "", None) for r in records], f"quarantine-{digest}")

    def review(self, item: QuarantineItem, status: Status, by: str, at: datetime) -> QuarantineItem:
        """Record a review decision (a newer version of the row).

        Raises:
            StoreUnavailableError: ClickHouse failed.
        """
        version = int(at.timestamp() * 1000)
        self._insert(
            [self._row(item.record, status, version, by, at)], f"review-{item.id}-{status}-{version}"
        )
        return QuarantineItem(item.id, item.record, status, by, at)

    def get(self, tenant_id: str, item: str) -> QuarantineItem | None:
        """The item ``item`` of ``tenant_id`` (newest version), or None.

        Raises:
            StoreUnavailableError: ClickHouse failed.
        """
        rows = self._query(
            f"SELECT record, status, reviewed_by, reviewed_at, item_id FROM {self._quoted} FINAL "
            "WHERE tenant_id = {t:String} AND item_id = {i:String}",
            {"t": tenant_id, "i": item},
        )
        return self._item(rows[0]) if rows else None

    def find(
        self, tenant_id: str, *, user_id: str | None = None, status: Status | None = None, limit: int = 100
    ) -> list[QuarantineItem]:
        """Items of a tenant (optionally one user and one status), newest first.

        Raises:
            StoreUnavailableError: ClickHouse failed.
        """
        where = ["tenant_id = {t:String}"]
        params: dict[str, Any] = {"t": tenant_id, "n": limit}
        if user_id is not None:
            where.append("user_id = {u:String}")
            params["u"] = user_id
        if status is not None:
            where.append("status = {s:String}")
            params["s"] = status
        rows = self._query(
            f"SELECT record, status, reviewed_by, reviewed_at, item_id FROM {self._quoted} FINAL "
            f"WHERE {' AND '.join(where)} ORDER BY quarantined_at DESC, item_id LIMIT {{n:UInt32}}",
            params,
        )
        return [self._item(r) for r in rows]

    def rates(self, tenant_id: str | None = None) -> list[tuple[str, str, str, int]]:
        """``(source, tool_name, reason, items)`` counts over every item (for ``hindsight audit``).

        Raises:
            StoreUnavailableError: ClickHouse failed.
        """
        where = "WHERE tenant_id = {t:String}" if tenant_id else ""
        rows = self._query(
            f"SELECT source, tool_name, arrayJoin(reasons) AS reason, count() FROM {self._quoted} FINAL "
            f"{where} GROUP BY source, tool_name, reason ORDER BY count() DESC",
            {"t": tenant_id} if tenant_id else {},
        )
        return [(str(a), str(b), str(c), int(d)) for a, b, c, d in rows]

    def audit_rows(
        self, tenant_id: str | None = None
    ) -> list[tuple[str, str, str, str, tuple[str, ...], datetime]]:
        """``(tenant, agent, source, tool_name, reasons, quarantined_at)`` of every item (newest
        version), oldest first, for ``hindsight audit``.

        Raises:
            StoreUnavailableError: ClickHouse failed.
        """
        where = "WHERE tenant_id = {t:String}" if tenant_id else ""
        rows = self._query(
            f"SELECT tenant_id, agent_id, source, tool_name, reasons, quarantined_at FROM {self._quoted} "
            f"FINAL {where} ORDER BY quarantined_at, item_id",
            {"t": tenant_id} if tenant_id else {},
        )
        return [(str(a), str(b), str(c), str(d), tuple(e), f) for a, b, c, d, e, f in rows]

    @staticmethod
    def _item(row: Sequence[Any]) -> QuarantineItem:
        record = QuarantineRecord.model_validate_json(row[0])
        reviewed_at = row[3] if row[3] and row[3].timestamp() > 0 else None
        return QuarantineItem(str(row[4]), record, row[1], row[2] or None, reviewed_at)

    def _command(self, sql: str) -> None:
        try:
            self._client.command(sql)
        except ClickHouseError as exc:
            raise StoreUnavailableError(f"quarantine DDL on {self.table} failed: {exc}") from exc

    def _query(self, sql: str, params: dict[str, Any]) -> Sequence[Sequence[Any]]:
        try:
            return self._client.query(sql, parameters=params, tz_mode="aware").result_rows
        except ClickHouseError as exc:
            raise StoreUnavailableError(f"quarantine query on {self.table} failed: {exc}") from exc
