"""Reflect stage: consolidate closed sessions into episodes, abstract recurring patterns (DESIGN.md s2-4).

Consumes ``memory.sessions.v1``. For each closed session:

1. wait (bounded by ``close_grace_s``) until the write-trigger has processed ``event_count`` events
   of the session and the embed stage has stored (or merged) every turn memory it kept: a close
   that overtakes its own turns is *parked* (:class:`~hindsight.stores.reflection_queue.ReflectionQueue`)
   and reflected by :meth:`ReflectStage.sweep` when its turns are in or its grace period is over, so
   it never holds up its partition (a user claiming ``event_count = 10**12`` delays no one else);
2. build the episode from the session's turn memories (:func:`build_episode`), embed and upsert it
   (an existing episode keeps its access history), publish it on ``memory.episodes.v1``;
3. lessons: with feedback, or a task with a known outcome, write semantic ``lesson`` memories
   (:mod:`services.reflect.lessons`; phrased by the lesson writer when one is configured) and
   announce them on ``memory.stored.v1``, where reconcile merges a lesson seen again (confidence up)
   or supersedes a contradicted one;
4. K-of-M abstraction over the user's last M episodes into semantic memories (new or updated);
5. publish the :class:`~schemas.ReflectionResult` and clear the session's working memory (its items
   are summarised in the episode); mark the session reflected, so a turn that arrives later (ingest
   lagging past the grace period) reopens it and the episode is rebuilt with that turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol

from hindsight.consumer import Envelope, Rejection, parse_model
from hindsight.derived import store_new
from hindsight.errors import RetryableError
from hindsight.ids import stable_id
from hindsight.pii import redact
from hindsight.records import (
    compressed_candidate,
    from_payload,
    memory_from_candidate,
    to_payload,
    with_merged_provenance,
)
from hindsight.redaction import redact_session_close
from hindsight.stores.tombstones import buried_in
from hindsight.stores.vector import MemoryFilter, VectorRecord
from hindsight.stores.working_memory import SessionKey
from schemas import (
    EpisodeEvent,
    Memory,
    MemoryOperation,
    MemoryStoredEvent,
    ReflectionResult,
    SessionClosedEvent,
    Topic,
    partition_key,
)
from services.reflect.abstraction import fact_for, recurring_entities
from services.reflect.consolidate import build_episode
from services.reflect.lessons import LessonText, fallback_lessons, lesson_memories, wants_lessons

if TYPE_CHECKING:
    from hindsight.inference.embedder import Embedder
    from hindsight.lexical import LexicalEncoder
    from hindsight.publisher import EventPublisher
    from hindsight.stores.reflection_queue import ReflectionQueue
    from hindsight.stores.session_ledger import SessionLedger
    from hindsight.stores.tombstones import Tombstones
    from hindsight.stores.vector import VectorStore
    from hindsight.stores.working_memory import WorkingMemory
    from services.reflect.settings import ReflectSettings

log = logging.getLogger("hindsight.reflect")
_SCROLL_PAGE = 512


def redacted(close: SessionClosedEvent) -> SessionClosedEvent:
    """``close`` with PII redacted from its free text (task, feedback): the close event does not pass
    the guard (it goes straight to ``memory.sessions.v1``), and both reach the episode and lessons."""
    update = {
        name: redact(value).text
        for name, value in (("task", close.task), ("feedback", close.feedback))
        if value is not None
    }
    return close.model_copy(update=update) if update else close


class _Lesson(Protocol):
    text: str
    kind: str


class LessonWriter(Protocol):
    """Phrases lessons from a finished task (the judge's model; ``hindsight.inference.judge``)."""

    @property
    def name(self) -> str:
        """Backend and model name."""
        ...

    def lessons(self, task: str, outcome: str, feedback: str) -> Sequence[_Lesson]:
        """Up to 2 lessons (possibly none).

        Raises:
            ModelUnavailableError: the backend is unreachable or timed out (retry later).
        """
        ...


MAX_RECHECK_S = 5.0
"""Longest wait between two checks of a parked close."""
LEASE_S = 60.0
"""How long a claimed parked close is hidden from other sweepers (a reflection takes well under it)."""
SWEEP_BATCH = 16
"""Parked closes one sweep claims at most."""


class ReflectStage:
    """Reflection: episode consolidation and K-of-M semantic abstraction."""

    name = "reflect"

    def __init__(
        self,
        store: VectorStore,
        embedder: Embedder,
        ledger: SessionLedger,
        working: WorkingMemory,
        settings: ReflectSettings,
        *,
        queue: ReflectionQueue,
        lexical: LexicalEncoder | None = None,
        tombstones: Tombstones | None = None,
        lesson_writer: LessonWriter | None = None,
    ) -> None:
        self._tombstones = tombstones
        self._lesson_writer = lesson_writer
        self._store = store
        self._lexical = lexical
        self._embedder = embedder
        self._ledger = ledger
        self._working = working
        self._cfg = settings
        self._queue = queue
        self._parked = asyncio.Event()  # set when this process parks a close: the sweeper looks at once

    def parse(self, topic: str, raw: bytes) -> SessionClosedEvent:
        """Validate a session-closed event; its ``task`` and ``feedback`` are redacted here, before
        anything reads them (closes do not pass the guard stage; issue 13 defect 5)."""
        close, findings = redact_session_close(parse_model(SessionClosedEvent, raw))
        if findings:
            log.info("session close redacted", extra={"session_id": close.session_id, "findings": findings})
        return close

    async def handle(
        self, batch: Sequence[Envelope[SessionClosedEvent]], out: EventPublisher
    ) -> Sequence[Rejection]:
        """Reflect on every closed session of the batch whose turns are in, in order; park the others
        (:meth:`sweep` reflects them later), so the batch never waits for one session.

        Raises:
            StoreUnavailableError / ModelUnavailableError: transient failures.
        """
        now = time.time()
        for env in batch:
            close = env.event
            if await self._ready(close, since=now):
                await self._reflect(close, out)
            else:
                await self._queue.park(close, due=now + self._cfg.recheck_s)
                self._parked.set()
        return ()

    async def _ready(self, close: SessionClosedEvent, *, since: float) -> bool:
        """Whether to reflect now: every processed turn the session kept is stored and ``event_count``
        events were processed, or the grace period that started at ``since`` is over."""
        processed, missing = await self._ledger.pending(close.tenant_id, close.user_id, close.session_id)
        if not missing and (close.event_count is None or processed >= close.event_count):
            return True
        if time.time() - since >= self._cfg.close_grace_s:
            log.info(
                "reflecting after the grace period",
                extra={
                    "session_id": close.session_id,
                    "processed": processed,
                    "event_count": close.event_count,
                    "not_stored": len(missing),
                },
            )
            return True
        return False

    async def sweep(self, publisher: Callable[[], EventPublisher], *, now: float | None = None) -> int:
        """Reflect the parked closes that are due and ready (or past their grace period); park the
        others again, checking each less often (``recheck_s`` doubling up to :data:`MAX_RECHECK_S`).
        Returns how many closes were due.

        Raises:
            StoreUnavailableError / ModelUnavailableError: transient failures (the claimed closes come
                due again when their lease ends).
        """
        at = time.time() if now is None else now
        due = await self._queue.claim(now=at, lease_s=LEASE_S, limit=SWEEP_BATCH)
        for item in due:
            if await self._ready(item.close, since=item.since):
                out = publisher()
                await self._reflect(item.close, out)
                await out.flush()
            else:
                waited = max(0.0, at - item.since)
                again = min(MAX_RECHECK_S, max(self._cfg.recheck_s, waited / 2))
                await self._queue.park(item.close, due=at + again, since=item.since)
        return len(due)

    async def run_sweeper(self, publisher: Callable[[], EventPublisher]) -> None:
        """Sweep for ever (a background job of the reflect process): at once again while closes are
        due, else when the earliest parked close comes due or this process parks one, and at least
        every ``sweep_interval_s`` (closes parked or reopened by other processes). An idle service
        with nothing parked looks once per ``sweep_interval_s`` (issue 12: it looked every second).
        A transient failure is logged and retried after ``sweep_interval_s``."""
        while True:
            self._parked.clear()
            try:
                busy = await self.sweep(publisher)
                wait = 0.0 if busy else await self._until_next_due()
            except RetryableError as exc:
                log.warning("parked closes not swept; retrying", extra={"error": repr(exc)})
                wait = self._cfg.sweep_interval_s
            if wait > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._parked.wait(), wait)

    async def _until_next_due(self) -> float:
        """Seconds until the earliest parked close comes due, at most ``sweep_interval_s``.

        Raises:
            StoreUnavailableError: Redis did not answer.
        """
        due = await self._queue.next_due()
        if due is None:
            return self._cfg.sweep_interval_s
        return min(self._cfg.sweep_interval_s, max(0.0, due - time.time()))

    def _scroll(self, flt: MemoryFilter) -> list[Memory]:
        out: list[Memory] = []
        offset: str | None = None
        while True:
            records, offset = self._store.scroll(flt, _SCROLL_PAGE, offset)
            out.extend(with_merged_provenance(r.payload) for r in records)
            if offset is None:
                return out

    async def _upsert(self, memories: Sequence[Memory]) -> None:
        if not memories:
            return
        vectors = await asyncio.to_thread(self._embedder.embed_passages, [m.content for m in memories])
        existing = {r.id: r for r in await asyncio.to_thread(self._store.retrieve, [m.id for m in memories])}
        records = []
        for fresh, vec in zip(memories, vectors, strict=True):
            old = existing.get(fresh.id)
            memory = fresh
            if old is not None:  # keep the access history of an earlier version of this record
                prior = from_payload(old.payload)
                memory = fresh.model_copy(
                    update={
                        "access_count": prior.access_count,
                        "last_accessed_at": prior.last_accessed_at,
                        "stored_at": prior.stored_at,
                    }
                )
            payload = to_payload(memory)
            if old is not None:
                payload |= {k: v for k, v in old.payload.items() if k.startswith("merged_")}
            sparse = self._lexical.document(memory.content) if self._lexical is not None else None
            records.append(VectorRecord(memory.id, vec, payload, sparse=sparse))
        await asyncio.to_thread(self._store.upsert, records)

    async def _reflect(self, close: SessionClosedEvent, out: EventPublisher) -> None:
        close = redacted(close)
        now = datetime.now(UTC)
        session_flt = MemoryFilter(
            tenant_id=close.tenant_id,
            user_id=close.user_id,
            session_id=close.session_id,
            types=("episodic",),
            statuses=("active",),
        )
        turns = [m for m in await asyncio.to_thread(self._scroll, session_flt) if m.kind == "turn"]
        session = SessionKey(tenant_id=close.tenant_id, user_id=close.user_id, session_id=close.session_id)
        leftovers = await self._leftovers(close, session, {m.id for m in turns}, now)
        await self._upsert(leftovers)
        turns += leftovers
        if not turns:  # an unknown or empty session: nothing to consolidate, no junk episode
            log.info("closed session has no turns (yet)", extra={"session_id": close.session_id})
            await self._lessons(close, None, "global", now, out)
            await self._working.clear(session)
            await self._queue.done(close)  # a turn that comes later reopens it
            return
        episode = build_episode(
            close, turns, stored_at=now, key_points=self._cfg.key_points, model=self._embedder.name
        )
        await self._upsert([episode])
        lessons = await self._lessons(close, episode, turns[0].scope, now, out)
        key = partition_key(close.tenant_id, close.user_id)
        out.send(
            Topic.EPISODES,
            key,
            EpisodeEvent(
                episode=episode,
                turn_memory_ids=tuple(m.id for m in turns),
                outcome=close.outcome,
                feedback_score=close.feedback_score,
            ),
        )
        operations = [
            MemoryOperation(op="store", memory_id=episode.id, reason="episode consolidated on close")
        ]
        operations += [
            MemoryOperation(
                op="store",
                memory_id=lesson.id,
                reason=f"lesson from the session's {'feedback' if close.feedback else 'outcome'}",
                confidence=lesson.confidence,
            )
            for lesson in lessons
        ]
        operations += await self._abstract(close, episode, now)
        out.send(
            Topic.REFLECTIONS,
            key,
            ReflectionResult(
                reflection_id=stable_id("reflection", episode.id),
                tenant_id=close.tenant_id,
                user_id=close.user_id,
                episode_id=episode.id,
                operations=tuple(operations),
                reflected_at=now,
            ),
        )
        await self._working.clear(session)
        await self._queue.done(close)

    async def _lessons(
        self,
        close: SessionClosedEvent,
        episode: Memory | None,
        scope: str,
        now: datetime,
        out: EventPublisher,
    ) -> list[Memory]:
        """Write the session's lessons (new ids only: a redelivered close rewrites nothing) and
        announce every one on ``memory.stored.v1`` for reconcile."""
        if not wants_lessons(close):
            return []
        texts: list[LessonText] = []
        if self._lesson_writer is not None:
            written = await asyncio.to_thread(
                self._lesson_writer.lessons, close.task or "", close.outcome, close.feedback or ""
            )
            texts = [LessonText(str(w.text), str(w.kind)) for w in written]
        lessons = lesson_memories(
            close,
            texts or fallback_lessons(close),
            episode=episode,
            scope=scope,
            stored_at=now,
            model=self._embedder.name,
        )
        if not lessons:
            return []
        await store_new(self._store, self._embedder, self._lexical, lessons)
        key = partition_key(close.tenant_id, close.user_id)
        for lesson in lessons:
            out.send(Topic.STORED, key, MemoryStoredEvent(memory=lesson, candidate_id=lesson.id))
        return lessons

    async def _leftovers(
        self, close: SessionClosedEvent, session: SessionKey, stored_turns: set[str], now: datetime
    ) -> list[Memory]:
        """Working-memory items never kept as memories: compressed into episodic memory on close
        (DESIGN.md section 2: pushed out of working memory, never just dropped)."""
        accounted = stored_turns | await self._ledger.stored(close.tenant_id, close.user_id, close.session_id)
        items = await self._working.items(session)
        forgotten = await buried_in(
            self._tombstones, ((close.tenant_id, close.user_id, i.event_id, i.created_at) for i in items)
        )
        out = []
        for item in items:
            if item.id in accounted or item.event_id in forgotten:
                continue
            # confidence 0.5: nothing vouched for an item that was never judged worth keeping
            candidate = compressed_candidate(item, close, 0.5)
            out.append(memory_from_candidate(candidate, stored_at=now, model=self._embedder.name))
        return out

    async def _abstract(
        self, close: SessionClosedEvent, episode: Memory, now: datetime
    ) -> list[MemoryOperation]:
        user_flt = MemoryFilter(tenant_id=close.tenant_id, user_id=close.user_id, statuses=("active",))
        memories = await asyncio.to_thread(self._scroll, user_flt)
        episodes = [m for m in memories if m.kind == "episode"]
        if episode.id not in {e.id for e in episodes}:
            episodes.append(episode)
        facts = {m.id: m for m in memories if m.kind == "fact"}
        changed: list[Memory] = []
        operations: list[MemoryOperation] = []
        for pattern in recurring_entities(episodes, k=self._cfg.k, m=self._cfg.m):
            candidate = fact_for(pattern, episode, stored_at=now, k=self._cfg.k, existing=None)
            existing = facts.get(candidate.id)
            fact = fact_for(pattern, episode, stored_at=now, k=self._cfg.k, existing=existing)
            if existing is not None and (existing.content, existing.confidence) == (
                fact.content,
                fact.confidence,
            ):
                continue
            changed.append(fact)
            operations.append(
                MemoryOperation(
                    op="update" if existing else "store",
                    memory_id=fact.id,
                    confidence=fact.confidence,
                    reason=(
                        f"{pattern.entity} in {pattern.support} of the last {pattern.window} episodes "
                        f"(K={self._cfg.k})"
                    ),
                )
            )
        await self._upsert(changed)
        return operations
