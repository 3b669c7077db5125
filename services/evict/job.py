"""The scheduled eviction run: score every memory, refresh counters, expire, delete (DESIGN.md s2, s4).

Reads access totals from the ClickHouse access log (deduplicated) and pages through the vector store;
writes are idempotent (setting a status twice is a no-op), so a run interrupted half-way is simply
repeated by the next one.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from prometheus_client import Counter

from hindsight.errors import RetryableError
from services.evict.policy import AccessTotals, decide, effective_access_count

if TYPE_CHECKING:
    from hindsight.stores.accesslog import AccessLogStore
    from hindsight.stores.vector import VectorStore
    from services.evict.settings import EvictSettings

log = logging.getLogger("hindsight.evict")
EVICTED = Counter("hindsight_evictions_total", "Memories expired or deleted by the eviction job", ["action"])
_PAGE = 512


@dataclass(frozen=True)
class EvictionReport:
    """Counts of one run."""

    scanned: int
    updated: int
    expired: int
    deleted: int


class EvictionJob:
    """Runs :func:`services.evict.policy.decide` over every memory of every tenant."""

    def __init__(self, store: VectorStore, access_log: AccessLogStore, settings: EvictSettings) -> None:
        self._store = store
        self._log = access_log
        self._cfg = settings

    def _all_payloads(self) -> list[tuple[str, dict[str, Any]]]:
        out: list[tuple[str, dict[str, Any]]] = []
        offset: str | None = None
        while True:
            records, offset = self._store.scroll(None, _PAGE, offset)
            out.extend((r.id, r.payload) for r in records)
            if offset is None:
                return out

    def run_once(self, now: datetime | None = None) -> EvictionReport:
        """One full pass (blocking; call from a thread). ``now`` defaults to the current UTC time.

        Raises:
            StoreUnavailableError: the vector store or ClickHouse failed (the next run repeats).
        """
        now = now or datetime.now(UTC)
        memories = self._all_payloads()
        logged: dict[str, AccessTotals] = {}
        for tenant in sorted({p["tenant_id"] for _, p in memories}):
            for stat in self._log.access_stats(tenant):
                logged[stat.memory_id] = AccessTotals(stat.access_count, stat.last_accessed_at.timestamp())
        max_count: dict[tuple[str, str], int] = defaultdict(int)
        for mid, p in memories:
            owner = (p["tenant_id"], p["user_id"])
            max_count[owner] = max(max_count[owner], effective_access_count(p, logged.get(mid)))
        counts = {"update": 0, "expire": 0, "delete": 0}
        to_delete: list[str] = []
        for mid, p in memories:
            decision = decide(
                p,
                logged.get(mid),
                max_count[(p["tenant_id"], p["user_id"])],
                now,
                expire_below=self._cfg.expire_below,
                retention_days=self._cfg.retention_days,
                decay_per_day=self._cfg.decay_for(p.get("type")),
            )
            if decision.action == "delete":
                to_delete.append(mid)
            elif decision.updates:
                self._store.set_payload([mid], decision.updates)
            if decision.action != "keep":
                counts[decision.action] += 1
        if to_delete:
            self._store.delete(to_delete)
        for action in ("expire", "delete"):
            EVICTED.labels(action).inc(counts[action])
        report = EvictionReport(len(memories), counts["update"], counts["expire"], counts["delete"])
        log.info("eviction run", extra=report.__dict__)
        return report


async def run_forever(job: EvictionJob, interval_s: float) -> None:
    """Run ``job`` every ``interval_s`` seconds until cancelled (first run after one interval)."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            await asyncio.to_thread(job.run_once)
        except RetryableError as exc:
            log.warning("eviction run failed, next run repeats it", extra={"error": repr(exc)})
