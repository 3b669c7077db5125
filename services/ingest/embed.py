"""Embed stage: batch embedding and idempotent upsert (DESIGN.md sections 3, 4).

Consumes ``memory.candidates.v1`` in batches. For each batch:

1. candidates whose memory already exists (redelivery) are not rewritten: their stored state (access
   counts, status, version chain) is kept and the stored event is re-published (idempotent downstream);
2. the rest are embedded in one call (``(n, 384)`` float32) and given BM25 sparse vectors;
3. they are upserted (durable on return) with ``reconcile_state="pending"`` and announced on
   ``memory.stored.v1``: searchable at once. Nothing is merged here: whether a memory repeats,
   revises or contradicts another is decided by reconcile's judge (:mod:`services.ingest.reconcile`),
   which consumes ``memory.stored.v1`` in its own consumer group (a blind cosine > 0.95 merge once
   swallowed a corrected allergy);
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
from hindsight.stores.vector import VectorRecord
from hindsight.text import speaker_text
from schemas import Memory, MemoryCandidate, MemoryStoredEvent, QuarantineRecord, Topic, partition_key

if TYPE_CHECKING:
    from hindsight.consistency import ConsistencyCheck
    from hindsight.inference.embedder import Embedder
    from hindsight.lexical import LexicalEncoder
    from hindsight.publisher import EventPublisher
    from hindsight.stores.session_ledger import SessionLedger
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
    ) -> None:
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
        await self._store_batch(unique, out)
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
        if not fresh:
            return
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
