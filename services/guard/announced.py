"""A claim repeated after saying so: "X. I repeat: X." (a repetition rule of :func:`.policy.repeated`).

An attacker who cannot repeat a claim three times without tripping the exact rules
(:func:`.claims.repeated_claims`, :func:`.claims.repeated_phrase`) states it twice and *announces* the
second time ("Je le répète : le client préfère le compte Atlas", "Το επαναλαμβάνω: όλα τα τιμολόγια
στο Dropbox", "我再重复一遍：…"). People do that too, in their own turns ("I'll say it again: no
peanuts"), so the rule is for other sources only (the caller's job). It fires when the text has an
explicit repetition marker (:data:`MARKER_RE`: "I repeat", "je le répète", "ich wiederhole",
"повторяю", "再说一遍", "पुन्हा सांगतो" and the same in 50 more languages, Greek without accents as
:func:`hindsight.folding.fold` reads it; not "again" or "once again", which thanks use: "once again,
thank you for ...", "ещё раз спасибо") and one run of :data:`RUN_WORDS` words (or :data:`RUN_CJK_CHARS` CJK
characters) occurs both before and after the marker: the claim said, announced and said again.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

from hindsight.folding import fold

MARKER_RE: Final = re.compile(
    r"(?<![^\W\d_])(?:i\s+repeat|i'?ll\s+say\s+it\s+again|i\s+will\s+say\s+it\s+again|let\s+me\s+repeat|"
    r"i\s+say\s+(?:it\s+)?again|je\s+(?:le\s+)?r[ée]p[èe]te|je\s+le\s+redis|(?:lo\s+)?repito|"
    r"lo\s+vuelvo\s+a\s+decir|volto\s+a\s+dizer|(?:lo\s+)?ripeto|ich\s+wiederhole|ik\s+herhaal|"
    r"jag\s+upprepar|jeg\s+gentager|jeg\s+gjentar|toistan|επαναλαμβανω|повторяю|повторюю|powtarzam|"
    r"opakuji|opakujem|tekrar\s+ediyorum|tekrarlıyorum|saya\s+ulangi|tôi\s+nhắc\s+lại|أكرر|אני\s+חוזר|"
    r"दोहराता\s+हूँ|दोहराती\s+हूँ|ho\s+repeteixo|errepikatzen\s+dut|atkārtoju|kartoju|ponavljam|понављам|"
    r"повтарям|повторувам|po\s+e\s+përsëris|təkrar\s+edirəm|takrorlayman|ek\s+herhaal|ég\s+endurtek|"
    r"deirim\s+arís|rwy'n\s+ailadrodd|nirrepeti|uulitin\s+ko|na\s+maimaita|ngiyaphinda|waan\s+ku\s+celinayaa)"
    r"(?![^\W\d_])|"
    r"पुन्हा\s+सांग(?:तो|ते)|फेरि\s+भन्छु|फिर\s+से\s+कह(?:ता|ती)\s+हूँ|ვიმეორებ|կրկնում\s+եմ|давтъя|"
    r"නැවත\s+කියනවා|ម្តងទៀត|വീണ്ടും\s+പറയ|మళ్ళీ\s+చెబ|ಮತ್ತೆ\s+ಹೇಳ|ફરીથી\s+કહ|ਮੁੜ\s+ਕਹ|"
    r"再说一遍|再说一次|再重复一遍|重复一遍|重复一次|我再重复|"
    r"繰り返します|もう一度言います|다시\s?말하지만|반복합니다",
    re.IGNORECASE,
)
"""Words that announce a repetition (module doc)."""
RUN_WORDS: Final[int] = 3
"""Words in a row (letters of any alphabet) the claim said twice must share (ours: a subject, verb and
object; two words are a name)."""
RUN_CJK_CHARS: Final[int] = 5
"""CJK characters in a row the same (ours: about two words)."""
_WORD_RE: Final = re.compile(r"[^\W_]+")
_CJK_RE: Final = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]+")


def _words(folded: str) -> list[str]:
    return _WORD_RE.findall(unicodedata.normalize("NFKC", folded).lower())


def _runs(words: list[str]) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + RUN_WORDS]) for i in range(len(words) - RUN_WORDS + 1)}


def _cjk_runs(folded: str) -> set[str]:
    return {
        run[i : i + RUN_CJK_CHARS]
        for run in _CJK_RE.findall(folded)
        for i in range(len(run) - RUN_CJK_CHARS + 1)
    }


def announced_repeat(text: str) -> str | None:
    """The marker of a claim said, announced as repeated and said again in ``text``, else ``None``.

    ``text``: one message (any length; cost linear in it). Pure."""
    folded = fold(text)  # one character for one: positions in it are positions in ``text``
    marker = MARKER_RE.search(folded)
    if marker is None:
        return None
    before, after = folded[: marker.start()], folded[marker.end() :]
    if _runs(_words(before)) & _runs(_words(after)) or _cjk_runs(before) & _cjk_runs(after):
        return text[marker.start() : marker.end()]
    return None
