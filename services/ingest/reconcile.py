"""Reconcile stage: put every new memory into its version chain (DESIGN.md sections 2-4; issue 9).

Consumes ``memory.stored.v1`` in its own consumer group (``<prefix>-ingest-reconcile``), behind the
embed stage: a memory is searchable before it is reconciled. For each stored memory, in partition
(per-user) order:

1. **facts** (turns; ``HINDSIGHT_INGEST_RECONCILE_FACTS``): durable statements become semantic
   ``fact`` memories through the :class:`~hindsight.inference.judge.FactExtractor` (ids from the
   turn id and the fact's position, provenance to the turn), announced on ``memory.stored.v1`` and
   reconciled at once (step 2) against the user's facts; the turn's ``derived_ids`` lists them.
   ``all`` extracts every durable turn (one batched call per batch; the turn's status then follows
   its facts, :mod:`.revisions`); ``revisions`` (the default: an extraction costs several judge
   calls on a CPU model) reconciles the turn itself and extracts the facts of the turns the judge
   put into a version chain, refinement or conflict (the facts of the older and the newer
   statement; a turn of the chain the extractor finds no fact in becomes one fact of its own
   words, :func:`.revisions.own_words`, so the older turn's facts are judged against what
   replaced them instead of staying current beside a superseded turn; two turns judged an
   update with one fact each give their fact pair the update, and an updated turn's one fact
   follows it to the newer turn's closest fact, :func:`.revisions.inherited_verdicts`); ``off``
   reconciles turns only;
2. **candidates and judge**: the same user's active, already reconciled memories of the same scope
   and kind nearest in the vector store pass the cheap gates of :mod:`.revisions`; the surviving
   pairs (older, newer by event time) go to the :class:`~hindsight.inference.judge.Judge` in one
   call, and each verdict becomes chain changes (:class:`~hindsight.chains.ChainEditor`);
3. **write-ahead, then apply**: the changes are written to the memory's payload
   (``reconcile_state="planned"``, ``reconcile_plan``), then applied to every memory they touch,
   then the memory is marked ``done`` with its verdicts. A restart in between re-applies the same
   plan (set operations are idempotent); a redelivered memory that is done changes nothing and its
   facts are announced again. Decisions depend only on the partition order (a memory pairs only
   with memories reconciled before it), the store and the judge, so redelivery, replay and restarts
   give the same chains (``docs/delivery.md``).

Outputs are only the ``memory.stored.v1`` announcements of new facts; the runtime commits offsets
after every store write returned and every announcement was acknowledged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from prometheus_client import Counter, Histogram

from hindsight.chains import ChainEditor, event_key, ids_of
from hindsight.consumer import Envelope, Rejection, parse_model
from hindsight.derived import store_new
from hindsight.errors import ModelUnavailableError
from hindsight.records import (
    DONE,
    PLANNED,
    RECONCILE_DECISIONS,
    RECONCILE_PLAN,
    RECONCILE_STATE,
    from_payload,
)
from hindsight.scoring import reinforced_confidence
from hindsight.stores.vector import MemoryFilter, VectorRecord
from schemas import MemoryStoredEvent, Topic, partition_key
from services.ingest.revisions import (
    FREE_BACKENDS,
    RECONCILED_KINDS,
    Candidate,
    PairKey,
    Thresholds,
    TurnFacts,
    apply_verdicts,
    durable,
    fact_memory,
    free_verdict,
    inherited_verdicts,
    judge_pair,
    own_words,
    select_candidates,
    source_turn,
    statement,
)

if TYPE_CHECKING:
    import numpy as np

    from hindsight.inference.embedder import Embedder
    from hindsight.inference.judge import Fact, FactExtractor, Judge, Verdict
    from hindsight.lexical import LexicalEncoder
    from hindsight.publisher import EventPublisher
    from hindsight.stores.vector import VectorStore
    from services.ingest.settings import FactsMode

log = logging.getLogger("hindsight.reconcile")

RECONCILED = Counter(
    "hindsight_reconcile_writes_total",
    "Writes reconciled (turns and lessons; a turn's facts count with it), by kind and whether at least "
    "one pair went to the judge",
    ["kind", "judged"],
)
JUDGE_PAIRS = Counter("hindsight_reconcile_judge_pairs_total", "Pairs sent to the judge")
JUDGE_CALLS = Counter("hindsight_reconcile_judge_calls_total", "Judge calls (each a batch of pairs)")
JUDGE_SECONDS = Histogram(
    "hindsight_reconcile_judge_seconds",
    "Wall time of one judge call (s)",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
FREE_VERDICTS = Counter(
    "hindsight_reconcile_free_verdicts_total",
    "Pairs decided without the judge (identical text, or the turns' update)",
)
VERDICTS = Counter("hindsight_reconcile_verdicts_total", "Verdicts applied, by relation", ["relation"])
EXTRACT_STATEMENTS = Counter(
    "hindsight_reconcile_extract_statements_total", "Statements sent to the fact extractor"
)
EXTRACT_CALLS = Counter("hindsight_reconcile_extract_calls_total", "Fact extractor calls")
EXTRACT_SECONDS = Histogram(
    "hindsight_reconcile_extract_seconds",
    "Wall time of one fact extractor call (s)",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
FACTS = Counter("hindsight_reconcile_facts_total", "Fact memories written")
FALLBACK_FACTS = Counter(
    "hindsight_reconcile_fallback_facts_total",
    "Turns in a version chain the extractor found no fact in, kept as a fact of their own words",
)

CHAINING = frozenset(("update", "refinement", "unsure"))
"""Relations that put two turns into a chain or a link: mode ``revisions`` extracts their facts."""
SEARCH_LIMIT = 16
"""Nearest memories fetched per reconciled memory before the gates keep ``max_pairs``."""
MERGE_REINFORCED_KINDS = frozenset(("fact", "lesson"))
"""Kinds whose confidence rises when the same information is stated again (DESIGN.md s4)."""


def nearest_in(vectors: dict[str, np.ndarray]) -> Callable[[str, Sequence[str]], str | None]:
    """``closest(fact, among)`` for :func:`.revisions.inherited_verdicts`: the id in ``among`` whose
    vector has the largest dot product (cosine: the store's vectors are unit length) with ``fact``'s,
    ties by id; ``None`` where a vector is missing (a fact hard-deleted since)."""

    def closest(fact: str, among: Sequence[str]) -> str | None:
        if fact not in vectors or any(a not in vectors for a in among) or not among:
            return None
        return max(sorted(among), key=lambda a: float(vectors[a] @ vectors[fact]))

    return closest


class ReconcileStage:
    """Version chains, merges and conflicts for every stored memory (module doc).

    Args:
        store: the vector store (chains live in its payloads).
        embedder: embeds extracted facts.
        judge: classifies candidate pairs.
        extractor: extracts facts from durable turns; ``None`` reconciles turns directly.
        thresholds: candidate gates (ingest settings).
        facts: ``all``, ``revisions`` or ``off`` (module doc).
        lexical: BM25 encoder for the facts' sparse vectors.
    """

    name = "ingest.reconcile"

    def __init__(
        self,
        store: VectorStore,
        embedder: Embedder,
        judge: Judge,
        extractor: FactExtractor | None,
        thresholds: Thresholds,
        *,
        lexical: LexicalEncoder | None = None,
        facts: FactsMode = "revisions",
    ) -> None:
        self._facts_mode: FactsMode = facts if extractor is not None else "off"
        self._store = store
        self._embedder = embedder
        self._judge = judge
        self._extractor = extractor
        self._thresholds = thresholds
        self._lexical = lexical

    def parse(self, topic: str, raw: bytes) -> MemoryStoredEvent:
        """Validate a stored-memory event."""
        return parse_model(MemoryStoredEvent, raw)

    async def handle(
        self, batch: Sequence[Envelope[MemoryStoredEvent]], out: EventPublisher
    ) -> Sequence[Rejection]:
        """Reconcile the batch's memories in partition order (module doc).

        Raises:
            StoreUnavailableError / ModelUnavailableError: retried by the runtime; nothing committed.
        """
        ids: list[str] = []
        for env in batch:
            memory = env.event.memory
            if not env.event.deduplicated and memory.kind in RECONCILED_KINDS and memory.id not in ids:
                ids.append(memory.id)
        if not ids:
            return ()
        records = {r.id: r for r in await asyncio.to_thread(self._store.retrieve, ids, True)}
        facts = await self._extract_batch([records[i] for i in ids if i in records])
        for memory_id in ids:
            record = records.get(memory_id)
            if record is None:
                continue  # hard-deleted since it was stored
            kind = str(record.payload.get("kind"))
            if kind == "turn":
                judged = await self._turn(record, facts.get(memory_id), out)
            else:
                judged, _ = await self._reconcile(memory_id, record.vector)
            if judged is not None and kind != "fact":  # facts count with their turn
                RECONCILED.labels(kind=kind, judged="yes" if judged else "no").inc()
        return ()

    # -- facts ----------------------------------------------------------------------------------------

    def _extracts_all(self, payload: dict[str, Any]) -> bool:
        """Mode ``all``: this turn's facts are extracted (a durable, active, unreconciled turn)."""
        return (
            self._facts_mode == "all"
            and durable(payload)
            and payload.get("status", "active") == "active"
            and payload.get(RECONCILE_STATE, DONE) != DONE
        )

    async def _extract(self, payloads: Sequence[dict[str, Any]]) -> list[list[Fact]]:
        """Facts of each statement, in one extractor call."""
        if not payloads or self._extractor is None:
            return [[] for _ in payloads]
        started = time.perf_counter()
        found = await asyncio.to_thread(self._extractor.extract, [statement(p) for p in payloads])
        EXTRACT_SECONDS.observe(time.perf_counter() - started)
        EXTRACT_CALLS.inc()
        EXTRACT_STATEMENTS.inc(len(payloads))
        if len(found) != len(payloads):
            raise ModelUnavailableError(
                f"fact extractor {self._extractor.name} answered {len(found)} results for "
                f"{len(payloads)} statements"
            )
        return [list(facts) for facts in found]

    async def _extract_batch(self, records: Sequence[VectorRecord]) -> dict[str, list[Fact]]:
        """Mode ``all``: the facts of the batch's durable turns not extracted yet, in one call."""
        todo = [r for r in records if self._extracts_all(r.payload) and not r.payload.get("facts_extracted")]
        found = await self._extract([r.payload for r in todo])
        return {r.id: facts for r, facts in zip(todo, found, strict=True)}

    async def _store_facts(self, turn_payload: dict[str, Any], facts: Sequence[Fact]) -> list[str]:
        """Write the turn's fact memories (new ones only) and record them on the turn."""
        turn = from_payload(turn_payload)
        now = datetime.now(UTC)
        model = self._embedder.name
        memories = [fact_memory(turn, fact, i, stored_at=now, model=model) for i, fact in enumerate(facts)]
        ids = [m.id for m in memories]
        fresh = await store_new(self._store, self._embedder, self._lexical, memories)
        FACTS.inc(len(fresh))
        await asyncio.to_thread(
            self._store.set_payload, [turn.id], {"derived_ids": ids, "facts_extracted": True}
        )
        return ids

    async def _announce(self, fact_ids: Sequence[str], out: EventPublisher) -> None:
        """Publish ``memory.stored.v1`` for the turn's facts (again, on a redelivered turn)."""
        if not fact_ids:
            return
        for record in await asyncio.to_thread(self._store.retrieve, list(fact_ids)):
            fact = from_payload(record.payload)
            out.send(
                Topic.STORED,
                partition_key(fact.tenant_id, fact.user_id),
                MemoryStoredEvent(memory=fact, candidate_id=fact.id),
            )

    async def _facts_of(
        self, turn_ids: Sequence[str], known: dict[str, list[Fact]], *, fallback: bool = False
    ) -> TurnFacts:
        """The fact memory ids of each turn, extracting (one call for those without) and storing
        them first where needed; turns in the order given.

        ``fallback`` (turns the judge put into one chain): an active turn the extractor finds no
        fact in, beside a turn that has facts, gets one fact of its own words (:func:`own_words`),
        so the other turn's facts are judged against it. A superseded turn gets none (its facts
        would only be one more old value to supersede), nor does a group without any fact (the
        turns themselves are already reconciled)."""
        payloads = await asyncio.to_thread(self._load, list(turn_ids))
        todo = [
            t for t in turn_ids if t in payloads and not payloads[t].get("facts_extracted") and t not in known
        ]
        found = dict(zip(todo, await self._extract([payloads[t] for t in todo]), strict=True))
        stored = {t: ids_of(p.get("derived_ids")) for t, p in payloads.items() if p.get("facts_extracted")}
        fresh = {t: known.get(t) or found.get(t) or [] for t in payloads if t not in stored}
        any_facts = any(stored.values()) or any(fresh.values())
        by_turn: dict[str, list[str]] = {}
        for turn_id in turn_ids:
            if turn_id in stored:
                by_turn[turn_id] = list(stored[turn_id])
            elif turn_id in fresh:
                facts = fresh[turn_id]
                payload = payloads[turn_id]
                if not facts and fallback and any_facts and payload.get("status", "active") == "active":
                    facts = [own_words(payload)]
                    FALLBACK_FACTS.inc()
                by_turn[turn_id] = await self._store_facts(payload, facts)
        return TurnFacts(by_turn)

    async def _reconcile_facts(
        self,
        fact_ids: Sequence[str],
        out: EventPublisher,
        *,
        chained: bool = False,
        given: dict[PairKey, Verdict] | None = None,
    ) -> bool:
        """Reconcile each fact (in order), then announce them; whether the judge was asked.
        ``chained``: the facts come from turns the judge put into one chain, so each fact also pairs
        with the other turns' facts whatever their cosine (:func:`.revisions.select_candidates`);
        ``given``: verdicts of fact pairs known already (:func:`.revisions.inherited_verdicts`)."""
        judged = False
        if not fact_ids:
            return judged
        records = await asyncio.to_thread(self._store.retrieve, list(fact_ids), True)
        vectors = {r.id: r.vector for r in records}
        turn_of = {r.id: source_turn(r.payload) for r in records}
        for fact_id in fact_ids:
            if fact_id in vectors:
                forced = (
                    frozenset(f for f in fact_ids if turn_of.get(f) != turn_of[fact_id])
                    if chained
                    else frozenset()
                )
                outcome, _ = await self._reconcile(fact_id, vectors[fact_id], forced=forced, given=given)
                judged = bool(outcome) or judged
        await self._announce(fact_ids, out)
        return judged

    async def _turn(self, record: VectorRecord, facts: list[Fact] | None, out: EventPublisher) -> bool | None:
        """Reconcile a turn through its facts, or itself (module doc); whether the judge was asked
        (``None``: the turn was reconciled before)."""
        payload = record.payload
        if payload.get(RECONCILE_STATE, DONE) == DONE:
            await self._announce(ids_of(payload.get("derived_ids")), out)
            return None
        if self._extracts_all(payload):
            fact_ids = (
                await self._facts_of([record.id], {record.id: facts} if facts is not None else {})
            ).ids()
            judged = await self._reconcile_facts(fact_ids, out)
            if fact_ids:
                await self._finish(record.id, None)
                return judged
        outcome, decisions = await self._reconcile(record.id, record.vector, finish=False)
        if self._facts_mode == "revisions" and decisions:
            involved = [d["with"] for d in decisions if d["applied"] and d["relation"] in CHAINING]
            if involved:
                turns = await asyncio.to_thread(self._load, [*involved, record.id])
                ordered = sorted(turns, key=lambda t: event_key(turns[t], t))
                turn_facts = await self._facts_of(ordered, {}, fallback=True)
                vectors = await asyncio.to_thread(self._vectors, turn_facts.ids())
                given = inherited_verdicts(record.id, decisions, turn_facts, closest=nearest_in(vectors))
                chained = await self._reconcile_facts(turn_facts.ids(), out, chained=True, given=given)
                outcome = chained or bool(outcome)
        await self._finish(record.id, None)
        return outcome

    # -- one memory ---------------------------------------------------------------------------------------

    def _load(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        return {r.id: r.payload for r in self._store.retrieve(list(ids))}

    def _vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        return {r.id: r.vector for r in self._store.retrieve(list(ids), True) if r.vector is not None}

    async def _finish(self, memory_id: str, decisions: list[dict[str, Any]] | None) -> None:
        values: dict[str, Any] = {RECONCILE_STATE: DONE, RECONCILE_PLAN: None}
        if decisions is not None:
            values[RECONCILE_DECISIONS] = decisions
        await asyncio.to_thread(self._store.set_payload, [memory_id], values)

    async def _apply(self, changes: dict[str, dict[str, Any]]) -> None:
        for memory_id, fields in changes.items():
            await asyncio.to_thread(self._store.set_payload, [memory_id], fields)

    async def _reconcile(
        self,
        memory_id: str,
        vector: np.ndarray | None,
        *,
        finish: bool = True,
        forced: frozenset[str] = frozenset(),
        given: dict[PairKey, Verdict] | None = None,
    ) -> tuple[bool | None, list[dict[str, Any]]]:
        """Candidates, judge, write-ahead plan, apply (module doc) for one memory, then mark it done
        (unless ``finish`` is false: the caller does, after the turn's facts); ``forced`` ids are
        candidates whatever their cosine (:func:`.revisions.select_candidates`); ``given`` verdicts
        (by pair) are used instead of asking the judge. Returns whether the judge was asked
        (``None``: reconciled before, or gone) and the decisions applied (as stored in
        ``reconcile_decisions``)."""
        payload = (await asyncio.to_thread(self._load, [memory_id])).get(memory_id)
        if payload is None:
            return None, []
        state = payload.get(RECONCILE_STATE, DONE)
        if state == DONE:
            return None, []
        if state == PLANNED:  # a restart between plan and done: the same plan again
            await self._apply(payload.get(RECONCILE_PLAN) or {})
            decisions = list(payload.get(RECONCILE_DECISIONS) or [])
            if finish:
                await self._finish(memory_id, None)
            return None, decisions
        kind = str(payload.get("kind"))
        inactive = payload.get("status", "active") != "active"
        if inactive or vector is None or (kind == "turn" and not durable(payload)):
            if finish:
                await self._finish(memory_id, [])
            return False, []
        candidates = await asyncio.to_thread(self._candidates, memory_id, payload, vector, forced)
        verdicts = await self._verdicts(memory_id, payload, candidates, given or {})
        editor = ChainEditor(self._load)
        editor.preload({memory_id: payload, **{c.id: c.payload for c in candidates}})
        decisions = await asyncio.to_thread(
            apply_verdicts,
            editor,
            memory_id,
            candidates,
            verdicts,
            min_update_confidence=self._thresholds.min_update_confidence,
        )
        for decision in decisions:
            if decision.applied and decision.relation == "same" and kind in MERGE_REINFORCED_KINDS:
                kept = editor.node(decision.other)
                if kept is not None:
                    editor.put(decision.other, "confidence", reinforced_confidence(float(kept["confidence"])))
            VERDICTS.labels(relation=decision.relation).inc()
        changes = editor.changes()
        record = [d.as_payload() for d in decisions]
        if changes:
            plan = {RECONCILE_STATE: PLANNED, RECONCILE_PLAN: changes, RECONCILE_DECISIONS: record}
            await asyncio.to_thread(self._store.set_payload, [memory_id], plan)
            await self._apply(changes)
        if finish:
            await self._finish(memory_id, record)
        elif not changes:
            await asyncio.to_thread(self._store.set_payload, [memory_id], {RECONCILE_DECISIONS: record})
        return any(d.backend not in FREE_BACKENDS for d in decisions), (record if changes else [])

    def _candidates(
        self, memory_id: str, payload: dict[str, Any], vector: np.ndarray, forced: frozenset[str]
    ) -> list[Candidate]:
        flt = MemoryFilter(
            tenant_id=str(payload["tenant_id"]),
            user_id=str(payload["user_id"]),
            scopes=(str(payload.get("scope", "global")),),
            kinds=(str(payload["kind"]),),
            statuses=("active",),
        )
        hits = self._store.search(vector, flt, SEARCH_LIMIT)
        found = [(h.id, h.score, h.payload) for h in hits]
        missing = sorted(forced - {h.id for h in hits} - {memory_id})
        for record in self._store.retrieve(missing, True) if missing else ():
            if record.vector is not None:  # same tenant/user/scope: facts of this user's own turns
                found.append((record.id, float(record.vector @ vector), record.payload))
        return select_candidates(memory_id, payload, found, self._thresholds, forced)

    async def _verdicts(
        self,
        memory_id: str,
        payload: dict[str, Any],
        candidates: Sequence[Candidate],
        given: dict[PairKey, Verdict],
    ) -> list[Verdict]:
        """One verdict per candidate: given ones and identical text are free, the rest in one judge
        call."""
        free = [
            given.get(frozenset((memory_id, c.id))) or free_verdict(payload, c.payload) for c in candidates
        ]
        asked = [c for c, f in zip(candidates, free, strict=True) if f is None]
        FREE_VERDICTS.inc(len(candidates) - len(asked))
        answers: list[Verdict] = []
        if asked:
            pairs = [judge_pair(memory_id, payload, c) for c in asked]
            started = time.perf_counter()
            answers = await asyncio.to_thread(self._judge.judge, pairs)
            JUDGE_SECONDS.observe(time.perf_counter() - started)
            JUDGE_CALLS.inc()
            JUDGE_PAIRS.inc(len(pairs))
            if len(answers) != len(pairs):
                raise ModelUnavailableError(
                    f"judge {self._judge.name} answered {len(answers)} verdicts for {len(pairs)} pairs"
                )
        it = iter(answers)
        return [f if f is not None else next(it) for f in free]
