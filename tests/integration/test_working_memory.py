"""Working memory on a real Redis 7: importance-weighted eviction, idempotence, concurrency.

The scenario is the seeds' (seeds/000, section 4.3): the user says "我对花生过敏" (I am allergic
to peanuts), then chats for a dozen turns; importance weighting keeps the allergy in working
memory where a plain sliding window would have dropped it.
"""

from __future__ import annotations

import asyncio
import socket
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from hindsight.errors import StoreUnavailableError
from hindsight.stores.working_memory import SessionKey, WorkingItem, WorkingMemory

pytestmark = pytest.mark.integration

_T0 = datetime(2026, 3, 2, 9, 30, tzinfo=timezone(timedelta(hours=8)))


def _session() -> SessionKey:
    return SessionKey(tenant_id="t1", user_id="u-zhang", session_id=f"s-{uuid.uuid4()}")


def _item(turn: int, content: str, importance: float, *, item_id: str | None = None) -> WorkingItem:
    return WorkingItem(
        id=item_id or f"item-{turn}",
        content=content,
        importance=importance,
        turn_index=turn,
        created_at=_T0 + timedelta(minutes=turn),
        source="user",
        external_ref=None,
        event_id=f"evt-{turn}",
    )


async def test_peanut_allergy_survives_chatter(redis_client: Redis) -> None:
    wm = WorkingMemory(redis_client, capacity=8)
    key = _session()
    allergy = _item(0, "我对花生过敏 (I am allergic to peanuts)", 0.95, item_id="allergy")
    assert await wm.push(key, allergy) == []

    chatter_importance = [0.1, 0.2, 0.15, 0.1, 0.2, 0.12, 0.18, 0.1, 0.2, 0.15]
    evicted: list[WorkingItem] = []
    for turn, importance in enumerate(chatter_importance, start=1):
        evicted += await wm.push(key, _item(turn, f"闲聊 {turn}: 今天天气不错", importance))

    kept = await wm.items(key)
    assert len(kept) == 8
    assert allergy in kept
    assert kept == sorted(kept, key=lambda i: i.turn_index)
    # 11 pushed, 8 kept: the 3 evicted are chatter, returned by push, never the allergy.
    assert len(evicted) == 3
    assert all(e.id != "allergy" for e in evicted)
    assert {e.id for e in evicted} | {k.id for k in kept} == {"allergy"} | {f"item-{t}" for t in range(1, 11)}
    # The offset is kept, not replaced by UTC (DESIGN.md section 2).
    assert next(k for k in kept if k.id == "allergy").created_at.utcoffset() == timedelta(hours=8)
    # Lowest scores at the time of each eviction: the 0.1-importance early turns went first.
    assert [e.id for e in evicted] == ["item-1", "item-4", "item-3"]


async def test_redelivery_keeps_one_copy_and_evicts_nothing_new(redis_client: Redis) -> None:
    wm = WorkingMemory(redis_client, capacity=3)
    key = _session()
    for turn in range(3):
        await wm.push(key, _item(turn, f"turn {turn}", 0.5))
    newcomer = _item(3, "turn 3", 0.9)
    first = await wm.push(key, newcomer)
    assert [e.id for e in first] == ["item-0"]

    again = await wm.push(key, newcomer)
    twice = await wm.push(key, newcomer)
    # The replay returns the first push's evictions (so a crashed caller can still compress them)
    # and evicts nothing new.
    assert again == first
    assert twice == first
    kept = await wm.items(key)
    assert [k.id for k in kept] == ["item-1", "item-2", "item-3"]

    # A redelivered item that had been evicted is not re-added either.
    assert await wm.push(key, _item(0, "turn 0", 0.5)) == []
    assert [k.id for k in await wm.items(key)] == ["item-1", "item-2", "item-3"]


async def test_concurrent_pushes_never_exceed_capacity(redis_client: Redis) -> None:
    wm = WorkingMemory(redis_client, capacity=8)
    key = _session()
    items = [_item(turn, f"turn {turn}", ((turn * 37) % 100) / 100) for turn in range(50)]

    async def push_and_peek(item: WorkingItem) -> list[WorkingItem]:
        evicted = await wm.push(key, item)
        assert len(await wm.items(key)) <= 8
        return evicted

    results = await asyncio.gather(*(push_and_peek(item) for item in items))

    kept = await wm.items(key)
    evicted_ids = [e.id for batch in results for e in batch]
    assert len(kept) == 8
    assert len(evicted_ids) == len(set(evicted_ids)) == 42
    assert sorted(evicted_ids + [k.id for k in kept]) == sorted(i.id for i in items)


async def test_clear_returns_items_and_empties(redis_client: Redis) -> None:
    wm = WorkingMemory(redis_client, capacity=8, ttl_s=60)
    key = _session()
    for turn in range(3):
        await wm.push(key, _item(turn, f"turn {turn}", 0.4))
    assert 0 < await redis_client.ttl(wm._keys(key)[0]) <= 60

    cleared = await wm.clear(key)
    assert [c.id for c in cleared] == ["item-0", "item-1", "item-2"]
    assert await wm.items(key) == []
    assert await wm.clear(key) == []
    # Sessions are isolated.
    other = _session()
    await wm.push(other, _item(0, "x", 0.5))
    assert [i.id for i in await wm.items(other)] == ["item-0"]
    assert await wm.items(key) == []


async def test_works_with_decoded_responses(redis_url: str) -> None:
    client = Redis.from_url(redis_url, decode_responses=True)
    try:
        wm = WorkingMemory(client, capacity=1)
        key = _session()
        await wm.push(key, _item(0, "我对花生过敏", 0.95))
        evicted = await wm.push(key, _item(1, "hi", 0.1))
        assert [e.id for e in evicted] == ["item-1"]
        assert [i.content for i in await wm.items(key)] == ["我对花生过敏"]
    finally:
        await client.aclose()


async def test_unreachable_redis_is_store_unavailable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = Redis(host="127.0.0.1", port=port, socket_connect_timeout=1.0, retry=Retry(NoBackoff(), 0))
    try:
        wm = WorkingMemory(client)
        with pytest.raises(StoreUnavailableError):
            await wm.push(_session(), _item(0, "x", 0.5))
        with pytest.raises(StoreUnavailableError):
            await wm.items(_session())
    finally:
        await client.aclose()


async def test_forget_removes_an_item_held_and_one_evicted_and_redelivery_stays_a_no_op(
    redis_client: Redis,
) -> None:
    # issue 13, defect 7: a forgotten turn stayed in working memory until its session closed
    wm = WorkingMemory(redis_client, capacity=2)
    key = _session()
    other = key.model_copy(update={"session_id": f"{key.session_id}-b"})
    secret = _item(0, "我的银行卡密码是 4711 (my card PIN is 4711)", 0.05, item_id="secret")
    assert await wm.push(key, secret) == []
    await wm.push(key, _item(1, "明天去机场", 0.9))
    evicted = await wm.push(key, _item(2, "航班是早上八点", 0.8))  # evicts the low-importance secret
    assert [e.id for e in evicted] == ["secret"]
    await wm.push(key, secret.model_copy(update={"id": "secret-2", "event_id": "evt-s2", "importance": 0.99}))
    await wm.push(other, _item(0, "另一个会话", 0.5))
    assert {s.session_id for s in await wm.sessions("t1", "u-zhang")} >= {key.session_id, other.session_id}

    held = await wm.forget(key, ["secret", "secret-2"])

    assert held == 1  # secret-2 was held; "secret" only survived inside an idempotency record
    assert "4711" not in " ".join(i.content for i in await wm.items(key))
    pushes = await redis_client.hgetall(f"hindsight:wm:{{t1:u-zhang:{key.session_id}}}:pushes")
    assert pushes, "the idempotency records stay"
    assert not any(b"4711" in value for value in pushes.values())
    # the records still make a redelivery a no-op: the item whose push evicted the secret
    assert await wm.push(key, _item(2, "航班是早上八点", 0.8)) == []
    assert [i.id for i in await wm.items(other)] == ["item-0"]  # another session is untouched
    assert await wm.forget(key, ["secret", "secret-2"]) == 0  # idempotent


async def test_forget_keeps_the_other_evicted_items_of_a_record_byte_identical(redis_client: Redis) -> None:
    # one push that evicted three items, one of them forgotten: the record keeps the other two
    # exactly as they were stored (a re-encoding in Redis's Lua cjson rounds floats to 14 digits)
    key = _session()
    wide, narrow = WorkingMemory(redis_client, capacity=3), WorkingMemory(redis_client, capacity=1)
    fine = [
        _item(0, "我对花生过敏 (allergic to peanuts)", 0.123456789012345678),
        _item(1, "My PIN is 4711", 0.2, item_id="secret"),
        _item(2, "航班是早上八点", 0.3141592653589793),
    ]
    for item in fine:
        await wide.push(key, item)
    evicted = await narrow.push(key, _item(3, "the last word", 0.99))
    assert {e.id for e in evicted} == {"item-0", "secret", "item-2"}

    assert await narrow.forget(key, ["secret"]) == 0  # it was only in the record

    again = await narrow.push(key, _item(3, "the last word", 0.99))  # a redelivery: the record
    assert again == [e for e in evicted if e.id != "secret"]
    assert again[0].importance == 0.123456789012345678


async def test_forget_under_concurrent_pushes_leaves_no_forgotten_item(redis_client: Redis) -> None:
    wm = WorkingMemory(redis_client, capacity=4)
    key = _session()
    secrets = [_item(i, f"secret {i}", 0.01, item_id=f"secret-{i}") for i in range(6)]
    for item in secrets[:3]:
        await wm.push(key, item)
    chatter = [wm.push(key, _item(10 + i, f"chatter {i}", 0.5)) for i in range(12)]
    forgets = [wm.forget(key, [s.id for s in secrets]) for _ in range(3)]
    await asyncio.gather(*chatter, *forgets)
    await wm.forget(key, [s.id for s in secrets])
    assert not any(i.id.startswith("secret") for i in await wm.items(key))
    pushes = await redis_client.hgetall(f"hindsight:wm:{{t1:u-zhang:{key.session_id}}}:pushes")
    assert not any(b"secret" in value for value in pushes.values())
    assert len(pushes) == 15  # every push keeps its idempotency record
