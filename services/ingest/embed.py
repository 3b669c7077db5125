"""Embed stage: batch embedding and idempotent upsert (DESIGN.md sections 3, 4).

Consumes ``memory.candidates.v1`` in batches. For each batch:

1. candidates whose memory already exists (redelivery) are not rewritten: their stored state (access
   counts, status, version chain) is kept and the stored event is re-published (idempotent downstream);
2. the rest are embedded (``(n, 384)`` float32) and given BM25 sparse vectors, in slices of
   ``slice_size`` (default 8);
3. each slice is upserted (durable on return) with ``reconcile_state="pending"`` and announced on
   ``memory.stored.v1`` (flushed) before the next slice is embedded: searchable at once. A burst's first
   memories wait for one slice, not for the whole batch of 32 (~27 s of 1 KB texts on two cores, stop
   22); the embedder's rate does not depend on the call size on CPU (1.3-1.8 texts/s at 1, 4, 8, 16 and
   32 per call, interleaved, 2026-12-03). A failure after a slice was announced retries the batch:
   that slice's memories exist by then and are re-announced, as on any redelivery. Nothing is merged
   here: whether a memory repeats, revises or contradicts another is decided by reconcile's judge
   (:mod:`services.ingest.reconcile`), which consumes ``memory.stored.v1`` in its own consumer group
   (a blind cosine > 0.95 merge once swallowed a corrected allergy);
4. the session ledger records every candidate as stored, which reflection waits for.

Before 3, the consistency check (:mod:`hindsight.consistency`, when configured) holds back a
low-trust candidate that overturns a safety-critical or strongly supported memory of the user: it
goes to ``memory.quarantine.v1`` (stage ``ingest.embed``, with the candidate for release) instead
of being stored.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from hindsight.consistency import Hold
from hindsight.consumer import Envelope, Rejection, parse_model
from hindsight.inference.embedder import embed_passages_async
from hindsight.records import PENDING, RECONCILE_STATE, from_payload, memory_from_candidate, to_payload
from hindsight.stores.tombstones import buried_in
from hindsight.stores.vector import VectorRecord
from hindsight.text import speaker_text
from schemas import Memory, MemoryCandidate, MemoryStoredEvent, QuarantineRecord, Topic, partition_key

if TYPE_CHECKING:
    from hindsight.consistency import ConsistencyCheck
    from hindsight.inference.embedder import Embedder
    from hindsight.lexical import LexicalEncoder
    from hindsight.publisher import EventPublisher
    from hindsight.stores.session_ledger import SessionLedger
    from hindsight.stores.tombstones import Tombstones
    from hindsight.stores.vector import VectorStore


def embed_text(candidate: MemoryCandidate | Memory) -> str:
    """Text that is embedded: ``"speaker: content"`` when the speaker is known."""
    return speaker_text(candidate.speaker, candidate.content)


def _held(c: MemoryCandidate, hold: Hold, now: datetime) -> QuarantineRecord:
    """The quarantine record of a candidate the consistency check held back (redacted already)."""
    return QuarantineRecord(
        tenant_id=c.tenant_id,
        user_id=c.user_id,
        agent_id=c.agent_id,
        session_id=c.session_id,
        event_id=c.provenance.event_ids[0] if c.provenance.event_ids else c.memory_id,
        verdict="quarantine",
        reasons=(hold.reason,),
        source=c.source,
        content_redacted=c.content,
        quarantined_at=now,
        stage="ingest.embed",
        trust=c.confidence,
        external_ref=c.provenance.external_refs[0] if c.provenance.external_refs else None,
        scores={"cosine": round(hold.cosine, 4), "judge_confidence": hold.verdict.confidence},
        candidate=c,
    )


class EmbedStage:
    """Embedding and idempotent storage of memory candidates."""

    name = "ingest.embed"

    def __init__(
        self,
        store: VectorStore,
        embedder: Embedder,
        ledger: SessionLedger,
        *,
        lexical: LexicalEncoder | None = None,
        consistency: ConsistencyCheck | None = None,
        tombstones: Tombstones | None = None,
        slice_size: int = 8,
    ) -> None:
        if slice_size < 1:
            raise ValueError(f"slice_size must be at least 1, got {slice_size}")
        self._slice = slice_size
        self._tombstones = tombstones
        self._consistency = consistency
        self._store = store
        self._lexical = lexical
        self._ledger = ledger
        self._embedder = embedder

    def parse(self, topic: str, raw: bytes) -> MemoryCandidate:
        """Validate a memory candidate."""
        return parse_model(MemoryCandidate, raw)

    async def handle(
        self, batch: Sequence[Envelope[MemoryCandidate]], out: EventPublisher
    ) -> Sequence[Rejection]:
        """Embed and upsert the batch.

        Raises:
            StoreUnavailableError / ModelUnavailableError: retried by the runtime; nothing committed.
        """
        unique = list({env.event.memory_id: env.event for env in batch}.values())
        forgotten = await buried_in(
            self._tombstones,
            ((c.tenant_id, c.user_id, e, c.occurred_at) for c in unique for e in c.provenance.event_ids),
        )
        # a candidate of a forgotten event (in flight, redelivered or replayed) is not stored: it is
        # only marked stored below, so reflection does not wait for it
        await self._store_batch([c for c in unique if forgotten.isdisjoint(c.provenance.event_ids)], out)
        sessions: dict[tuple[str, str, str], list[str]] = defaultdict(list)
        for c in unique:
            sessions[(c.tenant_id, c.user_id, c.session_id)].append(c.memory_id)
        for (tenant, user, session), ids in sessions.items():
            await self._ledger.mark_stored(tenant, user, session, ids)
        return ()

    async def _store_batch(self, unique: list[MemoryCandidate], out: EventPublisher) -> None:
        existing = {
            r.id: r for r in await asyncio.to_thread(self._store.retrieve, [c.memory_id for c in unique])
        }
        for c in unique:
            if c.memory_id in existing:
                out.send(
                    Topic.STORED,
                    partition_key(c.tenant_id, c.user_id),
                    MemoryStoredEvent(
                        memory=from_payload(existing[c.memory_id].payload), candidate_id=c.memory_id
                    ),
                )
        fresh = [c for c in unique if c.memory_id not in existing]
        for start in range(0, len(fresh), self._slice):
            await self._store_slice(fresh[start : start + self._slice], out)
            await out.flush()  # announced now: the next slice's embedding does not delay these

    async def _store_slice(self, fresh: list[MemoryCandidate], out: EventPublisher) -> None:
        vectors = await embed_passages_async(self._embedder, [embed_text(c) for c in fresh])
        now = datetime.now(UTC)
        to_store: list[VectorRecord] = []
        for c, vec in zip(fresh, vectors, strict=True):
            if self._consistency is not None:
                hold = await asyncio.to_thread(self._consistency.check, c, vec)
                if hold is not None:
                    out.send(Topic.QUARANTINE, partition_key(c.tenant_id, c.user_id), _held(c, hold, now))
                    continue
            memory = memory_from_candidate(c, stored_at=now, model=self._embedder.name)
            sparse = self._lexical.document(embed_text(c)) if self._lexical is not None else None
            payload = to_payload(memory) | {RECONCILE_STATE: PENDING}
            to_store.append(VectorRecord(c.memory_id, vec, payload, sparse=sparse))
            out.send(
                Topic.STORED,
                partition_key(c.tenant_id, c.user_id),
                MemoryStoredEvent(memory=memory, candidate_id=c.memory_id),
            )
        if to_store:
            await asyncio.to_thread(self._store.upsert, to_store)
