"""Embed stage: batch embedding, near-duplicate merge, idempotent upsert (DESIGN.md sections 3, 4).

Consumes ``memory.candidates.v1`` in batches. For each batch:

1. candidates whose memory already exists (redelivery) are not rewritten: their stored state (access
   counts, status) is kept and the stored event is re-published (idempotent downstream);
2. the rest are embedded in one call (``(n, 384)`` float32) and given BM25 sparse vectors;
3. a candidate whose cosine similarity to an active memory of the same user and type (already stored,
   or earlier in this batch) exceeds 0.95 is merged: no new memory, the existing one's
   ``merged_ids`` gains the candidate id (once: redelivery does not count twice) and
   ``merged_event_ids``/``merged_refs`` its provenance (kept apart from the memory's own provenance,
   so a reinforced memory stays a precise citation);
4. the others are upserted (durable on return) and announced on ``memory.stored.v1``;
5. the session ledger records every candidate as stored (or merged), which reflection waits for.

Before 3, the consistency check (:mod:`hindsight.consistency`, when configured) holds back a
low-trust candidate that overturns a safety-critical or strongly supported memory of the user: it
goes to ``memory.quarantine.v1`` (stage ``ingest.embed``, with the candidate for release) instead
of being stored. The reconcile stage should call the same check before it supersedes.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import numpy as np

from hindsight.consistency import Hold
from hindsight.consumer import Envelope, Rejection, parse_model
from hindsight.records import from_payload, memory_from_candidate, to_payload
from hindsight.stores.vector import MemoryFilter, VectorRecord
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
        dedupe_cosine: float,
        lexical: LexicalEncoder | None = None,
        consistency: ConsistencyCheck | None = None,
    ) -> None:
        self._consistency = consistency
        self._store = store
        self._lexical = lexical
        self._ledger = ledger
        self._embedder = embedder
        self._dedupe = dedupe_cosine

    def parse(self, topic: str, raw: bytes) -> MemoryCandidate:
        """Validate a memory candidate."""
        return parse_model(MemoryCandidate, raw)

    async def handle(
        self, batch: Sequence[Envelope[MemoryCandidate]], out: EventPublisher
    ) -> Sequence[Rejection]:
        """Embed, merge near-duplicates and upsert the batch.

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
        vectors = await asyncio.to_thread(self._embedder.embed_passages, [embed_text(c) for c in fresh])
        now = datetime.now(UTC)
        to_store: list[VectorRecord] = []
        merges: dict[str, list[str]] = defaultdict(list)
        accepted: dict[tuple[str, str, str], list[tuple[str, np.ndarray]]] = defaultdict(list)
        for c, vec in zip(fresh, vectors, strict=True):
            if self._consistency is not None:
                hold = await asyncio.to_thread(self._consistency.check, c, vec)
                if hold is not None:
                    out.send(Topic.QUARANTINE, partition_key(c.tenant_id, c.user_id), _held(c, hold, now))
                    continue
            group = (c.tenant_id, c.user_id, c.type)
            target = self._duplicate_of(c, vec, accepted[group])
            if target is not None:
                merges[target].append(c.memory_id)
                continue
            memory = memory_from_candidate(c, stored_at=now, model=self._embedder.name)
            sparse = self._lexical.document(embed_text(c)) if self._lexical is not None else None
            to_store.append(VectorRecord(c.memory_id, vec, to_payload(memory), sparse=sparse))
            accepted[group].append((c.memory_id, vec))
            out.send(
                Topic.STORED,
                partition_key(c.tenant_id, c.user_id),
                MemoryStoredEvent(memory=memory, candidate_id=c.memory_id),
            )
        if to_store:
            await asyncio.to_thread(self._store.upsert, to_store)
        await self._apply_merges(merges, {c.memory_id: c for c in fresh}, out)

    def _duplicate_of(
        self, c: MemoryCandidate, vec: np.ndarray, batch_peers: list[tuple[str, np.ndarray]]
    ) -> str | None:
        """Id of an active memory of the same user and type with cosine > threshold, if any."""
        for peer_id, peer_vec in batch_peers:
            if float(np.dot(vec, peer_vec)) > self._dedupe:
                return peer_id
        flt = MemoryFilter(tenant_id=c.tenant_id, user_id=c.user_id, types=(c.type,), statuses=("active",))
        hits = self._store.search(vec, flt, 1)
        if hits and hits[0].score > self._dedupe:
            return hits[0].id
        return None

    async def _apply_merges(
        self, merges: dict[str, list[str]], by_id: dict[str, MemoryCandidate], out: EventPublisher
    ) -> None:
        if not merges:
            return
        targets = {r.id: r for r in await asyncio.to_thread(self._store.retrieve, list(merges))}
        for target_id, cand_ids in merges.items():
            record = targets.get(target_id)
            if record is None:  # merged into a peer of this batch that was just stored
                continue
            merged = list(record.payload.get("merged_ids", []))
            new = [cid for cid in cand_ids if cid not in merged]
            if new:
                events = list(record.payload.get("merged_event_ids", []))
                refs = list(record.payload.get("merged_refs", []))
                for cid in new:
                    events.extend(by_id[cid].provenance.event_ids)
                    refs.extend(by_id[cid].provenance.external_refs)
                await asyncio.to_thread(
                    self._store.set_payload,
                    [target_id],
                    {
                        "merged_ids": merged + new,
                        "merged_event_ids": events,
                        "merged_refs": refs,
                    },
                )
            memory = from_payload(record.payload)
            for cid in cand_ids:
                c = by_id[cid]
                out.send(
                    Topic.STORED,
                    partition_key(c.tenant_id, c.user_id),
                    MemoryStoredEvent(memory=memory, candidate_id=cid, deduplicated=True),
                )
