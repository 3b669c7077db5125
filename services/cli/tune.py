"""``hindsight tune``: fit thresholds and decay from ClickHouse, write plots and tuned settings.

Opens ClickHouse the way the services do (``HINDSIGHT_CLICKHOUSE_DSN``, else the embedded chDB under
``<data_dir>/clickhouse``: chDB allows one process per directory, so stop ``hindsight up`` first, or use
the console's "run tune" button, which runs in the gateway's process), migrates the schema, runs
:func:`hindsight.tuning.run.tune`, prints the table to stderr and one JSON line to stdout, writes the PNG
plots and ``report.json`` next to the tuned-settings file, and (unless ``--dry-run``) a new version of
the tuned-settings file. Exit status: 0 when at least one value was fitted, 3 when the data supported
no fit (each refusal says how much it needs), 2 on a usage or connection error.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from hindsight.analytics.queries import Clock, Signal
from hindsight.errors import ConfigurationError, StoreUnavailableError
from hindsight.recall import SIMILARITY_FLOOR
from hindsight.settings import AllSettings
from hindsight.tuning import settings_file
from hindsight.tuning.run import Current, TuneOptions, render_table, run_and_write

if TYPE_CHECKING:
    from hindsight.analytics.store import AnalyticsStore

EXIT_NOT_FITTED = 3


class _GatewayFloor(BaseSettings):
    """The gateway's similarity floor as the gateway would read it (without its key checks)."""

    model_config = SettingsConfigDict(env_prefix="HINDSIGHT_GATEWAY_", extra="ignore")

    similarity_floor: float = Field(SIMILARITY_FLOOR)


def current_settings(cfg: AllSettings) -> Current:
    """What the services would run with now: defaults, then the tuned file, then the environment."""
    from services.evict.settings import EvictSettings  # noqa: PLC0415
    from services.ingest.settings import IngestSettings  # noqa: PLC0415

    tuning = settings_file.TuningSettings()
    data_dir = cfg.runtime.data_dir
    gateway, evict, ingest = _GatewayFloor(), EvictSettings(), IngestSettings()
    settings_file.apply("gateway", gateway, tuning, data_dir)
    settings_file.apply("evict", evict, tuning, data_dir)
    settings_file.apply("ingest", ingest, tuning, data_dir)
    return Current(
        similarity_floor=gateway.similarity_floor,
        decay_per_day=evict.decay_per_day,
        decay_per_day_by_type=dict(evict.decay_per_day_by_type),
        expire_below=evict.expire_below,
        keep_threshold=ingest.keep_threshold,
    )


def open_store(cfg: AllSettings) -> AnalyticsStore:
    """The analytics store over the configured ClickHouse, schema migrated.

    Raises:
        StoreUnavailableError: ClickHouse cannot be opened (an embedded directory in use says so).
    """
    import clickhouse_connect  # noqa: PLC0415
    from clickhouse_connect.driver.exceptions import ClickHouseError  # noqa: PLC0415

    from hindsight.analytics.schema import SchemaNames, TtlDays, current_database  # noqa: PLC0415
    from hindsight.analytics.store import AnalyticsStore  # noqa: PLC0415

    ch = cfg.clickhouse
    if ch.dsn:
        dsn = ch.dsn
    else:
        folder = (cfg.runtime.data_dir / "clickhouse").resolve()
        folder.mkdir(parents=True, exist_ok=True)
        dsn = f"chdb://{folder}"
    try:
        client = clickhouse_connect.get_client(dsn=dsn)
    except ClickHouseError as exc:
        if ch.dsn:
            raise StoreUnavailableError(f"cannot open ClickHouse at {dsn}: {exc}") from exc
        raise StoreUnavailableError(
            f"the embedded ClickHouse under {dsn.removeprefix('chdb://')} is in use by another process "
            "(a running `hindsight up`?): stop it, run the tuner from the console (/console/tuning), or "
            "point HINDSIGHT_CLICKHOUSE_DSN at a ClickHouse server"
        ) from exc
    ttl = TtlDays(
        access=ch.access_ttl_days,
        recall=ch.recall_ttl_days,
        feedback=ch.feedback_ttl_days,
        inventory=ch.inventory_ttl_days,
    )
    store = AnalyticsStore(client, SchemaNames(ch.database or current_database(client), ch.table, ttl))
    store.migrate()
    return store


def main_tune(
    *,
    data_dir: Path | None,
    dsn: str | None,
    database: str | None,
    tenant: str | None,
    signal: Signal,
    clock: Clock,
    target_recall: float,
    max_regret: float,
    keep_recall: float,
    plots: Path | None,
    dry_run: bool,
) -> int:
    """The ``hindsight tune`` command (module doc); returns the exit status."""
    cfg = AllSettings()
    if data_dir is not None:
        cfg.runtime.data_dir = data_dir
    if dsn:
        cfg.clickhouse.dsn = dsn
    if database:
        cfg.clickhouse.database = database
    try:
        current = current_settings(cfg)
        store = open_store(cfg)
        outcome = run_and_write(
            store,
            TuneOptions(
                signal=signal,
                clock=clock,
                tenant=tenant,
                target_recall=target_recall,
                max_regret=max_regret,
                keep_recall=keep_recall,
            ),
            current,
            tuned_path=settings_file.TuningSettings().path(cfg.runtime.data_dir),
            plots_dir=plots,
            write=not dry_run,
        )
    except (ConfigurationError, StoreUnavailableError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(render_table(outcome.report), file=sys.stderr)
    if outcome.written is not None:
        path = settings_file.TuningSettings().path(cfg.runtime.data_dir)
        print(
            f"wrote {path} version {outcome.written.version} "
            "(services load it at start-up; `hindsight tune rollback` returns to the previous values)",
            file=sys.stderr,
        )
    print(json.dumps(outcome.line(), default=str))
    return 0 if outcome.report.fitted_any() else EXIT_NOT_FITTED
