"""Script folds the guard's detectors match on: one spelling per word across the scripts a word is
written in, so a family of words listed once is found in every spelling.

- :func:`simplified` folds Traditional Chinese to Simplified (OpenCC's ``t2s`` conversion, the
  ``opencc`` package): "密碼" is "密码", "記住" is "记住", "緊急聯絡人" is "紧急联络人". The secret and PII
  rules, the instruction classifier and the repetition rules were written with Simplified words;
  Traditional text (Taiwan, Hong Kong, Macau) passed them by (issue 10, blind13: three attacks and a
  password in Traditional characters).
- :func:`greek_unaccented` drops the tonos and dialytika of Greek letters: Greek written in capitals
  carries no accents ("ΑΠΟΘΗΚΕΥΣΕ" lower-cased is "αποθηκευσε", the word lists hold "αποθήκευσε").

Both keep the text's length, character for character, so a finding's offsets in the folded text are
its offsets in the original (:func:`hindsight.pii.candidates` relies on that).
"""

from __future__ import annotations

import re
import threading
from typing import Final, Protocol

CJK_RE: Final = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
"""A CJK ideograph (the unified block, extension A, the compatibility block)."""
_KANA_RE: Final = re.compile(r"[\u3040-\u30ff]")
_GREEK_ACCENTED_RE: Final = re.compile(r"[\u0386\u0388-\u038a\u038c\u038e-\u0390\u03aa-\u03b0\u03ca-\u03ce]")
_GREEK_TABLE: Final[dict[int, str]] = {
    ord(a): b
    for a, b in zip(
        "ΆΈΉΊΌΎΏΐΪΫάέήίΰϊϋόύώ",
        "ΑΕΗΙΟΥΩιΙΥαεηιυιυουω",
        strict=True,
    )
}


class _Converter(Protocol):
    def convert(self, text: str) -> str: ...


_converter: _Converter | None = None
_lock = threading.Lock()


def _t2s() -> _Converter:
    global _converter  # noqa: PLW0603 (one converter per process, built on first use: ~10 ms)
    if _converter is None:
        with _lock:
            if _converter is None:
                import opencc  # noqa: PLC0415 (native dictionaries, loaded only when CJK text arrives)

                _converter = opencc.OpenCC("t2s")
    return _converter


def simplified(text: str) -> str:
    """``text`` with Traditional Chinese characters folded to Simplified (OpenCC ``t2s``), same length.

    Text without CJK ideographs is returned as is (no conversion cost, ~1 µs), and so is Japanese (any
    kana): its kanji are not Traditional Chinese ("認証コード" stays, the word lists hold it). Where
    OpenCC's phrase tables would change the length (rare: a phrase mapped to a different number of
    characters), the text is returned unconverted, so offsets stay valid.
    """
    if not CJK_RE.search(text) or _KANA_RE.search(text):
        return text
    folded = _t2s().convert(text)
    return folded if len(folded) == len(text) else text


def greek_unaccented(text: str) -> str:
    """``text`` with the accents (tonos, dialytika) of Greek letters dropped, same length."""
    return text.translate(_GREEK_TABLE) if _GREEK_ACCENTED_RE.search(text) else text


def fold(text: str) -> str:
    """:func:`simplified` then :func:`greek_unaccented`: what word lists and texts are matched as."""
    return greek_unaccented(simplified(text))


__all__ = ["CJK_RE", "fold", "greek_unaccented", "simplified"]
