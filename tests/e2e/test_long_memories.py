"""Long memories (issue 13, defect 6): a 30,000-character retain was one 4,753-token memory the
embedder read only the start of, and default recall answered ``[]`` with ``truncated: true`` because
the one match was larger than the token budget. Now the pipeline stores passages that each fit the
embedder's window, with provenance back to the event, and recall never answers empty because its
best match is too long."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path

import httpx
import pytest

from hindsight.ids import stable_id
from hindsight.records import from_payload, to_payload
from hindsight.stores.vector import MemoryFilter, VectorRecord
from hindsight.tokens import EMBEDDER_WINDOW, count_tokens, passage_tokens
from schemas import Memory, Provenance
from services.cli.embedded import Stack
from tests.fixtures.stack import KEY_A

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

NEEDLE = "The spare key to the allotment shed is hidden under the blue watering can."
# ../shared beside the repository (CI, the main checkout), or beside the worktrees' folder
SHARED = next(
    (p / "shared" for p in Path(__file__).resolve().parents[3:5] if (p / "shared" / "data").exists()),
    Path(__file__).resolve().parents[3] / "shared",
)


@cache
def _conversation() -> str:
    """Real chat (LoCoMo conv-26) as one long text, each sentence once (the guard quarantines a text
    that repeats a claim, and a chat transcript repeats its greetings)."""
    sample = json.loads((SHARED / "data" / "locomo_dev.json").read_text())[0]["conversation"]
    chat = " ".join(
        t["text"] for k, v in sample.items() if k.startswith("session_") and isinstance(v, list) for t in v
    )
    sentences = re.split(r"(?<=[.!?])\s+", chat)
    return " ".join(dict.fromkeys(sentences))


def _long_text() -> str:
    chat = _conversation()
    return f"{chat[:15_500]} {NEEDLE} {chat[15_500:31_000]}"


async def test_a_30000_character_retain_becomes_passages_and_its_middle_is_recalled(stack: Stack) -> None:
    user = f"u-long-{uuid.uuid4().hex[:6]}"
    text = _long_text()
    assert len(text) > 30_000
    async with httpx.AsyncClient(
        base_url=stack.gateway_url, headers={"Authorization": f"Bearer {KEY_A}"}, timeout=120
    ) as http:
        accepted = await http.post(
            "/v1/memories", json={"user_id": user, "session_id": "s-long", "content": text}
        )
        assert accepted.status_code == 202, accepted.text
        await stack.wait_caught_up(timeout_s=400)
        found = (
            await http.post(
                "/v1/recall", json={"query": "Where is the spare key to the shed?", "user_id": user}
            )
        ).json()

    records, _ = stack.resources.vector_store().scroll(MemoryFilter(tenant_id="tenant-a", user_id=user), 100)
    passages = sorted((from_payload(r.payload) for r in records), key=lambda m: m.provenance.passage or 0)
    assert len(passages) >= 12
    event_id = accepted.json()["event_id"]
    for i, memory in enumerate(passages):
        assert memory.provenance.event_ids == (event_id,)
        assert (memory.provenance.passage, memory.provenance.passages) == (i, len(passages))
        start, end = memory.provenance.span or (0, 0)
        assert text[start:end] == memory.content
        assert passage_tokens(memory.content) <= EMBEDDER_WINDOW
    assert found["memories"], found
    top = found["memories"][0]
    assert NEEDLE in top["content"]
    assert top["provenance"]["event_ids"] == [event_id]
    assert not top["trimmed"]
    assert found["tokens"] <= 2000


async def test_a_stored_memory_longer_than_the_budget_is_returned_as_an_excerpt(stack: Stack) -> None:
    # a memory stored whole before passages existed (4,700+ tokens): recall must not answer []
    user = f"u-old-{uuid.uuid4().hex[:6]}"
    content = f"{NEEDLE} " + _conversation()[:20_000]
    assert count_tokens(content) > 4_000
    now = datetime.now(UTC) - timedelta(days=1)
    memory = Memory(
        id=stable_id("test-long", user),
        tenant_id="tenant-a",
        user_id=user,
        agent_id="agent-1",
        session_id="s-old",
        type="episodic",
        content=content,
        source="user",
        importance=0.6,
        confidence=0.9,
        created_at=now,
        stored_at=now,
        last_accessed_at=now,
        provenance=Provenance(event_ids=(f"evt-{user}",)),
    )
    resources = stack.resources
    [vector] = resources.embedder().embed_passages([content])
    resources.vector_store().upsert(
        [VectorRecord(memory.id, vector, to_payload(memory), sparse=resources.lexical().document(content))]
    )
    async with httpx.AsyncClient(
        base_url=stack.gateway_url, headers={"Authorization": f"Bearer {KEY_A}"}, timeout=120
    ) as http:
        found = (await http.post("/v1/recall", json={"query": "spare key shed", "user_id": user})).json()
    assert found["truncated"] is True
    [excerpt] = found["memories"]
    assert excerpt["id"] == memory.id
    assert excerpt["trimmed"] is True
    assert excerpt["content"].startswith(NEEDLE)
    assert excerpt["content"].endswith("…")
    assert 1_800 <= excerpt["tokens"] == found["tokens"] <= 2_000
