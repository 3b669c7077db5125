"""Light, rule-based text features shared by the write-trigger and reflection.

Deliberately simple and documented: proper-noun entities (capitalised words that do not start a
sentence, and runs of them), coarse intents, and topic tags. Multilingual segmentation (jieba) and
model-based extraction arrive with the recall work; these rules are the baseline they must beat.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from hindsight.folding import CJK_RE as _CJK_RE
from hindsight.folding import simplified

_WORD = re.compile(r"[A-Za-z][A-Za-z'\-]*")
_SENTENCE_START = re.compile(r"(^|[.!?]\s+|\n)\s*[\"'(]?$")
_NOT_ENTITIES = frozenset(
    (
        "I",
        "I'm",
        "I've",
        "I'd",
        "I'll",
        "Im",
        "Ive",
        "Hey",
        "Hi",
        "Hello",
        "Yes",
        "No",
        "Yeah",
        "Yep",
        "Wow",
        "Oh",
        "Ok",
        "Okay",
        "Thanks",
        "Thank",
        "Sure",
        "Great",
        "Cool",
        "Awesome",
        "Nice",
        "Mon",
        "Tue",
        "Wed",
        "Thu",
        "Fri",
        "Sat",
        "Sun",
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
        "Mr",
        "Mrs",
        "Ms",
        "Dr",
        "Haha",
        "Lol",
        "Omg",
        "Congrats",
        "Congratulations",
        "Bye",
        "Good",
        "Well",
        "So",
        "And",
        "But",
        "Or",
        "The",
        "A",
        "An",
        "It",
        "That",
        "This",
        "Wish",
    )
)


_REDACTION = re.compile(r"\[REDACTED(?::[A-Za-z_]+)?\]")
"""The guard's redaction marker (``[REDACTED:email]``, :mod:`hindsight.pii`): never an entity."""


def entities(text: str, *, limit: int = 12) -> tuple[str, ...]:
    """Proper-noun entities in ``text``: capitalised words not at a sentence start, merged into runs.

    ``"I met Jon Snow in New York"`` gives ``("Jon Snow", "New York")``. Case-preserving, deduplicated,
    in order of first appearance, at most ``limit``. Redaction markers (``[REDACTED:phone]``) are
    blanked first, so neither the marker nor a run across it is an entity. CJK text yields nothing yet.
    """
    text = _REDACTION.sub(lambda m: "," + " " * (len(m.group(0)) - 1), text)
    found: list[str] = []
    run: list[str] = []
    last_end = -1
    for match in _WORD.finditer(text):
        word = match.group(0).rstrip("'-")
        starts_sentence = bool(_SENTENCE_START.search(text[: match.start()]))
        is_name = word[:1].isupper() and word not in _NOT_ENTITIES and not starts_sentence and len(word) > 1
        contiguous = run and text[last_end : match.start()].strip() == ""
        if is_name and (contiguous or not run):
            run.append(word)
        else:
            _close_run(run, found)
            run = [word] if is_name else []
        last_end = match.end()
    _close_run(run, found)
    return tuple(found[:limit])


def _close_run(run: list[str], found: list[str]) -> None:
    if run:
        name = " ".join(run)
        if name not in found:
            found.append(name)


_THIRD_PERSON = r"(?:note:\s*)?(?:the\s+)?(?:user|customer|client)(?:'s)?"
"""How agents write notes about the person they serve: "The user prefers ...", "Customer is ..."."""
_FAMILY_ZH = (
    r"(?:女儿|儿子|孩子|妈妈|爸爸|母亲|父亲|父母|太太|老婆|妻子|丈夫|老公|先生|哥哥|姐姐|弟弟|妹妹|"
    r"爷爷|奶奶|外公|外婆|男朋友|女朋友|未婚夫|未婚妻|家人|同事|老板)"
)

_INTENT_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "preference",
        re.compile(
            r"\b(i|we)\s+(really\s+|always\s+|never\s+)?"
            r"(love|like|prefer|enjoy|hate|dislike|adore|can't stand)\b"
            rf"|^\s*{_THIRD_PERSON}\s+(really\s+|always\s+|never\s+)?"
            r"(loves?|likes?|prefers?|enjoys?|hates?|dislikes?|wants?|needs?)\b"
            r"|\bfavou?rite\b|\ballergic\b|喜欢|讨厌|偏好|过敏|不要给我|别给我|以后.{0,12}都要|一律"
            r"|\b(please\s+)?(never|always|don't|do not)\s+"
            r"(book|send|call|give|use|order|schedule|email|remind)\b"
            r"|^\s*(please\s+)?(never|always|don't|do not)\s+\w+(\s+\w+)?\s+(me|my)\b",
            re.I,
        ),
    ),
    (
        "plan",
        re.compile(
            r"\b(i|we)('m| am| are|'re)?\s+(going to|gonna|planning|plan to|will|'ll)\b"
            r"|\b(i|we)('m| am| are|'re)\s+(flying|moving|travell?ing|driving|leaving|starting)\b"
            r"|\bnext (week|month|year)\b|\btomorrow\b|打算|计划|准备|明天|明年|下周|下个?月|下星期"
            r"|(周|星期|礼拜)[一二三四五六日天末].{0,6}要|要去",
            re.I,
        ),
    ),
    (
        "event",
        re.compile(
            r"\b(i|we)\s+(just\s+)?(went|visited|started|finished|joined|adopted|bought|moved|got|made|took|"
            r"painted|ran|signed|lost|won|attended|met|became|decided|booked|cancell?ed|postponed|switched|"
            r"quit|left)\b"
            r"|\byesterday\b|\blast (week|month|year)\b|\b(cancell?ed|called off|postponed|moved to)\b"
            r"|\b(changed|transferred|rescheduled|upgraded|downgraded|renamed|replaced|switched)\b"
            r"|昨天|上周|去了|取消|推迟|延期|搬到|搬家|跳槽|改成|改为|改到|改在|转到|转学|换到|换成|调到|订了"
            r"|调走|离职|辞职|退休|说错了|更正|纠正|改[喝吃学用开穿住去坐]|^\s*已经?[\u4e00-\u9fff]",
            re.I,
        ),
    ),
    (
        "fact",
        re.compile(
            r"\b(i|we)('m| am| are|'re|'ve| have| has)\b|\bmy\s+\w+"
            r"|\b(i|we)\s+(now\s+|currently\s+|still\s+|also\s+|no longer\s+)?"
            r"(work|live|study|teach|moved|switched|eat|drink|own|drive|ride|use|speak|play|rent|earn|take|"
            r"attend|volunteer|practi[cs]e|belong|follow)s?\b"
            rf"|^\s*{_THIRD_PERSON}\s+\w+|^\s*{_FAMILY_ZH}"
            r"|\bno longer\b|\banymore\b|\b(budget|rent|salary|address|birthday)\b"
            rf"|我是|我的|我有|我在|我(?:的)?{_FAMILY_ZH}|用户|客户|预算|地址|生日|工资|房租|不再|住在"
            r"|在.{1,8}(工作|上班|读书|上学)",
            re.I,
        ),
    ),
    (
        "question",
        re.compile(r"\?\s*$|^(what|how|why|when|where|who|do you|did you|are you)\b|吗[？?]?$", re.I),
    ),
)


_SPECIFIC = re.compile(
    r"\d|\b(jan(uary)?|feb(ruary)?|mar(ch)?|apr(il)?|may|june?|july?|aug(ust)?|sep(t|tember)?|oct(ober)?|"
    r"nov(ember)?|dec(ember)?|(mon|tues|wednes|thurs|fri|satur|sun)days?|noon|midnight)\b"
    r"|[一二三四五六七八九十两\d]+\s*(月|号|日|点|岁|块|元|年级)|(周|星期|礼拜)[一二三四五六日天末]|今年|去年|这学期",
    re.I,
)
"""A date, a time, a weekday, a month or a number: what makes a plain declarative sentence specific."""
SPECIFIC_MIN_WORDS = 3
"""Least words (:func:`features`' count) of a specific sentence that counts as a ``fact``."""
_FIRST_PERSON_STATEMENT = re.compile(
    r"\b(i|we)\s+(?:(?:also|now|still|usually|always|never|just|recently|only|really|mostly|often)\s+)*"
    r"(?!(?:think|guess|see|know|mean|hope|agree|feel|bet|wonder|suppose|believe|understand|appreciate|"
    r"miss|wish|can|could|would|should|will|shall|may|might|must|do|did|was|were|am|had)\b)[a-z]{3,}"
    r"|\b(named|called)\s+[A-Z]|\b(turns out|after all|actually)\b|\bour\s+\w+"
    r"|^\s*[A-Z][a-z]+ed\s+(a|an|the|your|two|three|\d)\b"
    r"|我们?(?:也|还|都|现在|已经|一直|平时|每天|只|自己)?+"
    r"(?!(?:觉得|想想|想一想|知道|明白|懂|同意|也是|等|再|马上|看看|来了|没事|还好|不知道|不确定|猜|希望|感觉|先|是这|这么))"
    r"[\u4e00-\u9fff]{2,}"
    r"|现在|目前|如今|叫[\u4e00-\u9fff]|不[\u4e00-\u9fff]{1,2}了|暑假|寒假|假期|国庆|春节",
    re.I,
)
"""A first-person declarative sentence about something other than the chat itself ("I subscribed
to ...", "We dropped the plan ...", "我养了一只猫。", "我不吃辣。"), a naming, a correction cue, a
present-state marker, an agent's step report ("Reserved a table for two ..."): a statement that is
a ``fact`` when no earlier rule claimed it and it has at least :data:`STATEMENT_MIN_WORDS` words or
:data:`STATEMENT_MIN_CJK` CJK characters. Acknowledgements and hedges ("I think so", "I see",
"我觉得也是", "让我想想", "我等会儿再回复你") are excluded by their verbs."""
_OTHER_LANGUAGE_STATEMENT = re.compile(
    r"(?<![^\W\d_])j['’](?=[^\W\d_])|(?<![^\W\d_])(?:"
    # the first person and its possessives: de, fr, es, it, pt, nl, sv/da/no, pl, ru/uk, tr, el
    r"ich|wir|mein|meine|meinen|meinem|meiner|unser|unsere|je|nous|mon|ma|mes|notre|nos|yo|mis|"
    r"nosotros|nuestro|nuestra|io|mio|mia|miei|mie|eu|meu|minha|meus|minhas|nós|ik|wij|mijn|onze|jag|jeg|"
    r"mitt|mina|mój|moja|moje|moi|я|мой|моя|моё|мои|мы|наш|наша|мене|benim|bizim|εγώ|μου"
    # the pro-drop first person of es/it/pt: "Vivo en Madrid", "Lavoro a Milano", "Moro em Lisboa"
    r"|vivo|trabajo|estudio|me\s+gusta|me\s+encanta|lavoro|abito|mi\s+piace|moro|trabalho|gosto\s+de"
    r")(?![^\W\d_])",
    re.I,
)
"""A first-person statement in the other languages users write in (German, French, Spanish, Italian,
Portuguese, Dutch, Scandinavian, Polish, Russian, Ukrainian, Turkish, Greek): "Ich wohne in München.",
"Je travaille chez Airbus.", "Vivo en Madrid y me gusta el café.". The rules above are English and
Chinese; without this a newcomer's German facts were all ``chatter`` and dropped (2026-12-03). Broader
than :data:`_FIRST_PERSON_STATEMENT` (hedges are not excluded): keeping a hedge costs less than dropping
a fact."""
STATEMENT_MIN_WORDS = 4
"""Least words (:func:`features`' count) of a first-person statement that counts as a ``fact``."""
STATEMENT_MIN_CJK = 4
"""Or least CJK characters ("我不吃辣。": Chinese says in 4 characters what English says in 4 words)."""


def intent(text: str) -> str:
    """Coarse intent: ``preference``, ``plan``, ``event``, ``fact``, ``question`` or ``chatter``.

    The first matching rule wins, in that order. A sentence no rule matches is still a ``fact``
    when it is specific: it names a date, a time, a weekday, a month or a number and has at least
    :data:`SPECIFIC_MIN_WORDS` words ("The wedding is on June 14.", "婚礼定在五月二十号。",
    "The standup is at 9:30 on Tuesdays."); chatter rarely carries one, and a schedule or a number
    is what later changes. So is a first-person statement (:data:`_FIRST_PERSON_STATEMENT`) or a
    health matter of at least :data:`STATEMENT_MIN_WORDS` words (or :data:`STATEMENT_MIN_CJK` CJK
    characters).
    """
    text = simplified(text)  # the Chinese words below are Simplified: "喜歡" reads as "喜欢"
    for label, pattern in _INTENT_RULES:
        if pattern.search(text):
            return label
    cjk = cjk_count(text)
    words = _word_count(text, cjk)
    if _SPECIFIC.search(text) and words >= SPECIFIC_MIN_WORDS:
        return "fact"
    long_enough = words >= STATEMENT_MIN_WORDS or cjk >= STATEMENT_MIN_CJK
    if long_enough and (
        _FIRST_PERSON_STATEMENT.search(text) or _OTHER_LANGUAGE_STATEMENT.search(text) or tags(text)
    ):
        return "fact"
    return "chatter"


_TAG_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "health",
        re.compile(
            r"\b(allerg\w*|doctor|hospital|medic\w*|diagnos\w*|therapy|therapist|surgery|illness|sick|injur\w*|"
            r"pregnan\w*|prescription|symptom\w*|disease|asthma|diabet\w*|cancer|migraines?|fever|"
            r"blood pressure|cholesterol|check-?ups?|dentist|hospitali[sz]ed|fractur\w*)\b|"
            r"过敏|医院|医生|药|病|住院|手术|哮喘|高血压|体检",
            re.I,
        ),
    ),
)


_CARE_PLACE_OR_ROLE = re.compile(r"\b(hospital|doctor|medic\w*|clinic)s?\b|医院|医生", re.I)
"""Health words that also name a workplace or a profession ("a nurse at St Mary's hospital")."""
_OCCUPATION = re.compile(
    r"\b(work\w*|job|employ\w*|hired|intern\w*|career|colleague\w*|shifts?|promot\w*|resign\w*|"
    r"quit|nurse|surgeon|physician|pharmacist|paramedic|receptionist|administrator|volunteer\w*|"
    r"(?:am|'m|is|are|was|were|as|became|become)\s+an?\s+(?:\w+\s+)?(?:doctor|medic))\b|"
    r"工作|上班|入职|辞职|跳槽|同事|实习|当医生|做医生|是医生|护士",
    re.I,
)
"""An occupation cue: with only :data:`_CARE_PLACE_OR_ROLE` words, a sentence is about a job."""


def tags(text: str) -> tuple[str, ...]:
    """Topic tags recall can require or exclude (DESIGN.md section 6), e.g. ``("health",)``.

    ``health`` marks the user's health matters. A sentence whose only health words name a place of
    care or a medical profession and that is about work ("I work as a nurse at St Mary's hospital",
    "My sister is a doctor", "我在医院上班") is about a job, not health, and is not tagged: the tag
    protects a memory from updates by agents (the guard's consistency rule) and hides it outside
    medical tasks, neither of which fits a job.
    """
    text = simplified(text)
    out = []
    for label, pattern in _TAG_RULES:
        if not pattern.search(text):
            continue
        if label == "health" and _only_occupational(text, pattern):
            continue
        out.append(label)
    return tuple(out)


def _only_occupational(text: str, health: re.Pattern[str]) -> bool:
    """Every health word of ``text`` names a place of care or a profession, and ``text`` is about work."""
    if not _OCCUPATION.search(text):
        return False
    rest = _CARE_PLACE_OR_ROLE.sub(" ", text)
    return health.search(rest) is None


@dataclass(frozen=True)
class TextFeatures:
    """Features of one text used by the write-trigger."""

    entities: tuple[str, ...]
    intent: str
    tags: tuple[str, ...]
    words: int


_LETTER_RE: Final = re.compile(r"[^\W\d_]")
CJK_TEXT: Final = 0.5
"""Share of CJK characters among the letters above which a text is Chinese (:func:`cjk_share`)."""


def cjk_count(text: str) -> int:
    """CJK ideographs in ``text`` (unified, extension A and compatibility blocks). Pure."""
    return len(_CJK_RE.findall(text))


def cjk_share(text: str) -> float:
    """CJK characters over all letters of ``text`` (0.0 for a text without letters), 0..1. Pure."""
    letters = len(_LETTER_RE.findall(text))
    return cjk_count(text) / letters if letters else 0.0


_ANY_WORD: Final = re.compile(r"[^\W\d_]+(?:['’\-][^\W\d_]+)*")
"""A word of any alphabet (Latin with accents, Cyrillic, Greek, Arabic, Hangul, ...): "München" is one
word, not "M" and "nchen"."""


def _word_count(text: str, cjk: int | None = None) -> int:
    """Words of alphabetic scripts plus CJK characters / 2 (``cjk``: the CJK count when the caller has
    it). Kana count as words by their runs."""
    words = len(_ANY_WORD.findall(_CJK_RE.sub(" ", text) if cjk != 0 else text))
    return words + (cjk_count(text) if cjk is None else cjk) // 2


def features(text: str) -> TextFeatures:
    """All features of ``text`` at once; ``words`` counts Latin words plus CJK characters / 2."""
    return TextFeatures(entities(text), intent(text), tags(text), _word_count(text))


def compress(content: str, max_chars: int = 280) -> str:
    """Compressed form of a working-memory item that leaves working memory without having been kept
    as a memory (DESIGN.md section 2): whitespace collapsed and cut at ``max_chars`` characters."""
    text = " ".join(content.split())
    return text if len(text) <= max_chars else text[: max_chars - 1].rstrip() + "…"


def speaker_text(speaker: str | None, content: str) -> str:
    """``"speaker: content"`` when the speaker is known, else ``content``: the text a memory is embedded
    and indexed as, and what a caller puts in its prompt (token budget)."""
    return f"{speaker}: {content}" if speaker else content
