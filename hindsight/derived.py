"""Storing memories a stage derives itself (reconcile's facts, reflection's lessons): the ones not
stored yet are embedded (:func:`~hindsight.inference.embedder.embed_passages_async`, the ingest lane)
and upserted with ``reconcile_state="pending"``, so reconcile judges them like any other memory."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hindsight.inference.embedder import embed_passages_async
from hindsight.records import PENDING, RECONCILE_STATE, to_payload
from hindsight.stores.vector import VectorRecord

if TYPE_CHECKING:
    from hindsight.inference.embedder import Embedder
    from hindsight.lexical import LexicalEncoder
    from hindsight.stores.vector import VectorStore
    from schemas import Memory


async def store_new(
    store: VectorStore,
    embedder: Embedder,
    lexical: LexicalEncoder | None,
    memories: Sequence[Memory],
) -> list[Memory]:
    """Embed and upsert those of ``memories`` the store does not hold yet (redelivery stores nothing
    twice); returns them.

    Raises:
        StoreUnavailableError / ModelUnavailableError: the store or the embedder failed.
    """
    existing = {r.id for r in await asyncio.to_thread(store.retrieve, [m.id for m in memories])}
    fresh = [m for m in memories if m.id not in existing]
    if not fresh:
        return []
    vectors = await embed_passages_async(embedder, [m.content for m in fresh])
    records = [
        VectorRecord(
            m.id,
            vec,
            to_payload(m) | {RECONCILE_STATE: PENDING},
            sparse=lexical.document(m.content) if lexical is not None else None,
        )
        for m, vec in zip(fresh, vectors, strict=True)
    ]
    await asyncio.to_thread(store.upsert, records)
    return fresh
