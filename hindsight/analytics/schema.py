"""Versioned ClickHouse schema of the operator's loop (DESIGN.md section 10), applied at start-up.

Tables (all ``ReplacingMergeTree`` on a deterministic key, so at-least-once delivery stores each row
once; every read uses ``FINAL``):

- ``access_log``: one row per memory a recall returned (the eviction job's counts), keyed by access
  id; TTL ``access_ttl_days`` (365);
- ``recall_log``: one row per recall (redacted query, intent, window, knobs, latency per step), keyed
  by query id; TTL ``recall_ttl_days`` (90);
- ``recall_candidates``: one row per candidate of a recall (component scores, outcome, age, type),
  keyed by (query, memory); TTL ``recall_ttl_days`` (90);
- ``recall_feedback``: the agent's label per (query, memory), latest ``given_at`` wins; TTL
  ``feedback_ttl_days`` (180);
- ``memory_inventory``: one row per stored memory (type, kind, importance, created/stored times),
  keyed by memory id; TTL ``inventory_ttl_days`` (730).

(Quarantined items live in the guard's review table, :mod:`hindsight.stores.quarantine`.)

How migrations work: :data:`MIGRATIONS` is an append-only list of numbered steps; ``schema_migrations``
records each applied version. :func:`migrate` applies the missing ones in order, then re-creates the
views (``CREATE OR REPLACE VIEW``, a "repeatable" step like Flyway's, so a view can change with the
tuner without a new version). Every statement is idempotent (``IF NOT EXISTS``, ``MODIFY TTL``), so
two processes starting at once, or a migration interrupted half-way, converge: applying twice is a
no-op. Never edit a released step: append a new one. A TTL changed in the settings later applies to
new tables only; change an existing one with ``ALTER TABLE ... MODIFY TTL`` (the step that added it
shows the statement).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass

from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import ClickHouseError

from hindsight.errors import ConfigurationError, StoreUnavailableError

log = logging.getLogger("hindsight.analytics")

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DEDUP = "non_replicated_deduplication_window = 1000"


@dataclass(frozen=True)
class TtlDays:
    """Days each table keeps its rows (ClickHouse ``TTL``); defaults in the module doc."""

    access: int = 365
    recall: int = 90
    feedback: int = 180
    inventory: int = 730


def quote_ident(name: str) -> str:
    """```name``` for a plain identifier.

    Raises:
        ValueError: ``name`` is not letters, digits and ``_`` (not starting with a digit).
    """
    if not _IDENT.fullmatch(name):
        raise ValueError(f"not a plain ClickHouse identifier: {name!r} (letters, digits, _)")
    return f"`{name}`"


@dataclass(frozen=True)
class SchemaNames:
    """Where the tables live: ``database`` (unquoted) and the access log's table (``table`` or
    ``db.table``, as the access log store is configured)."""

    database: str
    access_log: str = "access_log"
    ttl: TtlDays = TtlDays()

    def __post_init__(self) -> None:
        quote_ident(self.database)
        for part in self.access_log.split("."):
            quote_ident(part)

    def table(self, name: str) -> str:
        """Fully qualified, quoted name of one of the analytics tables."""
        return f"{quote_ident(self.database)}.{quote_ident(name)}"

    @property
    def db(self) -> str:
        """The quoted database."""
        return quote_ident(self.database)

    @property
    def access(self) -> str:
        """The quoted access log table, qualified with the database unless it names its own."""
        if "." in self.access_log:
            return ".".join(quote_ident(p) for p in self.access_log.split("."))
        return self.table(self.access_log)


def _access_log(names: SchemaNames) -> list[str]:
    from hindsight.stores.accesslog import AccessLogStore  # noqa: PLC0415 (avoid a cycle at import)

    table = names.access_log if "." in names.access_log else f"{names.database}.{names.access_log}"
    return [f"CREATE DATABASE IF NOT EXISTS {names.db}", AccessLogStore.ddl_for(table)]


def _access_ttl(names: SchemaNames) -> list[str]:
    return [
        f"ALTER TABLE {names.access} MODIFY TTL toDateTime(accessed_at) + toIntervalDay({names.ttl.access}) "
        "SETTINGS materialize_ttl_after_modify = 0"
    ]


def _recall_tables(names: SchemaNames) -> list[str]:
    t = names.ttl.recall
    return [
        f"""CREATE TABLE IF NOT EXISTS {names.table("recall_log")} (
    `query_id` String,
    `tenant_id` String,
    `user_id` String,
    `agent_id` String,
    `query_text` String,
    `intent` LowCardinality(String),
    `entities` Array(String),
    `window_start` Nullable(DateTime64(3, 'UTC')),
    `window_end` Nullable(DateTime64(3, 'UTC')),
    `wants_recent` Bool,
    `top_k` UInt16,
    `similarity_floor` Float32,
    `time_mode` LowCardinality(String),
    `result_order` LowCardinality(String),
    `rerank` Bool,
    `token_budget` UInt32,
    `tokens` UInt32,
    `truncated` Bool,
    `candidates` UInt16,
    `returned` UInt16,
    `timings_ms` Map(LowCardinality(String), Float32),
    `reference_time` DateTime64(3, 'UTC'),
    `recalled_at` DateTime64(3, 'UTC'),
    `ingested_at` DateTime64(3, 'UTC') DEFAULT now64(3, 'UTC')
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(recalled_at)
ORDER BY (tenant_id, user_id, recalled_at, query_id)
TTL toDateTime(recalled_at) + toIntervalDay({t})
SETTINGS {_DEDUP}""",
        f"""CREATE TABLE IF NOT EXISTS {names.table("recall_candidates")} (
    `query_id` String,
    `tenant_id` String,
    `user_id` String,
    `memory_id` String,
    `memory_type` LowCardinality(String),
    `kind` LowCardinality(String),
    `outcome` LowCardinality(String),
    `rank` Nullable(UInt16),
    `similarity` Float32,
    `dense_rank` Nullable(UInt16),
    `lexical_rank` Nullable(UInt16),
    `lexical_score` Nullable(Float32),
    `rerank_score` Nullable(Float32),
    `relevance` Nullable(Float32),
    `time_weight` Nullable(Float32),
    `final_score` Nullable(Float32),
    `in_time_window` Bool,
    `age_days` Float32,
    `since_access_days` Float32,
    `access_count` UInt32,
    `importance` Float32,
    `confidence` Float32,
    `status` LowCardinality(String),
    `version` UInt32,
    `reference_time` DateTime64(3, 'UTC'),
    `recalled_at` DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(recalled_at)
ORDER BY (tenant_id, query_id, memory_id)
TTL toDateTime(recalled_at) + toIntervalDay({t})
SETTINGS {_DEDUP}""",
    ]


def _feedback(names: SchemaNames) -> list[str]:
    return [
        f"""CREATE TABLE IF NOT EXISTS {names.table("recall_feedback")} (
    `feedback_id` String,
    `query_id` String,
    `tenant_id` String,
    `user_id` String,
    `agent_id` String,
    `memory_id` String,
    `label` LowCardinality(String),
    `given_at` DateTime64(3, 'UTC'),
    `ingested_at` DateTime64(3, 'UTC') DEFAULT now64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(given_at)
ORDER BY (tenant_id, query_id, memory_id)
TTL toDateTime(given_at) + toIntervalDay({names.ttl.feedback})
SETTINGS {_DEDUP}"""
    ]


def _inventory(names: SchemaNames) -> list[str]:
    return [
        f"""CREATE TABLE IF NOT EXISTS {names.table("memory_inventory")} (
    `memory_id` String,
    `tenant_id` String,
    `user_id` String,
    `agent_id` String,
    `session_id` String,
    `memory_type` LowCardinality(String),
    `kind` LowCardinality(String),
    `source` LowCardinality(String),
    `importance` Float32,
    `confidence` Float32,
    `status` LowCardinality(String),
    `version` UInt32,
    `parent_id` String,
    `created_at` DateTime64(3, 'UTC'),
    `stored_at` DateTime64(3, 'UTC'),
    `seen_at` DateTime64(3, 'UTC') DEFAULT now64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(seen_at)
ORDER BY (tenant_id, user_id, memory_id)
TTL toDateTime(stored_at) + toIntervalDay({names.ttl.inventory})
SETTINGS {_DEDUP}"""
    ]


@dataclass(frozen=True)
class Migration:
    """One numbered schema step: ``statements(names)`` are idempotent DDL statements."""

    version: int
    name: str
    statements: Callable[[SchemaNames], list[str]]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "access_log", _access_log),
    Migration(2, "access_log TTL", _access_ttl),
    Migration(3, "recall_log and recall_candidates", _recall_tables),
    Migration(4, "recall_feedback", _feedback),
    Migration(5, "memory_inventory", _inventory),
)
"""Append-only: never change a released step (module doc)."""


def _ledger(names: SchemaNames) -> str:
    return f"""CREATE TABLE IF NOT EXISTS {names.table("schema_migrations")} (
    `version` UInt32,
    `name` String,
    `applied_at` DateTime64(3, 'UTC') DEFAULT now64(3, 'UTC')
)
ENGINE = ReplacingMergeTree
ORDER BY version"""


def _run(client: Client, sql: str) -> None:
    try:
        client.command(sql)
    except ClickHouseError as exc:
        raise StoreUnavailableError(f"ClickHouse refused a schema statement: {exc}\n{sql[:300]}") from exc


def current_database(client: Client) -> str:
    """The client's current database (what an empty ``HINDSIGHT_CLICKHOUSE_DATABASE`` means).

    Raises:
        StoreUnavailableError: ClickHouse did not answer.
    """
    try:
        return str(client.query("SELECT currentDatabase()").result_rows[0][0])
    except ClickHouseError as exc:
        raise StoreUnavailableError(f"ClickHouse did not answer: {exc}") from exc


def applied_versions(client: Client, names: SchemaNames) -> list[int]:
    """Versions recorded in ``schema_migrations``, ascending (empty before the first migration).

    Raises:
        StoreUnavailableError: ClickHouse did not answer.
    """
    try:
        exists = client.query(
            "SELECT count() FROM system.tables WHERE database = {db:String} AND name = 'schema_migrations'",
            parameters={"db": names.database},
        ).result_rows[0][0]
        if not exists:
            return []
        rows = client.query(
            f"SELECT DISTINCT version FROM {names.table('schema_migrations')} FINAL ORDER BY version"
        ).result_rows
    except ClickHouseError as exc:
        raise StoreUnavailableError(f"reading schema_migrations failed: {exc}") from exc
    return [int(r[0]) for r in rows]


def migrate(
    client: Client, names: SchemaNames, views: Callable[[SchemaNames], list[str]] | None = None
) -> list[int]:
    """Apply the missing :data:`MIGRATIONS` in order, then (re)create ``views(names)``.

    Returns:
        The versions applied by this call (empty when the schema was current).

    Raises:
        StoreUnavailableError: ClickHouse did not answer or refused a statement.
        ConfigurationError: the database records a version newer than this code knows (an older
            release started against a newer schema: upgrade it).
    """
    _run(client, f"CREATE DATABASE IF NOT EXISTS {names.db}")
    _run(client, _ledger(names))
    done = set(applied_versions(client, names))
    newest = MIGRATIONS[-1].version
    if done and max(done) > newest:
        raise ConfigurationError(
            f"ClickHouse database {names.database!r} is at schema version {max(done)}, newer than this "
            f"release knows ({newest}): run the newer release"
        )
    applied: list[int] = []
    for step in MIGRATIONS:
        if step.version in done:
            continue
        for sql in step.statements(names):
            _run(client, sql)
        try:
            client.insert(
                names.table("schema_migrations").replace("`", ""),
                [[step.version, step.name]],
                column_names=["version", "name"],
            )
        except ClickHouseError as exc:
            raise StoreUnavailableError(f"recording schema version {step.version} failed: {exc}") from exc
        log.info("ClickHouse schema migration applied", extra={"version": step.version, "step": step.name})
        applied.append(step.version)
    if not _access_log_exists(client, names):
        # the access-log table's name is a setting (HINDSIGHT_CLICKHOUSE_TABLE), so a database whose
        # ledger is current can still lack the configured one: create it at the current schema
        for step in MIGRATIONS:
            if step.name.startswith("access_log"):
                for sql in step.statements(names):
                    _run(client, sql)
        log.info("ClickHouse access-log table created", extra={"table": names.access_log})
    for sql in views(names) if views is not None else ():
        _run(client, sql)
    return applied


def _access_log_exists(client: Client, names: SchemaNames) -> bool:
    """Whether the configured access-log table exists (``database.table`` or one in ``names.database``).

    Raises:
        StoreUnavailableError: ClickHouse did not answer.
    """
    database, _, table = names.access_log.rpartition(".")
    try:
        rows = client.query(
            "SELECT count() FROM system.tables WHERE database = {db:String} AND name = {t:String}",
            parameters={"db": database or names.database, "t": table},
        ).result_rows
    except ClickHouseError as exc:
        raise StoreUnavailableError(f"reading system.tables failed: {exc}") from exc
    return bool(rows[0][0])


def render_all(names: SchemaNames, views: Callable[[SchemaNames], list[str]] | None = None) -> str:
    """Every migration and view as one SQL script (``infra/clickhouse/schema.sql``), in order."""
    parts = [f"-- Hindsight ClickHouse schema, database {names.database} (generated: hindsight tune sql)"]
    parts.append(f"CREATE DATABASE IF NOT EXISTS {names.db};")
    parts.append(_ledger(names) + ";")
    for step in MIGRATIONS:
        parts.append(f"-- migration {step.version}: {step.name}")
        parts.extend(sql + ";" for sql in step.statements(names))
    if views is not None:
        parts.append("-- views (re-created at every start)")
        parts.extend(sql + ";" for sql in views(names))
    return "\n\n".join(parts) + "\n"
