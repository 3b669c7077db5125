"""The reflection queue on a real Redis 7: two deployments that share a Redis keep their parked
closes apart (a sweeper that claimed another deployment's close would find none of its turns and
write the lesson into its own vector store; this was the cause of a flaky end-to-end lesson test)."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

import pytest
from redis.asyncio import Redis

from hindsight.stores.reflection_queue import ReflectionQueue, key_prefix
from schemas import SessionClosedEvent

pytestmark = pytest.mark.integration


def _close(user: str, session: str) -> SessionClosedEvent:
    return SessionClosedEvent(
        event_id=f"{session}-close",
        tenant_id="t1",
        user_id=user,
        agent_id="agent-1",
        session_id=session,
        closed_at=datetime(2026, 9, 1, 10, 0, tzinfo=UTC),
        task="Book a flight",
        outcome="failure",
        feedback="Never book middle seats for me.",
        event_count=2,
    )


async def test_two_deployments_on_one_redis_never_claim_each_others_closes(redis_client: Redis) -> None:
    run = uuid.uuid4().hex[:8]
    ours = ReflectionQueue(redis_client, key_prefix=key_prefix(f"ours-{run}"))
    theirs = ReflectionQueue(redis_client, key_prefix=key_prefix(f"theirs-{run}"))
    close = _close("u-1", f"s-{run}")
    now = time.time()
    await ours.park(close, due=now - 1)

    assert await theirs.claim(now=now, lease_s=60, limit=10) == []
    assert (await theirs.parked(), await ours.parked()) == (0, 1)
    claimed = await ours.claim(now=now, lease_s=60, limit=10)
    assert [p.close.event_id for p in claimed] == [close.event_id]
    assert await ours.parked() == 1  # leased, not gone, until done
    await ours.done(close)
    assert await ours.parked() == 0
    done_keys = [k async for k in redis_client.scan_iter(match=ours.done_pattern("t1", "u-1"))]
    assert len(done_keys) == 1
    assert [k async for k in redis_client.scan_iter(match=theirs.done_pattern("t1", "u-1"))] == []


def test_the_default_deployment_keeps_the_historical_key_prefix() -> None:
    assert key_prefix("hindsight") == "hindsight:reflect"


async def test_next_due_is_the_earliest_parked_close_and_a_claim_moves_it_by_its_lease(
    redis_client: Redis,
) -> None:
    # the sweeper sleeps until then instead of looking every second (issue 12: idle CPU)
    queue = ReflectionQueue(redis_client, key_prefix=key_prefix(f"due-{uuid.uuid4().hex[:8]}"))
    assert await queue.next_due() is None
    now = time.time()
    await queue.park(_close("u-1", "s-late"), due=now + 30)
    await queue.park(_close("u-2", "s-soon"), due=now + 2)
    assert await queue.next_due() == pytest.approx(now + 2)
    await queue.claim(now=now + 3, lease_s=60, limit=10)  # s-soon leased until now + 63
    assert await queue.next_due() == pytest.approx(now + 30)
    await queue.done(_close("u-1", "s-late"))
    assert await queue.next_due() == pytest.approx(now + 63)
