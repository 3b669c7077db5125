"""Layer 2 of :mod:`hindsight.secrets`, keyword in context: the value after a credential word.

A credential word (:mod:`hindsight.secrets.patterns`) followed, with or without a separator and
with up to a few filler words ("is", "for the router", "是", "为", "改成了"), or after a later
separator or copula of the clause, or after a question the text answers ("my password? it's X"),
by a value that looks like a credential (:func:`hindsight.secrets.values.credential_like`). Also
a value glued to the word (``PIN0917``), named before it ("Tr0ub4dor&3 is my wifi password") or
made up later in the text, a passphrase of several words, a Wi-Fi key and a Redis password
option; the layer (:func:`_keyword_spans`) adds access codes and recovery material
(:mod:`hindsight.secrets.codes`); values read out or dictated come from
:mod:`hindsight.secrets.spoken`.

Not secrets (tested): prose about credentials ("my password is strong", "reset your password
here", "the secret to a good cake"), a published test card's CVV in a payment provider's docs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

from hindsight.secrets.codes import _access_code_spans, _code_is_spans, _recovery_spans
from hindsight.secrets.patterns import (
    _IT_IS,
    _KEYWORD_RE,
    _MAX_FILLERS,
    _PIN_VALUE_RE,
    _QUOTED_RE,
    _SEPARATORS,
    _VALUE_RE,
    FILLER_WORDS,
    ZH_FILLERS,
    _kw_kind,
    _kw_type,
)
from hindsight.secrets.spoken import _read_out
from hindsight.secrets.stopwords import _STOP_VALUES
from hindsight.secrets.values import (
    _TRAILING,
    MIN_ENTROPY_BITS,
    SecretType,
    _has_letter_and_digit,
    _has_symbol_or_digit,
    _shaped_like_password,
    _Span,
    _strong_value,
    credential_like,
    entropy,
    is_masked,
    strong_password_shape,
    typed_made_up,
)


def _value_after(text: str, pos: int) -> tuple[int, str, str] | None:
    """The first token after ``pos`` that is not a separator or filler: ``(start, token, gap)``
    where ``gap`` is the text skipped (it tells whether a separator or "is" came first)."""
    i, end, words = pos, min(len(text), pos + 96), 0
    while i < end:
        while i < end and text[i] in _SEPARATORS:
            quoted = _QUOTED_RE.match(text, i)
            if quoted is not None and " " in quoted.group(1):
                return quoted.start(1), quoted.group(1), text[pos : quoted.start(1)]
            i += 1
        zh = next((f for f in ZH_FILLERS if text.startswith(f, i)), None)
        if zh is not None:
            i += len(zh)
            continue
        if text[i : i + 5].lower() in _IT_IS:  # "password: it's bluebird77" (the apostrophe splits tokens)
            i += 4
            continue
        m = _VALUE_RE.match(text, i)
        if m is None:
            return None
        token = m.group(1)
        if token.lower().rstrip(".,:") in FILLER_WORDS and words < _MAX_FILLERS:
            i, words = m.end(), words + 1
            continue
        spaced = _SPACED_DIGITS_RE.match(text, m.start(1))
        if spaced is not None:  # "it's 9 1 4 4 7 2": a code read out digit by digit
            return spaced.start(), spaced.group(), text[pos : spaced.start()]
        if len(token) < 3:
            return None
        return m.start(1), token, text[pos : m.start(1)]
    return None


_SPACED_DIGITS_RE: Final = re.compile(r"[0-9](?:[ \-][0-9]){3,7}(?![ \-]?[0-9])")
"""4-8 digits one by one ("9 1 4 4 7 2", "6-0-4-2"): a code read out or typed apart, as a value."""


_PIN_WORD_RE: Final = re.compile(r"^pin(?:\s?(?:code|number))?$", re.IGNORECASE)
_PROSE_PIN_CONTEXT_RE: Final = re.compile(r"\b(?:bowling|hair|safety|rolling|push|lapel|bobby|map)\s*$", re.I)


_CLAUSE_SEPARATOR_RE: Final = re.compile(
    r"[^.。!！?？\n:：=]{0,80}?(?:[:：=]|(?<=\s)(?:is|was|are|were|will\s+be|should\s+be|es|est|ist|lautet|é|è|era|war|c'est|"
    # the copulas of vi, cs/sk/hr, pl, sv, id/ms, el, ru, ro, ca, sr/mk/bg, lv/lt, ar ("Mật khẩu ví MoMo của
    # mình là X", "Лозинка за рутер је X"); not "on" or "er", English words
    r"là|je|jest|är|adalah|ialah|είναι|это|este|és|је|е|ir|yra|هو|هي)(?=\s)|"
    r"是|为|は)\s*"
)
"""An explicit separator or copula later in the clause: "password for the guests: X", "password
for the portal is X", "门禁卡的密码现在是X"."""
_OTHER_FIELD_RE: Final = re.compile(r"(?<![A-Za-z0-9_\-])[A-Za-z_][A-Za-z0-9_\-]*(?:=|[\"']\s*:)\s*$")
"""A code-style field name right before the separator (``contact=``, ``"contact":``): a later field's
separator, not the credential's ("password for the guests: X" is prose and still counts)."""
MAX_COPULAS: Final[int] = 3
"""Separators or copulas tried, in order, in the clause after a credential word."""
_NEXT_SPEAKER: Final = (
    r"[ \t]*\n\s*(?:[A-Z][\w.'\-]{0,20}(?:[ ][\w.'\-]{1,20})?|[^\W\d_]{1,10})\s*[：:]\s*"
    r"(?i:(?:yeah|yes|yep|yup|sure|ok|okay|uh|um|right|so|好的|嗯)[,.!，。]?\s+){0,2}"
    r"(?i:(?:it'?s|it\s+is|that'?s|it\s+was)\s+|就?是)?"
)
_ANSWERED_RE: Final = re.compile(
    r"[^.。!！?？\n]{0,60}?(?:[?？](?:\s*(?:(?:it'?s|it\s+is|that'?s|it\s+was)(?=\s)|就?是|答\s*[：:])|"
    + _NEXT_SPEAKER
    + r")|[.。]?"
    + _NEXT_SPEAKER
    + r")\s*"
)
"""The user asks the question and answers it: "my password for the vet portal? it's X", "wifi
密码？是X", "问：VPN密码多少？ 答：X"; or the next speaker of a transcript does, after a question or
a request said in a speaker's turn (:func:`_spoken_turn`): "Agent: can you confirm the PIN on the
account?\nCustomer: yeah it's X", "客服：您的密码是？\n客户：X", "Tech: I'll need the temporary passcode
you were emailed.\nUser: It's X", "Оператор: Назовите кодовое слово.\nКлиент: X"."""
_LATER_SENTENCE_RE: Final = re.compile(
    r"[^.。!！?？\n]{0,60}[.。!！]\s*(?:[^.。!！?？\n]{1,60}[.。!！]\s*)?"
    r"(?:it'?s|it’s|it\s+is|it\s+was|that'?s|that’s|that\s+is)[\s:：]+",
    re.IGNORECASE,
)
"""The value given in a sentence of its own after one or two short ones about it: "My password is
long. Really long. It is X" (a value of :func:`_strong_value` shape only)."""

_GLUED_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:password|passwd|pwd|passcode|pin)([A-Z0-9!@#$%^&*][^\s\"'`“”‘’,，;；。、]{2,127})"
)
"""A value glued to the keyword: ``passwordTr0ub4dor&3``, ``PIN0917`` (the value must start with a
capital, a digit or a symbol, so "passwords" and "pinned" are words)."""


_NEXT_DIGIT_GROUP_RE: Final = re.compile(r"[ \-][0-9]{3,4}[#*]?(?![0-9A-Za-z])")
_DIGIT_GROUPS_RE: Final = re.compile(r"[0-9]{3,}(?:[ \-][0-9]{3,}){2,}")
MAX_CODE_DIGITS: Final[int] = 12
"""PINs and one-time codes have 4-12 digits (ours); three or more groups holding more are a document
number."""


def _document_number(text: str, start: int) -> bool:
    groups = _DIGIT_GROUPS_RE.match(text, start)
    return groups is not None and sum(c.isdigit() for c in groups.group()) > MAX_CODE_DIGITS


_PLACE_GAP_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:on|in|at|under|inside|behind|from|via|through|into|onto|near|beside|within|by)(?![A-Za-z])",
    re.IGNORECASE,
)
"""A preposition between a credential word and a plain word makes the word a place or a means
("the code is on the fridge", "PIN is in the envelope"), not the credential."""
_CLOSING_QUOTE_GAP_RE: Final = re.compile(r"[\"'”’」]\s")
"""The credential word ends a quotation ('... store the password" fooled the bot'): what follows the
closing quote is the sentence going on, not a value."""


_CHANGE_BEFORE_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:chang(?:e|ed|es|ing)|set(?:s|ting)?|reset(?:s|ting)?|updat(?:e|ed|es|ing)|"
    r"switch(?:ed|es|ing)?|rotat(?:e|ed|es|ing)|mov(?:e|ed|es|ing))(?![A-Za-z])",
    re.IGNORECASE,
)
"""Verbs that give a credential a new value "to" ("changed the Wi-Fi password to sunflower")."""


_PLURAL_WORD_RE: Final = re.compile(r"(?:words|codes|phrases)$", re.IGNORECASE)
"""Plural credential words ("passwords", "passcodes"): what follows them in letters only is prose."""


def _is_prose(m: re.Match[str], value: str, gap: str, *, cjk_word: bool) -> bool:
    """Whether ``value`` after keyword match ``m`` (with ``gap`` between them) is prose about the
    credential rather than the credential itself."""
    if value.replace("-", "").isalpha() and value.islower() and not cjk_word:
        if _PLACE_GAP_RE.search(gap) or _CLOSING_QUOTE_GAP_RE.match(gap):
            return True  # "the passcode is on the calendar", 'saying "... password" fooled': not a value
        # a lone lower-case English word counts only after a separator, quotes or "is" ("password strength")
        if _kw_kind(m) != "pin" and not re.search(r"[:=：＝\"'`“‘]|\bis\b|\bwas\b|\bto\b", gap):
            return True
        if re.fullmatch(r"\s*to\s*", gap) and not _CHANGE_BEFORE_RE.search(
            m.string, max(0, m.start() - 40), m.start()
        ):
            return True  # "save the password to memory": "to" a place; "changed the password to X": a value
    if any(c.isspace() for c in value) and (
        m.group("key") or m.group("zkey") or m.group("tok") or m.group("ztok")
    ):
        return True  # keys and tokens have no spaces: a quoted phrase after one is a message about it
    generated = entropy(value) >= MIN_ENTROPY_BITS
    if (m.group("key") or "").lower() in ("secret", "secrets") and not (
        (_has_letter_and_digit(value) and len(value) >= 8) or generated
    ):
        return True  # bare "secret": the value must look generated ("the secret is out" is prose)
    # "tokens: 5", "token limit"
    return bool(m.group("tok") or m.group("ztok")) and not (
        len(value) >= 8 and (_has_letter_and_digit(value) or generated)
    )


_DESCRIPTIVE_FIELD_RE: Final = re.compile(
    r"[_\-](?:type|kind|mode|format|name|expires?(?:_in|_at)?|ttl|lifetime|length|len|count|limit|url|uri|"
    r"endpoint|path|file|location|hint|usage|scope|version|policy|strength)[=:][\"']?",
    re.IGNORECASE,
)
"""Fields named after a credential word that describe it (``token_type=bearer``, ``password_policy:
strict``, ``key_file=/etc/ssl/k.pem``): their value is not the credential."""


def _accept(
    text: str, m: re.Match[str], start: int, raw: str, gap: str
) -> tuple[SecretType, int, int] | None:
    """The span of ``raw`` (found after keyword match ``m``) if it can be the credential."""
    stripped = raw.rstrip(_TRAILING)
    if not gap and stripped[:1] in ("_", "-"):
        # the keyword is part of a longer name: "api_key_prod=X" names X, "YOUR_API_KEY_HERE" names nothing
        name = re.match(r"[_\-][A-Za-z0-9_\-]*[=:][\"']?", stripped)
        if name is None or len(stripped) == name.end() or _DESCRIPTIVE_FIELD_RE.fullmatch(name.group()):
            return None
        start, stripped, gap = start + name.end(), stripped[name.end() :], "="
    # read out digit by digit ("9 1 4 4 7 2"): a code, though no credential is spelled with spaces
    spaced = (
        _kw_type(m) == "password"
        and _SPACED_DIGITS_RE.fullmatch(stripped) is not None
        and not _UNIT_AFTER_RE.match(text, start + len(stripped))
    )
    kind = _kw_kind(m)
    cjk_word = bool(m.group("zpw") or m.group("zkey") or m.group("ztok"))
    quoted = gap.rstrip(" ").endswith(("“", '"', "「", "‘", "'"))
    if (
        cjk_word
        and not stripped.isascii()
        and not (quoted and any(c.isascii() and c.isalnum() for c in stripped))
    ):
        # "密码是我生日" / "验证码已发送": a Chinese word after the keyword describes it; a quoted
        # value with a digit or a Latin letter is the credential itself (口令为“青山绿水2024”)
        # a security answer is any word the user chose, with digits or letters beside it ("豆豆2008")
        answer = "答案" in m.group(0) and len(stripped) <= 32
        if not (answer and any(c.isascii() and c.isalnum() for c in stripped)):
            head = re.match(r"[A-Za-z0-9!@#$%^&*_\-+=.~]{3,}", stripped)
            if head is None:
                return None
            stripped = head.group(0)
    if not spaced and (
        stripped.startswith("//")  # "see https://intra.example.com/...": the colon was a URL scheme's
        or not credential_like(stripped, kind=kind)
        or _is_prose(m, stripped, gap, cjk_word=cjk_word)
    ):
        return None
    if stripped.replace("-", "").isalpha() and _PLURAL_WORD_RE.search(m.group(0)):
        return None  # "store your passwords in NoteLock": a plural names a kind of thing, not a value
    end = start + len(stripped)
    if kind == "pin" and stripped.isdigit() and _not_a_code_number(text, start, end):
        return None
    if kind == "pin" and stripped.isdigit():
        group = _NEXT_DIGIT_GROUP_RE.match(text, end)  # "602 918": codes are shown in groups
        if group is not None:
            end = group.end()
    return _kw_type(m), start, end


_PASSPHRASE_WORD_RE: Final = re.compile(r"pass\s?phrase", re.IGNORECASE)
_PASSPHRASE_RE: Final = re.compile(
    r"[\s:=,]*(?:(?:is|was|will\s+be|it's)\s+)?[\"'“‘]?"
    r"((?:[a-z]{2,12}[ \-]){2,7}[a-z0-9]{2,12})(?![A-Za-z0-9])"
)
MIN_PASSPHRASE_WORDS: Final[int] = 3
"""Diceware-style passphrases have 3+ words ("correct horse battery staple"); fewer is a phrase."""


def _passphrase(text: str, pos: int) -> _Span | None:
    """A passphrase of several plain words after the word "passphrase": at least
    :data:`MIN_PASSPHRASE_WORDS` words that are not descriptive stop words, at most one that is
    ("passphrase should be long and random" is advice, not a passphrase)."""
    m = _PASSPHRASE_RE.match(text, pos)
    if m is None:
        return None
    words = re.split(r"[ \-]", m.group(1))
    stop = sum(w in _STOP_VALUES or w in FILLER_WORDS for w in words)
    if len(words) - stop < MIN_PASSPHRASE_WORDS or stop > 1:
        return None
    return "password", m.start(1), m.end(1)


_NAMED_THEN_VALUE_RE: Final = re.compile(
    r"\s*(?:is|was|c'est|est|ist|es|lautet|[:=：]|是|为)\s*[\"'`“‘]?([^\s\"'`“”‘’,，;；。、]{4,128})",
    re.IGNORECASE,
)
"""A copula and a value right after the first token that followed a credential word."""


_PURPOSE_GAP_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:for|of|on|at|to|für|fürs|pour|para|per)(?![A-Za-z])", re.I
)
"""A preposition between a credential word and its first token: the token names what it opens."""


_STANDARD_BEFORE_RE: Final = re.compile(r"(?<![A-Za-z])(?:GB(?:/T)?|ISO|IEC|RFC|EN|DIN|ANSI|IEEE|JIS)\s*$")
"""A standard's name right before a number makes the number the standard's, not a code."""


_SPEAKER_LINE_RE: Final = re.compile(r"[ \t]*[^\W\d_][\w.'\- ]{0,20}[：:][ \t]*\S")
"""A transcript line: a speaker's name or role, a colon and what they say ("Tech: I'll need ...")."""


def _spoken_turn(text: str, m: re.Match[str]) -> bool:
    """Whether the credential word of ``m`` is said inside a speaker's turn of a transcript (after its
    label, not as a label itself, in a sentence: "Tech: I'll need the passcode.", not "secret: <...>" or
    'secret: "<请替换为你自己的密钥>"')."""
    line_start = text.rfind("\n", 0, m.start()) + 1
    label = _SPEAKER_LINE_RE.match(text, line_start)
    if label is None or label.end() > m.start():
        return False
    line_end = text.find("\n", m.end())
    said = text[label.end() - 1 : line_end if line_end >= 0 else len(text)].rstrip()
    return said.endswith((".", "。", "!", "！")) or said.count(" ") >= 2  # a sentence, not a config value


def _after_copula(
    text: str,
    m: re.Match[str],
    clauses: tuple[re.Pattern[str], ...] = (_CLAUSE_SEPARATOR_RE, _ANSWERED_RE, _LATER_SENTENCE_RE),
) -> _Span | None:
    """A credential after a separator or copula later in the clause, after a question the text
    answers, or in a later sentence of its own (see :func:`_value_for`)."""
    for clause in clauses:
        start = m.end()
        for _ in range(MAX_COPULAS):  # "密码，就是她记在本子上的那个，是X": the second copula
            sep = clause.match(text, start)
            if sep is None or _OTHER_FIELD_RE.search(sep.group()):
                break  # 'api_key="YOUR_KEY" contact="a@b.c"': the later "=" is another field's
            if (
                clause is _ANSWERED_RE
                and not re.search("[?？]", sep.group())
                and (start != m.end() or not _spoken_turn(text, m))
            ):
                # 'secret: "<替换>"\nendpoint: https://...': the next line of a config, not a reply; and a
                # request is answered by the very next turn, not by a later one ("Agent: Thank you")
                break
            after = _value_after(text, sep.end())  # skips "still", "now"
            if clause is _LATER_SENTENCE_RE and after and not _strong_value(after[1].rstrip(_TRAILING)):
                # "Change your password often. It is important.", "I reset my password. It is 9:30 now":
                # a word or a time, not the value
                after = None
            if after is not None:
                found = _accept(text, m, after[0], after[1], text[m.end() : after[0]])
                if found is not None:
                    return found
            start = sep.end()
    return None


_WIFI_WORD_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:wi-?fi|wlan|ssid|wireless|hotspot|network)(?![A-Za-z])|无线|热点|網路|网络",
    re.IGNORECASE,
)
WIFI_KEY_WINDOW: Final[int] = 60
"""Characters before a bare "key" searched for a Wi-Fi word (ours: a sentence or two: "Guest wifi:
Lobby-5G. The key is X")."""


def _wifi_key(text: str, m: re.Match[str]) -> _Span | None:
    """A Wi-Fi key named by a bare "key ... is" ("wifi at the cabin: network is LakeView, and the key is
    the word papillon-rouge-88"): only after a Wi-Fi word shortly before, and only a value with a digit
    or a symbol ("the key is patience", "the key is to reboot" are sayings)."""
    if _WIFI_WORD_RE.search(text, max(0, m.start() - WIFI_KEY_WINDOW), m.start()) is None:
        return None
    value = _value_after(text, m.end())
    if value is None or not _has_symbol_or_digit(value[1].rstrip(_TRAILING)):
        return None
    return _accept(text, m, *value)


_OPTION_WORDS: Final = frozenset({"requirepass", "masterauth"})
"""Configuration directives that take a password (``requirepass X``); with the option ``--pass X`` the
value is the very next token, never a word after "is" ("the --pass option is deprecated") or "in"
("set requirepass in redis.conf")."""
_OPTION_VALUE_RE: Final = re.compile(r"[ \t]*[= \t][ \t]*[\"']?([^\s\"'`]{4,128})")


def _option_value(text: str, m: re.Match[str]) -> _Span | None:
    value = _OPTION_VALUE_RE.match(text, m.end())
    if value is None or not _has_symbol_or_digit(value.group(1).rstrip(_TRAILING)):
        return None
    return _accept(text, m, value.start(1), value.group(1), "=")


_IDENTIFIER_SHAPE_RE: Final = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[\-.][A-Za-z0-9]+)+")
"""Words and numbers joined by hyphens or dots: a host, a model or a version ("DB-Replica02",
"Chrome-131.0b2"), not a password, when a preposition puts it after the credential word."""


_NAME_RE: Final = re.compile(r"[A-Z][a-z]+(?:[A-Z][a-z]+)*")
"""A name or a brand in letters only ("Apple", "Ledgerly", "LinkedIn"): after a credential word with no
separator, who gave it or what it opens, unless nothing else is the value."""
_GAP_GIVES_VALUE_RE: Final = re.compile(
    r"[:=：＝\"'`“‘]|(?<![^\W\d_])(?:is|was|are|were|est|es|ist|lautet|c'est|é|è|era|war)(?![^\W\d_])|是|为",
    re.IGNORECASE,
)
"""A separator or a copula between a credential word and a token: the token is given as the value."""
_AFTER_NAME_VALUE_RE: Final = re.compile(r"\s+(?:to\s+|is\s+)?[\"'`“‘]?([^\s\"'`“”‘’,，;；。、]{8,128})")
"""The token after a name, or after "to": a value when it has a strong password's shape."""
_GIVER_VERB_RE: Final = re.compile(
    r" (?:gave|give[sn]?|made|makes|sent|sends|told|tells|mentioned|created|creates|generated|emailed|"
    r"texted|set|sets|chose|picked|asked|wants|requires|required|issued|assigned|assigns|shared|reset|"
    r"suggested|suggests|recommended|proposed)(?![a-z])"
)
"""A verb after a name after a password word: the name gave, made or asks for the password ("the password
Sarah mentioned", "the password Microsoft made me create"), it is not the password."""
_CLAUSE_GOES_ON_RE: Final = re.compile(r" (?:[a-z]+ ){0,3}?[a-z]+")
"""A lower-case word after the name: the clause goes on ("Apple gave me", "Anna created")."""


def _after_a_name(text: str, m: re.Match[str], gap: str, found: _Span) -> _Span | None:
    """When ``found`` is a name after the credential word with no separator or copula between
    (:data:`_NAME_RE`): the value after a later copula ("the password Apple gave me is qhvf-ktzm-wpra-jnxe":
    the name is who gave it), or None after a preposition when no value follows ("reset the password
    for your Ledgerly account": the name is what it opens). Else ``found`` itself."""
    if not _NAME_RE.fullmatch(text[found[1] : found[2]]) or _GAP_GIVES_VALUE_RE.search(gap):
        return found
    purpose = _PURPOSE_GAP_RE.search(gap) is not None
    goes_on = _CLAUSE_GOES_ON_RE.match(text, found[2])
    if (purpose or goes_on) and (named := _after_copula(text, m)):
        return named
    after = _AFTER_NAME_VALUE_RE.match(text, found[2])
    if after is not None and strong_password_shape(value := after.group(1).rstrip(_TRAILING)):
        # "password for Netflix Summer2024!", "reset the password for Ledgerly to Hv8$pLq2#w"
        return _kw_type(m), after.start(1), after.start(1) + len(value)
    if purpose or (goes_on and _GIVER_VERB_RE.match(text, found[2])):
        # "I forgot the password Microsoft made me create": the name made it, no value is given
        return None
    return found


def _first_or_named(text: str, m: re.Match[str], gap: str, found: _Span) -> _Span | None:
    """The credential when the first token after the keyword (``found``, after ``gap``) was accepted:
    it, or the value it turns out to describe or name."""
    if text[found[1] : found[2]].isalpha() and (later := _after_copula(text, m, (_LATER_SENTENCE_RE,))):
        # "My new password is complicated. It is: Kx9#mQ2p": the word describes it, the value follows
        return later
    if (after_name := _after_a_name(text, m, gap, found)) is not found:
        return after_name
    if _PURPOSE_GAP_RE.search(gap) and (named := _after_copula(text, m)) is not None:
        # "password for the Northwind Benefits portal is: X": the first token names what it opens
        return named
    if (_PURPOSE_GAP_RE.search(gap) or _PLACE_GAP_RE.search(gap)) and _IDENTIFIER_SHAPE_RE.fullmatch(
        text[found[1] : found[2]]
    ):
        return None  # "changed the VPN password on DB-Replica02": the machine, not the password
    after = _NAMED_THEN_VALUE_RE.match(text, found[2])
    if after is None or not _has_symbol_or_digit(after.group(1).rstrip(_TRAILING)):
        return found
    # "new password for svc_reporting is Zq4#tW8p", "mot de passe Ameli c'est Capucine*1979": the
    # first token names the account, the value follows the copula
    return _kw_type(m), after.start(1), after.start(1) + len(after.group(1).rstrip(_TRAILING))


def _value_for(text: str, m: re.Match[str]) -> _Span | None:
    """The credential after keyword match ``m``: the next token, else a value after a separator or
    copula later in the clause ("password for the guests: X") or after a question the text answers
    ("my password? it's X"), else a code anywhere in the clause
    after a PIN word ("the code they sent is 482913"), else a passphrase of several words; for a
    password word, a dictated value comes first ("so you get it right: capital K, seven, ...") and a
    made-up value later in the text last (:func:`_later_made_up_value`)."""
    password_word = _kw_type(m) == "password" and _kw_kind(m) == "password"
    if (read := _read_out(text, m, password_word=password_word)) is not False:
        return read if isinstance(read, tuple) else None
    value = _value_after(text, m.end())
    if value is not None and (found := _accept(text, m, *value)) is not None:
        return _first_or_named(text, m, value[2], found)
    if (found := _after_copula(text, m)) is not None:
        return found
    digits = _PIN_VALUE_RE.match(text, m.end()) if _kw_kind(m) == "pin" else None
    if digits is not None and _STANDARD_BEFORE_RE.search(text, max(0, digits.start(1) - 12), digits.start(1)):
        digits = None  # "校验码按 GB 11643 计算": a standard's number
    if digits is not None and _not_the_code(text, m, digits.start(1), digits.end(1)):
        digits = None
    if digits is not None and (found := _accept(text, m, digits.start(1), digits.group(1), ":")) is not None:
        return found
    if _PASSPHRASE_WORD_RE.fullmatch(m.group(0)):
        return _passphrase(text, m.end())
    return _later_made_up_value(text, m.end()) if password_word else None


_IDENTIFIER_BEFORE_RE: Final = re.compile(
    r"(?<![^\W\d_])(?:pr|pull\s+request|issue|bug|ticket|case|panel|ref|order|build|version|release|model|room|train|"
    r"flight|doc|document|policy|section|branch|commit|job|host|server|device|laptop|phone|tag|sku|item|"
    r"number|no\.?|id|型号|版本|房间|工单|订单|编号)[\s:#：]*(?:is\s+|was\s+)?$",
    re.IGNORECASE,
)
_CODE_BESIDE_RE: Final = re.compile(
    r"(?<![^\W\d_])(?:account|acct|invoice|receipt|attempt|error|fehler|erreur|errore|ending(?:\s+(?:in|with))?|"
    r"ends\s+(?:in|with)|endet\s+auf|termin(?:e|a|ando)\s+(?:par|en|em|in)|заканчивающ\w*\s+на|номер|nummer|"
    r"numéro|número|numero|bestellung|auftrag|pedido|commande|ordine|заказ\w*|terminal|version|"
    r"vorgang|expediente|dossier)[\s:#：=№-]*$|(?:番号|号码|尾号|订单号|受付番号)[\s:#：]*$|"
    r"(?<![^\W\d_])(?:pr|ticket|case|ref|order|room|number|no\.?|id)[\s:#：=]*$",
    re.IGNORECASE,
)
"""Words right before a number that make it something else than the code a PIN word names: a card's
or phone's last digits ("ending in 4417", "заканчивающийся на 4417", "尾号 4417"), an account, order,
ticket, error or receipt number ("for account 88123456", "(Fehler 4012)", "受付番号 482913")."""
_CODE_STATUS_RE: Final = re.compile(
    r"(?<![^\W\d_])(?:invalid|mismatch\w*|fail(?:ed|s|ure)?|wrong|incorrect|expired|attempts?|sent\s+to|"
    r"must\s+not|should\s+not|falsch|ungültig|abgelaufen|incorrecto|inválid[oa]|errón[eo]a?|expiré|"
    r"неверн\w*|истек\w*)(?![^\W\d_])|失败|错误|無効|間違",
    re.IGNORECASE,
)
"""Words between a PIN word and a number that tell of the code without giving it: a failed or expired
code, one sent to a number, a rule ("must not be 1234"). Not "requested" or "sent" alone: "Verification
code requested: 482913" gives the code."""
_PUBLIC_PIN_BEFORE_RE: Final = re.compile(r"(?<![^\W\d_])(?:default|factory|standard)[\s-]*$", re.IGNORECASE)
"""A default or factory PIN ("the default PIN for most headsets is 0000") is public."""
_PUBLIC_PIN_AFTER_RE: Final = re.compile(r"\s*(?:par\s+défaut|por\s+defecto|di\s+default)", re.IGNORECASE)
"""The same said after the word ("le PIN par défaut est 0000")."""


_CODE_INTRO_RE: Final = re.compile(
    r"(?:^|(?<![^\W\d_])(?:is|was|are|now|'s|’s|es|est|ist|è|é|lautet|beträgt|wynosi|to|je|är|er|on|"
    r"это|είναι|là|adalah|your|yours|anda|vous|votre|tu|su|ihr|dein|seu|sua|tuo|ваш|ваша|jest|"
    r"[a-z]*code|е|је|és|ir|එක)|\w+['’]s|[:：=\-–—→#\[(【「\"'“‘]|是|为|為|は|는|은|번호|您的|你的|هو|هي|بك|"
    r"គឺ|คือ|ແມ່ນ)[\s\"'“‘\[(【「]*$|"
    # "the PIN for the certificate file 4417", "die PIN für die Zertifikatsdatei 4417": what it opens
    r"^\s*(?:for|für|fürs|de|du|des|para|pour|per|of|von|zum|zur|для|от|"
    # and in cs/sk, pl, nl, sv/da/no, ru/uk, vi, id/ms ("PIN ke služební kartě 4471")
    r"k|ke|ku|pro|do|dla|voor|van|för|till|til|к|до|від|của|cho|untuk)\s[^,;:.!?]{0,32}$",
    re.IGNORECASE,
)
"""What may stand right before the code a PIN word names, after the word: nothing, a separator or
bracket, a copula ("is", "lautet", "是", "は"), a possessive ("Kode verifikasi Anda 448120"). A number
after any other word in the clause is something else (a duration, a status, a count, a phone number:
"will expire in 300 seconds", "returned 503", "wysłany na numer 600 123 456")."""
_UNIT_AFTER_RE: Final = re.compile(
    r"\s*(?:s|sec|secs|seconds?|ms|min|mins|minutes?|h|hrs?|hours?|days?|%|mb|gb|kb|alerts?|times?|"
    r"characters?|chars?|digits?|attempts?|tries|秒|分钟|分|小时|天|次|位|秒間|分間|초|분)(?![^\W\d_])",
    re.IGNORECASE,
)
"""A unit or a count noun after the number: "valid for 300 seconds", "6 digits"."""
_DEFAULT_AFTER_RE: Final = re.compile(
    r"[\s,]*(?:by\s+default|out\s+of\s+the\s+box|par\s+défaut|por\s+defecto|standardmäßig|"
    r"di\s+default|por\s+padrão|默认|デフォルト)",
    re.IGNORECASE,
)
"""A default after the number ("SIM PIN is 0000 by default"): a public value."""


def _not_a_code_number(text: str, start: int, end: int) -> bool:
    """Whether the digits at ``[start, end)`` after a PIN word are something else than a code: an
    invoice's 20-digit check code ("校验码 58213 40921 77310 28841"), a duration or count ("验证码有效期为
    300 秒"), a public default ("SIM PIN is 0000 by default"), a sandbox's fixed code (a trivial
    value, one digit repeated or a run such as 123456, beside a test word: "测试环境短信验证码固定为
    111111", "in test mode the OTP is always 000000")."""
    return bool(
        _document_number(text, start)
        or _UNIT_AFTER_RE.match(text, end)
        or _DEFAULT_AFTER_RE.match(text, end)
        or (
            _trivial_code(text[start:end])
            and TEST_CONTEXT_RE.search(text, max(0, start - TEST_CONTEXT_CHARS), end + TEST_CONTEXT_CHARS)
            is not None
        )
    )


def _trivial_code(digits: str) -> bool:
    """One digit repeated ("000000", "1111") or an ascending or descending run ("123456", "9876")."""
    return len(set(digits)) == 1 or digits in "01234567890" or digits in "09876543210"


def _not_the_code(text: str, m: re.Match[str], start: int, end: int) -> bool:
    """Whether the number at ``[start, end)``, in the clause after the PIN word of ``m``, is not that
    code: :data:`_CODE_BESIDE_RE` right before it, :data:`_CODE_STATUS_RE` between the word and it,
    no introducer (:data:`_CODE_INTRO_RE`) right before it, or a unit after it."""
    if _CODE_BESIDE_RE.search(text, max(m.end(), start - 32), start):
        return True
    if _CODE_STATUS_RE.search(text, m.end(), start) is not None:
        return True
    if _UNIT_AFTER_RE.match(text, end):
        return True
    return _CODE_INTRO_RE.search(text[m.end() : start]) is None


LATER_VALUE_WINDOW: Final[int] = 100
"""Characters after a password word searched for a made-up value when nothing closer was one (ours:
two short sentences: "The password? Oh right, it's the dog's name plus the year: Biscuit2019!")."""
_LATER_TOKEN_RE: Final = re.compile(
    r"(?<![A-Za-z0-9!@#$%^&*_\-+=~.])([^\s\"'`“”‘’,，;；。、()（）<>\[\]{}]{8,64})"
)
_OTHER_LABEL_RE: Final = re.compile(
    r"\n|(?<![A-Za-z])(?:user\s?(?:name|id)?|login|account|e-?mail|identifiant|benutzer(?:name)?|usuario|"
    r"utilisateur|nutzer)(?![A-Za-z])|用户名|账号|账户|登录名|логин|ユーザー",
    re.IGNORECASE,
)
"""Where the search for a later value stops: a new line or another label (a user name is not the
password: "password reset for user JohnSmith_22!")."""


def _later_made_up_value(text: str, pos: int) -> _Span | None:
    """A value of :func:`made_up_shape` within :data:`LATER_VALUE_WINDOW` characters after a password
    word, across clause and sentence ends but not a new line or another label: "密码我待会儿发你……
    算了直接说吧，Zl@2026vpn", "Пароль поменял, теперь он Kedr_Sibir_71"."""
    end = min(len(text), pos + LATER_VALUE_WINDOW)
    stop = _OTHER_LABEL_RE.search(text, pos, end)
    for v in _LATER_TOKEN_RE.finditer(text, pos, stop.start() if stop else end):
        value = v.group(1).rstrip(_TRAILING)
        named = _IDENTIFIER_BEFORE_RE.search(text, max(pos, v.start(1) - 24), v.start(1))
        if typed_made_up(value) and not named:
            between = text[pos : v.start(1)]
            if _ZH_RULE_WORDS_RE.search(between) or _RULE_WORDS_RE.search(between):
                return None  # "密码强度要求 Aa1!aaaa 以上", "password rules, e.g. Xy7!abcd": an example
            return "password", v.start(1), v.start(1) + len(value)
    return None


_RULE_WORDS_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:polic(?:y|ies)|rules?|requirements?|required|must|at\s+least|minimum|example|e\.g\.|"
    r"such\s+as|like|format|pattern|strength|complexity|sample)(?![A-Za-z])",
    re.IGNORECASE,
)
"""English words between a password word and a value that make the value an example of a rule
(the Chinese ones are :data:`_ZH_RULE_WORDS_RE`)."""


_TOOL_NOUNS: Final = (
    r"(?:managers?|apps?|vaults?|polic(?:y|ies)|resets?|strength|fields?|rules?|hints?|generators?|keepers?|"
    r"stores?|lists?|changes?|requirements?|protect\w*|prompts?|screens?|forms?)(?![A-Za-z])"
)
"""Nouns after a credential word that make it a tool or a rule ("1Password as our password manager")."""
_AS_PASSWORD_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:use[sd]?|using|set|chose|chosen|picked|pick|choose|made|make|try|tried|enter|type)\s+"
    r"[\"'`“‘]?(?P<v>[^\s\"'`“”‘’,，;；。]{4,64}?)[\"'`”’]?\s+(?:as|for)\s+"
    r"(?:(?:the|our|my|your|his|her|their|a|an)\s+)?"
    r"(?:[\w\-]+\s+){0,3}?(?:pass\s?words?|passphrase|pass\s?code|pin|wi-?fi\s+key)(?![A-Za-z])(?!\s+"
    + _TOOL_NOUNS
    + ")|"
    r"(?<![^\s\"'`“‘(（])[\"'`“‘]?(?P<w>[^\s\"'`“”‘’,，;；。:：]{4,64}?)[\"'`”’]?\s+(?:is|was|=)\s+"
    r"(?:the|our|my|your|his|her|their)\s+(?:[\w\-]+\s+){0,3}?(?:pass\s?words?|passphrase|pass\s?code|pin)"
    r"(?![A-Za-z])(?!\s+" + _TOOL_NOUNS + ")|"
    r"(?:用|拿|把)\s*(?P<z>[A-Za-z0-9!@#$%^&*_\-+=.~]{4,64})\s*(?:当|作为|做|设为|设成)[^，。,.]{0,6}?(?:密码|口令)",
    re.IGNORECASE,
)
"""The value named before the credential word: "we use Mariner-Copper-Lantern-17 as the shared
family passphrase", "try tiger2024! for the NAS admin password", "Tr0ub4dor&3 is my wifi password",
"用qwe123当密码"."""


_ZH_RULE_WORDS_RE: Final = re.compile(r"强度|规则|要求|格式|示例|例如|比如|长度|策略|提示|复杂度|样例")
"""Words between a credential word and a value that make the value an example of a rule."""

_ZH_HANDED_RE: Final = re.compile(r"(?:密码|口令)[^\n。.!?！？；;A-Za-z0-9]{1,8}?\s+([!-~]{6,64})")
"""A Chinese credential word, a few words ("发你了哈", "给你"), then an ASCII value: "服务器root密码发你了哈
Wang@#5566root" (only a strong-password shape counts)."""


def _handed_over_spans(text: str) -> Iterator[_Span]:
    for m in _ZH_HANDED_RE.finditer(text):
        value = m.group(1).rstrip(_TRAILING)
        if strong_password_shape(value) and not _ZH_RULE_WORDS_RE.search(text, m.start(), m.start(1)):
            yield "password", m.start(1), m.start(1) + len(value)


TEST_CARDS: Final[frozenset[str]] = frozenset(
    {
        "4242424242424242",
        "4000056655665556",
        "4111111111111111",
        "4012888888881881",
        "4000000000000002",
        "4000000000009995",
        "5555555555554444",
        "5105105105105100",
        "5200828282828210",
        "2223003122003222",
        "378282246310005",
        "371449635398431",
        "6011111111111117",
        "6011000990139424",
        "3056930009020004",
        "36227206271667",
        "3566002020360505",
        "6200000000000005",
        "5555341244441115",
        "4111111145551142",
        "4988438843884305",
        "2222400070000005",
    }
)
"""Card numbers the payment providers publish for test mode (Stripe, Braintree and Adyen testing docs)."""
# the words are not parts of an address ("a.b@example.com", "test@shop.cn"): redaction must stay idempotent
TEST_CONTEXT_RE: Final = re.compile(
    r"(?<![A-Za-z0-9@.])(?:test(?:ing)?|sandbox|docs?|documentation|example|demo|dummy|simulat(?:e|es|ed|ing|ion)|"
    r"esempi[oa]|exemples?|ejemplos?|exemplos?|beispiel\w*|voorbeeld\w*|przykład\w*)"
    r"(?![A-Za-z0-9@]|\.[A-Za-z])|"
    r"пример\w*|тестов\w*|例子|示例|测试|沙箱|文档|例示|예시|テスト|サンドボックス|テスト用|테스트|샌드박스|測試|"
    r"(?<![A-Za-z])(?:pruebas?|teste|test(?:karte|kaart|kort|karta)\w*|di\s+prova)(?![A-Za-z])",
    re.IGNORECASE,
)
"""Words that present a published test card (:data:`TEST_CARDS`) as one, in several languages: test,
sandbox, docs, example, demo ("in test mode use 4242 4242 4242 4242", "テスト用カード番号"); a CVV beside
them and a test card is a payment provider's test value ("Sandbox test cards: Visa 4111 ..., CVV 123"),
not a card's secret ("Testing my new card: 5425 ..., CVV 482" is). One list for cards
(:mod:`hindsight.pii`), CVVs and example IBANs."""
TEST_CONTEXT_CHARS: Final[int] = 80
"""Characters on each side of a published test card (or its CVV) searched for a word presenting it as
one (ours)."""

_USERINFO_BEFORE_RE: Final = re.compile(r"://[^\s/@]*$")


_RULE_NOUN_AFTER_RE: Final = re.compile(
    r"[ \t-]+(?:polic(?:y|ies)|rules?|requirements?|strength|complexity|managers?|generators?|"
    r"richtlinie\w*|politique|política|规则|策略|要求)(?![^\W\d_])|"
    # a hyphenated compound names a thing about passwords ("password-reset emails are to be forwarded")
    r"-(?:reset|recovery|change|protected|less|free|expiry|expiration|hint|sharing|rotation)s?(?![^\W\d_])",
    re.IGNORECASE,
)
"""A noun right after a password word that makes it a rule or a tool ("Password policy (updated Nov
2026): minimum 14 characters", "password manager: 1Password", "password-reset emails"): what follows is
a password only with a strong password's shape (:func:`_rule_example`)."""


_POSTAL_PIN_WORD_RE: Final = re.compile(r"pin\s?code|पिन\s?कोड", re.IGNORECASE)
_POSTAL_CONTEXT_RE: Final = re.compile(
    r"(?<![^\W\d_])(?:deliver\w*|address\w*|area|locality|district|post\s?office|postal|shipping|ship|"
    r"courier|serviceab\w*|cod|pincode|village|town|nagar|colony)(?![^\W\d_])|डिलीवरी|इलाक|शहर|मोहल्ल|गाँव|गांव",
    re.IGNORECASE,
)
_BANKING_RE: Final = re.compile(
    r"(?<![^\W\d_])(?:card|atm|debit|credit|bank\w*|upi|account|netbanking|wallet)(?![^\W\d_])|"
    r"एटीएम|कार्ड|बैंक|खाता",
    re.IGNORECASE,
)
"""Banking words beside "PIN code": a card's PIN, whatever address is named near it ("Your debit card
was delivered to your registered address. Card PIN code: 482913")."""
POSTAL_CONTEXT_CHARS: Final[int] = 60
"""Characters on each side of "PIN code" searched for an address word (ours: about a clause)."""


def _postal_pin(text: str, m: re.Match[str]) -> bool:
    """India's postal "PIN code" (Postal Index Number, six digits) beside an address word: "Delivery to
    PIN code 110001 only", "address: 12 MG Road, Bengaluru, PIN code 560001"."""
    if not _POSTAL_PIN_WORD_RE.fullmatch(m.group(0)):
        return False
    lo, hi = max(0, m.start() - POSTAL_CONTEXT_CHARS), m.end() + POSTAL_CONTEXT_CHARS
    return bool(
        re.match(r"[\s:：\-]*(?:is\s+)?[1-9][0-9]{2}\s?[0-9]{3}(?![0-9])", text[m.end() : m.end() + 16])
        and _POSTAL_CONTEXT_RE.search(text, lo, hi)
        and not _BANKING_RE.search(text, lo, hi)
    )


_RULE_NOUN_BEFORE_RE: Final = re.compile(
    r"(?<![^\W\d_])(?:politique|política|politica|richtlinie|règles?|reglas?|regole|regras|exigences?|"
    r"requisitos?|requisiti)\s+(?:de|del|da|do|di|für|des|du)\s*$",
    re.IGNORECASE,
)
"""The same rule noun before the word, as Romance languages and German put it ("Politique de mot de
passe : douze caractères minimum")."""


def _rule_example(text: str, m: re.Match[str], found: _Span) -> bool:
    """A password word naming a rule or a tool (:data:`_RULE_NOUN_AFTER_RE`) and a value without a
    strong password's shape: a rule's words or numbers ("Password policy: minimum 14 characters"); a
    generator's or a vault's strong output is still a password ("Password generator: Tr9$kLm2#pQx")."""
    return bool(
        _kw_kind(m) == "password"
        and (
            _RULE_NOUN_AFTER_RE.match(text, m.end())
            or _RULE_NOUN_BEFORE_RE.search(text, max(0, m.start() - 24), m.start())
        )
        and not strong_password_shape(text[found[1] : found[2]])
    )


def _names_no_value(text: str, m: re.Match[str]) -> bool:
    """The credential word names no value here: it is a URL's password itself, a template's placeholder
    (``postgres://USER:PASSWORD@localhost``); "pin" in "bowling pin"; India's postal PIN code beside an
    address (:func:`_postal_pin`); a test card's CVV in a payment provider's docs ("Sandbox test
    cards: Visa 4111 ..., CVV 123"); a default PIN ("the default PIN for most headsets is 0000":
    public)."""
    if text.startswith("@", m.end()) and _USERINFO_BEFORE_RE.search(text, max(0, m.start() - 64), m.start()):
        return True
    if _PROSE_PIN_CONTEXT_RE.search(text, max(0, m.start() - 12), m.start()):
        return True
    if _postal_pin(text, m):
        return True
    if _kw_kind(m) == "pin" and (
        _PUBLIC_PIN_BEFORE_RE.search(text, max(0, m.start() - 16), m.start())
        or _PUBLIC_PIN_AFTER_RE.match(text, m.end())
    ):
        return True
    return m.group(0).lower().startswith(("cvv", "cvc")) and _beside_a_test_card(text, m)


def _beside_a_test_card(text: str, m: re.Match[str]) -> bool:
    if not TEST_CONTEXT_RE.search(text, max(0, m.start() - TEST_CONTEXT_CHARS), m.end() + TEST_CONTEXT_CHARS):
        return False
    digits = re.sub(r"[ \-]", "", text)
    return any(card in digits for card in TEST_CARDS)


_MDP_MODEL_RE: Final = re.compile(
    r"(?<![^\W\d_])(?:markov|decision\s+process|reinforcement|rewards?|gamma|discount|policy|policies|"
    r"value\s+iteration|q-?learning|environments?|env|gym|gymnasium|episodes?|states?|actions?|"
    r"transitions?|bellman|pomdp|rl)(?![^\W\d_])",
    re.IGNORECASE,
)
"""Words of reinforcement learning: beside them "MDP" is a Markov decision process, not the French
abbreviation of "mot de passe"."""
_ENV_NAME_RE: Final = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)*[-_]v[0-9]+")
"""An environment's name with a version (``CartPole-v1``, ``FrozenLake_v0``): a model, not a password."""


def _mdp_is_a_model(text: str, value: str) -> bool:
    """Whether "mdp" here is a Markov decision process: reinforcement-learning words in the text, or
    a value named like an environment (``mdp: gridworld-v3``)."""
    return _MDP_MODEL_RE.search(text) is not None or _ENV_NAME_RE.fullmatch(value) is not None


def _keyword_value(text: str, m: re.Match[str]) -> _Span | None:
    """The value credential word ``m`` names: a Wi-Fi key, a command-line option's value or
    :func:`_value_for`; "mdp" names no password where it is a Markov decision process
    (:func:`_mdp_is_a_model`)."""
    word = m.group(0).lower()
    if word == "key":
        return _wifi_key(text, m)
    if word in _OPTION_WORDS or (word == "pass" and text.startswith("--", m.start() - 2)):
        return _option_value(text, m)
    found = _value_for(text, m)
    if found is not None and word == "mdp" and _mdp_is_a_model(text, text[found[1] : found[2]]):
        return None
    return found


def _keyword_spans(text: str) -> Iterator[_Span]:
    yield from _handed_over_spans(text)
    for m in _KEYWORD_RE.finditer(text):
        word = m.group(0)
        # lower-case "pin" is usually the English word ("a pin", "pin the tab"); "PIN" / "pin code" count
        if (
            _PIN_WORD_RE.match(word)
            and not word[:3].isupper()
            and not re.search(r"pin\s?(?:code|number)", word, re.I)
            and not re.match(r"\s*(?:is|:|=|was|number|code)|['’]s\s", text[m.end() : m.end() + 10], re.I)
        ):
            continue
        if _names_no_value(text, m):
            continue
        if (found := _keyword_value(text, m)) is not None and not _rule_example(text, m, found):
            yield found
    for g in _GLUED_RE.finditer(text):
        glued = g.group(1).rstrip(_TRAILING)
        if glued.startswith("@"):
            continue  # "postgres://USER:PASSWORD@localhost/app": the host after a placeholder
        if any(not c.isalpha() for c in glued) and not is_masked(glued):
            yield "password", g.start(1), g.start(1) + len(glued)
    yield from _access_code_spans(text)
    yield from _code_is_spans(text)
    yield from _recovery_spans(text)
    for a in _AS_PASSWORD_RE.finditer(text):
        group = "v" if a.group("v") else "w" if a.group("w") else "z"
        value = a.group(group).rstrip(_TRAILING)
        if _shaped_like_password(value):
            yield "password", a.start(group), a.start(group) + len(value)
