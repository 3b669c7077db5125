"""LoCoMo conversations as Hindsight events, and the evidence recall metric (``../shared/data/README.md``).

Each LoCoMo sample becomes one user (``user_id = sample_id``) of tenant ``locomo``; each session one
Hindsight session; each turn one :class:`~schemas.InteractionEvent` with the session's real date as
``occurred_at`` (turn ``i`` at ``+i`` seconds, to keep order) and the ``dia_id`` as ``external_ref``.
A :class:`~schemas.SessionClosedEvent` follows every session.

Evidence recall@k: an evidence turn is found at k when a memory among the top k lists its ``dia_id``
in its provenance *and* that provenance lists at most 3 turns (broad memories earn no credit).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from schemas import InteractionEvent, SessionClosedEvent

log = logging.getLogger("hindsight.eval.locomo")

OFFICIAL_SOURCE = "https://github.com/snap-research/LoCoMo (data/locomo10.json)"
TENANT = "locomo"
AGENT_PREFIX = "locomo-"
"""Each conversation is published by its own agent (``locomo-<sample_id>``), as separate deployments would."""
MAX_REFS_FOR_CREDIT = 3
"""A memory earns evidence credit only if its provenance lists at most 3 turns (data README)."""
_DIA_ID = re.compile(r"^D\d+:\d+$")
_SESSION_KEY = re.compile(r"^session_(\d+)$")


class DatasetError(ValueError):
    """The LoCoMo file is missing or not in the expected shape."""


@dataclass(frozen=True)
class Question:
    """One category 1-4 question with its cleaned evidence ``dia_id``s."""

    sample_id: str
    question: str
    category: int
    evidence: tuple[str, ...]
    reference_time: datetime


@dataclass(frozen=True)
class Conversation:
    """One LoCoMo sample as events plus its questions."""

    sample_id: str
    events: tuple[InteractionEvent | SessionClosedEvent, ...]
    questions: tuple[Question, ...]

    @property
    def turns(self) -> int:
        """Number of interaction events."""
        return sum(isinstance(e, InteractionEvent) for e in self.events)


def parse_session_time(value: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` -> aware datetime (UTC: LoCoMo gives no time zone).

    Raises:
        DatasetError: the string is not in LoCoMo's format.
    """
    try:
        return datetime.strptime(value.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    except ValueError as exc:
        raise DatasetError(f"unrecognised LoCoMo session time {value!r}: {exc}") from exc


def clean_evidence(raw: Sequence[str]) -> tuple[str, ...]:
    """Split and validate evidence ids (``"D8:6; D9:17"`` -> two ids; ``"D"`` dropped with a warning)."""
    out: list[str] = []
    for item in raw:
        for part in re.split(r"[;,]", str(item)):
            ident = part.strip()
            if _DIA_ID.match(ident):
                out.append(ident)
            elif ident:
                log.info("malformed LoCoMo evidence id %r ignored", ident)  # a quirk of the data
    return tuple(dict.fromkeys(out))


def load(path: Path) -> list[dict[str, Any]]:
    """Read the LoCoMo JSON list.

    Raises:
        DatasetError: the file is missing (the message names the official source) or malformed.
    """
    if not path.is_file():
        raise DatasetError(
            f"LoCoMo data not found at {path}. Pass --data PATH, or download locomo10.json from "
            f"{OFFICIAL_SOURCE} (CC BY-NC 4.0, evaluation only)."
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(data, list) or not all(isinstance(s, dict) and "sample_id" in s for s in data):
        raise DatasetError(f"{path} is not a LoCoMo file: expected a list of samples with 'sample_id'")
    return data


def _sessions(conv: dict[str, Any]) -> Iterator[tuple[int, datetime, list[dict[str, Any]]]]:
    numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION_KEY.match(k)))
    for n in numbers:
        turns = conv.get(f"session_{n}") or []
        when = conv.get(f"session_{n}_date_time")
        if turns and when:
            yield n, parse_session_time(when), turns


def turn_content(turn: dict[str, Any]) -> str:
    """Turn text, with the image caption LoCoMo provides when the speaker shared a picture."""
    text = str(turn.get("text", "")).strip()
    caption = turn.get("blip_caption")
    return f"{text} [shared an image: {caption}]" if caption else text


def conversation(sample: dict[str, Any]) -> Conversation:
    """Events and category 1-4 questions of one sample.

    Raises:
        DatasetError: a session time is malformed.
    """
    sid = str(sample["sample_id"])
    agent = AGENT_PREFIX + sid
    events: list[InteractionEvent | SessionClosedEvent] = []
    last_time = datetime.min.replace(tzinfo=UTC)
    for n, start, turns in _sessions(sample["conversation"]):
        session_id = f"{sid}:session_{n}"
        count = 0
        for i, turn in enumerate(turns):
            content = turn_content(turn)
            if not content:
                continue
            last_time = start + timedelta(seconds=i)
            events.append(
                InteractionEvent(
                    event_id=f"{sid}:{turn['dia_id']}",
                    tenant_id=TENANT,
                    user_id=sid,
                    agent_id=agent,
                    session_id=session_id,
                    occurred_at=last_time,
                    source="user",
                    content=content,
                    speaker=turn.get("speaker"),
                    turn_index=i,
                    external_ref=turn["dia_id"],
                )
            )
            count += 1
        events.append(
            SessionClosedEvent(
                event_id=f"{session_id}:close",
                tenant_id=TENANT,
                user_id=sid,
                agent_id=agent,
                session_id=session_id,
                closed_at=last_time,
                event_count=count,
            )
        )
    questions = []
    for qa in sample.get("qa", []):
        category = int(qa.get("category", 0))
        if category not in (1, 2, 3, 4):
            continue
        evidence = clean_evidence(qa.get("evidence", []))
        if not evidence:
            log.info("question without usable evidence skipped: %r", qa.get("question"))
            continue
        questions.append(
            Question(sid, str(qa["question"]), category, evidence, last_time + timedelta(days=1))
        )
    return Conversation(sid, tuple(events), tuple(questions))


def select(samples: list[dict[str, Any]], ids: Sequence[str] | None) -> list[dict[str, Any]]:
    """Samples whose ``sample_id`` is in ``ids`` (all when ``ids`` is None), in file order.

    Raises:
        DatasetError: an id is not in the file (the message lists the ones that are).
    """
    if ids is None:
        return samples
    known = [str(s["sample_id"]) for s in samples]
    missing = [i for i in ids if i not in known]
    if missing:
        raise DatasetError(f"unknown conversation(s) {missing}; the file has {known}")
    return [s for s in samples if str(s["sample_id"]) in ids]


def credited_refs(provenance_refs: Sequence[Sequence[str]], k: int) -> set[str]:
    """Evidence ids credited by the top ``k`` memories (each given as its provenance refs)."""
    found: set[str] = set()
    for refs in provenance_refs[:k]:
        if 0 < len(refs) <= MAX_REFS_FOR_CREDIT:
            found.update(refs)
    return found


def evidence_recall(evidence: Sequence[str], provenance_refs: Sequence[Sequence[str]], k: int) -> float:
    """Fraction of ``evidence`` credited within the top ``k`` (0..1)."""
    found = credited_refs(provenance_refs, k)
    return sum(e in found for e in evidence) / len(evidence)
