"""A stopped Triton server pauses the embedding consumer; nothing is lost or duplicated when it returns.

Runs the real embed stage (``services/ingest/embed.EmbedStage``) through the real consumer runtime
(``hindsight.consumer.run_batch``) on a real qdrant-edge store, with the Triton embedder on a
private ``tritonserver`` and the stage's session ledger on the session's real Redis. Kafka is
replaced by the runtime's contract: ``run_batch`` returning means "commit"; raising means "nack,
redeliver the batch". The publisher records what a real one would have sent to Kafka.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
from redis.asyncio import Redis

from hindsight.consumer import RETRIES, run_batch
from hindsight.errors import ModelUnavailableError
from hindsight.ids import turn_memory_id
from hindsight.inference.triton_client import TritonTarget
from hindsight.inference.triton_embedder import TritonEmbedder
from hindsight.inference.triton_server import TritonServer
from hindsight.publisher import EventPublisher
from hindsight.stores.session_ledger import SessionLedger
from hindsight.stores.vector import MemoryFilter
from hindsight.stores.vector_edge import EdgeVectorStore
from schemas import Topic
from services.ingest.embed import EmbedStage
from tests.fixtures.kafka import candidate_records

pytestmark = pytest.mark.integration

TENANT = "tenant-triton"
USER = "user-1"
CONTENTS = [
    "I am allergic to peanuts.",
    "My daughter starts school in September.",
    "I prefer window seats on long flights.",
    "We adopted a grey cat named Pixel.",
    "I run the Berlin marathon every autumn.",
    "My favourite dish is mapo tofu.",
]


class RecordingPublisher(EventPublisher):
    """An ``EventPublisher`` whose flush records the events instead of sending them to Kafka."""

    def __init__(self) -> None:
        super().__init__(cast(Any, None))
        self.flushed: list[tuple[str, bytes | None, bytes]] = []

    async def flush(self) -> int:
        pending, self._pending = self._pending, []
        self.flushed.extend(pending)
        return len(pending)

    def topics(self, topic: str) -> list[bytes]:
        return [value for t, _, value in self.flushed if t == topic]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EdgeVectorStore]:
    vector_store = EdgeVectorStore(tmp_path / "qdrant", 384)
    try:
        yield vector_store
    finally:
        vector_store.close()


def retries(stage: str) -> float:
    return RETRIES.labels(stage)._value.get()


async def test_stopped_server_pauses_the_embed_consumer_without_losing_or_duplicating_memories(
    triton_server_factory: Callable[[], TritonServer],
    store: EdgeVectorStore,
    redis_client: Redis,
) -> None:
    server = triton_server_factory()
    target = TritonTarget(
        server.grpc_url, "grpc", "embedder", timeout_s=5.0, max_attempts=2, backoff_max_s=0.2
    )
    embedder = TritonEmbedder(target, name="multilingual-e5-small-q4", dim=384)
    ledger = SessionLedger(redis_client, key_prefix=f"test-triton:{uuid.uuid4().hex}")
    stage = EmbedStage(store, embedder, ledger)
    records = candidate_records(TENANT, USER, CONTENTS, datetime(2026, 11, 1, 9, 0, tzinfo=UTC))
    ids = [turn_memory_id(TENANT, f"evt-{i}") for i in range(len(CONTENTS))]
    mine = MemoryFilter(tenant_id=TENANT, user_id=USER)
    embedder.model.info()  # the consumer was running against a healthy server

    # 1. The server goes away: the batch fails after bounded retries; nothing stored, nothing published
    #    (the runtime nacks: Kafka will redeliver the batch).
    await asyncio.to_thread(server.stop)
    publisher = RecordingPublisher()
    with pytest.raises(ModelUnavailableError, match="embedder"):
        await asyncio.wait_for(run_batch(stage, records, publisher, max_attempts=2, max_backoff_s=0.2), 60)
    assert store.count(mine) == 0
    assert publisher.flushed == []

    # 2. The redelivered batch meets a server that is still down: the consumer retries with backoff
    #    (paused) while the server restarts on the same ports, then completes.
    retried_before = retries(stage.name)
    publisher = RecordingPublisher()
    batch = asyncio.create_task(run_batch(stage, records, publisher, max_attempts=40, max_backoff_s=1.0))
    await asyncio.to_thread(server.start)
    await asyncio.wait_for(batch, 120)
    assert retries(stage.name) > retried_before, "the consumer never had to wait for the server"
    assert store.count(mine) == len(CONTENTS)
    assert sorted(r.id for r in store.retrieve(ids)) == sorted(ids)
    assert len(publisher.topics(Topic.STORED)) == len(CONTENTS)  # failed attempts published nothing
    assert publisher.topics(Topic.DLQ) == []

    # 3. At-least-once: the same batch delivered again (commit lost) stores nothing twice.
    publisher = RecordingPublisher()
    await asyncio.wait_for(run_batch(stage, records, publisher, max_attempts=2, max_backoff_s=0.2), 60)
    assert store.count(mine) == len(CONTENTS)
    assert len(publisher.topics(Topic.STORED)) == len(CONTENTS)
    contents = sorted(str(r.payload["content"]) for r in store.retrieve(ids))
    assert contents == sorted(CONTENTS)
    embedder.close()
