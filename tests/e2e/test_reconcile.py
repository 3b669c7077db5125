"""Memory that revises itself, end to end through Kafka with the real judge (issue 9).

The module runs its own embedded Hindsight with reconcile on (the session ``stack`` runs without it)
on a private real Kafka broker. Every test publishes interaction and session events to it, waits
until every consumer group (reconcile included) has caught up, and reads the result through the
gateway (HTTP and MCP) like an agent. The judge and fact extractor are the local model of the
embedded default (``hindsight.inference.judge``), so each test costs a few model calls.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import httpx2
import pytest
from aiokafka import AIOKafkaProducer
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from hindsight.ids import turn_memory_id
from schemas import InteractionEvent, SessionClosedEvent
from services.cli.embedded import Stack
from services.ingest.settings import IngestSettings
from tests.e2e.test_pipeline import raw, recall, user_memories
from tests.fixtures.stack import KEY_A, KEY_B, stack_with

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]

CATCH_UP_S = 1500.0
"""The judge is a CPU language model: a few calls per test, seconds each on a quiet machine."""

T0 = datetime(2026, 9, 1, 9, 0, tzinfo=UTC)
HEADERS = {"Authorization": f"Bearer {KEY_A}"}


@pytest.fixture(scope="module")
async def stack(
    private_kafka: str, redis_url: str, chdb_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    """This module's embedded Hindsight: every stage, reconcile included (facts: ``revisions``)."""
    ingest = IngestSettings(stages=("trigger", "embed", "reconcile"), reconcile_facts="revisions")
    data_dir = tmp_path_factory.mktemp("hindsight-reconcile")
    async with stack_with(private_kafka, redis_url, chdb_dsn, data_dir, ingest) as running:
        yield running


@pytest.fixture
async def http(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=stack.gateway_url, timeout=120) as client:
        yield client


async def send(stack: Stack, events: list[tuple[str, bytes, bytes]]) -> None:
    """Publish raw (topic, key, value) records as an agent would; wait until every group caught up."""
    producer = AIOKafkaProducer(bootstrap_servers=stack.bootstrap, acks="all")
    await producer.start()
    try:
        for topic, key, value in events:
            await producer.send_and_wait(topic, value, key=key)
    finally:
        await producer.stop()
    await stack.wait_caught_up(timeout_s=CATCH_UP_S)


def said(user: str, mark: str, text: str, *, day: float, source: str = "user") -> InteractionEvent:
    """One statement of ``user`` in its own session, ``day`` days after T0 (event id ``user:mark``)."""
    return InteractionEvent(
        event_id=f"{user}:{mark}",
        tenant_id="tenant-a",
        user_id=user,
        agent_id="agent-1",
        session_id=f"{user}-{mark}",
        occurred_at=T0 + timedelta(days=day),
        source=source,
        content=text,
    )


def memory_id(user: str, mark: str) -> str:
    return turn_memory_id("tenant-a", f"{user}:{mark}")


async def detail(http: httpx.AsyncClient, ident: str) -> dict[str, Any]:
    response = await http.get(f"/v1/memories/{ident}", headers=HEADERS)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def chain_state(stack: Stack, user: str) -> list[tuple[Any, ...]]:
    """Every memory of ``user`` with its chain fields, sorted: what must not change on redelivery."""
    return sorted(
        (
            m.id,
            m.kind,
            m.status,
            m.version,
            m.parent_id,
            m.superseded_by,
            m.supersedes,
            m.conflicts_with,
            m.merged_into,
        )
        for m in user_memories(stack, "tenant-a", user)
    )


async def test_budget_5000_then_8000_recalls_8000_and_5000_is_superseded_but_in_the_chain(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    user = f"u-{uuid.uuid4().hex[:6]}"
    old = said(user, "old", "预算控制在 5000 以内。", day=0)
    new = said(user, "new", "预算可以放宽到 8000。", day=7)
    await send(stack, [raw(old), raw(new)])

    found = await recall(http, KEY_A, user, "用户的预算是多少？", time_zone="Asia/Shanghai")
    assert found, "the budget should be recallable"
    assert "8000" in found[0]["content"]
    assert all("5000" not in m["content"] for m in found)  # superseded: left out by default
    with_old = await recall(http, KEY_A, user, "用户的预算是多少？", include_superseded=True, top_k=10)
    # the old statement comes back marked superseded: as itself, or as the evidence turn of the
    # superseded fact drawn from it (a fact and its turn answer as one entry)
    returned = {m["id"]: m["status"] for m in with_old}
    returned |= {e["id"]: e["status"] for m in with_old for e in m.get("evidence") or ()}
    assert returned.get(memory_id(user, "old")) == "superseded", with_old
    assert any("5000" in m["content"] and m["status"] == "superseded" for m in with_old), with_old
    assert "8000" in with_old[0]["content"], with_old  # the current version still first

    newer = await detail(http, memory_id(user, "new"))
    older = await detail(http, memory_id(user, "old"))
    expected = [(memory_id(user, "new"), 2, "active"), (memory_id(user, "old"), 1, "superseded")]
    assert [(m["id"], m["version"], m["status"]) for m in newer["chain"]] == expected
    assert [(m["id"], m["version"], m["status"]) for m in older["chain"]] == expected  # walked forward
    assert older["memory"]["valid_to"] == newer["memory"]["valid_from"]


async def test_an_older_statement_delivered_after_a_newer_one_becomes_the_older_version(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    user = f"u-{uuid.uuid4().hex[:6]}"
    newer = said(user, "oslo", "I live in Oslo now, I moved there for the new job.", day=60)
    late = said(user, "bergen", "I live in Bergen.", day=0)
    await send(stack, [raw(newer)])
    await send(stack, [raw(late)])  # arrives last, happened first

    oslo, bergen = await detail(http, memory_id(user, "oslo")), await detail(http, memory_id(user, "bergen"))
    assert oslo["memory"]["status"] == "active"
    assert oslo["memory"]["parent_id"] == memory_id(user, "bergen")
    assert (bergen["memory"]["status"], bergen["memory"]["superseded_by"]) == (
        "superseded",
        memory_id(user, "oslo"),
    )
    found = await recall(http, KEY_A, user, "Where does the user live?")
    assert "Oslo" in found[0]["content"]


async def test_the_same_events_delivered_twice_give_the_same_chains(stack: Stack) -> None:
    user = f"u-{uuid.uuid4().hex[:6]}"
    events = [
        said(user, "v1", "I drive a 2015 VW Golf.", day=0),
        said(user, "v2", "Sold the Golf, I have a Tesla Model 3 now.", day=30),
    ]
    await send(stack, [raw(e) for e in events])
    first = chain_state(stack, user)
    assert any(row[2] == "superseded" for row in first), first
    await send(stack, [raw(e) for e in events] + [raw(e) for e in reversed(events)])  # redelivered, reordered
    assert chain_state(stack, user) == first


async def test_two_look_alike_facts_about_different_people_both_stay_active(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    user = f"u-{uuid.uuid4().hex[:6]}"
    anna = said(user, "anna", "My colleague Anna's birthday is May 3.", day=0)
    ben = said(user, "ben", "My colleague Ben's birthday is June 9.", day=20)
    await send(stack, [raw(anna), raw(ben)])
    for mark in ("anna", "ben"):
        assert (await detail(http, memory_id(user, mark)))["memory"]["status"] == "active"
    found = await recall(http, KEY_A, user, "When is Ben's birthday?")
    assert "Ben" in found[0]["content"] or any("Ben" in e["content"] for e in found[0]["evidence"])


async def test_a_failed_tasks_feedback_is_recalled_by_a_later_similar_task(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    user = f"u-{uuid.uuid4().hex[:6]}"
    request = said(user, "req", "Please book me a flight from Berlin to Paris on Friday.", day=0)
    step = said(user, "step", "Booked the 9:05 Air France flight, seat 23E.", day=0, source="assistant")
    close = SessionClosedEvent(
        event_id=f"{user}-close",
        tenant_id="tenant-a",
        user_id=user,
        agent_id="agent-1",
        session_id=request.session_id,
        closed_at=T0 + timedelta(hours=1),
        task="Book a flight from Berlin to Paris",
        outcome="failure",
        feedback="You put me in a middle seat again. Never book middle seats for me.",
        feedback_score=-0.8,
        event_count=2,
    )
    step = step.model_copy(update={"session_id": request.session_id})
    await send(stack, [raw(request), raw(step), raw(close)])
    later = await recall(http, KEY_A, user, "Book a flight from Munich to Lisbon for next Tuesday.")
    lessons = [m for m in later[:3] if m["kind"] == "lesson"]
    assert lessons, [m["content"] for m in later]
    assert "middle seat" in lessons[0]["content"]
    assert lessons[0]["provenance"]["event_ids"] == [close.event_id]
    episode = next(m for m in user_memories(stack, "tenant-a", user) if m.kind == "episode")
    assert "Outcome: failure." in episode.content
    assert "Steps: Booked the 9:05 Air France flight, seat 23E." in episode.content


@asynccontextmanager
async def mcp_client(stack: Stack) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers=HEADERS, timeout=60) as client,
        Client(streamable_http_client(f"{stack.gateway_url}/mcp", http_client=client)) as mcp,
    ):
        yield mcp


def structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    content: dict[str, Any] | None = result.structured_content
    assert content is not None
    return content


async def test_a_chain_is_walked_both_ways_over_mcp_and_forgetting_the_newest_restores_the_older(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    user = f"u-{uuid.uuid4().hex[:6]}"
    await send(
        stack,
        [
            raw(said(user, "a", "My manager is Priya.", day=0)),
            raw(said(user, "b", "Priya left the company; my new manager is Tom.", day=40)),
        ],
    )
    a, b = memory_id(user, "a"), memory_id(user, "b")
    async with mcp_client(stack) as mcp:
        got = structured(await mcp.call_tool("get", {"memory_id": a}))
        chain = structured(await mcp.call_tool("history", {"user_id": user, "memory_id": b}))
    assert [m["id"] for m in got["chain"]] == [b, a]
    assert [m["id"] for m in chain["memories"]] == [a, b]

    forgotten = await http.delete(f"/v1/memories/{b}", headers=HEADERS)
    assert forgotten.status_code == 200, forgotten.text
    restored = (await detail(http, a))["memory"]
    assert (restored["status"], restored["superseded_by"], restored["valid_to"]) == ("active", None, None)
    found = await recall(http, KEY_A, user, "Who is the user's manager?")
    assert "Priya" in found[0]["content"]


# -- merges never cross scope, user or tenant (issue 13, defect 4) -----------------------------------

FACT = "My daughter's school is Lindenhof Primary, the one next to the river."


def _scoped(tenant: str, user: str, scope: str, i: int) -> InteractionEvent:
    return InteractionEvent(
        event_id=f"iso-{user}-{i}-{uuid.uuid4().hex[:6]}",
        tenant_id=tenant,
        user_id=user,
        agent_id=scope.removeprefix("agent:") if scope.startswith("agent:") else "agent-1",
        session_id=f"s-{i}",
        occurred_at=T0 + timedelta(days=i),
        source="user",
        content=FACT,
        scope=scope,
    )


async def test_a_repeated_fact_merges_within_its_scope_never_across_scope_user_or_tenant(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    user, other = f"u-{uuid.uuid4().hex[:6]}", f"u-{uuid.uuid4().hex[:6]}"
    events = [
        _scoped("tenant-a", user, "agent:agent-1", 0),
        _scoped("tenant-a", user, "agent:agent-2", 1),
        _scoped("tenant-a", user, "global", 2),
        _scoped("tenant-a", other, "agent:agent-1", 3),
        _scoped("tenant-b", user, "agent:agent-1", 4),
        _scoped("tenant-a", user, "agent:agent-1", 5),  # said again to agent 1: the one merge
    ]
    await send(stack, [raw(e) for e in events])

    mine = [m for m in user_memories(stack, "tenant-a", user) if m.kind == "turn"]
    assert sorted((m.scope, m.status) for m in mine) == [
        ("agent:agent-1", "active"),
        ("agent:agent-1", "merged"),
        ("agent:agent-2", "active"),
        ("global", "active"),
    ]
    [dup] = [m for m in mine if m.status == "merged"]
    assert dup.provenance.event_ids == (events[5].event_id,)
    assert dup.merged_into == next(m.id for m in mine if m.provenance.event_ids == (events[0].event_id,))
    for who, tenant in ((other, "tenant-a"), (user, "tenant-b")):
        theirs = [m for m in user_memories(stack, tenant, who) if m.kind == "turn"]
        assert [(m.scope, m.status) for m in theirs] == [("agent:agent-1", "active")]

    query = "Which school does my daughter go to?"
    for scope in ("agent:agent-1", "agent:agent-2", "global"):
        found = await recall(http, KEY_A, user, query, scopes=[scope])
        assert [m["scope"] for m in found if m["kind"] == "turn"] == [scope], scope
    in_b = await recall(http, KEY_B, user, query)
    assert [m["scope"] for m in in_b if m["kind"] == "turn"] == ["agent:agent-1"]
