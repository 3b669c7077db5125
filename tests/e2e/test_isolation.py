"""Merges never cross scope, user or tenant (issue 13, defect 4), through the whole pipeline.

The same statement retained under three scopes, by two users and in two tenants must stay one memory
per (tenant, user, scope): an agent must keep seeing its own fact whatever another agent stored.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from schemas import InteractionEvent
from services.cli.embedded import Stack
from tests.e2e.test_pipeline import http, raw, recall, send, user_memories
from tests.fixtures.stack import KEY_A, KEY_B

pytestmark = pytest.mark.e2e
__all__ = ["http"]  # the fixture, shared with the pipeline tests

T0 = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
FACT = "My daughter's school is Lindenhof Primary, the one next to the river."


def _event(tenant: str, user: str, scope: str, i: int) -> InteractionEvent:
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


async def test_the_same_fact_in_three_scopes_two_users_and_two_tenants_stays_one_memory_each(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    user, other = f"u-{uuid.uuid4().hex[:6]}", f"u-{uuid.uuid4().hex[:6]}"
    events = [
        _event("tenant-a", user, "agent:agent-1", 0),
        _event("tenant-a", user, "agent:agent-2", 1),
        _event("tenant-a", user, "global", 2),
        _event("tenant-a", other, "agent:agent-1", 3),
        _event("tenant-b", user, "agent:agent-1", 4),
    ]
    await send(stack, [raw(e) for e in events])

    mine = [m for m in user_memories(stack, "tenant-a", user) if m.kind == "turn"]
    assert sorted((m.scope, m.status) for m in mine) == [
        ("agent:agent-1", "active"),
        ("agent:agent-2", "active"),
        ("global", "active"),
    ]
    for who, tenant in ((other, "tenant-a"), (user, "tenant-b")):
        theirs = [m for m in user_memories(stack, tenant, who) if m.kind == "turn"]
        assert [(m.scope, m.status) for m in theirs] == [("agent:agent-1", "active")]

    query = "Which school does my daughter go to?"
    for scope in ("agent:agent-1", "agent:agent-2", "global"):
        found = await recall(http, KEY_A, user, query, scopes=[scope])
        assert [m["scope"] for m in found if m["kind"] == "turn"] == [scope], scope
    in_b = await recall(http, KEY_B, user, query)
    assert [m["scope"] for m in in_b if m["kind"] == "turn"] == ["agent:agent-1"]
