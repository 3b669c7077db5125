"""``hindsight audit``: open the stores, run :func:`hindsight.audit.audit`, print a table or JSON."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from hindsight.audit import AuditReport, AuditSettings, audit

if TYPE_CHECKING:
    from hindsight.settings import AllSettings
    from hindsight.stores.quarantine import QuarantineStore
    from hindsight.stores.vector import VectorStore


@contextlib.contextmanager
def _stores(settings: AllSettings) -> Iterator[tuple[VectorStore, QuarantineStore]]:
    import clickhouse_connect  # noqa: PLC0415

    from hindsight.runtime import open_vector_store  # noqa: PLC0415
    from hindsight.stores.quarantine import QuarantineStore  # noqa: PLC0415

    store = open_vector_store(settings)
    dsn = settings.clickhouse.dsn or f"chdb://{(settings.runtime.data_dir / 'clickhouse').resolve()}"
    client = clickhouse_connect.get_client(dsn=dsn)
    try:
        quarantine = QuarantineStore(client, settings.clickhouse.quarantine_table)
        quarantine.ensure_schema()  # an instance that never quarantined anything has no table yet
        yield store, quarantine
    finally:
        client.close()
        store.close()


def run(settings: AllSettings, *, tenant_id: str | None, cfg: AuditSettings) -> AuditReport:
    """Audit the configured stores (a Qdrant server by URL or the embedded store under the data
    directory; ClickHouse by DSN or chDB under the data directory).

    Raises:
        StoreUnavailableError: a store cannot be opened (e.g. ``hindsight up`` holds the embedded
            data directory: stop it, or point at the servers) or a query failed.
    """
    with _stores(settings) as (store, quarantine):
        return audit(store, quarantine, tenant_id=tenant_id, settings=cfg)


def render(report: AuditReport, console: Console) -> None:
    """The report as two tables: anomalies, then quarantine items by source, tool and reason."""
    console.print(
        f"hindsight audit: {report.memories} memories, {report.quarantined} quarantined items, "
        f"window from {report.window_start.isoformat(timespec='minutes')}"
    )
    table = Table(title=f"anomalies ({len(report.anomalies)})")
    for column in ("kind", "tenant", "subject", "value", "threshold", "n", "detail"):
        table.add_column(column, overflow="fold")
    for a in report.anomalies:
        table.add_row(
            a.kind, a.tenant_id, a.subject, f"{a.value:g}", f"{a.threshold:g}", str(a.count), a.detail
        )
    console.print(table)
    rates = Table(title="quarantine by source, tool and reason")
    for column in ("tenant", "source", "tool", "reason", "items", "in window"):
        rates.add_column(column)
    for r in report.quarantine_rates:
        rates.add_row(r.tenant_id, r.source, r.tool_name or "-", r.reason, str(r.items), str(r.in_window))
    console.print(rates)
