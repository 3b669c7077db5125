"""Codes that open things and account recovery material (part of the keyword-in-context layer).

An access code beside the lock, keypad or safe it opens ("the code on the parcel locker is
739214", "safe combination 24-7-13", "the shed padlock is 0815"), a code word in any language
followed by a made-up value ("Koden till min app är Lingon#5583"), backup codes after "backup
codes" / "备用码" and a BIP-39 seed phrase after "recovery phrase" / "助记词".
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

from hindsight.secrets.patterns import _PIN_VALUE_RE
from hindsight.secrets.spoken import _spoken, spoken_word_value
from hindsight.secrets.values import _TRAILING, _has_letter_and_digit, _Span, credential_like, typed_made_up

_CODE_IS_RE: Final = re.compile(
    r"(?<![^\W\d_])(?:code|kod|koden|kode|koder|kodu|código|codice|код|κωδικός)(?![^\W\d_])"
    r"[^.!?。！？\n]{0,40}?(?:(?<![^\W\d_])(?:is|är|er|ist|est|es|é|è|je|jest|это)(?![^\W\d_])|[:=：]|是)"
    r"[ \t]*[\"'“‘]?([^\s\"'`“”‘’,，;；。、()（）<>]{8,64})",
    re.IGNORECASE,
)
"""A code word in any language, a copula or a separator in its clause, then a value: only a value of
:func:`made_up_shape` counts ("Koden till min app är Lingon#5583"; "the code is 4021" and "the code is
messy" are left to the access-code rules and prose)."""


_SMS_CODE_RE: Final = re.compile(
    r"(?<![0-9A-Za-z])(?:(?:use|enter)\s+)?(?:[A-Z]-)?([0-9]{4,8})(?![0-9])\s+(?:is|as)\s+your\s+"
    r"(?:[A-Z][\w.&-]*\s+){0,3}(?:verification|security|login|sign-?in|one[\s-]time|otp|2fa|auth\w*|"
    r"confirmation|access)\s+(?:code|pin|password)",
    re.IGNORECASE,
)
"""A one-time code before its words, as most text messages put it ("482913 is your Facebook
confirmation code", "G-482913 is your Google verification code", "Use 482913 as your verification
code"): in this form a confirmation code is the sign-in code, not a booking's."""


_YOUR_CODE_RE: Final = re.compile(
    r"(?<![^\W\d_])(?P<pre>your|ваш|votre|tu|dein|ihr|seu|il\s+tuo|jouw|din)\s+((?:[A-Z][\w.&-]*\s+){0,3})"
    r"(?:code|код|código|codice|kod|kode)\s*(?:is|est|ist|es|è|é|это|[:：])\s*[:：]?\s*"
    r"(?P<v>[0-9]{4,8}|[0-9]{3}[ -][0-9]{3})(?![0-9A-Za-z])",
    re.IGNORECASE,
)
"""A code the text gives to its reader: "Your code is 482913", "Your WhatsApp code: 482-913", "Your
Apple ID Code is: 482913", "Ваш код: 482913" (the texts of messaging and sign-in services)."""
_SHARE_WARNING_RE: Final = re.compile(
    r"(?:do\s+not|don['’]t|never)\s+(?:share|give|tell|forward|disclose)|"
    r"ne\s+(?:le\s+|la\s+)?(?:partagez|communiquez|donnez|transmettez|divulguez)|"
    r"no\s+(?:lo\s+|la\s+)?(?:compartas|comparta|des|dé|digas|facilites)|nicht\s+weiter(?:geben|sagen)|"
    r"niemandem|nesdělujte|neposkytujte|nikomu\s+nehovorte|"
    r"non\s+(?:condividere|comunicare|condividerlo|comunicarlo)|não\s+(?:compartilhe|partilhe|informe)|"
    r"niet\s+(?:delen|door)|nie\s+(?:udostępniaj|podawaj|przekazuj)|paylaşmayın|"
    r"jangan\s+(?:berikan|bagikan|beritahu)|không\s+(?:chia\s+sẻ|cung\s+cấp)|"
    r"не\s+(?:сообщайте|передавайте|говорите|повідомляйте)|никому\s+не\s+(?:сообщайте|говорите|передавайте)|"
    r"нікому\s+не\s+(?:повідомляйте|передавайте|кажіть)|(?:code|it|ce\s+code|este\s+código|dieser\s+code)\s+"
    r"(?:is|est|es|ist)\s+(?:personal|personnel|confidential|confidentiel|vertraulich|personal\s+e)\w*|"
    r"不要(?:告诉|泄露|转发)|请勿(?:告诉|泄露|转发)|切勿(?:告知|泄露)|"
    r"他人に教え|教えないで|共有しないで|알려주지|공유하지|لا\s+تشارك|साझा\s+न",
    re.IGNORECASE,
)
"""A warning not to pass the code on, in the SMS and e-mail wording of banks and apps in several
languages, or that it is personal: after it, a code word with a few qualifier words and a separator
gives a one-time code ("Doctolib code: 48291", "Votre code de confirmation Doctolib : 847361")."""
_NAMED_CODE_RE: Final = re.compile(
    r"(?<![^\W\d_])(?:code|код|código|codice|kod|kód|kode)(?P<q>(?:\s+[^\s:：=.,;!?。]{1,24}){0,3}?)"
    r"\s*(?:[:：]|(?<=\s)(?:is|est|es|ist|è|é|это)(?=\s))\s*"
    r"(?P<v>[0-9]{4,8}|[0-9]{3}[ -][0-9]{3}|[0-9]{2}(?: [0-9]{2}){2,3})(?![0-9A-Za-z])",
    re.IGNORECASE,
)
"""A code word, up to three qualifier words ("de confirmation Doctolib", "for your login"), a separator
or a copula, then 4-8 digits (also in pairs: "48 29 13"): a one-time code where a warning not to share
it follows within :data:`WARNING_AFTER_CHARS`."""
WARNING_AFTER_CHARS: Final[int] = 120
"""Characters after a code searched for the warning about it (ours: the next sentence of an SMS; a
warning before the code, or far from it, is about something else: "Non condividere lo spoiler! Il
codice del corso è 1045")."""
_NOT_OTP_QUALIFIER_RE: Final = re.compile(
    r"(?<![^\W\d_])(?:postal|postale|post|zip|promo\w*|r[ée]servation|reserva\w*|booking|buchung\w*|"
    r"tracking|suivi|seguimiento|sendung\w*|commande|order|pedido|bestellung|client|customer|kunden\w*|"
    r"r[ée]f[ée]rence|reference|dossier|ticket|error|erreur|fehler|status|country|area|region|"
    r"discount|coupon|voucher|gift|cadeau)(?![^\W\d_])",
    re.IGNORECASE,
)
"""Qualifier words that make a code an identifier even in a one-time code's text ("code de suivi : ...")."""
_OTP_BEFORE_OK_RE: Final = re.compile(r"(?<![A-Za-z])confirmation\s*$", re.IGNORECASE)
"""In a one-time code's text, "confirmation code" is the sign-in code (it is a booking's elsewhere)."""


def _reader_code_spans(text: str) -> Iterator[_Span]:
    """Codes given to the reader (:data:`_YOUR_CODE_RE`), and a code word with a few qualifier words
    and a separator (:data:`_NAMED_CODE_RE`) followed by a warning not to share it
    (:data:`_SHARE_WARNING_RE`); not after or with an identifier word ("your tracking code: ...",
    "code de suivi : ...", :data:`_NOT_ACCESS_CODE_RE`, :data:`_NOT_OTP_QUALIFIER_RE`)."""
    for m in _YOUR_CODE_RE.finditer(text):
        if not _NOT_ACCESS_CODE_RE.search(m.group(2)):
            yield "password", m.start("v"), m.end("v")
    if _SHARE_WARNING_RE.search(text):
        for m in _NAMED_CODE_RE.finditer(text):
            before = text[max(0, m.start() - 24) : m.start()]
            if _NOT_OTP_QUALIFIER_RE.search(m.group("q")) or (
                _NOT_ACCESS_CODE_RE.search(before) and not _OTP_BEFORE_OK_RE.search(before)
            ):
                continue
            if _SHARE_WARNING_RE.search(text, m.end(), m.end() + WARNING_AFTER_CHARS):
                yield "password", m.start("v"), m.end("v")


def _code_is_spans(text: str) -> Iterator[_Span]:
    for m in _CODE_IS_RE.finditer(text):
        value = m.group(1).rstrip(_TRAILING)
        if typed_made_up(value) and not _NOT_ACCESS_CODE_RE.search(text, max(0, m.start() - 24), m.start()):
            yield "password", m.start(1), m.start(1) + len(value)
    if "your" in text or "Your" in text or "YOUR" in text:
        for m in _SMS_CODE_RE.finditer(text):
            yield "password", m.start(1), m.end(1)
    yield from _reader_code_spans(text)


_OBJECT_CODE_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:(?P<opens>alarm|deur|kluis|toegangs|poort|hek)?(?:code|kode)|combination|combo|código|codice|код|kod|kód|"
    r"kombinace|kombinacja|kombination)(?![A-Za-z])|कोड",
    re.IGNORECASE,
)
_LOCK_CONTEXT_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:lockers?|locks?|padlocks?|alarms?|doors?|gates?|garage|safe|keypads?|lock\s?box|key\s?box|"
    r"intercom|buzzer|entry|vault|mailbox|storage\s+unit|suitcase|bike|shed|portão|puerta|portal|tür|porte|"
    r"cadenas|lucchetto|cancello|домофон\w*|двер\w*|подъезд\w*|сейф\w*|замк\w*|"
    # safes and lockers in cs/sk, pl, de, es, fr, it, nl
    r"trezor\w*|sejf\w*|tresor\w*|caja\s+fuerte|coffre(?:-fort)?|cassaforte|kluis|zámk?\w*|skříň\w*)(?![A-Za-z])|"
    r"保险箱|保险柜|密码锁|门锁|快递柜|储物柜|金庫|금고|ढोका|दरवाज़ा|दरवाजा|तिजोरी|लॉकर",
    re.IGNORECASE,
)
"""Things opened by a code: with one in the clause, "code" / "combination" names an access code
("the code on the parcel locker is 739214", "office alarm: code 1984", "safe combination 24-7-13")."""
_NOT_ACCESS_CODE_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:error|zip|postal|post|area|country|dial(?:ling)?|promo|discount|coupon|voucher|qr|bar|"
    r"source|status|http|tracking|product|course|class|dress|colou?r|reference|ref|booking|confirmation|"
    r"airport|flight|tax|sort|swift|bic|routing|exit|fault|trouble|diagnostic|obd|model|part|fehler|erreur|"
    r"errore|error[a-z]*)[\s\-]*$",
    re.IGNORECASE,
)
"""Words before "code" that make it an identifier, not an access code ("error code 4012")."""
LOCK_CONTEXT_CHARS: Final[int] = 40
"""Characters on each side of "code" searched for a thing it opens (ours: about one clause)."""
_CLAUSE_END_RE: Final = re.compile(r"[.。!！?？\n;；]")


_COMBINATION_VALUE_RE: Final = re.compile(r"(?:[0-9]{1,3}[\-/ ]){2,4}[0-9]{1,3}")
_COMBINATION_RE: Final = re.compile(
    r"[^.。!！?？\n0-9]{0,40}?(?<![0-9])(" + _COMBINATION_VALUE_RE.pattern + r")(?![0-9])"
)
"""A combination in the clause after "combination" / "code": ``24-7-13``, ``is 10 20 30``, "Kód k
trezoru v kanceláři je 58-12-93" (what it opens between; the caller wants a lock word near, and words
between must end in :data:`_COMBINATION_GAP_RE`)."""
_COMBINATION_GAP_RE: Final = re.compile(
    r"(?:^[\s:：=]*|(?<![^\W\d_])(?:is|was|je|jest|est|ist|es|è|é|är|er|era|war|это|[:：=]))\s*$",
    re.IGNORECASE,
)
"""What may stand right before a combination after words between it and "code": a copula or a
separator ("the code for the back gate is 12-40-07"), never a date's preposition ("changed on 12/05/26")."""


def _clause_around(text: str, start: int, end: int, chars: int) -> str:
    """Up to ``chars`` characters each side of ``text[start:end]``, not past a sentence end."""
    before = text[max(0, start - chars) : start]
    cut = [m.end() for m in _CLAUSE_END_RE.finditer(before)]
    after = text[end : end + chars]
    stop = _CLAUSE_END_RE.search(after.rstrip(".。"))
    return before[cut[-1] if cut else 0 :] + text[start:end] + (after[: stop.start()] if stop else after)


_DEVICE_CODE_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:pad\s?locks?|key\s?pads?|lock\s?box(?:es)?|key\s?safes?|key\s?box(?:es)?|"
    r"(?:door|gate|smart|combination|bike|cable)\s+locks?)(?![A-Za-z])\s*(?:[:：=]|is|was|are)\s*"
    r"([0-9]{3,10}[#*]?)(?![0-9A-Za-z])|(?:门禁|密码锁|门锁|挂锁)(?:密码)?\s*[:：是为]\s*([0-9]{3,10}[#*]?)(?![0-9])",
    re.IGNORECASE,
)
"""A code given as the value of the device it opens, without the word "code": "the shed padlock is
0815", "Door keypad: 7316 then press the tick", "门禁：4096#"."""


_COPULA_IN_CLAUSE_RE: Final = re.compile(r"[^.。!！?？\n:=]{0,48}?(?=\s(?:is|was)\s|[:=])", re.IGNORECASE)
"""The words between a code's name and the clause's first copula or separator ("for the key safe by the
back door")."""


def _access_code_spans(text: str) -> Iterator[_Span]:
    for m in _DEVICE_CODE_RE.finditer(text):
        group = 1 if m.group(1) else 2
        if credential_like(m.group(group), kind="pin"):
            yield "password", m.start(group), m.end(group)
    for m in _OBJECT_CODE_RE.finditer(text):
        if _NOT_ACCESS_CODE_RE.search(text[max(0, m.start() - 24) : m.start()]):
            continue
        if not m.group("opens") and not _LOCK_CONTEXT_RE.search(
            _clause_around(text, m.start(), m.end(), LOCK_CONTEXT_CHARS)
        ):
            continue  # "alarmkode", "deurcode" name what they open themselves
        digits = _PIN_VALUE_RE.match(text, m.end()) or _COMBINATION_RE.match(text, m.end())
        if digits is None:
            # "the gate code is seven three three zero", "the code for the key safe by the back door is
            # two seven three nine": number words after the clause's first copula
            copula = _COPULA_IN_CLAUSE_RE.match(text, m.end())
            spoken = _spoken(text, copula.end() if copula is not None else m.end())
            if spoken is not None and not spoken_word_value(text, spoken):
                yield spoken
            continue
        value = digits.group(1)
        gap = text[digits.start() : digits.start(1)]
        if credential_like(value, kind="pin") or (
            _COMBINATION_VALUE_RE.fullmatch(value) and _COMBINATION_GAP_RE.search(gap)
        ):
            yield "password", digits.start(1), digits.end(1)


_RECOVERY_WORD_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:recovery|backup|seed|mnemonic|rescue)\s+(?:codes?|phrases?|words)(?![A-Za-z])|"
    r"助记词|恢复码|备用码|救援码|恢复短语|助記詞",
    re.IGNORECASE,
)
_SEED_PHRASE_RE: Final = re.compile(
    r"[^.。!！?？\n:：=\"'“‘「]{0,80}?(?:\s*[:：=]\s*|\s+(?:is|are|was)\s*:?\s*)[\"'“‘「]?"
    r"((?:[a-z]{3,8}[ ,]\s*){11,23}[a-z]{3,8})(?![A-Za-z])(?=[\"'”’」]?\s*(?:[.,;:!?。，；！？\n]|$))"
)
"""A BIP-39 phrase after its word (up to 80 characters of the clause between: "recovery phrase for
my hardware wallet, in case I lose the paper: ...") and a separator or "is": 12-24 lower-case words
of 3-8 letters ending the clause; :func:`_recovery_spans` also wants a BIP-39 length (12, 15, 18, 21
or 24 words)."""
_BACKUP_CODE_RE: Final = re.compile(
    r"(?<![0-9A-Za-z\-])(?=[0-9a-zA-Z\-]*[0-9])(?:[0-9a-zA-Z]{4,6}-[0-9a-zA-Z]{4,6}|[0-9a-zA-Z]{6,10})(?![0-9A-Za-z\-])"
)
RECOVERY_WINDOW: Final[int] = 200
"""Characters after "recovery codes" / "备用码" searched for the codes (a list of ten fits; ours)."""


BIP39_LENGTHS: Final = (12, 15, 18, 21, 24)
_CJK_SEED_RE: Final = re.compile(
    r"[^\n。.!?！？]{0,40}?[:：是为]\s*"
    r"((?:[\u4e00-\u9fff][ ,，、]\s*){11,23}[\u4e00-\u9fff])(?![\u4e00-\u9fff])"
)
"""A BIP-39 phrase from the Chinese word lists (one character a word, separated): "助记词：轻 诉 饭 ..."."""


def _recovery_spans(text: str) -> Iterator[_Span]:
    """Account recovery material: the codes listed after "backup codes" (each a span; a lone code
    needs letters and digits, so a date or a count is not one) and a seed phrase after "recovery
    phrase" / "助记词" (one span over the words)."""
    for kw in _RECOVERY_WORD_RE.finditer(text):
        word = kw.group().lower()
        if any(w in word for w in ("phrase", "words", "助记", "助記", "短语")):
            m = _SEED_PHRASE_RE.match(text, kw.end())
            if m is not None and len(re.findall(r"[a-z]+", m.group(1))) in BIP39_LENGTHS:
                yield "password", m.start(1), m.end(1)
            zh = _CJK_SEED_RE.match(text, kw.end())
            if zh is not None and len(re.findall(r"[\u4e00-\u9fff]", zh.group(1))) in BIP39_LENGTHS:
                yield "password", zh.start(1), zh.end(1)
            continue
        codes = list(_BACKUP_CODE_RE.finditer(text, kw.end(), min(len(text), kw.end() + RECOVERY_WINDOW)))
        for m in codes:
            if len(codes) >= 2 or _has_letter_and_digit(m.group()):
                yield "password", m.start(), m.end()
