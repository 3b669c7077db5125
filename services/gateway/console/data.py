"""What the console pages show, read from the stores (synchronous: routes run these in threads).

Memories come from the vector store (the source of truth for status and version chains), and no page
reads every memory of a user: the counts by type and status are facet counts of the payload index
(:meth:`~hindsight.stores.vector.VectorStore.facet`, one call per type); a page of the table is one
scroll of ids ordered by ``created_ts`` from the nearer end of the list
(:meth:`~hindsight.stores.vector.VectorStore.ordered`, no payload) and one retrieve of that page's
memories; the timeline chart is a histogram per (type, status) built from the ``created_ts`` values
the ordered scroll takes from the range index, not from the payloads (measured at 10,000 memories on
2 busy cores: ~60 ms for every value against ~300-500 ms for a three-field payload scroll, before
building 10,000 Python records). Recalls, labels, accesses come from ClickHouse
(:class:`~hindsight.analytics.store.AnalyticsStore`), quarantine from the guard's review store.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hindsight.stores.vector import MemoryFilter
from hindsight.tuning import settings_file

if TYPE_CHECKING:
    from hindsight.runtime import Resources
    from hindsight.stores.vector import OrderedRecord, VectorStore

TYPES = ("working", "episodic", "semantic")
"""Memory types in the order the page and the chart show them (others follow, sorted)."""
STATUSES = ("active", "superseded", "expired", "quarantined", "merged")
"""Memory statuses in the order the page shows them."""
ORDER_KEY = "created_ts"
"""The float-indexed payload field the table and the timeline are ordered by (epoch seconds)."""
TIMELINE_TTL_S = 30.0
"""How long a user's timeline chart data is reused by the next request (the page says so)."""
TIMELINE_BINS = 60
"""Time bins of the timeline chart (equal width between the oldest and the newest memory)."""
TIMELINE_MAX_POINTS = 1_000_000
"""Most ``created_ts`` values read per (type, status) for the chart (bounded memory per request)."""
PAGE = 50
"""Memories per page of a user's table."""
MAX_CHAIN = 100


def user_filter(
    tenant_id: str, user_id: str, status: str | None = None, memory_type: str | None = None
) -> MemoryFilter:
    """Every memory of ``user_id`` (any status), narrowed to ``status`` / ``memory_type`` when given."""
    return MemoryFilter(
        tenant_id=tenant_id,
        user_id=user_id,
        statuses=[status] if status else None,
        types=[memory_type] if memory_type else None,
    )


@dataclass(frozen=True)
class Counts:
    """A user's memories counted by type and status (``by_type``: ``{type: {status: n}}``, types in
    :data:`TYPES` order, then any other); ``total`` counts every memory, including any without a
    ``type`` or ``status`` field (which ``by_type`` cannot place)."""

    by_type: dict[str, dict[str, int]]
    total: int

    def matching(self, status: str | None, memory_type: str | None) -> int:
        """How many have this status and type (``None``/empty: any)."""
        if not status and not memory_type:
            return self.total
        return sum(
            n
            for t, by in self.by_type.items()
            if not memory_type or t == memory_type
            for s, n in by.items()
            if not status or s == status
        )


def _type_order(types: Any) -> list[str]:
    return sorted(types, key=lambda t: (TYPES.index(t) if t in TYPES else len(TYPES), t))


def read_counts(store: VectorStore, tenant_id: str, user_id: str) -> Counts:
    """Facet counts of a user's memories: one call for the types, one per type for its statuses, one
    exact count (payload indexes only, no payload read)."""
    flt = user_filter(tenant_id, user_id)
    types = store.facet(flt, "type")
    by_type = {t: store.facet(replace(flt, types=[t]), "status") for t in _type_order(types)}
    return Counts(by_type, store.count(flt))


def _through_ties(
    store: VectorStore, flt: MemoryFilter, count: int, *, descending: bool
) -> list[OrderedRecord]:
    """The first ``count`` (>= 1) points in this direction of ``created_ts`` and every point tied with
    the last of them (the engine's order among equal values changes with the scroll's limit, so a cut
    inside a tie would repeat or drop rows between pages)."""
    limit = count + 1
    while True:
        found = store.ordered(flt, ORDER_KEY, limit, descending=descending)
        if len(found) < limit or found[-1].value != found[count - 1].value:
            return found
        limit *= 2


def page_rows(
    store: VectorStore, flt: MemoryFilter, page: int, per_page: int = PAGE, total: int | None = None
) -> list[dict[str, Any]]:
    """Whole payloads (with ``id``) of page ``page`` (1-based) of the memories matching ``flt``,
    newest ``created_ts`` first, equal ``created_ts`` by id.

    One ordered scroll of ids and ``created_ts`` values only (no payload) from the nearer end of the
    list (the newest, or with ``total``, the number matching ``flt``, the oldest) through the page and
    the ties at its cut, then one retrieve of the page's own memories: the cost grows with the distance
    to the nearer end, not with the user's memory count (at most half of it).

    Raises:
        ValueError: ``page`` < 1.
    """
    if page < 1:
        raise ValueError(f"page is 1-based, got {page}")
    first = (page - 1) * per_page
    end = first + per_page
    if total is not None and total - first < end:  # nearer the oldest: read the tail, oldest first
        tail = total - first  # this page's first row and every older one
        if tail <= 0:
            return []
        ranked = sorted(_through_ties(store, flt, tail, descending=False), key=lambda r: (-r.value, r.id))
        start = max(len(ranked) - tail, 0)  # the found tail is closed under ties: a suffix of the order
        return full(store, [r.id for r in ranked[start : start + per_page]])
    ranked = sorted(_through_ties(store, flt, end, descending=True), key=lambda r: (-r.value, r.id))
    return full(store, [r.id for r in ranked[first:end]])


@dataclass(frozen=True)
class Timeline:
    """A user's memories binned by ``created_ts``: ``edges`` ``(bins + 1,)`` epoch seconds, and for each
    (type, status) present the number of memories per bin ``(bins,)``."""

    edges: np.ndarray
    series: dict[tuple[str, str], np.ndarray]
    total: int
    """Memories in the bins (those with a ``created_ts``)."""
    read_at: float
    """``time.monotonic()`` when it was read (the cache's clock)."""

    def __len__(self) -> int:
        return self.total

    def types(self) -> list[str]:
        """Types present, in :data:`TYPES` order then sorted."""
        return _type_order({t for t, _ in self.series})


def read_timeline(
    store: VectorStore, tenant_id: str, user_id: str, bins: int = TIMELINE_BINS, counts: Counts | None = None
) -> Timeline:
    """Histogram of a user's memories by ``created_ts``, per (type, status): the facet counts, then for
    each (type, status) present one ordered scroll returning only the ``created_ts`` values (no payload;
    at most :data:`TIMELINE_MAX_POINTS` each)."""
    counts = counts or read_counts(store, tenant_id, user_id)
    values: dict[tuple[str, str], np.ndarray] = {}
    for memory_type, by_status in counts.by_type.items():
        for status, n in by_status.items():
            if n <= 0:
                continue
            flt = user_filter(tenant_id, user_id, status, memory_type)
            found = store.ordered(flt, ORDER_KEY, min(n, TIMELINE_MAX_POINTS))
            values[(memory_type, status)] = np.fromiter((r.value for r in found), np.float64, len(found))
    every = [v for v in values.values() if len(v)]
    if every:
        low = min(float(v.min()) for v in every)
        high = max(float(v.max()) for v in every)
    else:
        low = high = time.time()
    edges = np.linspace(low, max(high, low + 1.0), bins + 1)
    series = {key: np.histogram(v, bins=edges)[0] for key, v in values.items()}
    return Timeline(edges, series, sum(len(v) for v in values.values()), time.monotonic())


class TimelineCache:
    """Timelines read in the last ``ttl_s`` seconds, per (tenant, user), and the chart drawn from each:
    repeated views of a user's chart share one read and one drawing. Bounded (oldest evicted first)."""

    def __init__(self, ttl_s: float = TIMELINE_TTL_S, size: int = 64) -> None:
        self._ttl = ttl_s
        self._size = size
        self._items: dict[tuple[str, str], Timeline] = {}
        self._charts: dict[tuple[str, str], tuple[Timeline, bytes]] = {}
        self._lock = threading.Lock()

    def chart(
        self, timeline: Timeline, tenant_id: str, user_id: str, render: Callable[[Timeline], bytes]
    ) -> bytes:
        """``render(timeline)``, reused while ``timeline`` is the cached read of this user (the chart
        depends on nothing else)."""
        key = (tenant_id, user_id)
        with self._lock:
            hit = self._charts.get(key)
        if hit is not None and hit[0] is timeline:
            return hit[1]
        png = render(timeline)
        with self._lock:
            self._charts[key] = (timeline, png)
            while len(self._charts) > self._size:
                self._charts.pop(next(iter(self._charts)))
        return png

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
