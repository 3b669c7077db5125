"""Forgetting leaves no copies (issue 13, defect 7), on the embedded pipeline with a real broker,
Redis, ClickHouse engine and vector store: after a turn was forgotten (even hard-deleted) its text
stayed in the session's episode, and re-sending its ``event_id`` recreated it. Now every memory derived
from it is rebuilt without it, a tombstone stops the replay, and forgetting a whole user is verifiable
store by store."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from aiokafka import AIOKafkaProducer

from hindsight.ids import episode_memory_id, turn_memory_id
from hindsight.records import from_payload
from hindsight.stores.tombstones import Tombstones
from hindsight.stores.working_memory import SessionKey, WorkingMemory
from schemas import InteractionEvent, Memory, SessionClosedEvent, Topic, partition_key
from services.cli.embedded import Stack
from services.guard import claims
from tests.fixtures.stack import KEY_A

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

TENANT = "tenant-a"
T0 = datetime(2026, 11, 3, 9, 0, tzinfo=UTC)
WAIT_S = 180.0
SECRETISH = "My therapist Dr. Okafor says the panic attacks started after the accident in March."
KEPT = "We are repainting the kitchen in a pale green colour next weekend."
STORES = ("vector_store", "redis", "guard_claims", "access_log", "quarantine", "analytics")


def _turn(user: str, i: int, content: str) -> InteractionEvent:
    return InteractionEvent(
        event_id=f"{user}-turn-{i}",
        tenant_id=TENANT,
        user_id=user,
        agent_id="agent-1",
        session_id="s-forget",
        occurred_at=T0 + timedelta(minutes=i),
        source="user",
        content=content,
        turn_index=i,
    )


async def _publish(stack: Stack, events: list[InteractionEvent | SessionClosedEvent]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=stack.bootstrap, acks="all")
    await producer.start()
    try:
        for ev in events:
            topic = Topic.INTERACTIONS if isinstance(ev, InteractionEvent) else Topic.SESSIONS
            await producer.send_and_wait(
                str(topic), ev.model_dump_json().encode(), key=partition_key(ev.tenant_id, ev.user_id)
            )
    finally:
        await producer.stop()
    await stack.wait_caught_up(timeout_s=WAIT_S)


async def _memory(stack: Stack, memory_id: str) -> Memory | None:
    found = await asyncio.to_thread(stack.resources.vector_store().retrieve, [memory_id])
    return from_payload(found[0].payload) if found else None


async def _until(stack: Stack, memory_id: str, ready: Callable[[Memory | None], bool]) -> Memory | None:
    """The memory once ``ready`` holds for it (polled; at most WAIT_S)."""
    async with asyncio.timeout(WAIT_S):
        memory = await _memory(stack, memory_id)
        while not ready(memory):
            await asyncio.sleep(0.25)
            memory = await _memory(stack, memory_id)
    return memory


async def test_a_forgotten_turn_leaves_its_episode_and_a_replay_does_not_bring_it_back(stack: Stack) -> None:
    user = f"u-forget-{uuid.uuid4().hex[:6]}"
    turns = [_turn(user, 0, SECRETISH), _turn(user, 1, KEPT)]
    close = SessionClosedEvent(
        event_id=f"close-{user}",
        tenant_id=TENANT,
        user_id=user,
        agent_id="agent-1",
        session_id="s-forget",
        closed_at=T0 + timedelta(hours=1),
        event_count=2,
    )
    await _publish(stack, [*turns, close])
    episode_id = episode_memory_id(TENANT, user, "s-forget")
    forgotten_id, kept_id = (turn_memory_id(TENANT, t.event_id) for t in turns)
    episode = await _until(stack, episode_id, lambda m: m is not None)
    assert episode is not None
    assert "Okafor" in episode.content

    async with httpx.AsyncClient(
        base_url=stack.gateway_url, headers={"Authorization": f"Bearer {KEY_A}"}, timeout=120
    ) as http:
        result = (await http.delete(f"/v1/memories/{forgotten_id}", params={"hard": "true"})).json()
        assert result["status"] == "deleted", result
        assert episode_id in result["derived"]
        assert result["tombstoned_events"] >= 1
        redacted = await _memory(stack, episode_id)  # at once: the quote is gone
        assert redacted is not None
        assert "Okafor" not in redacted.content
        assert forgotten_id not in redacted.provenance.memory_ids

        # then reflection rebuilds it from the remaining turn
        rebuilt = await _until(stack, episode_id, lambda m: m is not None and "[forgotten]" not in m.content)
        assert rebuilt is not None
        assert rebuilt.provenance.memory_ids == (kept_id,)
        assert "Okafor" not in rebuilt.content
        assert "Okafor" not in rebuilt.entities
        assert "pale green" in rebuilt.content

        await _publish(stack, [turns[0]])  # the same event id again: the tombstone holds
        assert await _memory(stack, forgotten_id) is None
        recalled = (
            await http.post("/v1/recall", json={"query": "Dr. Okafor panic attacks", "user_id": user})
        ).json()
        assert all("Okafor" not in m["content"] for m in recalled["memories"])

        erased = (await http.delete(f"/v1/users/{user}")).json()  # and now the whole user
        assert erased["complete"] is True, erased
        assert erased["remaining"] == dict.fromkeys(STORES, 0)
        await _publish(stack, [turns[1]])  # a replay of an event from before the erasure
        report = (await http.get(f"/v1/users/{user}/erasure")).json()
        assert report["complete"] is True, report
        assert await _memory(stack, kept_id) is None


async def test_a_per_agent_key_may_not_forget_a_whole_user(stack: Stack) -> None:
    async with httpx.AsyncClient(base_url=stack.gateway_url, timeout=60) as http:
        anonymous = await http.delete("/v1/users/u-anyone")
    assert anonymous.status_code == 401


def _http(stack: Stack) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=stack.gateway_url, headers={"Authorization": f"Bearer {KEY_A}"}, timeout=120
    )


async def test_a_forgotten_turn_leaves_the_working_memory_of_its_open_session_at_once(stack: Stack) -> None:
    # the session is still open: before, the turn stayed in working memory until the session closed
    user = f"u-wm-{uuid.uuid4().hex[:6]}"
    turns = [_turn(user, 0, SECRETISH), _turn(user, 1, KEPT)]
    await _publish(stack, list(turns))
    working = WorkingMemory(await stack.resources.redis())
    session = SessionKey(tenant_id=TENANT, user_id=user, session_id="s-forget")
    assert {i.event_id for i in await working.items(session)} == {t.event_id for t in turns}
    forgotten_id = turn_memory_id(TENANT, turns[0].event_id)
    await _until(stack, forgotten_id, lambda m: m is not None)

    async with _http(stack) as http:
        result = await http.delete(f"/v1/memories/{forgotten_id}")
    assert result.status_code == 200, result.text

    left = await working.items(session)
    assert [i.event_id for i in left] == [turns[1].event_id]
    assert all("Okafor" not in i.content for i in left)


async def test_forgetting_a_user_reaches_the_guards_claims_the_quarantine_and_the_analytics(
    stack: Stack,
) -> None:
    user = f"u-erase-{uuid.uuid4().hex[:6]}"
    prefix = claims.key_prefix(stack.resources.settings.kafka.group_prefix)
    claim = "The user's new home address is 12 Harbour Lane, Portsmouth."
    told = [  # the same claim about the user from two agents' tools: counted by the guard in Redis
        _turn(user, 10 + i, claim).model_copy(
            update={"source": "tool", "tool_name": "crm", "agent_id": f"agent-{i}"}
        )
        for i in range(2)
    ]
    secret = _turn(user, 20, "My bank password is Zq9!Tr0ub4dor-771 for the app")  # blocked: quarantine
    await _publish(stack, [_turn(user, 0, KEPT), *told, secret])
    events = {e.event_id for e in (*told, secret)}
    async with _http(stack) as http:
        recalled = await http.post("/v1/recall", json={"query": "kitchen colour", "user_id": user})
        assert recalled.status_code == 200, recalled.text
        await stack.wait_caught_up(timeout_s=WAIT_S)  # the recall log and accesses are sunk
        before = (await http.get(f"/v1/users/{user}/erasure")).json()
        assert before["complete"] is False
        assert before["forgotten_at"] is None  # never forgotten
        for store in ("vector_store", "guard_claims", "quarantine", "analytics"):
            assert before["remaining"][store] > 0, (store, before)
        redis = await stack.resources.redis()
        assert await claims.held_events(redis, prefix, TENANT, events) >= 3  # two claims, the verdicts

        erased = (await http.delete(f"/v1/users/{user}")).json()
        assert erased["complete"] is True, erased
        assert erased["remaining"] == dict.fromkeys(STORES, 0)
        assert await claims.held_events(redis, prefix, TENANT, events) == 0
        assert events <= await Tombstones(redis).user_events(TENANT, user)
        quarantine = stack.resources.quarantine()
        assert await asyncio.to_thread(quarantine.find, TENANT, user_id=user) == []
        assert await asyncio.to_thread(stack.resources.analytics().user_rows, TENANT, user) == 0

        await _publish(stack, [secret, *told])  # replays of events from before the erasure
        after = (await http.get(f"/v1/users/{user}/erasure")).json()
    assert after["complete"] is True, after  # the guard dropped them: no claim, no quarantine row
    assert after["forgotten_at"] == erased["forgotten_at"] is not None  # the report says when, every time
    assert await claims.held_events(redis, prefix, TENANT, events) == 0
