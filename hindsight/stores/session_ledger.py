"""Per-session ledger in Redis: which interaction events the write-trigger processed, in what order,
and which turn memories it kept (DESIGN.md section 3: episode consolidation).

Reflection reads it on session close to know whether the session's turns have all been processed
and which memories to wait for, so a close event that overtakes its own turns never yields a
partial episode. Idempotent: recording the same event twice keeps its first ordinal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote

from redis.exceptions import RedisError

from hindsight.errors import StoreUnavailableError

if TYPE_CHECKING:
    from redis.asyncio import Redis

_RECORD_LUA = """
local ordinal = redis.call('HGET', KEYS[1], ARGV[1])
if not ordinal then
  ordinal = redis.call('HLEN', KEYS[1])
  redis.call('HSET', KEYS[1], ARGV[1], ordinal)
end
if ARGV[2] ~= '' then redis.call('SADD', KEYS[2], ARGV[2]) end
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[3])
return tonumber(ordinal)
"""


class SessionLedger:
    """Processed events and kept memory ids per (tenant, user, session).

    Args:
        redis: async Redis client created by the caller.
        ttl_s: idle lifetime of a session's ledger (seconds, default 7 days).
    """

    def __init__(
        self, redis: Redis, ttl_s: int = 7 * 86_400, *, key_prefix: str = "hindsight:ledger"
    ) -> None:
        self._redis = redis
        self._ttl = ttl_s
        self._prefix = key_prefix
        self._record = redis.register_script(_RECORD_LUA)

    def _keys(self, tenant_id: str, user_id: str, session_id: str) -> tuple[str, str]:
        tag = ":".join(quote(p, safe="") for p in (tenant_id, user_id, session_id))
        return f"{self._prefix}:{{{tag}}}:events", f"{self._prefix}:{{{tag}}}:kept"

    def _stored_key(self, tenant_id: str, user_id: str, session_id: str) -> str:
        tag = ":".join(quote(p, safe="") for p in (tenant_id, user_id, session_id))
        return f"{self._prefix}:{{{tag}}}:stored"

    async def mark_stored(self, tenant_id: str, user_id: str, session_id: str, memory_ids: list[str]) -> None:
        """Record that these kept candidates reached the vector store (stored, or merged into a
        near-duplicate). Idempotent.

        Raises:
            StoreUnavailableError: Redis did not answer.
        """
        if not memory_ids:
            return
        key = self._stored_key(tenant_id, user_id, session_id)
        try:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.sadd(key, *memory_ids)
                pipe.expire(key, self._ttl)
                await pipe.execute()
        except RedisError as exc:
            raise StoreUnavailableError(f"session ledger write failed: {exc}") from exc

    async def mark_kept(self, tenant_id: str, user_id: str, session_id: str, memory_ids: list[str]) -> None:
        """Record more kept memory ids of an event already :meth:`record`-ed (the further passages of a
        long turn), so reflection waits for them too. Idempotent.

        Raises:
            StoreUnavailableError: Redis did not answer.
        """
        if not memory_ids:
            return
        _, kept = self._keys(tenant_id, user_id, session_id)
        try:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.sadd(kept, *memory_ids)
                pipe.expire(kept, self._ttl)
                await pipe.execute()
        except RedisError as exc:
            raise StoreUnavailableError(f"session ledger write failed: {exc}") from exc

    async def stored(self, tenant_id: str, user_id: str, session_id: str) -> set[str]:
        """Memory ids the embed stage stored (or merged) for this session.

        Raises:
            StoreUnavailableError: Redis did not answer.
        """
        try:
            ids = await self._redis.smembers(self._stored_key(tenant_id, user_id, session_id))
        except RedisError as exc:
            raise StoreUnavailableError(f"session ledger read failed: {exc}") from exc
        return {i.decode() if isinstance(i, bytes) else str(i) for i in ids}

    async def pending(self, tenant_id: str, user_id: str, session_id: str) -> tuple[int, set[str]]:
        """``(events processed, kept memory ids not yet stored or merged)`` of a session.

        Raises:
            StoreUnavailableError: Redis did not answer.
        """
        events, kept = self._keys(tenant_id, user_id, session_id)
        stored = self._stored_key(tenant_id, user_id, session_id)
        try:
            count = await self._redis.hlen(events)
            missing = await self._redis.sdiff([kept, stored])
        except RedisError as exc:
            raise StoreUnavailableError(f"session ledger read failed: {exc}") from exc
        return int(count), {i.decode() if isinstance(i, bytes) else str(i) for i in missing}

    async def record(
        self, tenant_id: str, user_id: str, session_id: str, event_id: str, kept_memory_id: str | None
    ) -> int:
        """Record ``event_id`` as processed (and its kept memory, if any); return its 0-based ordinal.

        Raises:
            StoreUnavailableError: Redis did not answer.
        """
        events, kept = self._keys(tenant_id, user_id, session_id)
        try:
            return int(
                await self._record(keys=[events, kept], args=[event_id, kept_memory_id or "", self._ttl])
            )
        except RedisError as exc:
            raise StoreUnavailableError(f"session ledger write failed: {exc}") from exc
