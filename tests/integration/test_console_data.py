"""The console's reads against the real embedded Qdrant engine (qdrant-edge): counts by type and
status, pages of a user's table newest first, the binned timeline and its chart, each checked against
the payloads written (a brute force over what was stored), with another user and another tenant in the
same store that must never leak in."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hindsight.stores.vector import VectorRecord
from hindsight.stores.vector_edge import EdgeVectorStore
from services.gateway.console import data
from services.gateway.console.charts import size_px, timeline_png

pytestmark = pytest.mark.integration

DIM = 8
TENANT, USER = "t-console", "u-heavy"
N = 537
NOW = 1_790_000_000.0


def _day(rng: np.random.Generator, k: int) -> float:
    if k % 5 == 0:
        return 3.0
    return float(rng.integers(0, 200) if k % 7 else rng.uniform(0, 200))


def _payloads(rng: np.random.Generator) -> list[tuple[str, dict[str, Any]]]:
    out = []
    owners = [(TENANT, USER)] * N + [(TENANT, "u-other")] * 40 + [("t-other", USER)] * 40
    for k, (tenant, user) in enumerate(owners):
        out.append(
            (
                str(uuid.UUID(int=int(rng.integers(1, 2**62)) << 32 | k)),
                {
                    "tenant_id": tenant,
                    "user_id": user,
                    "type": str(rng.choice(["episodic", "episodic", "semantic", "working"])),
                    "status": str(rng.choice(["active"] * 6 + ["superseded", "expired", "quarantined"])),
                    # equal timestamps (whole days; one batch of ~120 at one instant, as passages of
                    # one long event): ties must not repeat or drop rows across pages
                    "created_ts": NOW - 86_400.0 * _day(rng, k),
                    "content": f"memory {k}",
                },
            )
        )
    return out


@pytest.fixture(scope="module")
def stored(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[EdgeVectorStore, list[tuple[str, dict[str, Any]]]]]:
    rng = np.random.default_rng(11)
    points = _payloads(rng)
    store = EdgeVectorStore(Path(tmp_path_factory.mktemp("console")) / "edge", DIM, flush_on_write=False)
    vectors = rng.standard_normal((len(points), DIM)).astype(np.float32)
    store.upsert([VectorRecord(i, v, p) for (i, p), v in zip(points, vectors, strict=True)])
    mine = [(i, p) for i, p in points if p["tenant_id"] == TENANT and p["user_id"] == USER]
    try:
        yield store, mine
    finally:
        store.close()


def test_counts_by_type_and_status_match_the_payloads(stored: tuple[EdgeVectorStore, list[Any]]) -> None:
    store, mine = stored
    counts = data.read_counts(store, TENANT, USER)
    expected = Counter((p["type"], p["status"]) for _, p in mine)
    assert counts.total == N
    assert {(t, s): n for t, by in counts.by_type.items() for s, n in by.items()} == dict(expected)
    assert list(counts.by_type) == [t for t in data.TYPES if t in counts.by_type]
    assert counts.matching(None, None) == N
    assert counts.matching("expired", None) == sum(p["status"] == "expired" for _, p in mine)
    assert counts.matching("active", "semantic") == expected[("semantic", "active")]
    assert data.read_counts(store, TENANT, "nobody").total == 0


@pytest.mark.parametrize(("status", "memory_type"), [(None, None), ("active", None), ("expired", "episodic")])
def test_pages_list_every_memory_once_newest_first(
    stored: tuple[EdgeVectorStore, list[Any]], status: str | None, memory_type: str | None
) -> None:
    store, mine = stored
    wanted = [
        (p["created_ts"], i)
        for i, p in mine
        if (status is None or p["status"] == status) and (memory_type is None or p["type"] == memory_type)
    ]
    flt = data.user_filter(TENANT, USER, status, memory_type)
    per_page = 40
    seen: list[dict[str, Any]] = []
    from_tail: list[dict[str, Any]] = []  # the same pages, the later half read from the oldest end
    for page in range(1, -(-len(wanted) // per_page) + 1):
        rows = data.page_rows(store, flt, page, per_page)
        assert len(rows) == min(per_page, len(wanted) - (page - 1) * per_page)
        seen.extend(rows)
        from_tail.extend(data.page_rows(store, flt, page, per_page, total=len(wanted)))
    order = [i for _, i in sorted(wanted, key=lambda w: (-w[0], w[1]))]
    assert [r["id"] for r in seen] == order
    assert [r["id"] for r in from_tail] == order
    assert data.page_rows(store, flt, 10_000, per_page, total=len(wanted)) == []
    assert all(r["tenant_id"] == TENANT and r["user_id"] == USER and r["content"] for r in seen)
    assert data.page_rows(store, flt, 10_000, per_page) == []
    with pytest.raises(ValueError, match="1-based"):
        data.page_rows(store, flt, 0)


def test_timeline_bins_every_memory_by_type_and_status(stored: tuple[EdgeVectorStore, list[Any]]) -> None:
    store, mine = stored
    timeline = data.read_timeline(store, TENANT, USER, bins=25)
    created = np.asarray([p["created_ts"] for _, p in mine])
    assert len(timeline) == N
    assert timeline.edges[0] == created.min()
    assert timeline.edges[-1] == pytest.approx(created.max())
    for (memory_type, status), counts in timeline.series.items():
        values = [p["created_ts"] for _, p in mine if p["type"] == memory_type and p["status"] == status]
        np.testing.assert_array_equal(counts, np.histogram(values, bins=timeline.edges)[0])
    assert sum(int(c.sum()) for c in timeline.series.values()) == N
    assert timeline.types() == [t for t in data.TYPES if any(k[0] == t for k in timeline.series)]
    png = timeline_png(timeline, "u-heavy")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert (int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")) == size_px()
    empty = data.read_timeline(store, TENANT, "nobody")
    assert len(empty) == 0
    assert timeline_png(empty, "nobody")[:8] == b"\x89PNG\r\n\x1a\n"


def test_timeline_cache_reuses_a_read_until_fresh(stored: tuple[EdgeVectorStore, list[Any]]) -> None:
    store, _ = stored
    cache = data.TimelineCache(ttl_s=60.0, size=1)
    first = cache.get(store, TENANT, USER)
    assert cache.get(store, TENANT, USER) is first
    drawn: list[int] = []

    def render(timeline: data.Timeline) -> bytes:
        drawn.append(len(timeline))
        return timeline_png(timeline, "t")

    png = cache.chart(first, TENANT, USER, render)
    assert cache.chart(first, TENANT, USER, render) is png
    assert drawn == [N]  # drawn once for one read
    again = cache.get(store, TENANT, USER, fresh=True)
    assert again is not first
    assert cache.chart(again, TENANT, USER, render)[:8] == b"\x89PNG\r\n\x1a\n"
    assert drawn == [N, N]  # a new read is drawn again
    other = cache.get(store, TENANT, "u-other")
    assert len(other) == 40
    assert cache.get(store, TENANT, USER) is not first  # evicted: the cache holds one user
