"""The gateway end to end over real components: a real Kafka broker (session fixture), the embedded
Qdrant engine, the local E5 embedder, and the gateway served by uvicorn on a loopback port.

Memories are seeded straight into the vector store (the gateway itself never writes memories: its
``retain`` is checked by consuming ``memory.interactions.v1``). Tenants A and B share user ids, so
only the API key's tenant keeps their memories apart.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import httpx2
import numpy as np
import pytest
import uvicorn
from aiokafka import AIOKafkaConsumer
from mcp import StdioServerParameters
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent

from hindsight.brokers import ensure_topics
from hindsight.ids import access_id, stable_id
from hindsight.recall import RecallParams
from hindsight.records import to_payload
from hindsight.runtime import Resources, make_broker, open_resources
from hindsight.settings import (
    AllSettings,
    ClickHouseSettings,
    EmbedderSettings,
    KafkaSettings,
    RedisSettings,
    RuntimeSettings,
    VectorStoreSettings,
)
from hindsight.stores.vector import VectorRecord
from schemas import Memory, Provenance, RecallLogEvent, Topic
from services.accesslog.stage import access_rows
from services.gateway.app import build_asgi
from services.gateway.auth import Principal
from services.gateway.settings import GatewaySettings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

WAIT_S = 30.0
REPO_ROOT = Path(__file__).resolve().parents[2]
KEY_A = "key-tenant-a"
KEY_B = "key-tenant-b"
KEY_A_AGENT = "key-tenant-a-agent-1"
TENANT_A = "tenant-a"
TENANT_B = "tenant-b"
USER = "u1"  # the same user id in both tenants: only the key's tenant separates them
QUERY = "What is Alice allergic to?"
TOOLS = {
    "retain",
    "recall",
    "reflect",
    "feedback",
    "forget",
    "history",
    "get",
    "forget_user",
    "erasure_report",
} | {
    "quarantine_list",
    "quarantine_release",
    "quarantine_reject",
}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Seeded:
    """Ids of the memories seeded into the store."""

    a_allergy: str
    b_allergy: str
    a_diet: str
    a_agent2: str
    a_v1: str
    a_v2: str


@dataclass
class Gateway:
    """The running gateway and what the tests need to reach it."""

    base_url: str
    bootstrap: str
    resources: Resources
    seeded: Seeded

    def client(self, key: str | None = None) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=WAIT_S)


def _memory(
    tenant: str,
    user: str,
    content: str,
    *,
    scope: str = "global",
    status: str = "active",
    version: int = 1,
    parent_id: str | None = None,
    superseded_by: str | None = None,
    age_days: float = 2.0,
    type_: str = "semantic",
    memory_id: str | None = None,
) -> Memory:
    created = datetime.now(UTC) - timedelta(days=age_days)
    event_id = f"evt-{uuid.uuid4().hex[:12]}"
    return Memory(
        id=memory_id or stable_id("test-gateway", tenant, event_id),
        tenant_id=tenant,
        user_id=user,
        agent_id="seed-agent",
        session_id="s-seed",
        type=type_,
        kind="fact" if type_ == "semantic" else "turn",
        content=content,
        source="user",
        scope=scope,
        tags=("health",) if "allergic" in content else (),
        importance=0.8,
        confidence=0.7,
        created_at=created,
        stored_at=created,
        last_accessed_at=created,
        status=status,
        version=version,
        parent_id=parent_id,
        superseded_by=superseded_by,
        supersedes=(parent_id,) if parent_id else (),
        provenance=Provenance(event_ids=(event_id,), external_refs=(f"D1:{version}",)),
    )


def _seed(resources: Resources, memories: list[Memory]) -> None:
    vectors = resources.embedder().embed_passages([m.content for m in memories])
    resources.vector_store().upsert(
        [VectorRecord(m.id, vec, to_payload(m)) for m, vec in zip(memories, vectors, strict=True)]
    )


@pytest.fixture(scope="module")
async def gateway(
    kafka_bootstrap: str, chdb_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Gateway]:
    """Resources over the session broker and a temp data dir, seeded memories, and the gateway app
    served by uvicorn on a free loopback port (its lifespan runs the MCP session manager)."""
    data_dir: Path = tmp_path_factory.mktemp("gateway")
    settings = AllSettings(
        runtime=RuntimeSettings(mode="local", data_dir=data_dir, log_level="WARNING", log_json=False),
        kafka=KafkaSettings(bootstrap=kafka_bootstrap, partitions=3, idempotent=False),
        qdrant=VectorStoreSettings(url="", collection="memories"),
        clickhouse=ClickHouseSettings(dsn=chdb_dsn, database=f"gateway_{uuid.uuid4().hex[:8]}"),
        redis=RedisSettings(url=""),
        embedder=EmbedderSettings(backend="local", dim=384, threads=2),
    )
    await ensure_topics(
        kafka_bootstrap,
        {Topic.INTERACTIONS: 3, Topic.SESSIONS: 3, Topic.ACCESS: 3, Topic.RECALLS: 3, Topic.FEEDBACK: 3},
    )
    gateway_settings = GatewaySettings(
        api_keys={
            KEY_A: Principal(tenant_id=TENANT_A),
            KEY_B: Principal(tenant_id=TENANT_B),
            KEY_A_AGENT: Principal(tenant_id=TENANT_A, agent_id="agent-1"),
        },
        host="127.0.0.1",
    )
    broker = make_broker(settings.kafka)
    async with open_resources(settings, broker) as resources:
        async with asyncio.timeout(WAIT_S):
            await broker.connect()
        try:
            a_allergy = _memory(TENANT_A, USER, "Alice told me she is allergic to peanuts.")
            # B's memory is (nearly) the query itself: a closer match than A's, in another tenant.
            b_allergy = _memory(TENANT_B, USER, "What is Alice allergic to? Alice is allergic to shellfish.")
            a_diet = _memory(TENANT_A, USER, "Alice follows a vegetarian diet and avoids peanuts.")
            a_agent2 = _memory(
                TENANT_A, USER, "Alice is allergic to cats (agent-2 only).", scope="agent:agent-2"
            )
            v2_id = stable_id("test-gateway", TENANT_A, "chain-v2")
            a_v1 = _memory(
                TENANT_A,
                "u-chain",
                "Bob lives in Paris.",
                status="superseded",
                age_days=40,
                superseded_by=v2_id,
            )
            a_v2 = _memory(
                TENANT_A, "u-chain", "Bob moved to Berlin.", version=2, parent_id=a_v1.id, memory_id=v2_id
            )
            _seed(resources, [a_allergy, b_allergy, a_diet, a_agent2, a_v1, a_v2])
            seeded = Seeded(a_allergy.id, b_allergy.id, a_diet.id, a_agent2.id, a_v1.id, a_v2.id)

            app = build_asgi(resources, gateway_settings)
            port = _free_port()
            config = uvicorn.Config(
                app,
                host="127.0.0.1",
                port=port,
                log_level="warning",
                ws="none",
                lifespan="on",
                timeout_graceful_shutdown=5,
            )
            server = uvicorn.Server(config)
            task = asyncio.create_task(server.serve())
            async with asyncio.timeout(WAIT_S):
                while not server.started:
                    if task.done():
                        task.result()
                    await asyncio.sleep(0.02)
            try:
                yield Gateway(f"http://127.0.0.1:{port}", kafka_bootstrap, resources, seeded)
            finally:
                server.should_exit = True
                await asyncio.wait_for(task, WAIT_S)
        finally:
            await broker.stop()


async def _consume(
    bootstrap: str, topic: str, matches: Callable[[dict[str, Any]], bool], count: int
) -> list[tuple[bytes | None, dict[str, Any]]]:
    """Read ``topic`` from the start (fresh group) until ``count`` messages match; bounded by WAIT_S."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"t-gateway-{uuid.uuid4().hex[:8]}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    found: list[tuple[bytes | None, dict[str, Any]]] = []
    try:
        async with asyncio.timeout(WAIT_S):
            await consumer.start()
            while len(found) < count:
                batches = await consumer.getmany(timeout_ms=500)
                for records in batches.values():
                    for record in records:
                        try:  # the topic is shared with other tests, some of which publish poison
                            value = json.loads(record.value or b"")
                        except json.JSONDecodeError:
                            continue
                        if isinstance(value, dict) and matches(value):
                            found.append((record.key, value))
    finally:
        await consumer.stop()
    return found


def _ids(body: dict[str, Any]) -> list[str]:
    return [m["id"] for m in body["memories"]]


async def test_recall_returns_own_tenants_memories_with_scores_and_provenance_never_the_other_tenants(
    gateway: Gateway,
) -> None:
    seeded = gateway.seeded
    embedder = gateway.resources.embedder()
    query = embedder.embed_queries([QUERY])[0]
    a_vec, b_vec = embedder.embed_passages(
        [
            "Alice told me she is allergic to peanuts.",
            "What is Alice allergic to? Alice is allergic to shellfish.",
        ]
    )
    assert float(np.dot(query, b_vec)) > float(np.dot(query, a_vec))  # B's is the closer match

    async with gateway.client(KEY_A) as client_a, gateway.client(KEY_B) as client_b:
        resp_a = await client_a.post("/v1/recall", json={"query": QUERY, "user_id": USER, "top_k": 15})
        resp_b = await client_b.post("/v1/recall", json={"query": QUERY, "user_id": USER, "top_k": 15})
    assert resp_a.status_code == 200, resp_a.text
    assert resp_b.status_code == 200, resp_b.text
    body_a, body_b = resp_a.json(), resp_b.json()

    assert seeded.a_allergy in _ids(body_a)
    assert seeded.b_allergy not in _ids(body_a)
    assert _ids(body_b) == [seeded.b_allergy]
    for memory in body_a["memories"]:
        assert memory["user_id"] == USER
    first = next(m for m in body_a["memories"] if m["id"] == seeded.a_allergy)
    assert first["content"] == "Alice told me she is allergic to peanuts."
    assert first["type"] == "semantic"
    assert first["status"] == "active"
    assert first["version"] == 1
    assert first["tags"] == ["health"]
    assert first["scores"]["similarity"] >= 0.65
    assert first["scores"]["time_weight"] == 1.0
    scores = first["scores"]
    k = RecallParams().rrf_k  # RRF, normalised by the best possible fused score (hindsight.recall.rank)
    fused = sum(1 / (k + r) for r in (scores["dense_rank"], scores["lexical_rank"]) if r is not None)
    assert scores["relevance"] == pytest.approx(fused / (2 / (k + 1)))
    # no recency blend for a query that does not ask for the current state; boosts are small
    assert scores["relevance"] - 0.05 <= scores["final"] <= scores["relevance"] + 0.25
    assert first["provenance"]["event_ids"][0].startswith("evt-")
    assert first["provenance"]["external_refs"] == ["D1:1"]
    assert [m["rank"] for m in body_a["memories"]] == list(range(1, len(body_a["memories"]) + 1))


async def test_tenant_in_the_request_body_is_refused_and_agent_keys_see_only_their_scopes(
    gateway: Gateway,
) -> None:
    async with gateway.client(KEY_A) as client, gateway.client(KEY_A_AGENT) as agent_client:
        smuggled = await client.post(
            "/v1/recall", json={"query": QUERY, "user_id": USER, "tenant_id": TENANT_B}
        )
        tenant_wide = await client.post("/v1/recall", json={"query": QUERY, "user_id": USER, "top_k": 15})
        per_agent = await agent_client.post("/v1/recall", json={"query": QUERY, "user_id": USER, "top_k": 15})
        other_scope = await agent_client.post(
            "/v1/recall", json={"query": QUERY, "user_id": USER, "scopes": ["agent:agent-2"]}
        )
    assert smuggled.status_code == 422
    assert smuggled.json()["error"]["field"] == "tenant_id"
    assert gateway.seeded.a_agent2 in _ids(tenant_wide.json())
    assert per_agent.status_code == 200
    assert gateway.seeded.a_agent2 not in _ids(per_agent.json())
    assert gateway.seeded.a_allergy in _ids(per_agent.json())
    assert other_scope.status_code == 403
    assert other_scope.json()["error"]["field"] == "scopes"


async def test_missing_or_unknown_key_is_401_naming_the_header_and_the_fix(gateway: Gateway) -> None:
    async with gateway.client() as anonymous, gateway.client("not-a-key") as stranger:
        responses = [
            await anonymous.post("/v1/recall", json={"query": QUERY, "user_id": USER}),
            await stranger.post("/v1/recall", json={"query": QUERY, "user_id": USER}),
            await anonymous.get("/v1/memories", params={"user_id": USER}),
            await anonymous.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        ]
    for resp in responses:
        assert resp.status_code == 401, resp.text
        error = resp.json()["error"]
        assert error["code"] == "unauthenticated"
        assert error["field"] == "Authorization"
        assert "Bearer" in error["fix"]
        assert resp.headers["www-authenticate"].startswith("Bearer")
    async with httpx.AsyncClient(base_url=gateway.base_url, headers={"X-API-Key": KEY_A}) as by_header:
        assert (await by_header.get("/v1/memories", params={"user_id": USER})).status_code == 200
    # a key without the scheme is not "missing" (a newcomer's finding): the message says what is wrong
    async with httpx.AsyncClient(base_url=gateway.base_url, headers={"Authorization": KEY_A}) as bare:
        no_scheme = await bare.get("/v1/memories", params={"user_id": USER})
    assert no_scheme.status_code == 401
    assert "no 'Bearer ' scheme" in no_scheme.json()["error"]["message"]


async def test_out_of_range_top_k_and_empty_query_name_the_field_and_the_fix(gateway: Gateway) -> None:
    async with gateway.client(KEY_A) as client:
        too_many = await client.post("/v1/recall", json={"query": QUERY, "user_id": USER, "top_k": 99})
        zero = await client.post("/v1/recall", json={"query": QUERY, "user_id": USER, "top_k": 0})
        not_int = await client.post("/v1/recall", json={"query": QUERY, "user_id": USER, "top_k": "many"})
        empty = await client.post("/v1/recall", json={"query": "  ", "user_id": USER})
    # above the configured maximum: /openapi.json states it, so it is a schema violation like the others
    assert too_many.status_code == 422, too_many.text
    assert too_many.json()["error"]["code"] == "validation_error"
    assert too_many.json()["error"]["field"] == "top_k"
    assert "1..15" in too_many.json()["error"]["fix"]
    for resp in (zero, not_int):  # the schema's own bounds and types: validation errors
        assert resp.status_code == 422, resp.text
        assert resp.json()["error"]["field"] == "top_k"
        assert resp.json()["error"]["code"] == "validation_error"
    assert empty.status_code == 422
    assert empty.json()["error"]["field"] == "query"
    assert empty.json()["error"]["fix"] == "send a 'query' with at least one non-whitespace character"


async def test_an_unknown_time_zone_is_refused_even_without_a_time_word_and_a_reversed_window_too(
    gateway: Gateway,
) -> None:
    base = {"query": "seats", "user_id": USER}
    async with gateway.client(KEY_A) as client:
        mars = await client.post("/v1/recall", json={**base, "time_zone": "Mars/Olympus"})
        blank = await client.post("/v1/recall", json={**base, "time_zone": ""})
        reversed_window = await client.post(
            "/v1/recall",
            json={**base, "time_from": "2026-02-01T00:00:00Z", "time_to": "2026-01-01T00:00:00Z"},
        )
        empty_window = await client.post(
            "/v1/recall",
            json={**base, "time_from": "2026-02-01T08:00:00+08:00", "time_to": "2026-02-01T00:00:00Z"},
        )
        window = await client.post(
            "/v1/recall",
            json={**base, "time_from": "2026-01-01T00:00:00Z", "time_to": "2026-02-01T00:00:00Z"},
        )
        shanghai = await client.post("/v1/recall", json={**base, "time_zone": "Asia/Shanghai"})
        spec = (await client.get("/openapi.json")).json()
    assert mars.status_code == 422, mars.text
    assert mars.json()["error"]["field"] == "time_zone"
    assert "Mars/Olympus" in mars.json()["error"]["message"]
    assert blank.status_code == 422
    assert blank.json()["error"]["field"] == "time_zone"
    # a window that ends before (or where) it starts is a mistake: 400 naming time_from with the fix;
    # JSON Schema cannot state "time_from < time_to", so the OpenAPI document says it in words
    for resp in (reversed_window, empty_window):
        assert resp.status_code == 400, resp.text
        assert resp.json()["error"]["code"] == "invalid_request"
        assert resp.json()["error"]["field"] == "time_from"
        assert "earlier than time_to" in resp.json()["error"]["fix"]
    assert window.status_code == 200, window.text
    assert shanghai.status_code == 200
    recall = spec["paths"]["/v1/recall"]["post"]
    assert "time_from not before time_to" in recall["responses"]["400"]["description"]
    assert (
        "before time_to"
        in spec["components"]["schemas"]["RecallRequest"]["properties"]["time_from"]["description"]
    )


async def test_forgotten_memory_leaves_recall_but_stays_in_history_as_expired(gateway: Gateway) -> None:
    keep = _memory(TENANT_A, "u-forget", "Carol's favourite colour is green.")
    soft = _memory(TENANT_A, "u-forget", "Carol's favourite colour is blue.", age_days=1)
    hard = _memory(TENANT_A, "u-forget", "Carol's favourite colour is red.", age_days=3)
    _seed(gateway.resources, [keep, soft, hard])
    recall = {"query": "What is Carol's favourite colour?", "user_id": "u-forget", "top_k": 15}
    async with gateway.client(KEY_A) as client:
        before = await client.post("/v1/recall", json=recall)
        assert {keep.id, soft.id, hard.id} <= set(_ids(before.json()))

        forgot = await client.delete(f"/v1/memories/{soft.id}")
        deleted = await client.delete(f"/v1/memories/{hard.id}", params={"hard": "true"})
        after = await client.post("/v1/recall", json=recall)
        history = await client.get("/v1/memories", params={"user_id": "u-forget"})
        active_only = await client.get(
            "/v1/memories", params={"user_id": "u-forget", "include_inactive": "false"}
        )
        gone = await client.get(f"/v1/memories/{hard.id}")
    assert forgot.json() == {
        "id": soft.id,
        "status": "expired",
        "derived": [],
        "tombstoned_events": 1,
        "also_forgotten": [],
    }
    assert deleted.json() == {
        "id": hard.id,
        "status": "deleted",
        "derived": [],
        "tombstoned_events": 1,
        "also_forgotten": [],
    }
    assert soft.id not in _ids(after.json())
    assert hard.id not in _ids(after.json())
    assert keep.id in _ids(after.json())

    assert history.status_code == 200
    listed = history.json()["memories"]
    assert [m["id"] for m in listed] == [keep.id, soft.id]  # chronological: keep is 2 days old, soft 1
    assert [m["status"] for m in listed] == ["active", "expired"]
    assert listed[1]["valid_to"] is not None
    assert _ids(active_only.json()) == [keep.id]
    assert gone.status_code == 404
    payload = gateway.resources.vector_store().retrieve([soft.id])[0].payload
    assert payload["status"] == "expired"
    assert payload["expired_ts"] > 0


async def test_other_tenants_memory_is_404_and_own_memory_has_its_version_chain(gateway: Gateway) -> None:
    seeded = gateway.seeded
    async with gateway.client(KEY_B) as client_b, gateway.client(KEY_A) as client_a:
        foreign_get = await client_b.get(f"/v1/memories/{seeded.a_allergy}")
        foreign_delete = await client_b.delete(f"/v1/memories/{seeded.a_allergy}")
        unknown = await client_b.get(f"/v1/memories/{uuid.uuid4()}")
        garbage = await client_b.get("/v1/memories/not-a-uuid")
        own = await client_a.get(f"/v1/memories/{seeded.a_v2}")
    for resp in (foreign_get, foreign_delete, unknown, garbage):
        assert resp.status_code == 404, resp.text
        assert resp.json()["error"]["code"] == "not_found"
        assert resp.json()["error"]["field"] == "memory_id"
    assert foreign_get.json()["error"]["message"] == unknown.json()["error"]["message"].replace(
        unknown.url.path.rsplit("/", 1)[1], seeded.a_allergy
    )
    still = gateway.resources.vector_store().retrieve([seeded.a_allergy])[0].payload
    assert still["status"] == "active"

    assert own.status_code == 200
    detail = own.json()
    assert detail["memory"]["id"] == seeded.a_v2
    assert detail["memory"]["tenant_id"] == TENANT_A
    assert [(m["id"], m["version"], m["status"]) for m in detail["chain"]] == [
        (seeded.a_v2, 2, "active"),
        (seeded.a_v1, 1, "superseded"),
    ]
    async with gateway.client(KEY_A) as client_a:
        from_old = await client_a.get(f"/v1/memories/{seeded.a_v1}")  # walked forward, too
        history = await client_a.get("/v1/memories", params={"user_id": "u-chain", "memory_id": seeded.a_v2})
        other_user = await client_a.get("/v1/memories", params={"user_id": USER, "memory_id": seeded.a_v2})
    assert [m["id"] for m in from_old.json()["chain"]] == [seeded.a_v2, seeded.a_v1]
    assert from_old.json()["chain"][1]["superseded_by"] == seeded.a_v2
    assert [m["id"] for m in history.json()["memories"]] == [seeded.a_v1, seeded.a_v2]  # oldest first
    assert other_user.status_code == 404


async def test_recall_publishes_one_log_event_that_gives_an_access_row_per_returned_memory(
    gateway: Gateway,
) -> None:
    async with gateway.client(KEY_A) as client:
        resp = await client.post("/v1/recall", json={"query": QUERY, "user_id": USER, "top_k": 15})
    body = resp.json()
    assert len(body["memories"]) >= 2
    query_id = body["query_id"]
    [(key, value)] = await _consume(
        gateway.bootstrap, Topic.RECALLS, lambda v: v.get("query_id") == query_id, 1
    )
    assert key == f"{TENANT_A}:{USER}".encode()
    rows = {row["memory_id"]: row for row in access_rows(RecallLogEvent.model_validate(value))}
    assert list(rows) == _ids(body)  # the access log's rows: the returned memories, in order
    for memory in body["memories"]:
        row = rows[memory["id"]]
        assert row["access_id"] == access_id(query_id, memory["id"])
        assert row["rank"] == memory["rank"]
        assert row["tenant_id"] == TENANT_A
        assert row["user_id"] == USER
        assert row["memory_type"] == memory["type"]
        assert row["query_text"] == QUERY
        assert row["similarity"] == pytest.approx(memory["scores"]["similarity"])
        assert row["final_score"] == pytest.approx(memory["scores"]["final"])


async def test_retain_publishes_an_interaction_and_writes_no_store(gateway: Gateway) -> None:
    store = gateway.resources.vector_store()
    count_before = store.count()
    async with gateway.client(KEY_A_AGENT) as client:
        resp = await client.post(
            "/v1/memories",
            json={
                "user_id": USER,
                "session_id": "s-retain",
                "content": "I moved to Lisbon last month.",
                "occurred_at": "2026-03-02T09:30:00+08:00",
                "tags": ["travel"],
                "external_ref": "D9:1",
                "agent_id": "agent-ignored",
            },
        )
        foreign_scope = await client.post(
            "/v1/memories",
            json={"user_id": USER, "session_id": "s-retain", "content": "x", "scope": "agent:agent-2"},
        )
        naive = await client.post(
            "/v1/memories",
            json={"user_id": USER, "session_id": "s", "content": "x", "occurred_at": "2026-03-02T09:30:00"},
        )
        # a newcomer's finding (2026-12-03): 3,000 tags of 1,000 characters reached the broker's record
        # limit and came back as a 500 "retry"; tags are labels, bounded like every other field
        many = await client.post(
            "/v1/memories",
            json={"user_id": USER, "session_id": "s", "content": "x", "tags": [f"t{i}" for i in range(65)]},
        )
        long_tag = await client.post(
            "/v1/memories", json={"user_id": USER, "session_id": "s", "content": "x", "tags": ["t" * 129]}
        )
        empty_body = await client.post("/v1/memories", json={})
        bad_scope = await client.post(
            "/v1/memories", json={"user_id": USER, "session_id": "s", "content": "x", "scope": "team"}
        )
        huge = await client.post(  # refused by its Content-Length before it is read
            "/v1/memories", json={"user_id": USER, "session_id": "s", "content": "x" * (3 * 1024 * 1024)}
        )

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: refused while it arrives
            for _ in range(3):
                yield b"x" * (1024 * 1024)

        huge_chunked = await client.post(
            "/v1/memories", content=chunks(), headers={"content-type": "application/json"}
        )
    assert resp.status_code == 202, resp.text
    assert many.status_code == 422, many.text
    assert many.json()["error"]["field"] == "tags"
    assert long_tag.status_code == 422, long_tag.text
    assert long_tag.json()["error"]["field"].startswith("tags")
    assert huge.status_code == 413, huge.text
    assert huge.json()["error"]["code"] == "payload_too_large"
    assert huge.json()["error"]["field"] == "body"
    assert huge_chunked.status_code == 413, huge_chunked.text
    assert huge_chunked.json()["error"]["code"] == "payload_too_large"
    assert empty_body.status_code == 422
    assert empty_body.json()["error"]["fix"] == "add the required fields 'user_id', 'session_id', 'content'"
    assert bad_scope.status_code == 422
    assert "'global'" in bad_scope.json()["error"]["fix"]
    assert "agent:<id>" in bad_scope.json()["error"]["fix"]
    event_id = resp.json()["event_id"]
    assert resp.json()["status"] == "accepted"
    assert foreign_scope.status_code == 403
    assert foreign_scope.json()["error"]["field"] == "scope"
    assert naive.status_code == 422
    assert naive.json()["error"]["field"] == "occurred_at"
    assert "+08:00" in naive.json()["error"]["fix"]  # says how to add the offset, not what is wrong

    [(key, event)] = await _consume(
        gateway.bootstrap, Topic.INTERACTIONS, lambda v: v.get("event_id") == event_id, 1
    )
    assert key == f"{TENANT_A}:{USER}".encode()
    assert event["tenant_id"] == TENANT_A
    assert event["agent_id"] == "agent-1"  # from the key, not the body
    assert event["content"] == "I moved to Lisbon last month."
    assert event["occurred_at"] == "2026-03-02T09:30:00+08:00"  # the user's offset is kept
    assert event["tags"] == ["travel"]
    assert event["external_ref"] == "D9:1"
    assert event["source"] == "user"
    assert store.count() == count_before


async def test_closing_a_session_publishes_a_session_closed_event(gateway: Gateway) -> None:
    async with gateway.client(KEY_A) as client:
        resp = await client.post(
            "/v1/sessions/s-close/close",
            json={"user_id": USER, "outcome": "success", "feedback_score": 0.5, "event_count": 3},
        )
        bad = await client.post("/v1/sessions/s-close/close", json={"user_id": USER, "feedback_score": 3})
    assert resp.status_code == 202, resp.text
    event_id = resp.json()["event_id"]
    assert bad.status_code == 422
    assert bad.json()["error"]["field"] == "feedback_score"
    [(key, event)] = await _consume(
        gateway.bootstrap, Topic.SESSIONS, lambda v: v.get("event_id") == event_id, 1
    )
    assert key == f"{TENANT_A}:{USER}".encode()
    assert event["session_id"] == "s-close"
    assert event["outcome"] == "success"
    assert event["event_count"] == 3
    assert event["agent_id"] == "gateway"


@asynccontextmanager
async def _mcp(gateway: Gateway, key: str) -> AsyncIterator[Client]:
    """An MCP client over streamable HTTP to ``/mcp``, sending ``key`` on every request."""
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx2.AsyncClient(headers=headers, timeout=WAIT_S) as http_client:
        transport = streamable_http_client(f"{gateway.base_url}/mcp", http_client=http_client)
        async with Client(transport) as client:
            yield client


def _structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    content: dict[str, Any] | None = result.structured_content
    assert content is not None
    return content


def _error(result: CallToolResult) -> dict[str, Any]:
    """The ``{code, message, field, fix}`` of a tool error: its text is the HTTP error body as JSON."""
    assert result.is_error, result.content
    text = " ".join(c.text for c in result.content if isinstance(c, TextContent))
    body = json.loads(text)
    assert set(body["error"]) == {"code", "message", "field", "fix"}
    error: dict[str, Any] = body["error"]
    return error


async def test_mcp_tools_share_the_service_and_the_tenant_comes_from_the_key(gateway: Gateway) -> None:
    seeded = gateway.seeded
    async with (
        asyncio.timeout(WAIT_S * 2),
        _mcp(gateway, KEY_A) as client_a,
        _mcp(gateway, KEY_B) as client_b,
    ):
        tools = await client_a.list_tools()
        names = {tool.name for tool in tools.tools}
        assert names == TOOLS
        recall_tool = next(tool for tool in tools.tools if tool.name == "recall")
        assert recall_tool.input_schema["properties"]["top_k"]["description"]
        assert "ctx" not in recall_tool.input_schema["properties"]

        recalled_a = _structured(
            await client_a.call_tool("recall", {"query": QUERY, "user_id": USER, "top_k": 15})
        )
        recalled_b = _structured(await client_b.call_tool("recall", {"query": QUERY, "user_id": USER}))
        assert seeded.a_allergy in _ids(recalled_a)
        assert seeded.b_allergy not in _ids(recalled_a)
        assert _ids(recalled_b) == [seeded.b_allergy]
        top = recalled_a["memories"][0]
        assert set(top["scores"]) == {
            "similarity",
            "relevance",
            "dense_rank",
            "lexical_rank",
            "rerank",
            "time_weight",
            "in_time_window",
            "final",
        }
        assert top["provenance"]["event_ids"]

        too_many = _error(await client_a.call_tool("recall", {"query": QUERY, "user_id": USER, "top_k": 99}))
        assert (too_many["code"], too_many["field"]) == ("validation_error", "top_k")  # the schema's maximum
        assert "1..15" in too_many["fix"]
        not_int = _error(await client_a.call_tool("recall", {"query": QUERY, "user_id": USER, "top_k": "x"}))
        assert (not_int["code"], not_int["field"]) == ("validation_error", "top_k")
        window = {"time_from": "2026-02-01T00:00:00Z", "time_to": "2026-01-01T00:00:00Z"}
        reversed_window = _error(
            await client_a.call_tool("recall", {"query": QUERY, "user_id": USER, **window})
        )  # the same 400 as over HTTP, not an empty answer
        assert (reversed_window["code"], reversed_window["field"]) == ("invalid_request", "time_from")
        assert "earlier than time_to" in reversed_window["fix"]
        foreign = _error(await client_b.call_tool("forget", {"memory_id": seeded.a_diet}))
        assert (foreign["code"], foreign["field"]) == ("not_found", "memory_id")

        accepted = _structured(
            await client_a.call_tool(
                "retain", {"user_id": USER, "session_id": "s-mcp", "content": "I like jazz."}
            )
        )
        history = _structured(await client_a.call_tool("history", {"user_id": "u-chain"}))
        assert [m["id"] for m in history["memories"]] == [seeded.a_v1, seeded.a_v2]
        chain = _structured(
            await client_a.call_tool("history", {"user_id": "u-chain", "memory_id": seeded.a_v1})
        )
        assert [m["id"] for m in chain["memories"]] == [seeded.a_v1, seeded.a_v2]
        got = _structured(await client_a.call_tool("get", {"memory_id": seeded.a_v1}))
        assert [(m["id"], m["status"]) for m in got["chain"]] == [
            (seeded.a_v2, "active"),
            (seeded.a_v1, "superseded"),
        ]
        assert _error(await client_b.call_tool("get", {"memory_id": seeded.a_v1}))["code"] == "not_found"
        closed = _structured(await client_a.call_tool("reflect", {"user_id": USER, "session_id": "s-mcp"}))
        assert closed["status"] == "accepted"

    [(_, event)] = await _consume(
        gateway.bootstrap, Topic.INTERACTIONS, lambda v: v.get("event_id") == accepted["event_id"], 1
    )
    assert event["tenant_id"] == TENANT_A
    assert event["content"] == "I like jazz."


async def test_healthz_metrics_and_openapi(gateway: Gateway) -> None:
    async with gateway.client() as client:
        health = await client.get("/healthz")
        metrics = await client.get("/metrics")
        openapi = await client.get("/openapi.json")
    assert health.status_code == 200, health.text
    assert health.json()["status"] == "ok"
    assert health.json()["checks"] == {"kafka": "ok", "vector_store": "ok"}
    assert metrics.status_code == 200
    assert "hindsight_gateway_calls_total" in metrics.text
    spec = openapi.json()
    assert {
        "/v1/memories",
        "/v1/memories/{memory_id}",
        "/v1/recall",
        "/v1/sessions/{session_id}/close",
    } <= set(spec["paths"])
    for name in ("RecallRequest", "RetainRequest", "RecallResponse", "RecalledMemory", "ErrorBody"):
        for field, schema in spec["components"]["schemas"][name]["properties"].items():
            assert schema.get("description"), f"{name}.{field} has no description"


async def test_mcp_over_stdio_acts_as_the_principal_of_the_env_key(gateway: Gateway, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "HINDSIGHT_API_KEY": "stdio-key",
        "HINDSIGHT_GATEWAY_API_KEYS": "stdio-key=tenant-stdio:agent-9",
        "HINDSIGHT_KAFKA_BOOTSTRAP": gateway.bootstrap,
        "HINDSIGHT_DATA_DIR": str(tmp_path),  # its own store: the module's store is locked by this process
        "HINDSIGHT_MODE": "local",
    }
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", "import asyncio; from services.gateway.app import run_stdio; asyncio.run(run_stdio())"],
        env=env,
        cwd=str(REPO_ROOT),
    )
    async with asyncio.timeout(WAIT_S * 2), Client(params) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        accepted = _structured(
            await client.call_tool(
                "retain", {"user_id": USER, "session_id": "s-stdio", "content": "stdio works"}
            )
        )
    assert names == TOOLS
    [(key, event)] = await _consume(
        gateway.bootstrap, Topic.INTERACTIONS, lambda v: v.get("event_id") == accepted["event_id"], 1
    )
    assert key == f"tenant-stdio:{USER}".encode()
    assert event["tenant_id"] == "tenant-stdio"
    assert event["agent_id"] == "agent-9"


async def test_malformed_bodies_and_unknown_routes_get_the_documented_error_body(gateway: Gateway) -> None:
    # found by a newcomer test: these answered with FastAPI's own shapes or a "field" of "32"
    async with gateway.client(KEY_A) as http:
        broken = await http.post(
            "/v1/recall", content=b'{"query": "x", "user_id": ', headers={"Content-Type": "application/json"}
        )
        not_json = await http.post("/v1/recall", content=b"query=x", headers={"Content-Type": "text/plain"})
        missing = await http.post("/v1/recall", json={"query": "where?"})
        unknown = await http.get("/v1/nothing-here")
        wrong_method = await http.put("/v1/recall", json={})
    assert broken.status_code == 422
    assert broken.json()["error"]["field"] == "body"
    assert "JSON" in broken.json()["error"]["fix"]
    assert broken.json()["error"]["message"].startswith("body: not valid JSON at character")
    assert not_json.status_code == 422
    assert "Content-Type: application/json" in not_json.json()["error"]["fix"]
    assert missing.json()["error"]["field"] == "user_id"
    assert missing.json()["error"]["fix"] == "add the required field 'user_id'"
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "not_found"
    assert wrong_method.status_code == 405
    assert "PUT" in wrong_method.json()["error"]["fix"]


async def test_openapi_states_the_bounds_the_server_enforces_and_a_non_utf8_body_has_a_documented_code(
    gateway: Gateway,
) -> None:
    # issue 13, defect 12: generated clients sent requests the server refused, and a non-UTF-8 body
    # got an undocumented code
    async with gateway.client(KEY_A) as client:
        spec = (await client.get("/openapi.json")).json()
        latin1 = await client.post(
            "/v1/recall",
            content='{"query": "café", "user_id": "u1"}'.encode("latin-1"),
            headers={"Content-Type": "application/json"},
        )
        too_long = await client.get("/v1/memories", params={"user_id": USER, "limit": 1001})
        typo = await client.get("/v1/memories", params={"user_id": USER, "limt": 5})
        trace = await client.request("TRACE", "/v1/memories")
    recall = spec["components"]["schemas"]["RecallRequest"]["properties"]
    top_k = recall["top_k"]
    assert top_k["maximum"] == 15
    assert top_k["anyOf"][0]["minimum"] == 1
    assert recall["query"]["minLength"] == 1
    assert recall["query"]["pattern"]
    assert "Asia/Shanghai" in recall["time_zone"]["anyOf"][0]["enum"]
    assert "x-maximum-from-setting" not in json.dumps(spec)
    limit = next(p for p in spec["paths"]["/v1/memories"]["get"]["parameters"] if p["name"] == "limit")
    assert (limit["schema"]["minimum"], limit["schema"]["maximum"]) == (1, 1000)
    codes = spec["components"]["schemas"]["ErrorDetail"]["properties"]["code"]["description"]
    assert "invalid_encoding" in codes
    assert "invalid_encoding" in spec["paths"]["/v1/recall"]["post"]["responses"]["400"]["description"]

    assert latin1.status_code == 400, latin1.text
    assert latin1.json()["error"]["code"] == "invalid_encoding"
    assert latin1.json()["error"]["field"] == "body"
    assert "UTF-8" in latin1.json()["error"]["fix"]
    assert too_long.status_code == 422  # the configured history_max, stated as the schema's maximum
    too_long_error = too_long.json()["error"]
    assert (too_long_error["code"], too_long_error["field"]) == ("validation_error", "limit")
    assert typo.status_code == 422  # unknown query parameters are refused like unknown body fields
    assert typo.json()["error"]["field"] == "limt"
    assert trace.status_code == 405
    assert set(trace.headers["allow"].split(", ")) >= {"GET", "POST"}


async def test_recall_logs_every_candidate_with_the_query_redacted(gateway: Gateway) -> None:
    query = "What is Alice allergic to? Call me on 13800138000"
    async with gateway.client(KEY_A) as client:
        resp = await client.post("/v1/recall", json={"query": query, "user_id": USER, "top_k": 1})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    [(key, event)] = await _consume(
        gateway.bootstrap, Topic.RECALLS, lambda v: v.get("query_id") == body["query_id"], 1
    )
    assert key == f"{TENANT_A}:{USER}".encode()
    assert event["query_text"] == "What is Alice allergic to? Call me on [REDACTED:phone]"
    assert "13800138000" not in json.dumps(event)
    assert event["tenant_id"] == TENANT_A
    assert event["top_k"] == 1
    assert {"embed", "parse_and_search", "rank", "total", "served"} <= set(event["timings_ms"])
    candidates = event["candidates"]
    returned = [c for c in candidates if c["outcome"] == "returned"]
    assert [c["memory_id"] for c in returned] == _ids(body)
    assert returned[0]["rank"] == 1
    assert returned[0]["similarity"] == pytest.approx(body["memories"][0]["scores"]["similarity"])
    others = {c["outcome"] for c in candidates} - {"returned"}
    assert "below_top_k" in others  # top_k 1 of several allergy memories
    assert gateway.seeded.b_allergy not in {c["memory_id"] for c in candidates}  # other tenant's
    for c in candidates:
        assert c["age_days"] == pytest.approx(2.0, abs=0.05) or c["age_days"] > 2.0
        assert c["memory_type"] in ("semantic", "episodic")


async def test_feedback_is_checked_against_the_recall_idempotent_and_tenant_isolated(
    gateway: Gateway,
) -> None:
    async with gateway.client(KEY_A) as client_a, gateway.client(KEY_B) as client_b:
        recalled = await client_a.post("/v1/recall", json={"query": QUERY, "user_id": USER, "top_k": 15})
        body = recalled.json()
        qid, ids = body["query_id"], _ids(body)
        assert len(ids) >= 2
        labels = {"used": [ids[0]], "outdated": [ids[1]]}
        first = await client_a.post(f"/v1/recall/{qid}/feedback", json=labels)
        again = await client_a.post(f"/v1/recall/{qid}/feedback", json=labels)
        foreign = await client_b.post(f"/v1/recall/{qid}/feedback", json=labels)
        unknown = await client_a.post(f"/v1/recall/{uuid.uuid4()}/feedback", json=labels)
        stray = await client_a.post(f"/v1/recall/{qid}/feedback", json={"used": [gateway.seeded.b_allergy]})
        twice = await client_a.post(f"/v1/recall/{qid}/feedback", json={"used": [ids[0]], "wrong": [ids[0]]})
        empty = await client_a.post(f"/v1/recall/{qid}/feedback", json={})
        # schema-valid bodies for no recall of this tenant are 404, whatever the cross-list rules say
        empty_unknown = await client_a.post(f"/v1/recall/{uuid.uuid4()}/feedback", json={})
        twice_unknown = await client_a.post(
            f"/v1/recall/{uuid.uuid4()}/feedback", json={"used": ["0"], "wrong": ["0"]}
        )
        typo = await client_a.post(f"/v1/recall/{qid}/feedback", json={"usde": [ids[0]]})
    assert first.status_code == 200, first.text
    assert first.json() == {"query_id": qid, "labels": {ids[0]: "used", ids[1]: "outdated"}}
    assert again.json() == first.json()
    for resp in (foreign, unknown, empty_unknown, twice_unknown):
        assert resp.status_code == 404, resp.text
        assert resp.json()["error"]["field"] == "query_id"
    assert stray.status_code == 409  # the recall's state: it did not return that memory
    assert (stray.json()["error"]["code"], stray.json()["error"]["field"]) == ("conflict", "used")
    assert twice.status_code == 400
    assert twice.json()["error"]["field"] == "wrong"
    assert empty.status_code == 400
    assert typo.status_code == 422
    assert typo.json()["error"]["field"] == "usde"

    events = await _consume(gateway.bootstrap, Topic.FEEDBACK, lambda v: v.get("query_id") == qid, 4)
    assert len(events) == 4  # two identical calls of two labels each; nothing from tenant B
    assert {e["tenant_id"] for _, e in events} == {TENANT_A}
    by_id: dict[str, set[str]] = {}
    for _, e in events:
        by_id.setdefault(e["feedback_id"], set()).add(e["label"])
    assert sorted(by_id.values(), key=sorted) == [{"outdated"}, {"used"}]  # one id per (query, memory)


async def test_feedback_mcp_tool_labels_a_recall(gateway: Gateway) -> None:
    async with asyncio.timeout(WAIT_S * 2), _mcp(gateway, KEY_A) as client:
        recalled = _structured(await client.call_tool("recall", {"query": QUERY, "user_id": USER}))
        result = _structured(
            await client.call_tool(
                "feedback", {"query_id": recalled["query_id"], "used": [recalled["memories"][0]["id"]]}
            )
        )
        bad = _error(await client.call_tool("feedback", {"query_id": "nope", "used": ["x"]}))
        typo = _error(await client.call_tool("feedback", {"query_id": "nope", "usde": ["x"]}))
    assert result["labels"] == {recalled["memories"][0]["id"]: "used"}
    assert (bad["code"], bad["field"]) == ("not_found", "query_id")
    assert (typo["code"], typo["field"]) == ("validation_error", "usde")
