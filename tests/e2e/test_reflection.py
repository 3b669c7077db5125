"""Reflection is neither stalled nor skipped (issue 13, defect 10), on the embedded pipeline with a
real broker, Redis and stores:

- three session closes of one user claiming ``event_count = 10**12`` held the reflect partition for
  their whole grace period each, delaying another user's episode on the same partition from 1 s to
  147 s: now such a close is parked and the other user's episode is made while it waits;
- when ingest lagged past the grace period, reflection logged "closed session has no turns" and the
  episode was never made, although the turns were stored later: now a late turn reopens the session
  and the episode is built with it.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from aiokafka import AIOKafkaProducer

from hindsight.ids import episode_memory_id, turn_memory_id
from hindsight.records import from_payload
from schemas import InteractionEvent, Memory, SessionClosedEvent, Topic, partition_key
from services.cli.embedded import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

TENANT = "tenant-a"
T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
WAIT_S = 180.0
PARTITION = 0  # every close of these tests on one partition of memory.sessions.v1


def _turn(user: str, session: str, i: int, content: str) -> InteractionEvent:
    return InteractionEvent(
        event_id=f"{user}-{session}-{i}",
        tenant_id=TENANT,
        user_id=user,
        agent_id="agent-1",
        session_id=session,
        occurred_at=T0 + timedelta(minutes=i),
        source="user",
        content=content,
        turn_index=i,
    )


def _close(user: str, session: str, event_count: int | None) -> SessionClosedEvent:
    return SessionClosedEvent(
        event_id=f"close-{user}-{session}-{uuid.uuid4().hex[:6]}",
        tenant_id=TENANT,
        user_id=user,
        agent_id="agent-1",
        session_id=session,
        closed_at=T0 + timedelta(hours=1),
        task="plan the trip",
        event_count=event_count,
    )


async def _publish(stack: Stack, events: list[InteractionEvent | SessionClosedEvent]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=stack.bootstrap, acks="all")
    await producer.start()
    try:
        for ev in events:
            is_turn = isinstance(ev, InteractionEvent)
            await producer.send_and_wait(
                str(Topic.INTERACTIONS if is_turn else Topic.SESSIONS),
                ev.model_dump_json().encode(),
                key=partition_key(ev.tenant_id, ev.user_id),
                partition=None if is_turn else PARTITION,
            )
    finally:
        await producer.stop()


async def _episode(stack: Stack, user: str, session: str, *, timeout_s: float = WAIT_S) -> Memory:
    episode_id = episode_memory_id(TENANT, user, session)
    async with asyncio.timeout(timeout_s):
        while True:
            found = await asyncio.to_thread(stack.resources.vector_store().retrieve, [episode_id])
            if found:
                return from_payload(found[0].payload)
            await asyncio.sleep(0.25)


async def test_a_close_claiming_a_trillion_events_delays_no_other_users_episode(stack: Stack) -> None:
    greedy, other = f"u-greedy-{uuid.uuid4().hex[:6]}", f"u-other-{uuid.uuid4().hex[:6]}"
    turns = [
        _turn(other, "s-trip", 0, "We are flying to Lisbon on the 14th of May."),
        _turn(other, "s-trip", 1, "I booked the hotel near the Alfama district for four nights."),
    ]
    await _publish(stack, list(turns))
    await stack.wait_caught_up(timeout_s=WAIT_S)
    claims = [_close(greedy, f"s-claim-{i}", 10**12) for i in range(3)]
    await _publish(stack, [*claims, _close(other, "s-trip", 2)])  # behind the claims, same partition

    episode = await _episode(stack, other, "s-trip", timeout_s=60)
    queue = await stack.resources.reflection_queue()
    still_parked = [await queue.is_parked(c) for c in claims]
    assert still_parked == [True, True, True]  # the claims wait out their grace period, alone
    assert set(episode.provenance.memory_ids) == {turn_memory_id(TENANT, t.event_id) for t in turns}
    await stack.wait_caught_up(timeout_s=WAIT_S)  # and the reflect group committed past them


async def test_turns_that_arrive_after_their_session_was_reflected_still_reach_its_episode(
    stack: Stack,
) -> None:
    user = f"u-late-{uuid.uuid4().hex[:6]}"
    await _publish(stack, [_close(user, "s-late", None)])  # the close overtakes every turn
    await stack.wait_caught_up(timeout_s=WAIT_S)
    episode_id = episode_memory_id(TENANT, user, "s-late")
    assert not await asyncio.to_thread(stack.resources.vector_store().retrieve, [episode_id])

    late = [
        _turn(user, "s-late", 0, "My daughter starts at the Riverside primary school in September."),
        _turn(user, "s-late", 1, "She is allergic to peanuts, the school nurse needs to know."),
    ]
    await _publish(stack, list(late))
    episode = await _episode(stack, user, "s-late")
    assert set(episode.provenance.memory_ids) == {turn_memory_id(TENANT, t.event_id) for t in late}
    assert "Riverside" in episode.content
