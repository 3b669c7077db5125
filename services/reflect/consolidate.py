"""Episode consolidation: one structured episodic record per closed session (DESIGN.md section 2).

Rule-based for now (the LLM reviewer arrives with Triton): the episode's content names the task, the
time span (first to last turn: when it happened, not when the close arrived), the steps (what the
assistant and tools did, in order), the decisions (turns that settle something: "decided", "booked",
"决定"), the most important turns (key points), the entities, the outcome and the feedback. Its
provenance lists every turn it summarises, so it earns no per-turn evidence credit in benchmarks
(``../shared/data/README.md``) but points to its evidence.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from datetime import datetime

from hindsight.ids import episode_memory_id
from schemas import Memory, Provenance, SessionClosedEvent

_QUOTE_CHARS = 160
_STEPS = 5
"""Most assistant/tool turns listed as steps."""
_DECISION = re.compile(
    r"\b(decided|decide|chose|choose|picked|booked|confirmed|agreed|settled on|went with|will go with|"
    r"cancell?ed|ordered|signed)\b|决定|选择|选了|确认|订了|预订了|取消了|就这样",
    re.I,
)
"""Words of a turn that settles something (a decision)."""


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _QUOTE_CHARS else text[: _QUOTE_CHARS - 1] + "…"


def build_episode(
    close: SessionClosedEvent,
    turns: Sequence[Memory],
    *,
    stored_at: datetime,
    key_points: int = 5,
    model: str | None = None,
) -> Memory:
    """The episode memory of a closed session. Pure.

    Args:
        close: the session-closed event (task, outcome, feedback).
        turns: the session's turn memories, any order (sorted by ``created_at`` here).
        stored_at: tz-aware time the episode is stored (UTC).
        key_points: how many of the most important turns are quoted.

    Returns:
        A ``type='episodic'``, ``kind='episode'`` memory with id ``episode_memory_id(...)``; importance
        is the mean of the key points' importance, confidence the mean confidence of the turns.
    """
    ordered = sorted(turns, key=lambda m: (m.created_at, m.id))
    top = sorted(ordered, key=lambda m: (-m.importance, m.created_at))[:key_points]
    top.sort(key=lambda m: m.created_at)
    entity_counts = Counter(e for m in ordered for e in m.entities)
    entities = tuple(e for e, _ in entity_counts.most_common(12))
    started = ordered[0].created_at if ordered else close.closed_at
    ended = ordered[-1].created_at if ordered else close.closed_at
    lines = [f"Session {close.session_id} ({started.date().isoformat()} to {ended.date().isoformat()})"]
    if close.task:
        lines.append(f"Task: {close.task}")
    lines.append(f"{len(ordered)} remembered turns.")
    steps = [m for m in ordered if m.source in ("assistant", "tool")][:_STEPS]
    if steps:
        lines.append("Steps: " + " | ".join(_clip(m.content) for m in steps))
    decisions = [m for m in ordered if _DECISION.search(m.content)][:_STEPS]
    if decisions:
        lines.append("Decisions: " + " | ".join(_clip(m.content) for m in decisions))
    if top:
        lines.append(
            "Key points: "
            + " | ".join(_clip(f"{m.speaker}: {m.content}" if m.speaker else m.content) for m in top)
        )
    if entities:
        lines.append("Entities: " + ", ".join(entities))
    lines.append(f"Outcome: {close.outcome}.")
    if close.feedback:
        lines.append(f"Feedback: {_clip(close.feedback)}")
    importance = sum(m.importance for m in top) / len(top) if top else 0.3
    confidence = sum(m.confidence for m in ordered) / len(ordered) if ordered else 0.5
    refs = tuple(r for m in ordered for r in m.provenance.external_refs)
    return Memory(
        id=episode_memory_id(close.tenant_id, close.user_id, close.session_id),
        tenant_id=close.tenant_id,
        user_id=close.user_id,
        agent_id=close.agent_id,
        session_id=close.session_id,
        type="episodic",
        kind="episode",
        content="\n".join(lines),
        source="system",
        scope=ordered[0].scope if ordered else "global",
        tags=("episode", *sorted({t for m in ordered for t in m.tags if t != "compressed"})),
        entities=entities,
        intent="episode",
        importance=round(min(1.0, importance), 4),
        confidence=round(confidence, 4),
        created_at=started,
        stored_at=stored_at,
        valid_from=started,
        valid_to=None,
        last_accessed_at=stored_at,
        provenance=Provenance(
            event_ids=tuple(e for m in ordered for e in m.provenance.event_ids),
            external_refs=refs,
            memory_ids=tuple(m.id for m in ordered),
        ),
        embedding_model=model,
    )
