"""Tombstones of forgotten events and users, in Redis (issue 13, defect 7).

Forgetting a memory leaves a tombstone for every event it rests on, so a replay of the same
``event_id`` (an agent re-sending, ``hindsight dlq replay``, a redelivered candidate) does not bring
it back: the write-trigger and the embed stage drop a tombstoned event, and reflection does not
compress it into working-memory leftovers. Forgetting a whole user leaves a watermark: every event of
that user that happened before it (``occurred_at``) is dropped wherever it still is in flight.

Keys: ``<prefix>:{<tenant>}:events`` (set of event ids), ``<prefix>:{<tenant>}:users`` (hash: user ->
forgotten-at epoch seconds), ``<prefix>:{<tenant>}:user:<user>`` (set: the event ids of a forgotten
user, so an erasure report can still look for them in stores keyed by event). Tombstones hold ids
only, never content, and are kept for good.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING
from urllib.parse import quote

from redis.exceptions import RedisError

from hindsight.errors import StoreUnavailableError

if TYPE_CHECKING:
    from redis.asyncio import Redis


class Tombstones:
    """Forgotten event ids and forgotten users, per tenant.

    Args:
        redis: async Redis client created by the caller.
    """

    def __init__(self, redis: Redis, *, key_prefix: str = "hindsight:tomb") -> None:
        self._redis = redis
        self._prefix = key_prefix

    def _events(self, tenant_id: str) -> str:
        return f"{self._prefix}:{{{quote(tenant_id, safe='')}}}:events"

    def _users(self, tenant_id: str) -> str:
        return f"{self._prefix}:{{{quote(tenant_id, safe='')}}}:users"

    async def bury(self, tenant_id: str, event_ids: Iterable[str]) -> None:
        """Tombstone these events of ``tenant_id``. Idempotent.

        Raises:
            StoreUnavailableError: Redis did not answer.
        """
        ids = sorted(set(event_ids))
        if not ids:
            return
        try:
            await self._redis.sadd(self._events(tenant_id), *ids)
        except RedisError as exc:
            raise StoreUnavailableError(f"tombstone write failed: {exc}") from exc

    def _user_events(self, tenant_id: str, user_id: str) -> str:
        return f"{self._prefix}:{{{quote(tenant_id, safe='')}}}:user:{quote(user_id, safe='')}"

    async def bury_user_events(self, tenant_id: str, user_id: str, event_ids: Iterable[str]) -> None:
        """Tombstone these events and remember them as ``user_id``'s (see :meth:`user_events`).

        Raises:
            StoreUnavailableError: Redis did not answer.
        """
        ids = sorted(set(event_ids))
        if not ids:
            return
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.sadd(self._events(tenant_id), *ids)
                pipe.sadd(self._user_events(tenant_id, user_id), *ids)
                await pipe.execute()
        except RedisError as exc:
            raise StoreUnavailableError(f"tombstone write failed: {exc}") from exc

    async def user_events(self, tenant_id: str, user_id: str) -> set[str]:
        """The event ids tombstoned as ``user_id``'s by :meth:`bury_user_events`.

        Raises:
            StoreUnavailableError: Redis did not answer.
        """
        try:
            raw = await self._redis.smembers(self._user_events(tenant_id, user_id))
        except RedisError as exc:
            raise StoreUnavailableError(f"tombstone read failed: {exc}") from exc
        return {r.decode() if isinstance(r, bytes) else str(r) for r in raw}

    async def watermark(self, tenant_id: str, user_id: str) -> float | None:
        """When ``user_id`` was forgotten (epoch seconds), or None.

        Raises:
            StoreUnavailableError: Redis did not answer.
        """
        try:
            raw = await self._redis.hget(self._users(tenant_id), user_id)
        except RedisError as exc:
            raise StoreUnavailableError(f"tombstone read failed: {exc}") from exc
        return None if raw is None else float(raw)

    async def bury_user(self, tenant_id: str, user_id: str, at: datetime) -> None:
        """Tombstone every event of ``user_id`` that happened before ``at`` (tz-aware). Idempotent: the
        latest watermark wins.

        Raises:
            StoreUnavailableError: Redis did not answer.
        """
        try:
            await self._redis.hset(self._users(tenant_id), user_id, at.timestamp())
        except RedisError as exc:
            raise StoreUnavailableError(f"tombstone write failed: {exc}") from exc

    async def buried(self, tenant_id: str, user_id: str, events: Iterable[tuple[str, datetime]]) -> set[str]:
        """The ids among ``events`` (``(event_id, occurred_at)`` of one user) that are tombstoned: by
        id, or by the user's watermark.

        Raises:
            StoreUnavailableError: Redis did not answer.
        """
        pairs = list(events)
        if not pairs:
            return set()
        ids = [event_id for event_id, _ in pairs]
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.smismember(self._events(tenant_id), ids)
                pipe.hget(self._users(tenant_id), user_id)
                flags, watermark = await pipe.execute()
        except RedisError as exc:
            raise StoreUnavailableError(f"tombstone read failed: {exc}") from exc
        out = {event_id for event_id, flag in zip(ids, flags, strict=True) if flag}
        if watermark is not None:
            before = float(watermark)
            out |= {event_id for event_id, at in pairs if at.timestamp() < before}
        return out


async def buried_in(
    tombstones: Tombstones | None, items: Iterable[tuple[str, str, str, datetime]]
) -> set[str]:
    """The event ids among ``items`` (``(tenant, user, event_id, occurred_at)``) that are tombstoned,
    one Redis round trip per user; nothing when ``tombstones`` is None.

    Raises:
        StoreUnavailableError: Redis did not answer.
    """
    if tombstones is None:
        return set()
    by_user: dict[tuple[str, str], list[tuple[str, datetime]]] = {}
    for tenant, user, event_id, at in items:
        by_user.setdefault((tenant, user), []).append((event_id, at))
    out: set[str] = set()
    for (tenant, user), events in by_user.items():
        out |= await tombstones.buried(tenant, user, events)
    return out
