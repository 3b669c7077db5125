"""Values read out or dictated, as in a voice transcript (part of the keyword-in-context layer).

Number words after "is" ("the door code is four four nine one"), a word and number words ("the
alarm password is bluebird seventy three") and a password spelled item by item ("capital K,
seven, lowercase m, q, hash, two"); number words before a unit are a size or a time ("forty five
minutes ago"), not a value.
"""

from __future__ import annotations

import re
from typing import Final

from hindsight.secrets.patterns import FILLER_WORDS, _kw_kind, _kw_type
from hindsight.secrets.stopwords import _STOP_VALUES
from hindsight.secrets.values import _Span

_NUMBER_WORD: Final = (
    r"(?:zero|oh|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|"
    r"sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|"
    r"double|triple)"
)
_SPOKEN_RE: Final = re.compile(
    r"[ \t]*(?:is|was|[:=])[ \t]*(?:the\s+)?(?:(?P<word>(?!"
    + _NUMBER_WORD
    + r"(?![a-z]))[a-z]{3,20})[ \t]+)?"
    rf"(?P<numbers>{_NUMBER_WORD}(?:[ \t\-]+{_NUMBER_WORD})*)(?![A-Za-z])",
    re.IGNORECASE,
)
_NOT_SPOKEN_WORDS: Final = frozenset(
    {"about", "around", "over", "under", "only", "just", "least", "exactly", "roughly", "nearly", "almost"}
)
_SIZE_AFTER_RE: Final = re.compile(
    r"[ \t]*(?:is|was|[:=])[ \t]*(?:about|around|over|under|only|just|at\s+least|exactly|roughly|nearly|"
    rf"almost|up\s+to)[ \t]+(?:{_NUMBER_WORD}|[0-9]+)(?![A-Za-z])",
    re.IGNORECASE,
)
_UNIT_AFTER_RE: Final = re.compile(
    r"\s*(?:characters?|chars?|letters?|digits?|symbols?|bits?|bytes?|seconds?|minutes?|hours?|days?|weeks?|"
    r"months?|years?|times?|attempts?|tries|ago|max|maximum|min|minimum|long|percent|%)(?![A-Za-z])",
    re.IGNORECASE,
)
"""A unit after the number words makes them a size, a count or a time ("one hundred twenty characters
max", "forty five minutes ago")."""
MIN_SPOKEN_DIGITS: Final[int] = 3
"""Number words a spoken code needs on its own ("four four nine one"); after a word, two ("bluebird
seventy three"): fewer is a count or a size ("the code is one of six", "the password is eight long")."""


def _spoken(text: str, pos: int, *, word_first: bool = True) -> _Span | None:
    """A value read out, as in a voice transcript: number words after "is" ("the door code is four four
    nine one"), or, with ``word_first`` (a password, not a PIN: "the reset pin is GPIO twenty seven" is
    a board's pin), a word and number words ("the alarm password is bluebird seventy three")."""
    m = _SPOKEN_RE.match(text, pos)
    if m is None or _UNIT_AFTER_RE.match(text, m.end()):
        return None
    if m.group("word") and not word_first:
        return None
    numbers = len(re.findall(_NUMBER_WORD, m.group("numbers"), re.IGNORECASE))
    word = (m.group("word") or "").lower()
    if word in _NOT_SPOKEN_WORDS or word in FILLER_WORDS or word in _STOP_VALUES:
        if numbers < MIN_SPOKEN_DIGITS:
            return None
        return "password", m.start("numbers"), m.end("numbers")
    if numbers < (2 if word else MIN_SPOKEN_DIGITS):
        return None
    return "password", m.start("word") if word else m.start("numbers"), m.end("numbers")


def spoken_word_value(text: str, span: _Span) -> bool:
    """Whether a spoken value starts with a word ("tulip forty two"): after a bare "code" only number
    words count ("the lock code is easy twenty" is no code)."""
    return text[span[1] : span[2]].split(maxsplit=1)[0].lower() not in _NUMBER_WORDS_SET


_NUMBER_WORDS_SET: Final = frozenset(_NUMBER_WORD[3:-1].replace("|", " ").split())


_SPELLED_ITEM: Final = (
    r"(?:(?:capital|upper(?:\s?case)?|lower(?:\s?case)?|small|big)\s+)?"
    r"(?:zero|one|two|three|four|five|six|seven|eight|nine|hash|pound|at|dollar|percent|ampersand|star|asterisk|"
    r"exclamation(?:\s+(?:mark|point))?|bang|dash|hyphen|underscore|dot|period|plus|equals|question\s+mark|"
    r"slash|caret|tilde|[A-Za-z0-9])"
)
_DICTATED_RE: Final = re.compile(
    rf"(?<![A-Za-z])({_SPELLED_ITEM}(?:\s*,\s*(?:then\s+)?{_SPELLED_ITEM}){{{5},31}})(?![A-Za-z0-9])",
    re.IGNORECASE,
)
DICTATED_WINDOW: Final[int] = 80
"""Characters after a password word where a dictated value may start (ours: one clause)."""


def _dictated(text: str, pos: int) -> _Span | None:
    """A password spelled out item by item, as to a voice assistant: six or more comma-separated
    letters, digits, number words or symbol names, one of them naming a case or a symbol ("capital K,
    seven, lowercase m, q, hash, two"), not inside parentheses ("kdf(p, s, n, r, 8, 1)")."""
    m = _DICTATED_RE.search(text, pos, min(len(text), pos + DICTATED_WINDOW + 400))
    if m is None or m.start(1) > pos + DICTATED_WINDOW or text[: m.start(1)].rstrip().endswith("("):
        return None
    if not _SPELLING_WORD_RE.search(m.group(1)):
        return None  # "columns A, B, C, D, E, F", "steps 1, 2, 3, 4, 5, 6": a list, not a spelling
    return "password", m.start(1), m.end(1)


_SPELLING_WORD_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:capital|upper(?:\s?case)?|lower(?:\s?case)?|small|big|hash|pound|dollar|percent|ampersand|"
    r"star|asterisk|exclamation|bang|dash|hyphen|underscore|caret|tilde|at\s+sign)(?![A-Za-z])",
    re.IGNORECASE,
)
"""Words only a spelling has: a letter's case or a symbol's name."""


_ZH_DIGIT: Final = "[零〇一二三四五六七八九幺两]"
_ZH_READ_OUT_RE: Final = re.compile(
    rf"[^。！？!?\n]{{0,16}}?(?<!{_ZH_DIGIT})({_ZH_DIGIT}(?:[ \-]?{_ZH_DIGIT}){{3,9}})"
    r"(?![零〇一二三四五六七八九幺两十百千万])"
)
"""4-10 Chinese digits read out in the clause after a credential word ("保险箱密码我念一下啊，七 三 零 九
二 一", "验证码是幺二三四五六"): a code, as speech-to-text writes it (幺 and 两 are the spoken one and
two); a number with 十/百/千/万 after it is an amount, not a code."""


def zh_read_out(text: str, pos: int) -> _Span | None:
    """Chinese digits read out after ``pos`` (:data:`_ZH_READ_OUT_RE`), else ``None``."""
    m = _ZH_READ_OUT_RE.match(text, pos)
    return ("password", m.start(1), m.end(1)) if m is not None else None


def _read_out(text: str, m: re.Match[str], *, password_word: bool) -> _Span | bool:
    """A value dictated or read out after credential word ``m`` (a span); True when the words after
    it give a size instead ("the password is about twenty three characters long": no value); else
    False."""
    if password_word and (dictated := _dictated(text, m.end())) is not None:
        return dictated
    # not after 口令, which is also a drill's call ("广播体操口令：一二三四，二二三四")
    zh_word = m.group("zpw") and m.group("zpw") != "口令"
    if _kw_type(m) == "password" and zh_word and (zh := zh_read_out(text, m.end())) is not None:
        return zh
    if _kw_type(m) == "password":
        spoken = _spoken(text, m.end(), word_first=_kw_kind(m) == "password")
        if spoken is not None:
            return spoken
        said = _SPOKEN_RE.match(text, m.end())
        if said is not None and _UNIT_AFTER_RE.match(text, said.end()):
            return True  # "the password was changed forty five minutes ago": a time, no value
    return _SIZE_AFTER_RE.match(text, m.end()) is not None
