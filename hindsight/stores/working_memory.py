"""Per-session working memory in Redis with importance-weighted eviction (DESIGN.md section 2).

A session holds at most ``capacity`` items (default 8). Pushing an item into a full session pushes
out the item with the lowest score ``importance * exp(-lam * age_turns)`` (lam 0.1; see
:func:`hindsight.scoring.working_memory_score`) and hands it back to the caller, which compresses it
into episodic memory: an item is never just dropped.

Redis layout per session (all keys share one ``{...}`` hash tag, so a cluster keeps them on one
slot, and all carry the session TTL, refreshed by every push):

- ``<prefix>:{<tenant>:<user>:<session>}:items``  hash, item id -> item JSON
- ``<prefix>:{<tenant>:<user>:<session>}:rank``   sorted set, item id -> eviction rank (see
  :func:`eviction_rank`); ``ZPOPMIN`` yields the lowest-scoring item
- ``<prefix>:{<tenant>:<user>:<session>}:pushes`` hash, item id -> JSON array of the items its push
  evicted: the idempotency record (one small entry per pushed item, for the session's lifetime)

Every push runs as one Lua script, so concurrent pushers never see a half-applied push.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal
from urllib.parse import quote, unquote

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field
from redis.asyncio import Redis
from redis.exceptions import RedisError, WatchError
from redis.typing import EncodableT, FieldT

from hindsight.errors import StoreUnavailableError

DEFAULT_CAPACITY = 8
"""Working-memory capacity in items (DESIGN.md section 2; the seed article says N = 5..10)."""

DEFAULT_LAMBDA = 0.1
"""Decay rate per turn of the working-memory score (DESIGN.md section 2)."""

DEFAULT_TTL_S = 86_400
"""Idle lifetime of a session's working memory in seconds (refreshed by every push)."""

# KEYS[1] items hash, KEYS[2] rank zset, KEYS[3] pushes hash.
# ARGV[1] item id, ARGV[2] item JSON, ARGV[3] eviction rank, ARGV[4] capacity, ARGV[5] ttl seconds.
# Returns {duplicate (0|1), JSON array of the evicted items' JSON}.
_PUSH_LUA = """
local prior = redis.call('HGET', KEYS[3], ARGV[1])
if prior then
  return {1, prior}
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
local evicted = {}
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[4])
if over > 0 then
  local popped = redis.call('ZPOPMIN', KEYS[2], over)
  for i = 1, #popped, 2 do
    local body = redis.call('HGET', KEYS[1], popped[i])
    if body then
      evicted[#evicted + 1] = body
    end
    redis.call('HDEL', KEYS[1], popped[i])
  end
end
local result = '[' .. table.concat(evicted, ',') .. ']'
redis.call('HSET', KEYS[3], ARGV[1], result)
for i = 1, 3 do
  redis.call('EXPIRE', KEYS[i], ARGV[5])
end
return {0, result}
"""

# KEYS[1] items hash, KEYS[2] rank zset. Returns the item JSON values and deletes both keys.
_CLEAR_LUA = """
local bodies = redis.call('HVALS', KEYS[1])
redis.call('DEL', KEYS[1], KEYS[2])
return bodies
"""


_FORGET_ATTEMPTS = 16
"""Optimistic-transaction attempts of :meth:`WorkingMemory.forget` against concurrent pushes."""


class SessionKey(BaseModel):
    """Identifies one agent session's working memory."""

    model_config = ConfigDict(frozen=True)

    tenant_id: str = Field(min_length=1)
    user_id: str = Field(min_length=1)
    session_id: str = Field(min_length=1)


class WorkingItem(BaseModel):
    """One working-memory item: a recent turn or note of the session.

    ``id`` is deterministic from the source event, so a redelivered event yields the same id and
    the push is a no-op. ``created_at`` keeps the offset it was given (DESIGN.md section 2).
    """

    model_config = ConfigDict(frozen=True)

    id: str = Field(min_length=1)
    content: str
    importance: float = Field(ge=0.0, le=1.0, description="dimensionless, in [0, 1]")
    turn_index: int = Field(ge=0, description="the session turn this item belongs to")
    created_at: AwareDatetime
    source: Literal["user", "assistant", "tool", "system"]
    external_ref: str | None = None
    event_id: str = Field(min_length=1)


def eviction_rank(importance: float, turn_index: int, lam: float = DEFAULT_LAMBDA) -> float:
    """Turn-independent sort key that orders items exactly as the working-memory score does.

    For any current turn ``c``:
    ``ln(working_memory_score(importance, c - turn_index, lam)) = eviction_rank(...) - lam * c``,
    because ``ln(importance * exp(-lam * (c - t))) = ln(importance) + lam * t - lam * c``. The
    ``- lam * c`` term is the same for every item of the session, so ranking by this key equals
    ranking by the score (DESIGN.md section 2) at every turn, and the key never needs recomputing
    as the session advances. Holds for any score of the form ``f(importance) * exp(-lam * age)``.

    Args:
        importance: dimensionless, in ``[0, 1]``.
        turn_index: the item's turn index (turns, ``>= 0``).
        lam: decay rate per turn, ``>= 0``.

    Returns:
        ``ln(importance) + lam * turn_index``; ``-inf`` for importance 0 (evicted first).

    Raises:
        ValueError: if ``importance`` is outside ``[0, 1]`` or ``lam`` is negative.
    """
    if not 0.0 <= importance <= 1.0:
        raise ValueError(f"importance must be in [0, 1], got {importance!r}")
    if not lam >= 0.0:
        raise ValueError(f"lam must be >= 0, got {lam!r}")
    if importance == 0.0:
        return -math.inf
    return math.log(importance) + lam * turn_index


def _turn_order(item: WorkingItem) -> tuple[int, datetime, str]:
    return (item.turn_index, item.created_at, item.id)


def _decode(raw: bytes | str) -> str:
    return raw.decode("utf-8") if isinstance(raw, bytes) else raw


class WorkingMemory:
    """Working memory of many sessions, over an async Redis client created by the caller.

    Args:
        redis: a ``redis.asyncio.Redis`` client (``decode_responses`` either way).
        capacity: most items kept per session (default 8, DESIGN.md section 2); ``>= 1``.
        lam: decay rate per turn of the eviction score (default 0.1); ``>= 0``.
        ttl_s: idle lifetime of a session's keys in seconds (default 86400), refreshed by each push.
        key_prefix: prefix of every Redis key this class writes.

    Raises:
        ValueError: on a capacity below 1, a negative ``lam`` or a non-positive ``ttl_s``.
    """

    def __init__(
        self,
        redis: Redis,
        capacity: int = DEFAULT_CAPACITY,
        lam: float = DEFAULT_LAMBDA,
        ttl_s: int = DEFAULT_TTL_S,
        *,
        key_prefix: str = "hindsight:wm",
    ) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        if not lam >= 0.0:
            raise ValueError(f"lam must be >= 0, got {lam!r}")
        if ttl_s < 1:
            raise ValueError(f"ttl_s must be >= 1 second, got {ttl_s}")
        self._redis = redis
        self.capacity = capacity
        self.lam = lam
        self.ttl_s = ttl_s
        self._prefix = key_prefix
        self._push_script = redis.register_script(_PUSH_LUA)
        self._clear_script = redis.register_script(_CLEAR_LUA)

    def _tag(self, *parts: str) -> str:
        return ":".join(quote(part, safe="") for part in parts)

    def _keys(self, key: SessionKey) -> tuple[str, str, str]:
        base = f"{self._prefix}:{{{self._tag(key.tenant_id, key.user_id, key.session_id)}}}"
        return f"{base}:items", f"{base}:rank", f"{base}:pushes"

    async def push(self, key: SessionKey, item: WorkingItem) -> list[WorkingItem]:
        """Add ``item`` to the session; return the items this push evicted, lowest score first.

        When the session then holds more than ``capacity`` items, the lowest-scoring ones (by
        ``importance * exp(-lam * age_turns)``, ties: lexicographically smallest id) leave working
        memory and are returned; that may be ``item`` itself. The caller must compress every
        returned item into episodic memory before committing the source event's offset.

        Idempotent by ``item.id``: a redelivered item is not added again and evicts nothing new;
        the call returns the same list its first push returned, so a caller that crashed between
        ``push`` and compressing the evicted items loses nothing on redelivery (its episodic writes
        must be idempotent, which deterministic ids give). Atomic under concurrent pushers.

        Raises:
            StoreUnavailableError: Redis did not answer or refused the script.
        """
        items_key, rank_key, pushes_key = self._keys(key)
        rank = eviction_rank(item.importance, item.turn_index, self.lam)
        try:
            reply: Any = await self._push_script(
                keys=[items_key, rank_key, pushes_key],
                args=[item.id, item.model_dump_json(), repr(rank), self.capacity, self.ttl_s],
            )
        except RedisError as exc:
            raise StoreUnavailableError(f"working memory push failed: {exc}") from exc
        bodies: list[Any] = json.loads(_decode(reply[1]))
        return [WorkingItem.model_validate(body) for body in bodies]

    async def items(self, key: SessionKey) -> list[WorkingItem]:
        """Return the session's items in turn order (turn index, then ``created_at``, then id).

        Raises:
            StoreUnavailableError: Redis did not answer.
        """
        items_key, _, _ = self._keys(key)
        try:
            raw: Sequence[bytes | str] = await self._redis.hvals(items_key)
        except RedisError as exc:
            raise StoreUnavailableError(f"working memory read failed: {exc}") from exc
        return sorted((WorkingItem.model_validate_json(_decode(r)) for r in raw), key=_turn_order)

    async def clear(self, key: SessionKey) -> list[WorkingItem]:
        """Empty the session (on session close) and return what it held, in turn order.

        The idempotency record is kept until its TTL, so an item redelivered after the close is
        not re-added. A second ``clear`` returns ``[]``: for crash safety, compress
        ``await items(key)`` first and ``clear`` once those writes are durable.

        Raises:
            StoreUnavailableError: Redis did not answer.
        """
        items_key, rank_key, _ = self._keys(key)
        try:
            raw: Any = await self._clear_script(keys=[items_key, rank_key])
        except RedisError as exc:
            raise StoreUnavailableError(f"working memory clear failed: {exc}") from exc
        return sorted((WorkingItem.model_validate_json(_decode(r)) for r in raw), key=_turn_order)

    async def sessions(self, tenant_id: str, user_id: str) -> list[SessionKey]:
        """The sessions of one user that hold working memory (a ``SCAN`` of the keyspace: for
        forgetting, not for the hot path).

        Raises:
            StoreUnavailableError: Redis did not answer.
        """
        prefix = f"{self._prefix}:{{{self._tag(tenant_id, user_id)}:"
        found: list[SessionKey] = []
        try:
            async for raw in self._redis.scan_iter(match=f"{_glob_escape(prefix)}*}}:items", count=500):
                tag = _decode(raw)[len(prefix) : -len("}:items")]
                found.append(SessionKey(tenant_id=tenant_id, user_id=user_id, session_id=unquote(tag)))
        except RedisError as exc:
            raise StoreUnavailableError(f"working memory scan failed: {exc}") from exc
        return found

    async def forget(self, key: SessionKey, item_ids: Sequence[str]) -> int:
        """Remove these items from the session, and from the evicted lists its idempotency records
        keep (issue 13, defect 7: a forgotten turn's text must not stay in working memory until the
        session closes). The records themselves stay, so a redelivered push is still a no-op.

        One ``WATCH``/``MULTI`` transaction on the session's keys, retried when a concurrent push
        changed the records (at most :data:`_FORGET_ATTEMPTS` times). The records are rewritten in
        Python with the models' own JSON, so every kept item stays byte-identical (Redis's Lua
        ``cjson`` would round floats to 14 digits). Idempotent. Returns how many of the items the
        session held.

        Raises:
            StoreUnavailableError: Redis did not answer, or pushes kept conflicting.
        """
        forget = set(item_ids)
        if not forget:
            return 0
        items_key, rank_key, pushes_key = self._keys(key)
        try:
            async with self._redis.pipeline(transaction=True) as pipe:
                for _ in range(_FORGET_ATTEMPTS):
                    try:
                        await pipe.watch(pushes_key)
                        records: dict[Any, Any] = await pipe.hgetall(pushes_key)
                        rewrites: dict[FieldT, EncodableT] = {}
                        for field, value in records.items():
                            evicted = [WorkingItem.model_validate(b) for b in json.loads(_decode(value))]
                            kept = [item for item in evicted if item.id not in forget]
                            if len(kept) != len(evicted):
                                body = ",".join(item.model_dump_json() for item in kept)
                                rewrites[_decode(field)] = f"[{body}]"
                        pipe.multi()  # type: ignore[no-untyped-call]
                        pipe.hdel(items_key, *forget)
                        pipe.zrem(rank_key, *forget)
                        if rewrites:
                            pipe.hset(pushes_key, mapping=rewrites)
                        held: list[Any] = await pipe.execute()
                        return int(held[0])
                    except WatchError:
                        continue
        except RedisError as exc:
            raise StoreUnavailableError(f"working memory forget failed: {exc}") from exc
        raise StoreUnavailableError(
            f"working memory forget conflicted with concurrent pushes {_FORGET_ATTEMPTS} times"
        )


def _glob_escape(text: str) -> str:
    """``text`` with Redis glob metacharacters escaped (for ``SCAN MATCH``)."""
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)
