"""Forgetting (issue 13, defect 7): one memory, with everything derived from it, or a whole user.

- :meth:`ForgetService.forget`: the memory is expired (soft) or deleted (hard); its source events
  (and those of near-duplicates merged into it) are tombstoned
  (:class:`~hindsight.stores.tombstones.Tombstones`), so a replay of the same ``event_id`` does not
  bring it back; every memory derived from it (found over provenance, :mod:`hindsight.forgetting`)
  is stored again with the forgotten text redacted and the forgotten ids out of its provenance, or
  forgotten with it when it was its only source; an episode's session is also reopened, so
  reflection rebuilds it from its remaining turns.
  The forgotten turns also leave the working memory of their sessions at once (not only when the
  session closes).
- :meth:`ForgetService.forget_user`: every memory of the user is deleted, its events tombstoned and
  a watermark set (events of the user that happened before it are dropped wherever they are still in
  flight, the guard and every sink included), its Redis keys (working memory, session ledger,
  reflection queue, the guard's claim verdicts and entries) and its ClickHouse rows (access log,
  quarantine, recall log and candidates, feedback, memory inventory) deleted; the answer is
  :meth:`ForgetService.erasure_report`, which counts what is left in each store.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from hindsight.forgetting import Forgotten, derived_from, without
from hindsight.ids import turn_memory_id
from hindsight.records import from_payload, to_payload, with_merged_provenance
from hindsight.stores.reflection_queue import ReflectionQueue, session_member
from hindsight.stores.tombstones import Tombstones
from hindsight.stores.vector import MemoryFilter, VectorRecord
from hindsight.stores.working_memory import WorkingMemory
from services.gateway.errors import ForbiddenError
from services.gateway.models import ErasureReport, ForgetResult
from services.guard import claims

if TYPE_CHECKING:
    from collections.abc import Sequence

    from redis.asyncio import Redis

    from hindsight.runtime import Resources
    from schemas import Memory
    from services.gateway.auth import Principal

log = logging.getLogger("hindsight.gateway.forget")

_PAGE = 256
MAX_ROUNDS = 10
"""Depth of the cascade: a derived memory forgotten with its only source forgets what derives from it."""


def _redis_patterns(tenant_id: str, user_id: str, queue: ReflectionQueue) -> list[str]:
    """SCAN patterns of every Redis key that holds something of one user (``queue``: the
    deployment's reflection queue, whose done markers are the user's too)."""
    tag = f"{quote(tenant_id, safe='')}:{quote(user_id, safe='')}:"
    working = f"hindsight:wm:{{{tag}*"
    return [working, _ledger_pattern(tenant_id, user_id), queue.done_pattern(tenant_id, user_id)]


def _ledger_pattern(tenant_id: str, user_id: str) -> str:
    """SCAN pattern of one user's session ledgers."""
    return f"hindsight:ledger:{{{quote(tenant_id, safe='')}:{quote(user_id, safe='')}:*"


class ForgetService:
    """Forget memories and users over the process's resources (vector store, embedder, Redis,
    ClickHouse)."""

    def __init__(self, resources: Resources) -> None:
        self._resources = resources

    def _scroll(self, flt: MemoryFilter) -> list[Memory]:
        store = self._resources.vector_store()
        out: list[Memory] = []
        offset: str | None = None
        while True:
            page, offset = store.scroll(flt, _PAGE, offset)
            out.extend(with_merged_provenance(r.payload) for r in page)
            if offset is None:
                return out

    async def forget(
        self,
        principal: Principal,
        payload: dict[str, Any],
        *,
        hard: bool,
        also: Sequence[dict[str, Any]] = (),
    ) -> ForgetResult:
        """Forget the memory of ``payload`` (already checked to be the caller's) and its derivations;
        ``also`` are payloads forgotten with it (the facts extracted from it and the duplicates merged
        into it, reported as ``also_forgotten``).

        Raises:
            StoreUnavailableError / ModelUnavailableError: a store or the embedder failed (forgetting
                is idempotent: call again).
        """
        memory = with_merged_provenance(payload)
        own = from_payload(payload)
        redis = await self._resources.redis()
        with_it = [from_payload(p) for p in also if p.get("id") != own.id]
        forgotten = Forgotten.of([own, *with_it], extra_events=memory.provenance.event_ids)
        await Tombstones(redis).bury(own.tenant_id, forgotten.event_ids)
        await self._drop([own.id, *(m.id for m in with_it)], hard=hard)
        await self._forget_working(redis, own.tenant_id, own.user_id, forgotten)
        user = MemoryFilter(tenant_id=own.tenant_id, user_id=own.user_id, statuses=None)
        changed: list[str] = []
        for _ in range(MAX_ROUNDS):
            everything = await asyncio.to_thread(self._scroll, user)
            derived = [m for m in derived_from(everything, forgotten) if m.id not in changed]
            if not derived:
                break
            queue = await self._resources.reflection_queue()
            dropped = await self._rebuild(derived, forgotten, hard=hard, queue=queue)
            changed.extend(m.id for m in derived)
            if not dropped:
                break
            forgotten = Forgotten(
                forgotten.memory_ids | {m.id for m in dropped},
                forgotten.event_ids,
                forgotten.texts + tuple(m.content for m in dropped),
            )
        return ForgetResult(
            id=own.id,
            status="deleted" if hard else "expired",
            derived=changed,
            tombstoned_events=len(forgotten.event_ids),
            also_forgotten=[m.id for m in with_it],
        )

    @staticmethod
    async def _forget_working(redis: Redis, tenant_id: str, user_id: str, forgotten: Forgotten) -> None:
        """Take the forgotten turns (by memory id, and the turn of every forgotten event) out of the
        working memory of every session of the user that holds any."""
        items = sorted(forgotten.memory_ids | {turn_memory_id(tenant_id, e) for e in forgotten.event_ids})
        working = WorkingMemory(redis)
        for session in await working.sessions(tenant_id, user_id):
            await working.forget(session, items)

    async def _drop(self, ids: list[str], *, hard: bool) -> None:
        store = self._resources.vector_store()
        if hard:
            await asyncio.to_thread(store.delete, ids)
            return
        now = datetime.now(UTC)
        updates = {"status": "expired", "valid_to": now.isoformat(), "expired_ts": now.timestamp()}
        live = [
            r.id for r in await asyncio.to_thread(store.retrieve, ids) if r.payload.get("status") != "expired"
        ]
        if live:  # an already expired memory keeps when it expired
            await asyncio.to_thread(store.set_payload, live, updates)

    async def _rebuild(
        self, derived: list[Memory], forgotten: Forgotten, *, hard: bool, queue: ReflectionQueue
    ) -> list[Memory]:
        """Store each derived memory without the forgotten ones (re-embedded); forget those left
        without a source; reopen the sessions of episodes. Returns the ones forgotten."""
        kept = [(m, without(m, forgotten)) for m in derived]
        dropped = [m for m, new in kept if new is None]
        rewritten = [new for _, new in kept if new is not None]
        if dropped:
            await self._drop([m.id for m in dropped], hard=hard)
        if rewritten:
            await self._store(rewritten)
        for memory in rewritten:
            if memory.kind == "episode":
                await queue.reopen(memory.tenant_id, memory.user_id, memory.session_id, due=time.time())
        log.info(
            "derived memories rebuilt after a forget",
            extra={"rewritten": len(rewritten), "forgotten": len(dropped)},
        )
        return dropped

    async def _store(self, memories: list[Memory]) -> None:
        resources = self._resources
        store = resources.vector_store()
        vectors = await asyncio.to_thread(resources.embedder().embed_passages, [m.content for m in memories])
        old = {r.id: r.payload for r in await asyncio.to_thread(store.retrieve, [m.id for m in memories])}
        records = []
        for memory, vector in zip(memories, vectors, strict=True):
            payload = to_payload(memory) | {
                k: v for k, v in old.get(memory.id, {}).items() if k in ("expired_ts", "eviction_score")
            }
            sparse = resources.lexical().document(memory.content)
            records.append(VectorRecord(memory.id, vector, payload, sparse=sparse))
        await asyncio.to_thread(store.upsert, records)

    @staticmethod
    def _tenant_wide(principal: Principal) -> None:
        if principal.agent_id is not None:
            raise ForbiddenError(
                "forgetting a whole user needs a tenant-wide API key",
                field="Authorization",
                fix="use a key of the tenant that names no agent (KEY=TENANT)",
            )

    async def forget_user(self, principal: Principal, *, user_id: str) -> ErasureReport:
        """Erase every trace of ``user_id`` in the caller's tenant; returns what is left (nothing,
        unless a store failed part-way: call again).

        Order: the watermark first (from then on the user's in-flight events are dropped by the
        guard, ingest, reflection and every sink), then the user's event ids are gathered (memory
        provenance, session ledgers, working memory, quarantine) and tombstoned as the user's, then
        each store is erased.

        Raises:
            ForbiddenError: a per-agent key (forgetting a user is tenant-wide).
            StoreUnavailableError: a store failed (the erasure is idempotent: call again).
        """
        self._tenant_wide(principal)
        tenant = principal.tenant_id
        resources = self._resources
        redis = await resources.redis()
        tombstones = Tombstones(redis)
        now = datetime.now(UTC)
        await tombstones.bury_user(tenant, user_id, now)
        user = MemoryFilter(tenant_id=tenant, user_id=user_id, statuses=None)
        memories = await asyncio.to_thread(self._scroll, user)
        quarantined, _ = await asyncio.to_thread(resources.quarantine().user_events, tenant, user_id)
        events = {e for m in memories for e in m.provenance.event_ids} | quarantined
        events |= await self._redis_events(redis, tenant, user_id)
        await tombstones.bury_user_events(tenant, user_id, events)
        for start in range(0, len(memories), _PAGE):
            await self._drop([m.id for m in memories[start : start + _PAGE]], hard=True)
        queue = await resources.reflection_queue()
        for pattern in _redis_patterns(tenant, user_id, queue):
            keys = [key async for key in redis.scan_iter(match=pattern, count=500)]
            if keys:
                await redis.delete(*keys)
        await queue.forget_user(tenant, user_id)
        every_event = await tombstones.user_events(tenant, user_id)  # this erasure's and any earlier one's
        await claims.erase_events(redis, self._guard_prefix, tenant, every_event)
        await asyncio.to_thread(resources.access_log().erase_user, tenant, user_id)
        await asyncio.to_thread(resources.quarantine().erase_user, tenant, user_id)
        await asyncio.to_thread(resources.analytics().erase_user, tenant, user_id)
        return await self.erasure_report(principal, user_id=user_id)

    @property
    def _guard_prefix(self) -> str:
        return claims.key_prefix(self._resources.settings.kafka.group_prefix)

    @staticmethod
    async def _redis_events(redis: Redis, tenant_id: str, user_id: str) -> set[str]:
        """Event ids the user's session ledgers and working memory name."""
        events: set[str] = set()
        async for key in redis.scan_iter(match=_ledger_pattern(tenant_id, user_id), count=500):
            name = key.decode() if isinstance(key, bytes) else key
            if name.endswith(":events"):
                events |= {k.decode() if isinstance(k, bytes) else k for k in await redis.hkeys(key)}
        working = WorkingMemory(redis)
        for session in await working.sessions(tenant_id, user_id):
            events |= {item.event_id for item in await working.items(session)}
        return events

    async def erasure_report(self, principal: Principal, *, user_id: str) -> ErasureReport:
        """What of ``user_id`` is left in the vector store, Redis (the user's keys, and the guard's
        entries for the user's events), the ClickHouse access log, quarantine and analytics tables.

        Raises:
            ForbiddenError: a per-agent key.
            StoreUnavailableError: a store failed.
        """
        self._tenant_wide(principal)
        tenant = principal.tenant_id
        resources = self._resources
        redis = await resources.redis()
        user = MemoryFilter(tenant_id=tenant, user_id=user_id, statuses=None)
        memories = await asyncio.to_thread(self._scroll, user)
        keys = 0
        queue = await resources.reflection_queue()
        for pattern in _redis_patterns(tenant, user_id, queue):
            keys += len([key async for key in redis.scan_iter(match=pattern, count=500)])
        keys += await queue.parked_of_user(tenant, user_id)
        quarantined, quarantine_rows = await asyncio.to_thread(
            resources.quarantine().user_events, tenant, user_id
        )
        events = {e for m in memories for e in m.provenance.event_ids} | quarantined
        events |= await self._redis_events(redis, tenant, user_id)
        events |= await Tombstones(redis).user_events(tenant, user_id)
        remaining = {
            "vector_store": len(memories),
            "redis": keys,
            "guard_claims": await claims.held_events(redis, self._guard_prefix, tenant, events),
            "access_log": await asyncio.to_thread(resources.access_log().user_rows, tenant, user_id),
            "quarantine": quarantine_rows,
            "analytics": await asyncio.to_thread(resources.analytics().user_rows, tenant, user_id),
        }
        watermark = await Tombstones(redis).watermark(tenant, user_id)
        return ErasureReport(
            user_id=user_id,
            complete=not any(remaining.values()),
            remaining=remaining,
            forgotten_at=None if watermark is None else datetime.fromtimestamp(watermark, UTC),
        )


__all__ = ["ForgetService", "session_member"]
