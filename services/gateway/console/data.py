"""What the console pages show, read from the stores (synchronous: routes run these in threads).

Memories come from the vector store (the source of truth for status and version chains), read with
a payload include-list: a user's timeline needs five small fields per memory, not the text, which is
what keeps a user with 10,000 memories under the console's 500 ms budget. Recalls, labels, accesses
come from ClickHouse (:class:`~hindsight.analytics.store.AnalyticsStore`), quarantine from the
guard's review store.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hindsight.stores.vector import MemoryFilter
from hindsight.tuning import settings_file

if TYPE_CHECKING:
    from hindsight.runtime import Resources
    from hindsight.stores.vector import VectorStore

TIMELINE_FIELDS = ("created_ts", "type", "status")
"""Payload keys the timeline reads per memory."""
TIMELINE_TTL_S = 30.0
"""How long a user's timeline is reused by the next request (the page says when it was read)."""
PAGE = 50
"""Memories per page of a user's table."""
SCROLL_PAGE = 4096
MAX_CHAIN = 100


@dataclass(frozen=True)
class Timeline:
    """A user's memories as columns, newest first (``created`` in epoch seconds)."""

    ids: list[str]
    created: np.ndarray
    types: list[str]
    statuses: list[str]
    read_at: float
    """``time.monotonic()`` when it was read (the cache's clock)."""

    def __len__(self) -> int:
        return len(self.ids)

    def select(self, status: str | None, memory_type: str | None) -> list[str]:
        """Ids (newest first) with this status and type (``None``/empty: any)."""
        return [
            i
            for i, s, t in zip(self.ids, self.statuses, self.types, strict=True)
            if (not status or s == status) and (not memory_type or t == memory_type)
        ]

    def counts(self) -> dict[str, dict[str, int]]:
        """``{type: {status: n}}``."""
        out: dict[str, dict[str, int]] = {}
        for (t, s), n in Counter(zip(self.types, self.statuses, strict=True)).items():
            out.setdefault(t, {})[s] = n
        return out


def read_timeline(store: VectorStore, tenant_id: str, user_id: str) -> Timeline:
    """Every memory of ``user_id`` (all statuses) with the timeline fields only, newest first."""
    flt = MemoryFilter(tenant_id=tenant_id, user_id=user_id, statuses=None)
    ids: list[str] = []
    created: list[float] = []
    types: list[str] = []
    statuses: list[str] = []
    offset: str | None = None
    while True:
        page, offset = store.scroll(flt, SCROLL_PAGE, offset, fields=TIMELINE_FIELDS)
        for r in page:
            p = r.payload
            ids.append(r.id)
            created.append(float(p.get("created_ts", 0.0)))
            types.append(str(p.get("type", "episodic")))
            statuses.append(str(p.get("status", "active")))
        if offset is None:
            break
    order = np.argsort(-np.asarray(created, dtype=np.float64), kind="stable")
    return Timeline(
        [ids[i] for i in order],
        np.asarray(created, dtype=np.float64)[order],
        [types[i] for i in order],
        [statuses[i] for i in order],
        time.monotonic(),
    )


class TimelineCache:
    """Timelines read in the last ``ttl_s`` seconds, per (tenant, user): the user page, its chart and
    its next pages share one read. Bounded (oldest evicted first)."""

    def __init__(self, ttl_s: float = TIMELINE_TTL_S, size: int = 64) -> None:
        self._ttl = ttl_s
        self._size = size
        self._items: dict[tuple[str, str], Timeline] = {}
        self._lock = threading.Lock()

    def get(self, store: VectorStore, tenant_id: str, user_id: str, *, fresh: bool = False) -> Timeline:
        """The cached timeline, or a new read (``fresh`` forces one)."""
        key = (tenant_id, user_id)
        with self._lock:
            hit = self._items.get(key)
        if hit is not None and not fresh and time.monotonic() - hit.read_at < self._ttl:
            return hit
        timeline = read_timeline(store, tenant_id, user_id)
        with self._lock:
            self._items[key] = timeline
            while len(self._items) > self._size:
                self._items.pop(next(iter(self._items)))
        return timeline


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
