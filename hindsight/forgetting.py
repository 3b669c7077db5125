"""Forgetting reaches every derived memory (issue 13, defect 7): the general mechanism over provenance.

A memory *derives* from another when its provenance names that memory (``memory_ids``) or one of its
events (``event_ids``): an episode names the turns it summarises, a fact or a lesson the memories or
events it was drawn from. When a memory is forgotten, :func:`derived_from` finds every derived memory
of the same user, and :func:`without` gives each one back with the forgotten text redacted
(:func:`redact`, also a clipped quote of it) and the forgotten ids taken out of its provenance; a
derived memory left with no source at all is forgotten itself. The caller re-embeds and stores what
changed, and may ask the stage that built a derived memory to rebuild it from its remaining sources
(an episode: its session is reopened for reflection). Pure functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from schemas import Memory

MARKER = "[forgotten]"
"""What replaces forgotten text inside a derived memory."""
MIN_QUOTE_CHARS = 16
"""Shortest prefix of a forgotten text that counts as a quote of it (a clipped key point)."""


@dataclass(frozen=True)
class Forgotten:
    """What was forgotten: memory ids, their event ids, and their texts (to redact quotes of)."""

    memory_ids: frozenset[str]
    event_ids: frozenset[str]
    texts: tuple[str, ...]

    @classmethod
    def of(cls, memories: Iterable[Memory], extra_events: Iterable[str] = ()) -> Forgotten:
        """The :class:`Forgotten` of ``memories`` (and events merged into them, ``extra_events``)."""
        items = list(memories)
        return cls(
            frozenset(m.id for m in items),
            frozenset({e for m in items for e in m.provenance.event_ids} | set(extra_events)),
            tuple(m.content for m in items),
        )


def derived_from(memories: Sequence[Memory], forgotten: Forgotten) -> list[Memory]:
    """The memories among ``memories`` (one user's) whose provenance names a forgotten memory or
    event, other than the forgotten ones and other than turns (a turn rests on its own event only:
    the passages and merged near-duplicates of one event are siblings, not derivations)."""
    return [
        m
        for m in memories
        if m.id not in forgotten.memory_ids
        and m.kind != "turn"
        and (
            forgotten.memory_ids.intersection(m.provenance.memory_ids)
            or forgotten.event_ids.intersection(m.provenance.event_ids)
        )
    ]


def _longest_quoted_prefix(haystack: str, text: str) -> str:
    """The longest prefix of ``text`` (at least :data:`MIN_QUOTE_CHARS` characters, or all of a shorter
    text) found in ``haystack``; ``""`` when none is. Prefix presence is monotone, so it bisects."""
    shortest = min(MIN_QUOTE_CHARS, len(text))
    if not text or text[:shortest] not in haystack:
        return ""
    low, high = shortest, len(text)
    while low < high:
        mid = (low + high + 1) // 2
        if text[:mid] in haystack:
            low = mid
        else:
            high = mid - 1
    return text[:low]


def redact(content: str, forgotten_text: str) -> str:
    """``content`` with every quote of ``forgotten_text`` (the whole text, or a prefix of at least
    :data:`MIN_QUOTE_CHARS` characters, as summaries clip it; the forgotten text with its whitespace
    collapsed, as summaries quote it) replaced by :data:`MARKER`, a clipping ``…`` after it included."""
    out = content
    for text in dict.fromkeys((forgotten_text, " ".join(forgotten_text.split()))):
        out = _redact_one(out, text)
    return out


def _redact_one(content: str, text: str) -> str:
    out = content
    for _ in range(100):  # each round removes one quote; bounded against a pathological input
        quote = _longest_quoted_prefix(out, text)
        if not quote:
            return out
        start = out.index(quote)
        end = start + len(quote)
        if out[end : end + 1] == "…":
            end += 1
        out = out[:start] + MARKER + out[end:]
    return out


def without(memory: Memory, forgotten: Forgotten) -> Memory | None:
    """``memory`` (derived from something forgotten) with the forgotten texts redacted and the
    forgotten ids out of its provenance; None when no source is left (forget it too)."""
    prov = memory.provenance
    memory_ids = tuple(i for i in prov.memory_ids if i not in forgotten.memory_ids)
    event_ids = tuple(e for e in prov.event_ids if e not in forgotten.event_ids)
    if not memory_ids and not event_ids:
        return None
    content = memory.content
    for text in forgotten.texts:
        content = redact(content, text)
    return memory.model_copy(
        update={
            "content": content,
            "provenance": prov.model_copy(update={"memory_ids": memory_ids, "event_ids": event_ids}),
        }
    )
