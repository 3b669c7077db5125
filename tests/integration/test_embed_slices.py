"""The embed stage stores and announces a batch slice by slice (issue 12: a burst's first memories are
searchable after one slice, not after the whole consumer batch).

Real embed stage, real local e5 embedder, real qdrant-edge store and the session's real Redis (the
session ledger), through the real consumer runtime (``run_batch``). The publisher is the runtime's
own ``EventPublisher`` with a flush that records, at each flush, what it would have sent to Kafka and
how many of the user's memories the store held at that moment.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
from aiokafka.structs import ConsumerRecord
from redis.asyncio import Redis

from hindsight.consumer import run_batch
from hindsight.ids import turn_memory_id
from hindsight.inference.embedder import Embedder, build_embedder
from hindsight.publisher import EventPublisher
from hindsight.settings import EmbedderSettings
from hindsight.stores.session_ledger import SessionLedger
from hindsight.stores.vector import MemoryFilter
from hindsight.stores.vector_edge import EdgeVectorStore
from schemas import Topic
from services.ingest.embed import EmbedStage
from tests.fixtures.kafka import candidate_records

pytestmark = pytest.mark.integration

TENANT = "tenant-slices"
USER = "user-1"
CONTENTS = [
    "I moved to Lyon in March for a job at a bakery.",
    "My son is learning the cello.",
    "I can't eat shellfish.",
    "We are saving for a trip to Patagonia next winter.",
    "My manager's name is Ines.",
]


class StoreWatchingPublisher(EventPublisher):
    """Records each flush: the stored events it carried and the store's count of the user's memories."""

    def __init__(self, store: EdgeVectorStore) -> None:
        super().__init__(cast(Any, None))
        self.store = store
        self.flushes: list[tuple[list[str], int]] = []

    async def flush(self) -> int:
        pending, self._pending = self._pending, []
        stored = [json.loads(value)["memory"]["id"] for topic, _, value in pending if topic == Topic.STORED]
        if pending:
            self.flushes.append((stored, self.store.count(MemoryFilter(tenant_id=TENANT, user_id=USER))))
        return len(pending)


def records() -> list[ConsumerRecord[bytes, bytes]]:
    return candidate_records(TENANT, USER, CONTENTS, datetime(2026, 11, 2, 9, 0, tzinfo=UTC))


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return build_embedder(EmbedderSettings())


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EdgeVectorStore]:
    vector_store = EdgeVectorStore(tmp_path / "qdrant", 384)
    try:
        yield vector_store
    finally:
        vector_store.close()


async def test_a_batch_is_stored_and_announced_slice_by_slice(
    embedder: Embedder, store: EdgeVectorStore, redis_client: Redis
) -> None:
    ledger = SessionLedger(redis_client, key_prefix=f"test-slices:{uuid.uuid4().hex}")
    stage = EmbedStage(store, embedder, ledger, slice_size=2)
    publisher = StoreWatchingPublisher(store)
    await run_batch(stage, records(), publisher, max_attempts=1, max_backoff_s=0.1)
    ids = [turn_memory_id(TENANT, f"evt-{i}") for i in range(len(CONTENTS))]
    # three slices (2, 2, 1), each announced once it is in the store and before the next is embedded
    assert publisher.flushes == [(ids[0:2], 2), (ids[2:4], 4), (ids[4:5], 5)]

    # redelivered (the commit was lost): nothing is embedded again, every memory is re-announced at once
    again = StoreWatchingPublisher(store)
    await run_batch(stage, records(), again, max_attempts=1, max_backoff_s=0.1)
    assert again.flushes == [(ids, 5)]


def test_a_slice_size_below_one_is_refused(embedder: Embedder, store: EdgeVectorStore) -> None:
    with pytest.raises(ValueError, match="slice_size must be at least 1"):
        EmbedStage(store, embedder, cast(Any, None), slice_size=0)
