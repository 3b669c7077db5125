"""What the console pages show, read from the stores (synchronous: routes run these in threads).

Memories come from the vector store (the source of truth for status and version chains), read with
a payload include-list: a user's timeline needs five small fields per memory, not the text, which is
what keeps a user with 10,000 memories under the console's 500 ms budget. Recalls, labels, accesses
come from ClickHouse (:class:`~hindsight.analytics.store.AnalyticsStore`), quarantine from the
guard's review store.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hindsight.stores.vector import MemoryFilter
from hindsight.tuning import settings_file

if TYPE_CHECKING:
    from hindsight.runtime import Resources
    from hindsight.stores.vector import VectorStore

TIMELINE_FIELDS = ("created_ts", "type", "status", "kind", "version")
"""Payload keys the timeline reads per memory."""
PAGE = 50
"""Memories per page of a user's table."""
SCROLL_PAGE = 4096
MAX_CHAIN = 100


@dataclass(frozen=True)
class TimelinePoint:
    """One memory on a user's timeline."""

    id: str
    created_ts: float
    type: str
    status: str
    kind: str
    version: int


def timeline(
    store: VectorStore, tenant_id: str, user_id: str, scopes: tuple[str, ...] | None
) -> list[TimelinePoint]:
    """Every memory of ``user_id`` (all statuses), newest first, with the timeline fields only."""
    flt = MemoryFilter(tenant_id=tenant_id, user_id=user_id, scopes=scopes, statuses=None)
    points: list[TimelinePoint] = []
    offset: str | None = None
    while True:
        page, offset = store.scroll(flt, SCROLL_PAGE, offset, fields=TIMELINE_FIELDS)
        for r in page:
            p = r.payload
            points.append(
                TimelinePoint(
                    r.id,
                    float(p.get("created_ts", 0.0)),
                    str(p.get("type", "episodic")),
                    str(p.get("status", "active")),
                    str(p.get("kind", "turn")),
                    int(p.get("version", 1)),
                )
            )
        if offset is None:
            break
    points.sort(key=lambda m: (-m.created_ts, m.id))
    return points


def counts(points: list[TimelinePoint]) -> dict[str, dict[str, int]]:
    """``{type: {status: n}}`` of a timeline."""
    out: dict[str, dict[str, int]] = {}
    for (t, s), n in Counter((m.type, m.status) for m in points).items():
        out.setdefault(t, {})[s] = n
    return out


def full(store: VectorStore, ids: list[str]) -> list[dict[str, Any]]:
    """Whole payloads (with ``id``) of ``ids``, in that order."""
    return [{"id": r.id, **r.payload} for r in store.retrieve(ids)]


def chain(store: VectorStore, tenant_id: str, memory_id: str) -> list[dict[str, Any]]:
    """The memory and its older versions (``parent_id``), newest first; another tenant's id: ``[]``."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    current: str | None = memory_id
    while current and current not in seen and len(out) < MAX_CHAIN:
        try:
            records = store.retrieve([current])
        except ValueError:  # not a UUID
            break
        if not records or records[0].payload.get("tenant_id") != tenant_id:
            break
        seen.add(current)
        out.append({"id": records[0].id, **records[0].payload})
        parent = records[0].payload.get("parent_id")
        current = str(parent) if parent else None
    return out


def when(ts: float | None) -> str:
    """``YYYY-MM-DD HH:MM`` UTC of epoch seconds (empty for none)."""
    if not ts:
        return ""
    return datetime.fromtimestamp(float(ts), UTC).strftime("%Y-%m-%d %H:%M")


@dataclass(frozen=True)
class TuningView:
    """The tuning page: what this process loaded, what the file holds, the last report and its plots."""

    path: Path
    loaded: dict[str, Any]
    file: settings_file.TunedFile | None
    report: dict[str, Any] | None
    plots: list[str]


def tuning_view(resources: Resources) -> TuningView:
    """Read the tuned-settings file, the last ``report.json`` and the plot names beside it."""
    path = settings_file.TuningSettings().path(resources.settings.runtime.data_dir)
    doc = settings_file.load(path)
    report_path = path.parent / "report.json"
    report = json.loads(report_path.read_text(encoding="utf-8")) if report_path.exists() else None
    folder = path.parent / "plots"
    plots = sorted(p.stem for p in folder.glob("*.png")) if folder.exists() else []
    loaded = {name: applied.as_dict() for name, applied in resources.tuned.items()}
    return TuningView(path, loaded, doc, report, plots)


def plot_path(resources: Resources, name: str) -> Path | None:
    """The PNG ``name`` of the last tuning run, if it exists (``name`` is a plain word)."""
    if not name.replace("_", "").isalnum():
        return None
    path = (
        settings_file.TuningSettings().path(resources.settings.runtime.data_dir).parent
        / "plots"
        / f"{name}.png"
    )
    return path if path.exists() else None
