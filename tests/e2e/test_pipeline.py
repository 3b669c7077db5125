"""The whole pipeline on real components: Kafka in, memory out through the gateway."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import httpx
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from hindsight.records import from_payload
from hindsight.stores.vector import MemoryFilter
from hindsight.stores.working_memory import SessionKey, WorkingMemory
from schemas import InteractionEvent, SessionClosedEvent, Topic, partition_key
from services.cli.embedded import Stack
from tests.fixtures.stack import KEY_A, KEY_B

pytestmark = pytest.mark.e2e

T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)


def event(
    user: str,
    content: str,
    *,
    tenant: str = "tenant-a",
    session: str = "s1",
    i: int = 0,
    ref: str | None = None,
    event_id: str | None = None,
) -> InteractionEvent:
    return InteractionEvent(
        event_id=event_id or f"{user}-{session}-{i}-{uuid.uuid4().hex[:6]}",
        tenant_id=tenant,
        user_id=user,
        agent_id="agent-1",
        session_id=session,
        occurred_at=T0 + timedelta(minutes=i),
        source="user",
        content=content,
        turn_index=i,
        external_ref=ref,
    )


def closed(
    user: str,
    session: str,
    *,
    after: timedelta = timedelta(hours=1),
    outcome: Literal["success", "failure", "abandoned", "unknown"] = "unknown",
    event_count: int | None = None,
) -> SessionClosedEvent:
    """The close of ``user``'s ``session`` (tenant-a, agent-1) at ``T0 + after``."""
    return SessionClosedEvent(
        event_id=f"close-{user}",
        tenant_id="tenant-a",
        user_id=user,
        agent_id="agent-1",
        session_id=session,
        closed_at=T0 + after,
        outcome=outcome,
        event_count=event_count,
    )


async def send(stack: Stack, items: Sequence[tuple[str, bytes | None, bytes]]) -> None:
    """Publish raw (topic, key, value) records, as any agent would, and wait until processed."""
    producer = AIOKafkaProducer(bootstrap_servers=stack.bootstrap, acks="all")
    await producer.start()
    try:
        for topic, key, value in items:
            await producer.send_and_wait(topic, value, key=key)
    finally:
        await producer.stop()
    await stack.wait_caught_up(timeout_s=180)


def raw(ev: InteractionEvent | SessionClosedEvent) -> tuple[str, bytes, bytes]:
    topic = Topic.INTERACTIONS if isinstance(ev, InteractionEvent) else Topic.SESSIONS
    return str(topic), partition_key(ev.tenant_id, ev.user_id), ev.model_dump_json().encode()


@pytest.fixture
async def http(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=stack.gateway_url, timeout=60) as client:
        yield client


async def recall(
    http: httpx.AsyncClient, key: str, user: str, query: str, **extra: Any
) -> list[dict[str, Any]]:
    response = await http.post(
        "/v1/recall",
        json={"query": query, "user_id": user, **extra},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert response.status_code == 200, response.text
    return list(response.json()["memories"])


def user_memories(stack: Stack, tenant: str, user: str) -> list[Any]:
    records, _ = stack.resources.vector_store().scroll(
        MemoryFilter(tenant_id=tenant, user_id=user, statuses=None), 1000
    )
    return [from_payload(r.payload) for r in records]


async def test_interaction_becomes_recallable_memory_with_provenance(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    user = f"u-{uuid.uuid4().hex[:6]}"
    ev = event(user, "I adopted a golden retriever puppy named Biscuit last weekend.", ref="D1:7")
    await send(stack, [raw(ev)])
    memories = await recall(http, KEY_A, user, "What is the name of my dog?")
    assert memories, "the interaction should be recallable"
    top = memories[0]
    assert "Biscuit" in top["content"]
    assert top["provenance"]["external_refs"] == ["D1:7"]
    assert top["provenance"]["event_ids"] == [ev.event_id]
    assert 0.65 <= top["scores"]["similarity"] <= 1.0


async def test_same_event_delivered_twice_yields_one_memory(stack: Stack) -> None:
    user = f"u-{uuid.uuid4().hex[:6]}"
    ev = event(user, "My favourite restaurant in Lisbon is Cervejaria Ramiro.", event_id=f"dup-{user}")
    await send(stack, [raw(ev), raw(ev)])
    await send(stack, [raw(ev)])
    turns = [m for m in user_memories(stack, "tenant-a", user) if m.kind == "turn"]
    assert len(turns) == 1


async def dead_letters(stack: Stack, predicate: Any, want: int) -> list[dict[str, Any]]:
    consumer = AIOKafkaConsumer(
        str(Topic.DLQ),
        bootstrap_servers=stack.bootstrap,
        auto_offset_reset="earliest",
        group_id=None,
        enable_auto_commit=False,
    )
    await consumer.start()
    found: list[dict[str, Any]] = []
    try:
        for _ in range(40):
            batch = await consumer.getmany(timeout_ms=250)
            for records in batch.values():
                for rec in records:
                    body = json.loads(rec.value)
                    if predicate(body):
                        found.append(body)
            if len(found) >= want:
                break
    finally:
        await consumer.stop()
    return found


async def test_malformed_and_schema_invalid_messages_are_dead_lettered_and_the_next_is_processed(
    stack: Stack,
) -> None:
    user = f"u-{uuid.uuid4().hex[:6]}"
    key = partition_key("tenant-a", user)
    marker = uuid.uuid4().hex
    malformed = f'{{"not json {marker}'.encode()
    invalid = json.loads(event(user, "x").model_dump_json())
    invalid["occurred_at"] = "2026-11-01T09:00:00"  # no time zone
    invalid["content"] = f"schema-invalid {marker}"
    blank = json.loads(event(user, "x", i=3).model_dump_json())
    blank["content"] = " \n\t "  # whitespace only: no memory can be made of it
    blank["metadata"] = {"marker": marker}
    valid = event(user, "I am training for the Berlin marathon in September.", i=2)
    await send(
        stack,
        [
            (str(Topic.INTERACTIONS), key, malformed),
            (str(Topic.INTERACTIONS), key, json.dumps(invalid).encode()),
            (str(Topic.INTERACTIONS), key, json.dumps(blank).encode()),
            raw(valid),
        ],
    )

    def mine(body: dict[str, Any]) -> bool:
        return marker.encode() in base64.b64decode(body["original_b64"])

    letters = await dead_letters(stack, mine, 3)
    assert len(letters) == 3
    by_type = {d["error_type"]: d for d in letters}
    assert set(by_type) == {"ValidationError"} or "JSONDecodeError" in by_type or len(by_type) == 2
    assert all(d["stage"] == "guard" and d["topic"] == str(Topic.INTERACTIONS) for d in letters)
    reasons = " ".join(d["reason"] for d in letters)
    assert "occurred_at" in reasons
    assert "content" in reasons
    assert "JSON" in reasons or "json" in reasons
    turns = [m for m in user_memories(stack, "tenant-a", user) if m.kind == "turn"]
    assert [m.content for m in turns] == [valid.content]


PII_TEXT = (
    "Please remember my e-mail jane.doe@example.com, my mobile 13812345678, my ID 11010519491231002X "
    "and my card 4111 1111 1111 1111 for the booking."
)
PII_VALUES = (
    "jane.doe@example.com",
    "13812345678",
    "11010519491231002X",
    "4111 1111 1111 1111",
    "4111111111111111",
)


async def test_pii_never_reaches_stores_and_recall_returns_redacted_text(
    stack: Stack, http: httpx.AsyncClient, clickhouse_client: Any
) -> None:
    user = f"u-{uuid.uuid4().hex[:6]}"
    await send(stack, [raw(event(user, PII_TEXT, session="pii"))])
    memories = await recall(http, KEY_A, user, "what contact details did I give (jane.doe@example.com?)")
    assert memories
    content = memories[0]["content"]
    assert "[REDACTED:email]" in content
    assert "[REDACTED:phone]" in content
    assert all(v not in content for v in PII_VALUES)
    # Qdrant payloads
    payloads = json.dumps(
        [
            r.payload
            for r in stack.resources.vector_store().scroll(
                MemoryFilter(tenant_id="tenant-a", user_id=user, statuses=None), 100
            )[0]
        ]
    )
    assert all(v not in payloads for v in PII_VALUES)
    # Redis: every key of working memory and the ledger
    redis = await stack.resources.redis()
    dump = []
    async for k in redis.scan_iter(match="*"):
        kind = await redis.type(k)
        if kind == b"hash":
            dump.append(json.dumps({str(a): str(b) for a, b in (await redis.hgetall(k)).items()}))
        elif kind == b"string":
            dump.append(str(await redis.get(k)))
    assert dump
    assert all(v not in "".join(dump) for v in PII_VALUES)
    # ClickHouse access log (the recall above was logged)
    await stack.wait_caught_up(timeout_s=60)
    table = stack.resources.settings.clickhouse.table
    rows = clickhouse_client.query(
        f"SELECT * FROM {table} WHERE user_id = {{u:String}}", parameters={"u": user}
    )
    assert rows.result_rows, "the recall should have been logged"
    assert all(v not in json.dumps(rows.result_rows, default=str) for v in PII_VALUES)


async def test_tenant_a_never_recalls_tenant_b(stack: Stack, http: httpx.AsyncClient) -> None:
    user = f"shared-{uuid.uuid4().hex[:6]}"
    await send(
        stack,
        [
            raw(
                event(
                    user, "The launch code for project Falcon is stored in the red binder.", tenant="tenant-b"
                )
            ),
            raw(event(user, "I keep my running shoes in the hallway closet.", tenant="tenant-a")),
        ],
    )
    a = await recall(http, KEY_A, user, "Where is the launch code for project Falcon?")
    b = await recall(http, KEY_B, user, "Where is the launch code for project Falcon?")
    assert all("Falcon" not in m["content"] for m in a)
    assert any("Falcon" in m["content"] for m in b)
    assert all("running shoes" not in m["content"] for m in b)


async def test_working_memory_keeps_the_allergy_and_compresses_evicted_chatter(stack: Stack) -> None:
    user = f"u-{uuid.uuid4().hex[:6]}"
    session = "dinner"
    turns = [event(user, "I am severely allergic to peanuts.", session=session, i=0)]
    turns += [event(user, f"lol ok {i}", session=session, i=i) for i in range(1, 11)]
    await send(stack, [raw(t) for t in turns])
    working = WorkingMemory(await stack.resources.redis())
    items = await working.items(SessionKey(tenant_id="tenant-a", user_id=user, session_id=session))
    assert len(items) == 8
    assert any("peanuts" in i.content for i in items)
    records, _ = stack.resources.vector_store().scroll(MemoryFilter(tenant_id="tenant-a", user_id=user), 100)
    compressed = [r.payload for r in records if "compressed" in r.payload["tags"]]
    assert all(p["content"].startswith("lol ok") for p in compressed)
    # 11 items, capacity 8: three chatter items were pushed out; each is a compressed episodic memory or
    # was merged into one as a near-duplicate (cosine > 0.95) -- none is dropped
    represented = {p["id"] for p in compressed} | {m for p in compressed for m in p["merged_ids"]}
    in_working = {i.id for i in items}
    assert len(represented) == 3
    assert not represented & in_working
    assert any("peanuts" in r.payload["content"] and "health" in r.payload["tags"] for r in records)


async def test_session_close_consolidates_an_episode_with_provenance(stack: Stack) -> None:
    user = f"u-{uuid.uuid4().hex[:6]}"
    turns = [
        event(user, f"I visited Kyoto and loved the temples, day {i}.", session="trip", i=i, ref=f"D1:{i}")
        for i in range(4)
    ]
    close = closed(user, "trip", outcome="success", event_count=4)
    await send(stack, [*(raw(t) for t in turns), raw(close)])
    episodes = [m for m in user_memories(stack, "tenant-a", user) if m.kind == "episode"]
    assert len(episodes) == 1
    assert episodes[0].provenance.external_refs == ("D1:0", "D1:1", "D1:2", "D1:3")
    assert "Outcome: success." in episodes[0].content


async def test_closing_a_session_compresses_what_working_memory_never_kept(stack: Stack) -> None:
    user = f"u-{uuid.uuid4().hex[:6]}"
    chatter = event(user, "lol ok", session="chat", i=0, ref="D9:1")
    close = closed(user, "chat", event_count=1)
    await send(stack, [raw(chatter)])
    assert user_memories(stack, "tenant-a", user) == []  # skipped by the write-trigger: working memory only
    await send(stack, [raw(close)])
    stored = user_memories(stack, "tenant-a", user)
    turns = [m for m in stored if m.kind == "turn"]
    assert [(m.content, m.tags, m.provenance.external_refs) for m in turns] == [
        ("lol ok", ("compressed",), ("D9:1",))
    ]
    assert [m.kind for m in stored if m.kind == "episode"] == ["episode"]
    working = WorkingMemory(await stack.resources.redis())
    assert await working.items(SessionKey(tenant_id="tenant-a", user_id=user, session_id="chat")) == []


async def test_closing_an_unknown_session_creates_no_episode(stack: Stack) -> None:
    user = f"u-{uuid.uuid4().hex[:6]}"
    close = closed(user, "nope", after=timedelta(0))
    await send(stack, [raw(close)])
    assert user_memories(stack, "tenant-a", user) == []


async def test_the_stack_subscribes_exactly_the_declared_topology(stack: Stack) -> None:
    """hindsight.topology is the one list of consumer groups: what the stack runs (and waits for, and
    the console reports) is exactly it, so a new stage that is not declared there fails here. The
    session stack runs without reconcile (tests/fixtures/stack.py), so that group is left out."""
    from hindsight.topology import STAGE_TOPICS  # noqa: PLC0415

    declared = {
        name: tuple(str(t) for t in topics)
        for name, topics in STAGE_TOPICS.items()
        if name != "ingest-reconcile"
    }
    assert stack.resources.stage_topics == declared
    kafka = stack.resources.settings.kafka
    assert set(stack.groups()) == {kafka.group(name) for name in declared}
