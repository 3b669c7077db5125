"""Hand-written cues about a judge pair: retraction words, numbers, dates, named values.

These are features, not a judge: :class:`~hindsight.inference.llm_judge.LLMJudge` can show them to
the model (``HINDSIGHT_JUDGE_USE_FEATURES``) and the benchmark reports how they relate to the
labels. They are cheap (regular expressions, ~20 us a pair) and language-aware for English and
Chinese.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hindsight.inference.judge import JudgePair

_RETRACT_EN = re.compile(
    r"\b(no longer|not anymore|any ?more|cancel(?:l?ed|s|ling)?|called off|is off|are off|was off|"
    r"instead|switched|changed|moved|quit|left|stopped|gave up|turns out|actually|not .{0,20} after all|"
    r"now|these days|nowadays|sold|broke up|divorced|retired|replaced|postponed|rescheduled|"
    r"corrected|correction|wrong|mistake)\b",
    re.IGNORECASE,
)
_RETRACT_ZH = re.compile(
    r"不再|取消|改成|改为|改到|换成|换到|搬到|搬去|辞职|离职|不是|其实|现在|已经不|戒了|推迟|延期|分手|离婚|退了|不去了|不用了|更正|搞错"
)
_NEGATION = re.compile(
    r"\b(not|no|never|don't|doesn't|didn't|isn't|aren't|wasn't|won't|can't)\b|不|没|别", re.IGNORECASE
)
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
_CAPITALISED = re.compile(r"\b[A-Z][a-zA-Z'’\-]+(?:\s+[A-Z][a-zA-Z'’\-]+)*")
_SENTENCE_START = {
    "I",
    "I'm",
    "I've",
    "I'll",
    "My",
    "We",
    "We're",
    "Our",
    "The",
    "A",
    "It",
    "It's",
    "He",
    "She",
    "They",
}


def _numbers(text: str) -> set[str]:
    return {n.replace(",", "") for n in _NUMBER.findall(text)}


def _names(text: str) -> set[str]:
    return {m for m in _CAPITALISED.findall(text) if m not in _SENTENCE_START}


@dataclass(frozen=True)
class PairFeatures:
    """Cues of one pair.

    Attributes:
        retraction: the newer text has a retraction/change word ("no longer", "cancelled", "不再", "改成").
        negation_flip: exactly one side has a negation.
        numbers_older / numbers_newer: numbers in each (digits, separators dropped).
        numbers_differ: both have numbers and they differ.
        names_only_older / names_only_newer: capitalised names found on one side only.
        same_entity: both carry the same ``entity`` (None when either lacks one).
        same_attribute: both carry the same ``attribute`` (None when either lacks one).
        cosine: the pair's dense cosine.
    """

    retraction: bool
    negation_flip: bool
    numbers_older: frozenset[str]
    numbers_newer: frozenset[str]
    numbers_differ: bool
    names_only_older: frozenset[str]
    names_only_newer: frozenset[str]
    same_entity: bool | None
    same_attribute: bool | None
    cosine: float

    def cues(self) -> str:
        """A short description for the prompt (empty when there is nothing to say)."""
        parts = []
        if self.retraction:
            parts.append("NEWER has a change/cancel word")
        if self.negation_flip:
            parts.append("one side is negated")
        if self.numbers_differ:
            older, newer = ", ".join(sorted(self.numbers_older)), ", ".join(sorted(self.numbers_newer))
            parts.append(f"numbers differ ({older} vs {newer})")
        if self.names_only_older and self.names_only_newer:
            parts.append(
                f"different names ({', '.join(sorted(self.names_only_older))} vs "
                f"{', '.join(sorted(self.names_only_newer))})"
            )
        if self.same_entity is False:
            parts.append("different entities")
        if self.same_attribute is False:
            parts.append("different attributes")
        return "; ".join(parts)


def pair_features(pair: JudgePair) -> PairFeatures:
    """The cues of ``pair`` (pure function of the two texts, entities, attributes and cosine)."""
    old, new = pair.older, pair.newer
    n_old, n_new = _numbers(old.text), _numbers(new.text)
    names_old, names_new = _names(old.text), _names(new.text)

    def same(a: str | None, b: str | None) -> bool | None:
        if not a or not b:
            return None
        return a.strip().lower() == b.strip().lower()

    return PairFeatures(
        retraction=bool(_RETRACT_EN.search(new.text) or _RETRACT_ZH.search(new.text)),
        negation_flip=bool(_NEGATION.search(old.text)) != bool(_NEGATION.search(new.text)),
        numbers_older=frozenset(n_old),
        numbers_newer=frozenset(n_new),
        numbers_differ=bool(n_old and n_new and n_old != n_new),
        names_only_older=frozenset(names_old - names_new),
        names_only_newer=frozenset(names_new - names_old),
        same_entity=same(old.entity, new.entity),
        same_attribute=same(old.attribute, new.attribute),
        cosine=pair.cosine,
    )
