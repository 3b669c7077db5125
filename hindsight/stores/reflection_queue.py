"""Session closes waiting for their turns, and sessions already reflected, in Redis (issue 13, defect 10).

A close whose turns are not all processed yet is *parked* here instead of holding up its Kafka
partition: the reflect consumer commits and moves on to the next close (another user's, say), and a
sweeper (:meth:`services.reflect.stage.ReflectStage.sweep`) reflects the parked close when its turns
are in, or when its grace period is over. So one user's claim (``event_count = 10**12``) costs the
others nothing.

A reflected session is *marked done* (its close kept for 7 days): a turn of that session that
arrives later (ingest lagged past the grace period) *reopens* it, parking the close again, so the
episode is rebuilt with the late turn instead of never being made.

Keys: ``<prefix>:parked`` (sorted set: session -> due time, epoch seconds), ``<prefix>:close`` (hash:
session -> close JSON), ``<prefix>:since`` (hash: session -> when it was parked: the grace period's
start), ``<prefix>:done:<session>`` (string: the close JSON, with a TTL). Every operation is one
atomic script or command, so several reflect processes may share the queue: a claim leases the
items it returns (their due time moves ``lease_s`` ahead), and an item whose claimer died becomes due
again when the lease ends.

The prefix belongs to one deployment (:func:`key_prefix`: ``<consumer group prefix>:reflect``): two
deployments that share a Redis but not a vector store must not claim each other's closes (a sweeper
that claimed a stranger's close would find none of its turns and write its lesson into the wrong
store).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import quote

from redis.exceptions import RedisError

from hindsight.errors import StoreUnavailableError
from schemas import SessionClosedEvent

if TYPE_CHECKING:
    from redis.asyncio import Redis

_CLAIM_LUA = """
local items = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for _, member in ipairs(items) do
  redis.call('ZADD', KEYS[1], ARGV[2], member)
  local close = redis.call('HGET', KEYS[2], member)
  local since = redis.call('HGET', KEYS[3], member)
  if close then
    table.insert(out, close)
    table.insert(out, since or ARGV[1])
  else
    redis.call('ZREM', KEYS[1], member)
  end
end
return out
"""

_REOPEN_LUA = """
local close = redis.call('GET', KEYS[4])
if not close then return 0 end
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], close)
redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
return 1
"""


@dataclass(frozen=True)
class Parked:
    """A claimed close and when its grace period started (epoch seconds)."""

    close: SessionClosedEvent
    since: float


def key_prefix(group_prefix: str) -> str:
    """The Redis key prefix of a deployment's queue (``<group prefix>:reflect``; the default group
    prefix ``hindsight`` gives ``hindsight:reflect``)."""
    return f"{group_prefix}:reflect"


def session_member(tenant_id: str, user_id: str, session_id: str) -> str:
    """The queue's name of a session (each part URL-quoted, joined by ``:``)."""
    return ":".join(quote(p, safe="") for p in (tenant_id, user_id, session_id))


class ReflectionQueue:
    """Parked session closes and reflected sessions of every tenant.

    Args:
        redis: async Redis client created by the caller.
        done_ttl_s: how long a reflected session can be reopened by a late turn (default 7 days,
            the session ledger's lifetime).
    """

    def __init__(
        self, redis: Redis, *, done_ttl_s: int = 7 * 86_400, key_prefix: str = "hindsight:reflect"
    ) -> None:
        self._redis = redis
        self._ttl = done_ttl_s
        self._parked = f"{key_prefix}:parked"
        self._close = f"{key_prefix}:close"
        self._since = f"{key_prefix}:since"
        self._done = f"{key_prefix}:done:"
        self._claim = redis.register_script(_CLAIM_LUA)
        self._reopen = redis.register_script(_REOPEN_LUA)

    @staticmethod
    def _member(close: SessionClosedEvent) -> str:
        return session_member(close.tenant_id, close.user_id, close.session_id)

    async def park(self, close: SessionClosedEvent, *, due: float, since: float | None = None) -> None:
        """Park ``close`` until ``due`` (epoch seconds). ``since`` (default: now, or the time it was
        first parked if it is parked already) starts its grace period. The latest close of a session
        wins.

        Raises:
            StoreUnavailableError: Redis did not answer.
        """
        member = self._member(close)
        try:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.zadd(self._parked, {member: due})
                pipe.hset(self._close, member, close.model_dump_json())
                if since is None:
                    pipe.hsetnx(self._since, member, time.time())
                else:
                    pipe.hset(self._since, member, since)
                await pipe.execute()
        except RedisError as exc:
            raise StoreUnavailableError(f"reflection queue write failed: {exc}") from exc

    async def claim(self, *, now: float, lease_s: float, limit: int) -> list[Parked]:
        """Up to ``limit`` closes due at ``now``, leased for ``lease_s`` seconds (another claimer does
        not get them before the lease ends; :meth:`done` or :meth:`park` ends it).

        Raises:
            StoreUnavailableError: Redis did not answer.
        """
        try:
            raw = await self._claim(
                keys=[self._parked, self._close, self._since], args=[now, now + lease_s, limit]
            )
        except RedisError as exc:
            raise StoreUnavailableError(f"reflection queue read failed: {exc}") from exc
        return [
            Parked(SessionClosedEvent.model_validate_json(raw[i]), float(raw[i + 1]))
            for i in range(0, len(raw), 2)
        ]

    async def next_due(self) -> float | None:
        """When the earliest parked close comes due (epoch seconds; a claimed one when its lease
        ends), or None when nothing is parked.

        Raises:
            StoreUnavailableError: Redis did not answer.
        """
        try:
            first = await self._redis.zrange(self._parked, 0, 0, withscores=True)
        except RedisError as exc:
            raise StoreUnavailableError(f"reflection queue read failed: {exc}") from exc
        return float(first[0][1]) if first else None

    async def done(self, close: SessionClosedEvent) -> None:
        """The session was reflected: unpark it and remember its close, so a late turn reopens it.

        Raises:
            StoreUnavailableError: Redis did not answer.
        """
        member = self._member(close)
        try:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.zrem(self._parked, member)
                pipe.hdel(self._close, member)
                pipe.hdel(self._since, member)
                pipe.set(self._done + member, close.model_dump_json(), ex=self._ttl)
                await pipe.execute()
        except RedisError as exc:
            raise StoreUnavailableError(f"reflection queue write failed: {exc}") from exc

    async def reopen(self, tenant_id: str, user_id: str, session_id: str, *, due: float) -> bool:
        """A turn of this session arrived: if the session was reflected already (and is not parked),
        park its close again until ``due``. Returns whether it was reopened.

        Raises:
            StoreUnavailableError: Redis did not answer.
        """
        member = session_member(tenant_id, user_id, session_id)
        try:
            reopened = await self._reopen(
                keys=[self._parked, self._close, self._since, self._done + member],
                args=[member, due, time.time()],
            )
        except RedisError as exc:
            raise StoreUnavailableError(f"reflection queue write failed: {exc}") from exc
        return bool(reopened)

    async def parked(self) -> int:
        """How many closes are parked (a gauge for metrics and tests).

        Raises:
            StoreUnavailableError: Redis did not answer.
        """
        try:
            return int(await self._redis.zcard(self._parked))
        except RedisError as exc:
            raise StoreUnavailableError(f"reflection queue read failed: {exc}") from exc

    async def is_parked(self, close: SessionClosedEvent) -> bool:
        """Whether ``close``'s session is parked.

        Raises:
            StoreUnavailableError: Redis did not answer.
        """
        try:
            return await self._redis.zscore(self._parked, self._member(close)) is not None
        except RedisError as exc:
            raise StoreUnavailableError(f"reflection queue read failed: {exc}") from exc

    async def _user_members(self, tenant_id: str, user_id: str) -> list[str]:
        prefix = f"{quote(tenant_id, safe='')}:{quote(user_id, safe='')}:"
        members = []
        async for member, _ in self._redis.zscan_iter(self._parked, match=f"{prefix}*"):
            members.append(member.decode() if isinstance(member, bytes) else str(member))
        return members

    async def parked_of_user(self, tenant_id: str, user_id: str) -> int:
        """How many closes of one user are parked.

        Raises:
            StoreUnavailableError: Redis did not answer.
        """
        try:
            return len(await self._user_members(tenant_id, user_id))
        except RedisError as exc:
            raise StoreUnavailableError(f"reflection queue read failed: {exc}") from exc

    def done_pattern(self, tenant_id: str, user_id: str) -> str:
        """SCAN pattern of the done markers of one user's sessions (plain keys the caller deletes)."""
        return f"{self._done}{quote(tenant_id, safe='')}:{quote(user_id, safe='')}:*"

    async def forget_user(self, tenant_id: str, user_id: str) -> None:
        """Drop every parked close of one user (their done markers, :meth:`done_pattern`, are plain
        keys the caller deletes).

        Raises:
            StoreUnavailableError: Redis did not answer.
        """
        try:
            members = await self._user_members(tenant_id, user_id)
            if members:
                async with self._redis.pipeline(transaction=True) as pipe:
                    pipe.zrem(self._parked, *members)
                    pipe.hdel(self._close, *members)
                    pipe.hdel(self._since, *members)
                    await pipe.execute()
        except RedisError as exc:
            raise StoreUnavailableError(f"reflection queue write failed: {exc}") from exc
