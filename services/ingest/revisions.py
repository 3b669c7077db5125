"""What reconcile decides, as pure functions: which memories may revise each other, which pairs
reach the judge, and what a verdict does to the version chains (DESIGN.md sections 2 and 4).

The I/O (store, judge, extractor, Kafka) is in :mod:`services.ingest.reconcile`; the chain
operations themselves in :mod:`hindsight.chains`.

**Gates (cheap signals first; the judge is a CPU LLM here at ~10 tokens/s).**

- A turn is a *durable statement* (its facts are extracted) when the write-trigger's intent is
  ``preference``, ``fact``, ``plan`` or ``event`` (questions and chatter state nothing to revise).
- Only memories of the same tenant, user, **scope** and kind are ever paired (the filter is pushed
  into the store: a chain never links two tenants', users' or scopes' memories), and only ones
  already reconciled (``reconcile_state`` done): the partition order decides who came first, so
  redelivery and replay pair the same memories again.
- A pair needs the kind's calibrated dense-similarity threshold (``HINDSIGHT_INGEST_RECONCILE_*_COSINE``)
  or, for facts, the same entity and attribute; turns spoken by two different named speakers
  never pair (each speaks about themself); two facts from the same turn never pair, nor two
  passages of one long event (one statement does not revise itself). At most ``max_pairs``
  closest candidates per memory.
- The facts of turns the judge put into one chain (mode ``revisions``: the older and the newer
  statement) pair with each other whatever their cosine, first, and all of them, ``max_pairs`` or
  not: the turns' verdict is the signal that they are about the same thing, and a fact's wording
  ("The user moved to Siemens last month." vs "The user is an engineer at Airbus.") is often far from
  the fact it revises. (The unseen set's Lisbon trip gave its turn four facts; the cancellation's fact
  was judged against three of them, and the fourth, "The user is planning a trip to Lisbon.", stayed
  current beside the cancellation.) A chain's turns hold a handful of facts, so this stays bounded.
- Identical text (case and punctuation folded) from the same speaker is ``same`` without a judge call.
- A fact's text is the extractor's third-person statement, or the turn's own words when the model
  wrote it in another language than the turn (a Chinese turn, an English statement): a fact must be
  found by queries in the user's language.

**Verdicts.** ``same``: the new memory is merged into the existing one (``status="merged"``);
``update``: supersede by event time (:meth:`~hindsight.chains.ChainEditor.supersede`), the older
keeps its text and gets ``valid_to``; an ``update`` below ``min_update_confidence`` counts as
``unsure``; ``refinement``: both active, ``related_ids``; ``unsure``: both active,
``conflicts_with`` (recall reports the pair); ``unrelated``: nothing. A low-trust source (an
agent's note, a tool) never supersedes a safety-critical or repeatedly stated memory: that
``update`` becomes a conflict (the guard's consistency rule). When two facts chain, their
source turns follow: a turn whose every extracted fact is superseded is superseded by the turn of the
newer fact, and conflicts between facts are conflicts between their turns.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from hindsight.chains import ChainEditor, event_key, ids_of
from hindsight.consistency import safety_category
from hindsight.ids import extracted_fact_id
from hindsight.inference.judge import Fact, JudgePair, Statement, Verdict
from hindsight.records import DONE, RECONCILE_STATE
from hindsight.text import CJK_TEXT, cjk_share, features
from schemas import Memory, Provenance

DURABLE_INTENTS = frozenset(("preference", "fact", "plan", "event"))
"""Write-trigger intents of turns that state something that can later change."""
RECONCILED_KINDS = frozenset(("turn", "fact", "lesson"))
"""Kinds reconcile puts into chains; episodes are summaries of sessions, never revised."""
IDENTICAL_BACKEND = "rules:identical-text"


def normalised(text: str) -> str:
    """Case- and punctuation-folded text: what "identical" means for the free ``same`` verdict."""
    return re.sub(r"\W+", " ", text.casefold()).strip()


def durable(payload: dict[str, Any]) -> bool:
    """A turn whose intent says it states something durable (module doc)."""
    return bool(payload.get("kind") == "turn" and payload.get("intent") in DURABLE_INTENTS)


def is_reconciled(payload: dict[str, Any]) -> bool:
    """Reconciled already (or stored before reconcile existed: no state field)."""
    return bool(payload.get(RECONCILE_STATE, DONE) == DONE)


def source_turn(payload: dict[str, Any]) -> str | None:
    """The turn a fact was extracted from (first of its provenance ``memory_ids``)."""
    ids = ids_of((payload.get("provenance") or {}).get("memory_ids"))
    return ids[0] if ids else None


def _event_ids(payload: dict[str, Any]) -> set[str]:
    """The source event ids of a memory (its provenance)."""
    return set(ids_of((payload.get("provenance") or {}).get("event_ids")))


def _fold(value: Any) -> str:
    return normalised(str(value or ""))


def same_key(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two facts about the same entity and attribute (folded)."""
    return bool(a.get("attribute")) and (_fold(a.get("entity")), _fold(a.get("attribute"))) == (
        _fold(b.get("entity")),
        _fold(b.get("attribute")),
    )


@dataclass(frozen=True)
class Thresholds:
    """Dense-similarity candidate thresholds per kind and the pair budget (ingest settings)."""

    turn: float
    fact: float
    lesson: float
    max_pairs: int
    min_update_confidence: float

    def cosine(self, kind: str) -> float:
        """Least cosine for a pair of ``kind``."""
        return {"turn": self.turn, "fact": self.fact, "lesson": self.lesson}.get(kind, 1.01)


@dataclass(frozen=True)
class Candidate:
    """An earlier memory that may be about the same thing as the one being reconciled."""

    id: str
    payload: dict[str, Any]
    cosine: float


def select_candidates(
    memory_id: str,
    payload: dict[str, Any],
    hits: Sequence[tuple[str, float, dict[str, Any]]],
    thresholds: Thresholds,
    forced: frozenset[str] = frozenset(),
) -> list[Candidate]:
    """The candidate pairs for ``memory_id`` among dense ``hits`` ``(id, cosine, payload)`` (already
    filtered by tenant, user, scope, kind and status active): the ``forced`` ids first whatever their
    cosine (facts of turns the judge chained; every one of them), then the rest closest first, up to
    ``max_pairs`` in all. Pure (module doc)."""
    kind = str(payload.get("kind"))
    least = thresholds.cosine(kind)
    speaker = _fold(payload.get("speaker"))
    own_turn = source_turn(payload)
    own_events = _event_ids(payload)
    out: list[Candidate] = []
    for hit_id, cosine, other in hits:
        if hit_id == memory_id or other.get("kind") != kind or other.get("status", "active") != "active":
            continue
        if not is_reconciled(other):
            continue  # stored after this one in partition order: it will pair with this one itself
        if kind == "turn":
            theirs = _fold(other.get("speaker"))
            if not durable(other) or (speaker and theirs and speaker != theirs):
                continue
            if own_events & _event_ids(other):
                continue  # passages of one long event: parts of one statement, never versions of it
        if kind == "fact" and (
            not other.get("attribute") or (own_turn is not None and source_turn(other) == own_turn)
        ):
            continue
        if hit_id in forced or cosine >= least or (kind == "fact" and same_key(payload, other)):
            out.append(Candidate(hit_id, other, cosine))
    out.sort(key=lambda c: (c.id not in forced, -c.cosine, c.id))
    chained = sum(1 for c in out if c.id in forced)
    return out[: max(chained, thresholds.max_pairs)]


def _when(payload: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(str(payload.get("created_at")))


def statement(payload: dict[str, Any]) -> Statement:
    """The judge's view of a memory payload."""
    return Statement(
        text=str(payload.get("content", "")),
        occurred_at=_when(payload),
        source=str(payload.get("source", "user")),
        speaker=payload.get("speaker"),
        entity=payload.get("entity"),
        attribute=payload.get("attribute"),
    )


def judge_pair(memory_id: str, payload: dict[str, Any], cand: Candidate) -> JudgePair:
    """The pair (candidate, memory) with the older statement first by event time (ties by id)."""
    newer = event_key(payload, memory_id) > event_key(cand.payload, cand.id)
    older, newest = (cand.payload, payload) if newer else (payload, cand.payload)
    return JudgePair(statement(older), statement(newest), cand.cosine)


def free_verdict(payload: dict[str, Any], other: dict[str, Any]) -> Verdict | None:
    """``same`` without a judge call for identical text from the same speaker; else ``None``."""
    if normalised(str(payload.get("content", ""))) != normalised(str(other.get("content", ""))):
        return None
    if _fold(payload.get("speaker")) != _fold(other.get("speaker")):
        return None
    return Verdict("same", 1.0, "identical text", IDENTICAL_BACKEND)


INHERITED_BACKEND = "turn-verdict"
"""Backend of a fact pair's verdict taken from its turns' (:func:`inherited_verdicts`): no judge call."""
FREE_BACKENDS = frozenset((IDENTICAL_BACKEND, INHERITED_BACKEND))
"""Backends that decide without asking the judge."""

PairKey = frozenset[str]
"""Two memory ids, unordered: the key of a verdict given in advance."""


@dataclass(frozen=True)
class TurnFacts:
    """The fact ids of each turn of a chain (turns in event order)."""

    by_turn: dict[str, list[str]]

    def ids(self) -> list[str]:
        """Every fact id, turn by turn."""
        return [f for facts in self.by_turn.values() for f in facts]


def inherited_verdicts(
    turn_id: str,
    decisions: Sequence[dict[str, Any]],
    facts: TurnFacts,
    closest: Callable[[str, Sequence[str]], str | None] | None = None,
) -> dict[PairKey, Verdict]:
    """Fact pairs that take their turns' verdict instead of a judge call.

    - Two chained turns with one fact each. A turn's one fact restates the turn (often lossily:
      "Sorry, it's my right wrist that's broken, not the left." became "The user's wrist is broken."),
      and the judge saw the whole turns. Asked again on the facts, the 1.5B judge merged that fact into
      "The user broke their left wrist skiing." and called "我用的是华为 P40。" / "昨天换了小米 14。"
      unsure (0.65) as facts right after calling the same two sentences an update (0.80) as turns
      (bench updates, stores inspected).
    - An older turn with one fact, updated by a newer turn with several: the whole older statement was
      replaced, so its one fact is too, by the newer turn's fact ``closest`` to it (dense cosine; the
      pair only names the chain's link), where the judge, shown the facts alone, may keep a plan
      active beside its own cancellation ("The user is planning a trip." / "The user cancelled the
      Airbnb."). Written for the unseen set's Lisbon cancellation (2026-12-03), whose older turn, the
      store showed later, had four facts: there the fix was pairing every chained fact
      (:func:`select_candidates`); this rule is kept for the one-fact case it names (tests).

    A turn with several facts being *replaced* still has each pair judged: only the judge can tell
    which one changed ("I live in Berlin and work at Airbus" then "I moved to Munich"). Only ``update``
    is inherited: a turn verdict that keeps both turns active (refinement, unsure) leaves the fact pair
    to the judge, which sees the changed value alone and may find the update the whole turns hid
    (inheriting those too cost four turn-level supersedes of the all-122 run: two budgets, a diet, a
    schedule). ``decisions``: the applied decisions of ``turn_id`` (as stored); ``facts`` in event
    order; ``closest(fact, among)``: the id in ``among`` nearest ``fact`` (``None``: unknown), without
    it only the one-fact pairs are inherited. Pure."""
    order = list(facts.by_turn)
    out: dict[PairKey, Verdict] = {}
    for d in decisions:
        other = str(d["with"])
        if not d.get("applied") or d.get("relation") != "update":
            continue
        if turn_id not in facts.by_turn or other not in facts.by_turn:
            continue
        older, newer = sorted((turn_id, other), key=order.index)
        old_facts, new_facts = facts.by_turn[older], facts.by_turn[newer]
        if len(old_facts) != 1 or not new_facts:
            continue
        if len(new_facts) == 1:
            successor: str | None = new_facts[0]
            reason = f"the turns' verdict ({d.get('backend')}): each turn has this one fact"
        else:
            successor = closest(old_facts[0], new_facts) if closest is not None else None
            reason = (
                f"the turns' verdict ({d.get('backend')}): the older turn's one fact follows it, "
                "to the newer turn's closest fact"
            )
        if successor is not None:
            verdict = Verdict("update", float(d.get("confidence", 0.0)), reason, INHERITED_BACKEND)
            out[frozenset((old_facts[0], successor))] = verdict
    return out


@dataclass(frozen=True)
class Decision:
    """One applied verdict, kept in the memory's ``reconcile_decisions`` for audit."""

    other: str
    relation: str
    confidence: float
    backend: str
    reason: str
    applied: bool

    def as_payload(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {
            "with": self.other,
            "relation": self.relation,
            "confidence": round(self.confidence, 4),
            "backend": self.backend,
            "reason": self.reason[:200],
            "applied": self.applied,
        }


def _propagate_supersede(editor: ChainEditor, older_fact: str, newer_fact: str, late: bool) -> None:
    """The older fact's turn follows once every fact extracted from it is superseded."""
    old_payload, new_payload = editor.node(older_fact), editor.node(newer_fact)
    if old_payload is None or new_payload is None:
        return
    old_turn, new_turn = source_turn(old_payload), source_turn(new_payload)
    if old_turn is None or new_turn is None or old_turn == new_turn:
        return
    turn = editor.node(old_turn)
    if turn is None or turn.get("status", "active") != "active":
        return
    facts = ids_of(turn.get("derived_ids"))
    statuses = [(editor.node(f) or {}).get("status") for f in facts]
    if facts and all(s == "superseded" for s in statuses):
        editor.supersede(old_turn, new_turn, late=late)


def _propagate_link(editor: ChainEditor, a_fact: str, b_fact: str, field: str) -> None:
    a, b = editor.node(a_fact), editor.node(b_fact)
    if a is None or b is None:
        return
    a_turn, b_turn = source_turn(a), source_turn(b)
    if a_turn and b_turn and a_turn != b_turn:
        editor.link(a_turn, b_turn, field)


MAY_OVERTURN = frozenset(("user",))
"""Sources whose statement may supersede a protected memory (people may change their own facts)."""
STRONG_SUPPORT = 2
"""Events (its own and merged repetitions) that make a memory strongly supported."""


def protected(payload: dict[str, Any]) -> str | None:
    """Why a memory may not be overturned by a low-trust source: ``safety_critical`` (allergies,
    medication, identity, credentials, payment: :func:`hindsight.consistency.safety_category`, or a
    ``health`` tag) or ``strong_support`` (stated :data:`STRONG_SUPPORT` times or more); else None."""
    if safety_category(str(payload.get("content", ""))) or "health" in (payload.get("tags") or ()):
        return "safety_critical"
    if 1 + len(payload.get("merged_ids") or ()) >= STRONG_SUPPORT:
        return "strong_support"
    return None


def overturn_refused(older: dict[str, Any], newer: dict[str, Any]) -> str | None:
    """The reason a newer statement may not supersede the older one (the guard's consistency rule,
    DESIGN.md section 6, applied where reconcile supersedes), or None."""
    if str(newer.get("source", "user")) in MAY_OVERTURN:
        return None
    why = protected(older)
    if why is None:
        return None
    return f"consistency:{why}: a {newer.get('source')} statement may not overturn it"


def _relation(
    memory_id: str, payload: dict[str, Any], cand: Candidate, verdict: Verdict, min_update_confidence: float
) -> tuple[str, str]:
    """The relation to apply and why: a doubtful ``update`` is ``unsure``; so is one the consistency
    rule refuses."""
    if verdict.relation != "update":
        return verdict.relation, verdict.reason
    if verdict.confidence < min_update_confidence:
        return "unsure", verdict.reason
    newer_is_memory = event_key(payload, memory_id) > event_key(cand.payload, cand.id)
    older, newer = (cand.payload, payload) if newer_is_memory else (payload, cand.payload)
    refused = overturn_refused(older, newer)
    return ("unsure", f"{refused} ({verdict.reason})") if refused is not None else ("update", verdict.reason)


def _apply(editor: ChainEditor, memory_id: str, cand: Candidate, relation: str, is_fact: bool) -> bool:
    """One relation between ``memory_id`` and ``cand`` applied to the editor; whether it changed a chain."""
    payload = editor.node(memory_id) or {}
    if relation == "same":
        return editor.merge(memory_id, cand.id)
    if relation == "update":
        newer = event_key(payload, memory_id) > event_key(cand.payload, cand.id)
        if newer:
            applied = editor.supersede(cand.id, memory_id)
        else:
            applied = editor.supersede(memory_id, cand.id, late=True)
        if applied and is_fact:
            older, newest = (cand.id, memory_id) if newer else (memory_id, cand.id)
            _propagate_supersede(editor, older, newest, late=not newer)
        return applied
    if relation in ("refinement", "unsure"):
        field = "related_ids" if relation == "refinement" else "conflicts_with"
        applied = editor.link(memory_id, cand.id, field)
        if applied and is_fact and relation == "unsure":
            _propagate_link(editor, memory_id, cand.id, field)
        return applied
    return False


def apply_verdicts(
    editor: ChainEditor,
    memory_id: str,
    candidates: Sequence[Candidate],
    verdicts: Sequence[Verdict],
    *,
    min_update_confidence: float,
) -> list[Decision]:
    """Apply each verdict about (candidate, ``memory_id``) to ``editor`` (module doc); closest
    candidate first, a merge ends it (the memory is then a duplicate). An ``update`` from a low-trust
    source that would supersede a protected memory (:func:`overturn_refused`) becomes a conflict:
    both stay active and the agent sees the pair. Pure over the editor."""
    payload = editor.node(memory_id)
    if payload is None:
        return []
    decisions: list[Decision] = []
    is_fact = payload.get("kind") == "fact"
    merged = False
    for cand, verdict in zip(candidates, verdicts, strict=True):
        relation, reason = _relation(memory_id, payload, cand, verdict, min_update_confidence)
        applied = False if merged else _apply(editor, memory_id, cand, relation, is_fact)
        merged = merged or (applied and relation == "same")
        decisions.append(Decision(cand.id, relation, verdict.confidence, verdict.backend, reason, applied))
    return decisions


def own_words(payload: dict[str, Any]) -> Fact:
    """A turn's own words as its one fact: what a turn of a version chain becomes when the
    extractor finds no fact in it (the small CPU model misses some: "我现在开始吃鱼了。" after
    "我吃素，不吃肉也不吃鱼。", bench updates). Without it, the older turn's facts would stay active
    beside the turn the judge already marked superseded, and recall, which prefers facts, would
    answer with the old value. No entity or attribute: the judge reads the sentence."""
    return Fact(entity="", attribute="", value="", statement=str(payload.get("content", "")))


def fact_memory(turn: Memory, fact: Fact, index: int, *, stored_at: datetime, model: str) -> Memory:
    """The semantic ``fact`` memory for the ``index``-th fact extracted from ``turn``: same tenant,
    user, scope and event time; provenance to the turn (its events, references and id)."""
    text = " ".join(fact.statement.split()) or f"{fact.entity} {fact.attribute}: {fact.value}"
    if cjk_share(turn.content) >= CJK_TEXT and cjk_share(text) < CJK_TEXT:
        text = turn.content  # the model wrote it in another language: the user's own words (module doc)
    found = features(text)
    entities = tuple(dict.fromkeys((fact.entity, *found.entities))) if fact.entity else found.entities
    tags = tuple(dict.fromkeys((*turn.tags, *found.tags, "fact")))
    return Memory(
        id=extracted_fact_id(turn.tenant_id, turn.id, index),
        tenant_id=turn.tenant_id,
        user_id=turn.user_id,
        agent_id=turn.agent_id,
        session_id=turn.session_id,
        type="semantic",
        kind="fact",
        content=text,
        source=turn.source,
        scope=turn.scope,
        tags=tuple(t for t in tags if t != "compressed"),
        entities=entities,
        intent=fact.category or "fact",
        importance=turn.importance,
        confidence=turn.confidence,
        created_at=turn.created_at,
        stored_at=stored_at,
        valid_from=turn.valid_from or turn.created_at,
        last_accessed_at=stored_at,
        entity=fact.entity or None,
        attribute=fact.attribute or None,
        value=fact.value or None,
        provenance=Provenance(
            event_ids=turn.provenance.event_ids,
            external_refs=turn.provenance.external_refs,
            memory_ids=(turn.id,),
        ),
        embedding_model=model,
    )
