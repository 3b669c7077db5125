"""Write-trigger stage: importance, keep/skip, working memory (DESIGN.md sections 2-4).

Consumes ``memory.guarded.v1``. For every guarded interaction, in partition (per-user) order:

1. drop it (nothing written anywhere) when its event is tombstoned: it was forgotten;
   score it with :func:`services.ingest.write_trigger.decide`;
2. record it in the session ledger (processed events, kept memory ids) for reflection;
3. reopen the session if it was reflected already (a late turn: the episode is rebuilt with it);
   push it into the session's working memory in Redis; every item the push evicts that was not kept
   is compressed into an episodic memory candidate, never dropped;
4. publish a :class:`~schemas.MemoryCandidate` to ``memory.candidates.v1`` if it is worth keeping.

All writes are idempotent (deterministic ids, idempotent Redis scripts), so a redelivered batch
changes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hindsight.consumer import Envelope, Rejection, parse_model
from hindsight.ids import passage_memory_id, turn_memory_id
from hindsight.records import compressed_candidate, memory_candidate
from hindsight.stores.tombstones import buried_in
from hindsight.stores.working_memory import SessionKey, WorkingItem
from hindsight.text import features, speaker_text
from hindsight.tokens import split_passages
from schemas import GuardedEvent, InteractionEvent, MemoryCandidate, Topic, partition_key
from services.ingest.write_trigger import WriteDecision, decide

if TYPE_CHECKING:
    from hindsight.publisher import EventPublisher
    from hindsight.stores.reflection_queue import ReflectionQueue
    from hindsight.stores.session_ledger import SessionLedger
    from hindsight.stores.tombstones import Tombstones
    from hindsight.stores.working_memory import WorkingMemory


def turn_text(event: InteractionEvent) -> str:
    """The text a turn memory stores: content, plus the tool result when there is one."""
    if event.tool_result:
        return f"{event.content}\n[tool {event.tool_name or ''} result] {event.tool_result}"
    return event.content


def candidate_for(event: InteractionEvent, decision: WriteDecision, trust: float) -> MemoryCandidate:
    """The turn-memory candidate of a kept interaction (its whole text, however long; see
    :func:`candidates_for`)."""
    return memory_candidate(
        event,
        memory_id=turn_memory_id(event.tenant_id, event.event_id),
        text=turn_text(event),
        source=event.source,
        features=decision.features,
        tags=tuple(dict.fromkeys((*event.tags, *decision.features.tags))),
        importance=decision.importance,
        confidence=trust,
        occurred_at=event.occurred_at,
        reason=decision.reason,
        event_id=event.event_id,
        external_ref=event.external_ref,
        speaker=event.speaker,
    )


def candidates_for(event: InteractionEvent, decision: WriteDecision, trust: float) -> list[MemoryCandidate]:
    """The memory candidates of a kept interaction: one turn memory when its text fits the embedder's
    window (:data:`~hindsight.tokens.EMBEDDER_WINDOW`, with the ``speaker:`` prefix it is embedded
    with), else one memory per passage (:func:`~hindsight.tokens.split_passages`), each with the
    event's importance, its own entities and intent, and provenance naming the event, the passage and
    its character span (defect 6 of issue 13: a 30,000-character turn was one 4,753-token memory the
    embedder read only the start of, and that no token budget could return)."""
    whole = candidate_for(event, decision, trust)
    text = whole.content
    spans = split_passages(text, prefix=speaker_text(event.speaker, ""))
    if len(spans) <= 1:
        return [whole]
    out = []
    for i, (start, end) in enumerate(spans):
        piece = text[start:end]
        f = features(piece)
        out.append(
            whole.model_copy(
                update={
                    "memory_id": passage_memory_id(event.tenant_id, event.event_id, i),
                    "content": piece,
                    "entities": f.entities,
                    "intent": f.intent,
                    "tags": tuple(dict.fromkeys((*whole.tags, *f.tags))),
                    "provenance": whole.provenance.model_copy(
                        update={"passage": i, "passages": len(spans), "span": (start, end)}
                    ),
                }
            )
        )
    return out


REOPEN_DELAY_S = 2.0
"""A late turn reopens its reflected session this many seconds later (reflection also waits until the
turn's memory is stored): a burst of late turns is reflected once."""


class WriteTriggerStage:
    """Write-trigger: importance and keep/skip, working memory update, memory candidates."""

    name = "ingest.trigger"

    def __init__(
        self,
        working: WorkingMemory,
        ledger: SessionLedger,
        *,
        threshold: float,
        reflections: ReflectionQueue | None = None,
        tombstones: Tombstones | None = None,
    ) -> None:
        self._working = working
        self._ledger = ledger
        self._reflections = reflections
        self._tombstones = tombstones
        self._threshold = threshold

    def parse(self, topic: str, raw: bytes) -> GuardedEvent:
        """Validate a guarded event."""
        return parse_model(GuardedEvent, raw)

    async def handle(
        self, batch: Sequence[Envelope[GuardedEvent]], out: EventPublisher
    ) -> Sequence[Rejection]:
        """Process in order; Redis writes are durable (and idempotent) before outputs are queued.

        Raises:
            StoreUnavailableError: Redis failed (the batch is retried; nothing is committed).
        """
        forgotten = await buried_in(
            self._tombstones,
            (
                (e.tenant_id, e.user_id, e.event_id, e.occurred_at)
                for e in (env.event.interaction for env in batch)
            ),
        )
        for env in batch:
            guarded = env.event
            event = guarded.interaction
            if event.event_id in forgotten:  # forgotten: a replay must not bring it back (nor any key)
                continue
            decision = decide(turn_text(event), event.source, threshold=self._threshold)
            memory_id = turn_memory_id(event.tenant_id, event.event_id)
            ordinal = await self._ledger.record(
                event.tenant_id,
                event.user_id,
                event.session_id,
                event.event_id,
                memory_id if decision.keep else None,
            )
            if self._reflections is not None:  # a turn of a session reflected already: reflect again
                await self._reflections.reopen(
                    event.tenant_id, event.user_id, event.session_id, due=time.time() + REOPEN_DELAY_S
                )
            item = WorkingItem(
                id=memory_id,
                content=turn_text(event),
                importance=decision.importance,
                turn_index=event.turn_index if event.turn_index is not None else ordinal,
                created_at=event.occurred_at,
                source=event.source,
                external_ref=event.external_ref,
                event_id=event.event_id,
            )
            key = partition_key(event.tenant_id, event.user_id)
            evicted = await self._working.push(
                SessionKey(tenant_id=event.tenant_id, user_id=event.user_id, session_id=event.session_id),
                item,
            )
            if decision.keep:
                candidates = candidates_for(event, decision, guarded.trust)
                await self._ledger.mark_kept(
                    event.tenant_id, event.user_id, event.session_id, [c.memory_id for c in candidates[1:]]
                )
                for candidate in candidates:
                    out.send(Topic.CANDIDATES, key, candidate)
            for old in evicted:
                if old.importance < self._threshold:
                    await self._ledger.record(
                        event.tenant_id, event.user_id, event.session_id, old.event_id, old.id
                    )
                    out.send(Topic.CANDIDATES, key, compressed_candidate(old, event, guarded.trust))
        return ()
