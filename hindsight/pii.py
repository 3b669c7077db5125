"""Rule-based detection and redaction of PII and secrets (DESIGN.md section 6).

DESIGN.md section 6 asks the guard to find phone numbers (CN mobile and international), e-mail, CN
resident IDs (with checksum), bank cards (Luhn), passport numbers, IP addresses and API
keys/tokens/passwords, and to apply one action per type: ``redact`` (``[REDACTED:type]``), ``mask``
or ``block``. This module is that rule set: pure functions over a string, no I/O, no model.

Detectors and the validation each one applies (a candidate that fails validation is not a finding):

==============  ==============================================================================
type            rule
==============  ==============================================================================
email           ``local@domain.tld``; domain labels non-empty, TLD alphabetic (RFC 5321 shape)
phone           CN mobile ``1[3-9]x`` + 8 digits, optional ``+86``/``0086``, spaces/dashes in
                3-4-4 groups (MIIT numbering plan); international numbers that start with ``+``
                and have 8-15 digits (ITU-T E.164); NANP ``(555) 123-4567`` / ``555-123-4567``
                with separators; CN landlines with an area code ``010-88886666``. A bare digit
                run is never a phone, so years, dates, times, money and ids like ``D1:3`` pass.
cn_id           18 characters, region code (GB/T 2260 province prefix), a real birth date in
                1900-2099, ISO 7064 MOD 11-2 check character (GB 11643-1999).
bank_card       13-19 digits, contiguous or in 4-digit (or Amex 4-6-5) groups, first digit 2-6
                (ISO/IEC 7812 major industry identifiers of payment cards), Luhn checksum.
passport        one or two letters and 6-8 digits (``E12345678``, ``Z1234567``), 9 digits or a
                9-character serial, only within a short window of a passport keyword
                ("passport", "护照", "パスポート", ...).
ip              public IPv4/IPv6 validated by :mod:`ipaddress`; loopback, unspecified, internal
                (RFC 1918, 6598, 3927, 4193, 4291) and documentation or benchmark (RFC 5737, 3849,
                2544) addresses identify nobody and are skipped (:data:`_INTERNAL_NETWORKS`).
api_key,        :mod:`hindsight.secrets`: provider token formats (cloud, Git hosting, model hubs,
token,          chat platforms, payment providers, JWTs), PEM private keys, URL credentials,
private_key,    credential words in context ("password hunter2", "密码是X", "logging in as X
password        with Y", "PIN 0917", "验证码482913") and random-looking values after key words.
iban            ISO 13616 account numbers (``DE44 5001 ...``) with the MOD 97-10 check.
ip (not)        four-part version numbers ("version 1.2.3.4", "升级到2.10.4.1") and netmasks.
==============  ==============================================================================

Default actions (DESIGN.md section 6 lists the actions; the split is the issue's): personal data
(email, phone, cn_id, bank_card, iban, passport, ip) is redacted; secrets (api_key, token, private_key,
password) block the whole message. ``keep`` (report but leave the text alone) is our addition so an
operator can switch one type off without losing the count.

Text handling: no ``\\b`` word boundaries (Python treats CJK characters as word characters, so
``\\b`` fails in "号码13812345678"); boundaries are explicit ASCII look-arounds. Full-width ASCII
(``１３８``, ``＠``, ``：``) is folded to ASCII one character for one character before matching,
so offsets stay valid and findings point into the original text.

Overlaps: a finding whose action is ``block`` always wins (a redaction must never hide a secret);
otherwise the longest span wins, then the type order of :data:`TYPE_PRIORITY`.
"""

from __future__ import annotations

import bisect
import ipaddress
import re
import unicodedata
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date
from types import MappingProxyType
from typing import Final, Literal, get_args

from hindsight.folding import simplified
from hindsight.secrets import TEST_CARDS, TEST_CONTEXT_CHARS, TEST_CONTEXT_RE, detect_secrets

Action = Literal["redact", "mask", "block", "keep"]
"""What to do with a finding: replace, mask to the last 4 characters, refuse the message, or keep."""

PiiType = Literal[
    "email",
    "phone",
    "cn_id",
    "bank_card",
    "iban",
    "passport",
    "ip",
    "api_key",
    "token",
    "private_key",
    "password",
]
"""Every type a detector can report."""

PII_TYPES: Final[tuple[str, ...]] = get_args(PiiType)
"""All detector types, as strings (for validation and docs)."""
ACTIONS: Final[tuple[str, ...]] = get_args(Action)
"""All actions, as strings (DESIGN.md section 6: redact, mask, block; ``keep`` is ours)."""
SECRET_TYPES: Final[frozenset[str]] = frozenset({"api_key", "token", "private_key", "password"})
"""Secret types (DESIGN.md section 6: "API keys/tokens/passwords"); block reason ``secret:<type>``."""

DEFAULT_ACTIONS: Final[Mapping[PiiType, Action]] = MappingProxyType(
    {
        "email": "redact",
        "phone": "redact",
        "cn_id": "redact",
        "bank_card": "redact",
        "iban": "redact",
        "passport": "redact",
        "ip": "redact",
        "api_key": "block",
        "token": "block",
        "private_key": "block",
        "password": "block",
    }
)
"""Default action per type: personal data is redacted, secrets block (DESIGN.md section 6 + issue)."""

TYPE_PRIORITY: Final[tuple[PiiType, ...]] = (
    "private_key",
    "api_key",
    "token",
    "password",
    "cn_id",
    "bank_card",
    "iban",
    "email",
    "phone",
    "passport",
    "ip",
)
"""Tie-break order for overlapping findings of equal length (our choice: most specific first)."""

_RANK: Final[Mapping[PiiType, int]] = MappingProxyType({t: i for i, t in enumerate(TYPE_PRIORITY)})

MASK_KEEP: Final[int] = 4
"""``mask`` keeps this many trailing characters (issue: "keep last 4 chars, e.g. ****1234")."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One detected span: ``text[start:end]`` of the original input is a ``type``.

    ``text`` holds the raw matched value; it is left out of ``repr`` so a stray log line of a
    finding never prints the PII it describes (DESIGN.md section 6: nothing unredacted in logs).
    """

    type: PiiType
    start: int
    end: int
    text: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class RedactionResult:
    """Outcome of :func:`redact`.

    ``text`` has every finding replaced per its action (blocked spans are redacted too, so even
    the quarantine copy never carries the secret); ``blocked`` says the message must not be stored;
    ``block_reasons`` names the blocking types, never their values: ``secret:<type>`` for secrets,
    ``block:<type>`` for a personal-data type an operator set to ``block``.
    """

    text: str
    findings: tuple[Finding, ...]
    blocked: bool
    block_reasons: tuple[str, ...]


# ---------------------------------------------------------------------------------------------
# Text folding: full-width ASCII (U+FF01-U+FF5E) and the ideographic space map 1:1 to ASCII.

_FOLD_TABLE: Final[Mapping[int, int]] = MappingProxyType(
    {
        cp: 0x30 + unicodedata.decimal(chr(cp))
        for cp in range(0x80, 0x10000)
        if unicodedata.category(chr(cp)) == "Nd"
    }
    | {cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F)}
    | {0x3000: 0x20, 0x00A0: 0x20}
)


def _fold(text: str) -> str:
    """Fold full-width ASCII to ASCII, the decimal digits of every script to ASCII digits (Devanagari
    "५ ८ ३ १", Arabic-Indic, Bengali, Thai ...: a code is a code in any script's digits) and Traditional
    Chinese to Simplified (the credential words are listed in Simplified: "密碼" is "密码"), one
    character for one, so offsets are unchanged."""
    return text if text.isascii() else simplified(text).translate(_FOLD_TABLE)


# ---------------------------------------------------------------------------------------------
# Helpers

_Span = tuple[PiiType, int, int]
_Detector = Callable[[str], Iterator[_Span]]


def _digits(value: str) -> str:
    return "".join(c for c in value if c in "0123456789")


# ---------------------------------------------------------------------------------------------
# email

_EMAIL_RE: Final = re.compile(r"(?<![A-Za-z0-9._%+\-])([A-Za-z0-9._%+\-]{1,64})@([A-Za-z0-9.\-]{1,253})")
_AT: Final = r"(?:\s*[\[({<]\s*at\s*[\])}>]\s*|\s+at\s+)"
_DOT: Final = r"(?:\s*[\[({<]\s*dot\s*[\])}>]\s*|\s+dot\s+|\.)"
_SPELLED_EMAIL_RE: Final = re.compile(
    r"(?<![A-Za-z0-9._%+\-])([A-Za-z0-9._%+\-]{1,64}(?:\s+dot\s+[A-Za-z0-9_%+\-]{1,64}){0,2})"
    + _AT
    + r"([A-Za-z0-9\-]{1,63}(?:"
    + _DOT
    + r"[A-Za-z0-9\-]{1,63}){0,3})"
    + _DOT
    + r"([A-Za-z]{2,24})(?![A-Za-z0-9])",
    re.IGNORECASE,
)
"""An address spelled out against scrapers: ``jdoe [at] fastmail [dot] fm``, ``li.wei at qq dot com``,
``priya dot raman at outlook dot com`` (a dot spelled in the local part too)."""
_AT_WORD_RE: Final = re.compile(r"(?<![A-Za-z])at(?![A-Za-z])", re.IGNORECASE)
"""What every spelled-out address contains (both ``_AT`` forms): the pre-filter of that detector."""
_MAIL_WORD_RE: Final = re.compile(r"e-?mail|mail|邮箱|邮件|郵箱|contact|reach|write\s+to", re.IGNORECASE)


def _detect_spelled_email(text: str) -> Iterator[_Span]:
    """Spelled-out addresses: bracketed ``[at]`` / ``(dot)`` always; the bare ``x at y dot com`` form
    only with a mail word in the 40 characters before and a ``.``, ``_``, ``+``, digit or spelled "dot"
    in the local part ("look at this dot com bubble" is prose)."""
    pos = 0
    while (m := _SPELLED_EMAIL_RE.search(text, pos)) is not None:
        bracketed = any(c in m.group() for c in "[({<")
        if bracketed or (
            (any(c in m.group(1) for c in "._+0123456789") or " dot " in m.group(1).lower())
            and _MAIL_WORD_RE.search(text, max(0, m.start() - 40), m.start())
        ):
            yield "email", m.start(), m.end()
            pos = m.end()
        else:  # "accountant at li.wei at qq dot com": the address may start at a later word
            pos = m.start(1) + len(m.group(1).split()[0]) + 1


def _detect_email(text: str) -> Iterator[_Span]:
    for m in _EMAIL_RE.finditer(text):
        local, domain = m.group(1), m.group(2)
        start = m.start(1) + (len(local) - len(local.lstrip(".")))
        domain = domain.rstrip(".-")
        labels = domain.split(".")
        if start >= m.start(1) + len(local) or len(labels) < 2:
            continue
        if any(not lab or lab.startswith("-") or lab.endswith("-") for lab in labels):
            continue
        tld = labels[-1]
        if not (2 <= len(tld) <= 24 and tld.isalpha()):
            continue
        yield "email", start, m.start(2) + len(domain)


# ---------------------------------------------------------------------------------------------
# phone

_CN_MOBILE_RE: Final = re.compile(
    r"(?<![0-9A-Za-z+])(?:(?:\+|00)86[ \-]?|\(\+?86\)[ \-]?)?"
    r"1[3-9][0-9][ \-]?[0-9]{4}[ \-]?[0-9]{4}(?![0-9A-Za-z])"
)
_INTL_PHONE_RE: Final = re.compile(
    r"(?<![0-9A-Za-z+])\+[1-9][0-9]{0,14}"
    r"(?:[ .\-]?\([0-9]{1,4}\)[0-9]{0,14}|[ .\-][0-9]{1,14}){0,6}(?![0-9A-Za-z])"
)
_NANP_RE: Final = re.compile(
    r"(?<![0-9A-Za-z+\-.])(?:1[ .\-])?(?:\([2-9][0-9]{2}\)[ ]?|[2-9][0-9]{2}[ .\-])"
    r"[2-9][0-9]{2}[ .\-][0-9]{4}(?![0-9A-Za-z]|[.\-][0-9A-Za-z])"
)
_CN_LANDLINE_RE: Final = re.compile(
    r"(?<![0-9A-Za-z\-])(?:\(0[1-9][0-9]{1,2}\)[ ]?|0[1-9][0-9]{1,2}-)"
    r"(?:[2-9][0-9]{6,7}|[2-9][0-9]{2,3}[ \-][0-9]{4})(?![0-9A-Za-z]|-[0-9])"
)

E164_MIN_DIGITS: Final[int] = 8
"""Fewest digits (country code included) for a ``+`` number; shorter is a score, not a phone (ours)."""
E164_MAX_DIGITS: Final[int] = 15
"""ITU-T E.164: at most 15 digits including the country code."""


_PHONE_WORD_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:phone|mobile|cell|tel|telephone|call|ring|text|sms|whatsapp|signal|number|contact|"
    r"reach|dial|landline|fax|telefon\w*|telefone|telefono|teléfono|téléphone|tél|telephone|handy\w*|mobil\w*|"
    r"móvil|movil|celular|cellulare|portable|telemóvel|telemovel|numéro|numero|número|nummer|kontakt|"
    r"contacto|contatto|llám\w*|llam\w*|appel\w*|durchwahl|festnetz|hotline|helpline|switchboard|"
    r"(?:direct|office|work|home|private|personal|desk)[\s\-]+lines?|lignes?\s+(?:directe|fixe)s?|"
    r"l[ií]neas?\s+(?:directa|fija)s?|linea\s+(?:diretta|fissa)|"
    # more languages: vi, id, sv/da/no, fi, tr, pl, cs, el, ru/uk, hi, ar, he, th
    r"điện\s+thoại|số\s+đt|sđt|di\s+động|telepon|ponsel|nomor\s+hp|mobilnummer|puhelin\w*|telefon\s+numara\w*|cep\s+(?:telefonu|numara\w*)|"
    r"komórk\w*|mobil|τηλέφωνο|κινητό|телефон\w*|мобильн\w*|फ़ोन|फोन|मोबाइल|هاتف|جوال|טלפון|"
    r"נייד|โทรศัพท์|เบอร์โทร|"
    # nl, sk/hr/sl, sw, ms, bn, ta, fa/ur, and the verbs "call" of he and ar
    r"telefoon\w*|mobiel\w*|gsm|telef[oó]n\w*|mobitel\w*|simu|nombor|ফোন|মোবাইল|தொலைபேசி|கைபேசி|"
    r"تلفن|موبایل|فون|התקשר\w*|תתקשר\w*|להתקשר|חייג\w*|اتصل\w*|"
    # ca, lt, lv, ka, hy, si, km, lo, my, ml, te, kn, gu, pa, ps, af, is, ga, cy, mt, zu, mn
    r"telèfon|telefonas|tālru\w*|ტელეფონ\w*|հեռախոս\w*|දුරකථන|ទូរស័ព្ទ|ໂທລະສັບ|ဖုန်း|ഫോൺ|ఫోన్|ಫೋನ್|ફોન|"
    r"ਫ਼ੋਨ|ਫੋਨ|تلیفون|selfoon|sími|guthán|ffôn|mowbajl|inombolo|утас\w*)(?![A-Za-z])|"
    r"(?<=[a-z])nummer(?![A-Za-z])|电话|手机|致电|联系|号码|電話|手機|聯繫|號碼|手提|"
    r"携帯|連絡|전화|휴대폰|연락처",
    re.IGNORECASE,
)
_NATIONAL_PHONE_RE: Final = re.compile(
    # a hyphen before the number only after a letter of another script: Hebrew's prefixes ("ל-052-...")
    r"(?<![0-9A-Za-z+./])(?<![0-9A-Za-z+\-./\s]-)(?<!^-)"
    r"0[1-9][0-9]{0,4}(?:[ \-]?[0-9]{2,4}){1,4}(?![0-9A-Za-z]|[.\-/][0-9A-Za-z])"
)
_NO_TRUNK_PHONE_RE: Final = re.compile(
    r"(?<![0-9A-Za-z+\-./:])(?:[1-9][0-9]{1,3}(?:[ \-.][0-9]{2,4}){2,4}|[1-9][0-9]{8,9})"
    r"(?![0-9A-Za-z]|[.\-/:][0-9A-Za-z])"
)
"""A national number without a trunk 0 (Spain ``612 34 56 78``, Italy ``347 123 4567``), taken only right
after a phone word and with 9-12 digits."""
_GENERIC_NUMBER_WORD_RE: Final = re.compile(
    r"number|numéro|numero|número|nummer|contact|kontakt|contacto|contatto|reach|号码|號碼|联系|聯繫|連絡",
    re.IGNORECASE,
)
"""Phone words that name any number or contact: enough beside a number with a trunk 0, not without."""
PHONE_WORD_WINDOW: Final[int] = 40
"""Characters after a phone word searched for a national-format number (ours: one clause)."""
NATIONAL_MIN_DIGITS: Final[int] = 9
NATIONAL_MAX_DIGITS: Final[int] = 12
"""National numbers with a trunk prefix 0 have 9-12 digits (UK 07700 900123, DE 030 901820, FR 06 12
34 56 78; ITU-T E.164 national significant numbers plus the trunk 0)."""


_EXTENSION_RE: Final = re.compile(
    r"\s*(?:ext\.?|extension|x|转|轉|分机|分機)\s*[0-9]{1,6}(?![0-9])", re.IGNORECASE
)
"""An extension after a number ("(415) 683-2291 ext. 204", "5489 2210转806"): part of the number."""


def _with_extension(text: str, start: int, end: int) -> _Span:
    ext = _EXTENSION_RE.match(text, end)
    return "phone", start, ext.end() if ext is not None else end


_TOLL_FREE_RE: Final = re.compile(
    r"(?:1)?(?:800|888|877|866|855|844|833)[0-9]{7}|400[0-9]{7}|0800[0-9]{6,7}|0808[0-9]{7}|0805[0-9]{6}"
)
"""Toll-free and shared-cost service numbers: NANP 8XX (FCC 47 CFR 52.101), China's 400 / 800 lines and
the European freephone ranges with a trunk 0 (UK 0800 / 0808, Germany 0800, France 0800 / 0805)."""
_CN_400_RE: Final = re.compile(r"400[0-9]{7}")
"""China's 400 numbers: enterprise service lines by assignment (MIIT number plan), never a person's."""
_SERVICE_LINE_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:hotline|helpline|toll[\s\-]?free|customer\s+(?:service|care|support)|support\s+line|"
    r"service\s+line|call\s+cent(?:er|re))(?![A-Za-z])|客服|热线|熱線|服务电话|服務電話|售后|售後|全国统一",
    re.IGNORECASE,
)
"""Words that present a number as a company's service line, not a person's phone."""
SERVICE_LINE_CHARS: Final[int] = 40
"""Characters before a toll-free number searched for a service word (ours: about one clause)."""
_ZH_DIGITS: Final = "零〇一二三四五六七八九幺两"
_ZH_DIGIT_MAP: Final = str.maketrans(_ZH_DIGITS, "0012345678912")
_ZH_SPOKEN_NUMBER_RE: Final = re.compile(
    f"[{_ZH_DIGITS}](?:[，,、 \\-]?[{_ZH_DIGITS}]){{10}}(?![{_ZH_DIGITS}])"
)
"""A mobile number spoken in Chinese digits ("幺三九，二二零八，六七一五": speech-to-text output), after a
phone word; it must read as a CN mobile number (幺 and 两 are the spoken one and two)."""


def _service_line(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` is a toll-free number presented as a company's service line; a
    Chinese 400 number always is (only enterprises are assigned them), so one number is treated alike
    wherever it stands in a text ("请致电4008-123-456 ... 热线4008-123-456")."""
    digits = _digits(text[start:end])
    if _CN_400_RE.fullmatch(digits):
        return True
    return bool(_TOLL_FREE_RE.fullmatch(digits)) and bool(
        _SERVICE_LINE_RE.search(text, max(0, start - SERVICE_LINE_CHARS), start)
    )


_EN_DIGIT_WORD: Final = r"(?:zero|oh|one|two|three|four|five|six|seven|eight|nine)"
_EN_SPOKEN_NUMBER_RE: Final = re.compile(
    rf"(?<![A-Za-z]){_EN_DIGIT_WORD}(?:[ ,\-]+{_EN_DIGIT_WORD}){{9,11}}(?![A-Za-z])", re.IGNORECASE
)
"""A phone number read out digit by digit in English, 10-12 digit words ("six one seven, five five five,
zero one four two": a call transcript), after a phone word."""
SPOKEN_PHONE_WINDOW: Final[int] = 120
"""Characters after a phone word where a number read out must end (ours: a question and the next
speaker's answer)."""


def _detect_spoken_phone(text: str) -> Iterator[_Span]:
    english = _EN_SPOKEN_NUMBER_RE.search(text) is not None
    if english:
        for word in _PHONE_WORD_RE.finditer(text):
            hi = min(len(text), word.end() + SPOKEN_PHONE_WINDOW)
            for m in _EN_SPOKEN_NUMBER_RE.finditer(text, word.end(), hi):
                yield "phone", m.start(), m.end()
    if _ZH_SPOKEN_NUMBER_RE.search(text) is None:
        return
    for word in _PHONE_WORD_RE.finditer(text):
        hi = min(len(text), word.end() + PHONE_WORD_WINDOW)
        for m in _ZH_SPOKEN_NUMBER_RE.finditer(text, word.end(), hi):
            spoken = re.sub(r"[，,、 \-]", "", m.group()).translate(_ZH_DIGIT_MAP)
            if _CN_MOBILE_RE.fullmatch(spoken):
                yield "phone", m.start(), m.end()


_ID_BEFORE_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:run|build|job|pipeline|order|ticket|issue|invoice|tracking|commit|trace|request|txn|"
    r"transaction|awb|waybill|consignment|shipment|parcel|seguimiento|suivi|rastreio|rastreamento|"
    r"sendungs(?:nummer)?)\s*(?:id|no\.?|number)?\s*[:#：]?\s*$|"
    r"(?:编号|订单号?|单号|工单号?|流水号|运单号?|بوليصة(?:\s+الشحن)?)\s*[:#：]?\s*$",
    re.IGNORECASE,
)
"""Words right before an 11-digit number that make it an identifier ("CI run 13290045871", "订单号
13312345678"), not a CN mobile number."""


_ARITHMETIC_AFTER_RE: Final = re.compile(
    r"\s*(?:除以|乘以|加上|减去|[×÷*^]|的(?:平方|立方|余数|因数|质因数|倒数)|"
    r"(?:divided|multiplied)\s+by|times|plus|minus|mod(?:ulo)?|squared|cubed)(?![A-Za-z])",
    re.IGNORECASE,
)
_ARITHMETIC_BEFORE_RE: Final = re.compile(
    r"(?:除以|乘以|加上|减去|[×÷*^]|(?<![A-Za-z])(?:(?:divided|multiplied)\s+by|times|plus|minus))\s*$",
    re.IGNORECASE,
)
"""An operator beside an 11-digit number makes it an operand ("13817624459 除以 7 的余数", "7 times
13817624459"), not a CN mobile number; "/", "-" and "加" stay out (two numbers "a/b", "加我微信")."""


def _operand(text: str, start: int, end: int) -> bool:
    """Whether the number ``text[start:end]`` is an operand: an operator beside it and no phone word in
    the clause before it ("call 13817624459 plus the extension" is a phone)."""
    return (
        _ARITHMETIC_AFTER_RE.match(text, end) is not None
        or _ARITHMETIC_BEFORE_RE.search(text, max(0, start - 16), start) is not None
    ) and _PHONE_WORD_RE.search(text, max(0, start - PHONE_WORD_WINDOW), start) is None


def _no_trunk_numbers(text: str, start: int, hi: int) -> Iterator[_Span]:
    """Trunk-less national numbers starting within 16 characters after a phone word ending at ``start``
    ("móvil es 612 34 56 78", "teléfono: 612345678"); not after an order or a passport word."""
    for m in _NO_TRUNK_PHONE_RE.finditer(text, start, hi):
        before = text[max(0, m.start() - 40) : m.start()]
        if (
            m.start() > start + 16
            or _ID_BEFORE_RE.search(before[-24:])
            or _PASSPORT_KEYWORD_RE.search(before)
        ):
            continue
        if NATIONAL_MIN_DIGITS <= len(_digits(m.group())) <= NATIONAL_MAX_DIGITS and not _service_line(
            text, m.start(), m.end()
        ):
            yield _with_extension(text, m.start(), m.end())


_TABLE_DELIMITERS: Final = (",", ";", "\t", "|")
"""Column separators of the tables agents paste (CSV, TSV, Markdown)."""


_PHONE_HEADER_RE: Final = re.compile(
    r"(?:(?:home|work|office|mobile|cell|private|personal|contact|business)[\s_\-]*)?"
    r"(?:phone|telephone|tel\.?|mobile|cell\s?phone|mobile\s?phone|phone\s?(?:number|no\.?|#))|"
    r"whatsapp|handy(?:nummer)?|telefon\w*|teléfono|téléphone|tél\.?|móvil|movil|celular|cellulare|"
    r"telemóvel|portable|mobil(?:nummer|telefon)?|手机(?:号码?)?|电话(?:号码)?|联系电话|手機|電話",
    re.IGNORECASE,
)
"""Table headers naming a phone column (not "text", "number" or a bare "cell": a column of SMS texts, any
numbers or a network's cells)."""


def _column_phones(text: str) -> Iterator[_Span]:
    """National-format numbers in a table's phone column (a CSV export of a CRM, a Markdown table): the
    header names the column ("phone", "Mobile", "电话"), so each row's cell is a number without a phone
    word of its own ("10483,Owen Pryce,owenpryce88@btinternet.com,07981 224305,Cardiff"). A row with
    another number of cells (a quoted separator) is skipped."""
    lines = text.split("\n")
    offsets = [0]
    for line in lines[:-1]:
        offsets.append(offsets[-1] + len(line) + 1)
    for h, header in enumerate(lines[:-1]):
        delimiter = next((d for d in _TABLE_DELIMITERS if header.count(d) >= 1), None)
        if delimiter is None:
            continue
        names = header.split(delimiter)
        columns = [i for i, n in enumerate(names) if _PHONE_HEADER_RE.fullmatch(n.strip(" *_`"))]
        if not columns:
            continue
        for row, start in zip(lines[h + 1 :], offsets[h + 1 :], strict=True):
            cells = row.split(delimiter)
            if len(cells) != len(names):
                continue
            positions = [start]
            for cell in cells[:-1]:
                positions.append(positions[-1] + len(cell) + 1)
            for i in columns:
                value = cells[i].strip(" \"'")
                at = positions[i] + cells[i].find(value)
                if (
                    (_NATIONAL_PHONE_RE.fullmatch(value) or _NO_TRUNK_PHONE_RE.fullmatch(value))
                    and NATIONAL_MIN_DIGITS <= len(_digits(value)) <= NATIONAL_MAX_DIGITS
                    and not _service_line(text, at, at + len(value))
                ):
                    yield "phone", at, at + len(value)
        return


_PHONE_WORD_AFTER_RE: Final = re.compile(
    r"[^.。!！?？\n0-9]{0,12}?(?:(?<![^\W\d_])(?:numara\w*|ara(?:y|yın|yınız|yabilir)\w*|telefon\w*)|"
    r"(?:に|まで|へ)(?:お)?(?:電話|連絡)|(?:로|으로|에|에게)\s?(?:전화|연락)|पर\s+(?:कॉल|फोन|फ़ोन))",
    re.IGNORECASE,
)
"""A phone word right after a national number (a dozen characters at most between), in the languages
that put it there: Turkish ("numarasından arayabilirsiniz"), Japanese ("までお電話"), Korean ("로
전화"), Hindi ("पर कॉल")."""
_CODE_GROUP_BEFORE_RE: Final = re.compile(
    r"(?<![A-Za-z0-9])(?=[A-Z0-9]*[A-Z])(?=[A-Z0-9]*[0-9])[A-Z0-9]{2,}[ \-]$"
)
"""A group of capitals and digits right before a number (``1Z 4F7 2W9 03 8815 2207``, a UPS tracking
number): the number continues that code, it is not a phone number."""


def _national_phone(text: str, start: int, end: int) -> bool:
    """Whether the national-format number ``text[start:end]`` (found beside a phone word) can be a phone:
    9-12 digits, not a service line, not the tail of a code or of a tracking or order number."""
    if not NATIONAL_MIN_DIGITS <= len(_digits(text[start:end])) <= NATIONAL_MAX_DIGITS:
        return False
    if _service_line(text, start, end) or _CODE_GROUP_BEFORE_RE.search(text, max(0, start - 12), start):
        return False
    return _ID_BEFORE_RE.search(text[max(0, start - 24) : start]) is None


def _numbers_before_a_phone_word(text: str) -> Iterator[_Span]:
    """National numbers followed by a phone word, as Turkish, Japanese, Korean and Hindi put it ("beni
    0532 418 27 60 numarasından arayabilirsiniz", "090-1234-5678までお電話ください")."""
    for m in _NATIONAL_PHONE_RE.finditer(text):
        if _PHONE_WORD_AFTER_RE.match(text, m.end()) and _national_phone(text, m.start(), m.end()):
            yield _with_extension(text, m.start(), m.end())


def _detect_phone(text: str) -> Iterator[_Span]:
    for pattern in (_CN_MOBILE_RE, _NANP_RE, _CN_LANDLINE_RE):
        for m in pattern.finditer(text):
            if pattern is _CN_MOBILE_RE and (
                _ID_BEFORE_RE.search(text[max(0, m.start() - 24) : m.start()])
                or _operand(text, m.start(), m.end())
            ):
                continue
            if not _service_line(text, m.start(), m.end()):
                yield _with_extension(text, m.start(), m.end())
    # a national format only next to a phone word; most texts hold no national-format number at all, and
    # one search for it is far cheaper than finding every phone word (a long alternation)
    national = _NATIONAL_PHONE_RE.search(text) is not None or _NO_TRUNK_PHONE_RE.search(text) is not None
    for word in _PHONE_WORD_RE.finditer(text) if national else ():
        hi = min(len(text), word.end() + PHONE_WORD_WINDOW)
        for m in _NATIONAL_PHONE_RE.finditer(text, word.end(), hi):
            if _national_phone(text, m.start(), m.end()):
                yield _with_extension(text, m.start(), m.end())
        if not _GENERIC_NUMBER_WORD_RE.fullmatch(word.group()):
            # "number", "号码" alone name any number; a number without a trunk 0 needs a phone word
            yield from _no_trunk_numbers(text, word.end(), hi)

    if national:
        yield from _numbers_before_a_phone_word(text)
    for m in _INTL_PHONE_RE.finditer(text):
        if E164_MIN_DIGITS <= len(_digits(m.group())) <= E164_MAX_DIGITS:
            yield _with_extension(text, m.start(), m.end())
    if national and "\n" in text:
        yield from _column_phones(text)


# ---------------------------------------------------------------------------------------------
# cn_id (GB 11643-1999)

_CN_ID_RE: Final = re.compile(
    r"(?<![0-9A-Za-z])([1-9][0-9]{5}) ?((?:19|20)[0-9]{2})(0[1-9]|1[0-2])(0[1-9]|[12][0-9]|3[01]) ?"
    r"([0-9]{3}[0-9Xx])(?![0-9A-Za-z])"
)
_CN_ID_WEIGHTS: Final[tuple[int, ...]] = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_CN_ID_CHECK: Final[str] = "10X98765432"
_CN_PROVINCES: Final[frozenset[str]] = frozenset(
    {"11", "12", "13", "14", "15", "21", "22", "23", "31", "32", "33", "34", "35", "36", "37", "41", "42"}
    | {"43", "44", "45", "46", "50", "51", "52", "53", "54", "61", "62", "63", "64", "65", "71", "81", "82"}
    | {"83"}
)
"""GB/T 2260 province-level codes (71 Taiwan, 81 Hong Kong, 82 Macau, 83 Taiwan residence permit)."""


CN_ID_MIN_YEAR: Final[int] = 1900
"""Earliest plausible birth year in a CN resident ID (our choice)."""
CN_ID_MAX_YEAR: Final[int] = 2099
"""Latest birth year the ID pattern accepts (our choice; a pure check cannot know today's date)."""


def cn_id_check_char(first17: str) -> str:
    """ISO 7064 MOD 11-2 check character of the first 17 digits (GB 11643-1999 section 8.2)."""
    total = sum(int(c) * w for c, w in zip(first17, _CN_ID_WEIGHTS, strict=True))
    return _CN_ID_CHECK[total % 11]


def is_valid_cn_id(value: str) -> bool:
    """True when ``value`` (18 chars) has a known region, a real birth date and a correct check char."""
    if len(value) != 18 or not value[:17].isdigit() or not value[:17].isascii():
        return False
    if value[:2] not in _CN_PROVINCES or not CN_ID_MIN_YEAR <= int(value[6:10]) <= CN_ID_MAX_YEAR:
        return False
    try:
        date(int(value[6:10]), int(value[10:12]), int(value[12:14]))
    except ValueError:
        return False
    return cn_id_check_char(value[:17]) == value[17].upper()


def _detect_cn_id(text: str) -> Iterator[_Span]:
    for m in _CN_ID_RE.finditer(text):
        if is_valid_cn_id("".join(m.groups())):
            yield "cn_id", m.start(), m.end()


# ---------------------------------------------------------------------------------------------
# bank_card (ISO/IEC 7812, Luhn)

_CARD_RE: Final = re.compile(
    r"(?<![0-9A-Za-z])(?:[2-6][0-9]{12,18}|[2-6][0-9]{3}(?:[ \-][0-9]{4}){2,3}(?:[ \-][0-9]{1,4})?"
    r"|[2-6][0-9]{3}[ \-][0-9]{6}[ \-][0-9]{4,5})(?![0-9A-Za-z])"
)
CARD_MIN_DIGITS: Final[int] = 13
"""ISO/IEC 7812: shortest primary account number we accept (older 13-digit Visa numbers)."""
CARD_MAX_DIGITS: Final[int] = 19
"""ISO/IEC 7812: primary account numbers have at most 19 digits."""


def luhn_valid(digits: str) -> bool:
    """Luhn (mod 10) check over a string of ASCII digits (ISO/IEC 7812-1 annex B)."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return bool(digits) and total % 10 == 0


def issuer_ok(digits: str) -> bool:
    """Whether the leading digits and the length fit a payment-card issuer range (ISO/IEC 7812
    major industry identifiers 2-6 as the networks allocate them): 2-series only Mastercard
    2221-2720 and Mir 2200-2204 (16 digits); 3-series only Amex 34/37 (15), JCB 35 (16-19) and
    Diners 30/36/38/39 (14-19); 4 any length 13-19; 5 and 6 14-19 (13 digits is the legacy Visa
    length only: a 13-digit number from 6 is an EAN-13 barcode, China's GS1 prefixes are 690-699)."""
    n = len(digits)
    if digits[0] == "2":
        return n == 16 and (2221 <= int(digits[:4]) <= 2720 or 2200 <= int(digits[:4]) <= 2204)
    if digits[0] == "3":
        two = digits[:2]
        if two in ("34", "37"):
            return n == 15
        if two == "35":
            return 16 <= n <= 19
        return two in ("30", "36", "38", "39") and 14 <= n <= 19
    return digits[0] == "4" or n >= 14


def _card_ok(candidate: str) -> bool:
    digits = _digits(candidate)
    return CARD_MIN_DIGITS <= len(digits) <= CARD_MAX_DIGITS and issuer_ok(digits) and luhn_valid(digits)


def _test_card(text: str, start: int, end: int) -> bool:
    """A published test card number presented as one ("in test mode use 4242 4242 4242 4242"), or
    beside another that is ("... 4242 4242 4242 4242 ... To simulate a decline, use 4000 0000 0000
    0002"); the same number given as "my card" is still a card (a user may really be using it to pay)."""
    if _digits(text[start:end]) not in TEST_CARDS:
        return False
    if TEST_CONTEXT_RE.search(text, max(0, start - TEST_CONTEXT_CHARS), start) or TEST_CONTEXT_RE.search(
        text, end, end + TEST_CONTEXT_CHARS
    ):
        return True
    return any(
        m.start() != start
        and _digits(m.group()) in TEST_CARDS
        and TEST_CONTEXT_RE.search(text, max(0, m.start() - TEST_CONTEXT_CHARS), m.start())
        for m in _CARD_RE.finditer(text)
    )


_GDS_PAYMENT_RE: Final = re.compile(r"(?<![A-Za-z0-9])FP[ ]?CC[A-Z]{2}([0-9]{13,19})(?![0-9])")
"""A card in an airline reservation's form of payment, glued to its two-letter card code (IATA PNR
format, ``FP CCAX378228786877788/0329``): no word boundary before it for :data:`_CARD_RE` to see."""


def _detect_bank_card(text: str) -> Iterator[_Span]:
    for m in _GDS_PAYMENT_RE.finditer(text) if "CC" in text else ():
        if _card_ok(m.group(1)):
            yield "bank_card", m.start(1), m.end(1)
    for m in _CARD_RE.finditer(text):
        candidate = m.group()
        if _test_card(text, m.start(), m.end()) or _inside_iban(text, m.start(), m.end()):
            continue
        if _card_ok(candidate):
            yield "bank_card", m.start(), m.end()
            continue
        # "4111 1111 1111 1111 2023": the optional last group may have swallowed a neighbour.
        cut = max(candidate.rfind(" "), candidate.rfind("-"))
        if cut > 0 and _card_ok(candidate[:cut]):
            yield "bank_card", m.start(), m.start() + cut


# ---------------------------------------------------------------------------------------------
# iban (ISO 13616: country code, two check digits, up to 30 alphanumerics; mod-97 check)

_IBAN_RE: Final = re.compile(
    r"(?<![A-Za-z0-9])([A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?)(?![A-Za-z0-9])"
)


def iban_valid(value: str) -> bool:
    """ISO 13616 / ISO 7064 MOD 97-10: move the first four characters to the end, letters to 10..35,
    the number mod 97 must be 1."""
    compact = value.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


EXAMPLE_IBANS: Final[frozenset[str]] = frozenset(
    {
        "AD1200012030200359100100",
        "AE070331234567890123456",
        "AL47212110090000000235698741",
        "AT611904300234573201",
        "AZ21NABZ00000000137010001944",
        "BA391290079401028494",
        "BE68539007547034",
        "BG80BNBG96611020345678",
        "BH67BMAG00001299123456",
        "BR1800360305000010009795493C1",
        "BR9700360305000010009795493P1",
        "BY13NBRB3600900000002Z00AB00",
        "CH9300762011623852957",
        "CR05015202001026284066",
        "CY17002001280000001200527600",
        "CZ6508000000192000145399",
        "DE02120300000000202051",
        "DE75512108001245126199",
        "DE44500105175407324931",
        "DE89370400440532013000",
        "DK5000400440116243",
        "DO28BAGR00000001212453611324",
        "EE382200221020145685",
        "EG380019000500000000263180002",
        "ES9121000418450200051332",
        "FI2112345600000785",
        "FO6264600001631634",
        "FR1420041010050500013M02606",
        "FR7630006000011234567890189",
        "GB29NWBK60161331926819",
        "GB33BUKB20201555555555",
        "GB82WEST12345698765432",
        "GE29NB0000000101904917",
        "GI75NWBK000000007099453",
        "GL8964710001000206",
        "GR1601101250000000012300695",
        "GT82TRAJ01020000001210029690",
        "HR1210010051863000160",
        "HU42117730161111101800000000",
        "IE29AIBK93115212345678",
        "IL620108000000099999999",
        "IQ98NBIQ850123456789012",
        "IS140159260076545510730339",
        "IT60X0542811101000000123456",
        "JO94CBJO0010000000000131000302",
        "KW81CBKU0000000000001234560101",
        "KZ86125KZT5004100100",
        "LB62099900000001001901229114",
        "LC55HEMM000100010012001200023015",
        "LI21088100002324013AA",
        "LT121000011101001000",
        "LU280019400644750000",
        "LV80BANK0000435195001",
        "MC5811222000010123456789030",
        "MD24AG000225100013104168",
        "ME25505000012345678951",
        "MK07250120000058984",
        "MR1300020001010000123456753",
        "MT84MALT011000012345MTLCAST001S",
        "MU17BOMM0101101030300200000MUR",
        "NL91ABNA0417164300",
        "NO9386011117947",
        "PK36SCBL0000001123456702",
        "PL61109010140000071219812874",
        "PS92PALS000000000400123456702",
        "PT50000201231234567890154",
        "QA58DOHB00001234567890ABCDEFG",
        "RO49AAAA1B31007593840000",
        "RS35260005601001611379",
        "SA0380000000608010167519",
        "SC18SSCB11010000000000001497USD",
        "SE4550000000058398257466",
        "SI56263300012039086",
        "SK3112000000198742637541",
        "SM86U0322509800000000270100",
        "ST68000100010051845310112",
        "SV62CENR00000000000000700025",
        "TL380080012345678910157",
        "TN5910006035183598478831",
        "TR330006100519786457841326",
        "UA213223130000026007233566001",
        "VA59001123000012345678",
        "VG96VPVG0000012345678901",
        "XK051212012345678906",
    }
)
"""IBANs published as examples: the SWIFT IBAN Registry's example per country (also the ones
Wikipedia and the banks' developer docs print) and a few German and British ones common in
tutorials. Like :data:`~hindsight.secrets.TEST_CARDS`, one is left alone only when presented as an
example (:func:`_example_iban`); the same number given as "my IBAN" is still redacted."""


def _example_iban(text: str, start: int, end: int) -> bool:
    """A published example IBAN with an example / test / docs word within
    :data:`TEST_CONTEXT_CHARS` on either side ("un IBAN di esempio è IT60 X054 ...")."""
    if text[start:end].replace(" ", "") not in EXAMPLE_IBANS:
        return False
    return bool(
        TEST_CONTEXT_RE.search(text, max(0, start - TEST_CONTEXT_CHARS), start)
        or TEST_CONTEXT_RE.search(text, end, end + TEST_CONTEXT_CHARS)
    )


def _inside_iban(text: str, start: int, end: int) -> bool:
    """Whether ``[start, end)`` lies inside a valid IBAN (its digit groups can pass Luhn as a card:
    ``DE75 5121 0800 1245 1261 99``); an example IBAN left unredacted must not become a card."""
    if "IBAN" not in text.upper() and not _IBAN_RE.search(text, max(0, start - 12), end):
        return False
    return any(
        m.start(1) <= start and end <= m.end(1) and iban_valid(m.group(1))
        for m in _IBAN_RE.finditer(text, max(0, start - 50), min(len(text), end + 50))
    )


def _detect_iban(text: str) -> Iterator[_Span]:
    for m in _IBAN_RE.finditer(text):
        if iban_valid(m.group(1)) and not _example_iban(text, m.start(1), m.end(1)):
            yield "iban", m.start(1), m.end(1)


# ---------------------------------------------------------------------------------------------
# passport

_PASSPORT_KEYWORD_RE: Final = re.compile(
    r"passport|护照|護照|旅券|パスポート|여권|pasaporte|passeport|reisepass|passaporto|passaporte|paszport|"
    r"pasaport|paspoort|paspor|cestovní\s+pas|hộ\s*chiếu|διαβατηρ|паспорт|पासपोर्ट|جواز\s*(?:ال)?سفر|"
    r"证件号|證件號|travel\s+document",
    re.IGNORECASE,
)
_PASSPORT_NUMBER_RE: Final = re.compile(
    r"(?<![0-9A-Za-z])(?:[A-Z]{1,2}[ -]?[0-9]{6,8}|[0-9]{9}|[0-9]{2}[ -][0-9]{7}|"
    r"[0-9]{2} ?[0-9]{2}[ -][0-9]{6}|[0-9]{2} ?[0-9]{2},?\s*(?:номер|№)\s*[0-9]{6}|[А-ЯЁ]{2}[ -]?[0-9]{6}|"
    r"(?=(?:[A-Z]*[0-9]){3})(?=[0-9]*[A-Z])[A-Z0-9]{9})(?![0-9A-Za-z])"
)
"""One or two letters and 6-8 digits, the letters optionally set apart by a space or hyphen
(China's E12345678, India's Z1234567, Brazil's FZ123456, the UK's and many others' two letters + 7
digits), 9 digits, a series and number written apart (Russia's international ``75 4812937``: 2 + 7
digits; its internal ``45 07 123456``: 4 + 6, also written ``серия 45 07 номер 123456``), two
Cyrillic letters and 6 digits (Ukraine's and Belarus's older booklets, ``КВ 123456``), or 9
upper-case letters and digits with 3+ digits (German ``C01X7RT42``-style serials); only beside a
passport word."""
PASSPORT_WINDOW_BEFORE: Final[int] = 24
"""Characters before a passport keyword searched for a number ("E12345678 is my passport"; ours)."""
PASSPORT_WINDOW_AFTER: Final[int] = 48
"""Characters around a passport keyword searched for a number (our choice: one short clause)."""


_SSR_DOCS_RE: Final = re.compile(r"SSR[ ]DOCS[ ][A-Z0-9]{2}[ ]?[A-Z]{2}[0-9]/P/[A-Z]{2,3}/([A-Z0-9]{5,15})/")
"""The passport in an airline reservation's secure-flight line (IATA ``SSR DOCS``: document type ``P``,
issuing country, then the number: ``SSR DOCS YY HK1/P/USA/561204873/USA/14MAR88/F/...``)."""


def _detect_passport(text: str) -> Iterator[_Span]:
    for m in _SSR_DOCS_RE.finditer(text) if "SSR" in text else ():
        yield "passport", m.start(1), m.end(1)
    for kw in _PASSPORT_KEYWORD_RE.finditer(text):
        lo = max(0, kw.start() - PASSPORT_WINDOW_BEFORE)
        hi = min(len(text), kw.end() + PASSPORT_WINDOW_AFTER)
        for m in _PASSPORT_NUMBER_RE.finditer(text, lo, hi):
            yield "passport", m.start(), m.end()


# ---------------------------------------------------------------------------------------------
# ip

_IPV4_RE: Final = re.compile(r"(?<![0-9A-Za-z.])(?:[0-9]{1,3}\.){3}[0-9]{1,3}(?![0-9A-Za-z]|\.[0-9])")
_IPV6_RE: Final = re.compile(
    r"(?<![0-9A-Za-z:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:(?:[0-9]{1,3}\.){3}[0-9]{1,3}|[0-9A-Fa-f]{1,4})?"
    r"(?![0-9A-Za-z:]|\.[0-9])"
)
IPV6_MIN_HEX_DIGITS: Final[int] = 4
"""An IPv6 candidate needs this many hex digits, so prose like "A::B" is not an address (ours)."""


_INTERNAL_NETWORKS: Final = tuple(
    ipaddress.ip_network(n)
    for n in (
        "10.0.0.0/8",  # RFC 1918 private
        "172.16.0.0/12",
        "192.168.0.0/16",
        "100.64.0.0/10",  # RFC 6598 carrier-grade NAT (shared by a provider's subscribers)
        "169.254.0.0/16",  # RFC 3927 link-local
        "fc00::/7",  # RFC 4193 unique local
        "fe80::/10",  # RFC 4291 link-local
        "192.0.2.0/24",  # RFC 5737 documentation (TEST-NET-1, -2, -3)
        "198.51.100.0/24",
        "203.0.113.0/24",
        "2001:db8::/32",  # RFC 3849 documentation
        "198.18.0.0/15",  # RFC 2544 benchmarking
    )
)
"""Address ranges that identify no person or household on the internet: the ranges every home and
office network reuses (such an address names a machine inside some network: "mysql -h 10.0.4.12",
"default via 192.168.1.1"; five of the seven outside authors of the held-out sets left them
unlabelled) and the ranges reserved for documentation and benchmarks, which are never assigned
("use the documentation ranges 192.0.2.0/24 and 2001:db8::/32 in slides")."""


def _identifies_host(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """A public address: not loopback, unspecified or in :data:`_INTERNAL_NETWORKS`."""
    if address.is_loopback or address.is_unspecified:
        return False
    return not any(address.version == n.version and address in n for n in _INTERNAL_NETWORKS)


_VERSION_CONTEXT_RE: Final = re.compile(
    r"(?:(?<![A-Za-z])(?:v|ver|version|versions|release|build|firmware|driver|sdk|kernel|patch|bootloader|"
    r"bios|uefi|baseband|modem|rom|os|"
    r"upgrade[ds]?(?:\s+paths?)?|upgrading|downgrade[ds]?|chrome|firefox|safari|windows|ios|android|macos|python|node|"
    r"chapter|section|sec\.?|§|clause|article|paragraph|appendix|figure|fig\.?|table|step|item|rule|part)"
    r"(?:[\s:=\"']+(?:from|to|is|was|of)?)?[\s:=\"']*|(?:版本号?|固件|驱动|内核|补丁)(?:版本)?[是为:：\s从]*|"
    r"(?:升级|更新|降级)(?:(?:到|至)了?|路径|路线)\s*[:：]?\s*|[A-Za-z][A-Za-z0-9]*[\-_])$",
    re.IGNORECASE,
)
"""Words right before a dotted quad that make it a version or a section number ("version 1.2.3.4",
"升级到2.10.4.1", "Chapter 10.3.4.1"); a four-part version number is not an address (issue 10)."""
_NAME_BEFORE_RE: Final = re.compile(r"(?<![A-Za-z0-9])[A-Z][A-Za-z0-9+#\-]{2,}\s$|第\s?$|[章节条]\s?$")
"""A product or document name right before the dotted quad ("Kubernetes 1.29.3.2"): a version,
unless the quad is a private address (10/8, 172.16/12, 192.168/16: "Graylog 10.2.3.4" is a host) or
an address word is near (:data:`_ADDRESS_CONTEXT_RE`)."""
_ADDRESS_CONTEXT_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:ip|ips|ipv4|ipv6|wan|lan|address\w*|host\w*|server\w*|ping\w*|ssh|port|dns|gateway|subnet|router|proxy|"
    r"vpn|connect\w*|reach\w*|listen\w*|bind|http|https|tcp|udp|curl|firewall|whitelist\w*|allowlist\w*|"
    r"block\w*|vm|nat)(?![A-Za-z])|服务器|地址|端口|主机|网关|内网|外网|公网|局域网|宽带",
    re.IGNORECASE,
)
_RELEASE_CONTEXT_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:release\s+notes?|changelog|change\s+log|(?:introduced|fixed|regressed)\s+in|"
    r"upgrade\s+(?:from|to)|since\s+version)(?![A-Za-z])|更新日志|发布说明|版本说明",
    re.IGNORECASE,
)
"""Release-note words anywhere in the text ("Release notes: controller 10.2.0.17 fixes ... introduced in
10.2.0.15"): a dotted quad with no address word near is a version, private range or not."""
ADDRESS_CONTEXT_CHARS: Final[int] = 40
"""Characters on each side of a dotted quad searched for an address word (ours: about one clause)."""


_VERSION_SUBJECT_RE: Final = re.compile(
    r"(?:(?<![A-Za-z])(?:firmware|version|bootloader|release|build)(?![A-Za-z])|固件|版本)"
    r"[^.。!！?？;；\n,，]{0,32}?(?:(?<![A-Za-z])(?:is|was|reads|shows|says)(?![A-Za-z])|[:：]|是|为|显示)\s*$",
    re.IGNORECASE,
)
"""A clause whose subject is a version and whose copula leads to the dotted quad."""
_HOST_WORD_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:ip|ips|ipv4|ipv6|address\w*|host\w*|server\w*|ssh|dns|vpn|proxy|node|box|machine)(?![A-Za-z])|"
    r"地址|服务器|主机|节点",
    re.IGNORECASE,
)
"""Words that make such a clause about a machine ("the build server is 10.0.0.5"): an address after all."""


def _is_netmask(address: ipaddress.IPv4Address) -> bool:
    """255.255.255.0-style masks (ones then zeros) identify no host."""
    bits = int(address)
    return bits != 0 and (bits | (bits - 1)) == 0xFFFFFFFF and str(address).startswith("255.")


_RANGE_GAP_RE: Final = re.compile(
    r"\s*(?:to|through|thru|and|or|,|->|→|–|—|~|至|到)\s*(?:then\s+)?$|\s+-\s+$", re.IGNORECASE
)
"""Between two versions of a range or a list ("10.1.4.3 to 10.2.0.17", "升级 2.1.0.3 到 2.2.0.1")."""


_LONG_VERSION_RE: Final = re.compile(
    r"(?<![0-9.])[0-9]+(?:\.[0-9]+){4,}|(?<![0-9.])[0-9]+(?:\.[0-9]+){3}[_\-+][0-9A-Za-z]"
)
"""A dotted number no address has (five or more parts, or four with a build suffix: ``3.0.0.4.388_24198``)."""


MIN_DOTS_FOR_FAMILY: Final[int] = 6
"""A quad and a longer version have six dots at least: fewer and no family check is needed."""


def _version_families(text: str) -> set[tuple[str, ...]]:
    """First three parts of the text's unmistakable versions: a dotted quad sharing them is a sibling
    version ("firmware 3.0.0.4.388_24198 ... or do I need 3.0.0.6?")."""
    return {tuple(m.group().split(".")[:3]) for m in _LONG_VERSION_RE.finditer(text)}


def _detect_ip(text: str) -> Iterator[_Span]:
    release_notes = _RELEASE_CONTEXT_RE.search(text) is not None
    families = _version_families(text) if text.count(".") >= MIN_DOTS_FOR_FAMILY else set()
    version_end = -1
    for m in _IPV4_RE.finditer(text):
        try:
            v4 = ipaddress.IPv4Address(m.group())
        except ValueError:
            continue
        if (
            tuple(m.group().split(".")[:3]) in families
            or _is_netmask(v4)
            or _VERSION_CONTEXT_RE.search(text[max(0, m.start() - 24) : m.start()])
        ):
            version_end = m.end()
            continue
        near = text[max(0, m.start() - ADDRESS_CONTEXT_CHARS) : m.end() + ADDRESS_CONTEXT_CHARS]
        if (
            version_end >= 0
            and _RANGE_GAP_RE.fullmatch(text, version_end, m.start())
            and not _ADDRESS_CONTEXT_RE.search(near)
        ):
            version_end = m.end()
            continue  # the second end of a version range
        subject = _VERSION_SUBJECT_RE.search(text[max(0, m.start() - 48) : m.start()])
        if subject is not None and not _HOST_WORD_RE.search(subject.group()):
            version_end = m.end()
            continue  # "the firmware on my router is 1.0.2.105": the clause is about a version
        named = _NAME_BEFORE_RE.search(text[max(0, m.start() - 24) : m.start()])
        versioned = (named and not v4.is_private) or release_notes
        if versioned and not _ADDRESS_CONTEXT_RE.search(near):
            version_end = m.end()
            continue
        if _identifies_host(v4):
            yield "ip", m.start(), m.end()
    for m in _IPV6_RE.finditer(text):
        candidate = m.group()
        if candidate.endswith(":") and not candidate.endswith("::"):
            candidate = candidate[:-1]
        if sum(c in "0123456789abcdefABCDEF" for c in candidate) < IPV6_MIN_HEX_DIGITS:
            continue
        try:
            v6 = ipaddress.IPv6Address(candidate)
        except ValueError:
            continue
        if _identifies_host(v6):
            yield "ip", m.start(), m.start() + len(candidate)


# ---------------------------------------------------------------------------------------------
# secrets: hindsight.secrets (provider formats, keyword in context, entropy with context)


def _detect_secrets(text: str) -> Iterator[_Span]:
    yield from detect_secrets(text)


# ---------------------------------------------------------------------------------------------
# Public API

DETECTORS: Final[tuple[_Detector, ...]] = (
    _detect_secrets,
    _detect_cn_id,
    _detect_bank_card,
    _detect_iban,
    _detect_email,
    _detect_phone,
    _detect_passport,
    _detect_ip,
)
"""Every detector, run in this order; overlaps are resolved afterwards, so order does not matter."""


_EFFECTIVE_CACHE: dict[tuple[tuple[str, str], ...], Mapping[PiiType, Action]] = {}


def _effective_actions(actions: Mapping[PiiType, Action] | None) -> Mapping[PiiType, Action]:
    if not actions:
        return DEFAULT_ACTIONS
    key = tuple(sorted(actions.items()))
    cached = _EFFECTIVE_CACHE.get(key)
    if cached is not None:
        return cached
    unknown_types = set(actions) - set(PII_TYPES)
    if unknown_types:
        raise ValueError(f"unknown PII types {sorted(unknown_types)}; known: {list(PII_TYPES)}")
    bad = {t: a for t, a in actions.items() if a not in ACTIONS}
    if bad:
        raise ValueError(f"unknown actions {bad}; known: {list(ACTIONS)}")
    effective = MappingProxyType({**DEFAULT_ACTIONS, **actions})
    if len(_EFFECTIVE_CACHE) < 64:  # a process has a handful of policies; never grow without bound
        _EFFECTIVE_CACHE[key] = effective
    return effective


MIN_DIGITS: Final[int] = 7
"""Fewest digits any numeric type has (a passport number: one letter + 7-8 digits or 9 digits; a
phone: 7+; cards, ids and IBANs more): a text with fewer skips those detectors, except the passport
detector beside a passport word (a mixed serial such as ``C01X7RT42`` has 3+ digits)."""
PASSPORT_MIN_DIGITS: Final[int] = 3


def candidates(text: str, *, prefilter: bool = True) -> list[Finding]:
    """Every detector's raw findings over ``text``, overlaps not yet resolved.

    With ``prefilter`` (the default) a detector is skipped when the text lacks what every one of its
    matches contains (:data:`MIN_DIGITS` digits for numbers, ``@`` for e-mail, four digits and a dot
    or a colon for addresses, a provider's literal prefix for its tokens, a credential word for the
    keyword layers); ``prefilter=False`` runs everything and is the reference the pre-filter is
    tested against.
    """
    folded = _fold(text)
    spans: list[_Span] = list(detect_secrets(folded, prefilter=prefilter))
    digits = sum(map(folded.count, "0123456789")) if prefilter else MIN_DIGITS
    if digits >= MIN_DIGITS:
        for numeric in (_detect_cn_id, _detect_bank_card, _detect_iban, _detect_phone, _detect_passport):
            spans.extend(numeric(folded))
    elif digits >= PASSPORT_MIN_DIGITS and _PASSPORT_KEYWORD_RE.search(folded):
        spans.extend(_detect_passport(folded))
    spans.extend(_detect_spoken_phone(folded))
    if not prefilter or "@" in folded:
        spans.extend(_detect_email(folded))
    if not prefilter or _AT_WORD_RE.search(folded):
        spans.extend(_detect_spelled_email(folded))
    if not prefilter or (digits >= 4 and "." in folded) or ":" in folded:
        spans.extend(_detect_ip(folded))
    return [Finding(kind, s, e, text[s:e]) for kind, s, e in spans]


def _resolve(findings: list[Finding], effective: Mapping[PiiType, Action]) -> tuple[Finding, ...]:
    if len(findings) < 2:
        return tuple(findings)
    ordered = sorted(
        findings,
        key=lambda f: (effective[f.type] != "block", f.start - f.end, _RANK[f.type], f.start),
    )
    starts: list[int] = []  # kept spans, sorted and disjoint, so neighbours decide an overlap
    kept: list[Finding] = []
    for f in ordered:
        i = bisect.bisect_right(starts, f.start)
        if (i > 0 and kept[i - 1].end > f.start) or (i < len(kept) and kept[i].start < f.end):
            continue
        starts.insert(i, f.start)
        kept.insert(i, f)
    return tuple(kept)


def resolve_overlaps(
    findings: list[Finding], actions: Mapping[PiiType, Action] | None = None
) -> tuple[Finding, ...]:
    """Keep non-overlapping findings: blocking types first, then the longest, then :data:`TYPE_PRIORITY`.

    Returned in text order. ``actions`` (merged over :data:`DEFAULT_ACTIONS`) decides which types block.
    """
    return _resolve(findings, _effective_actions(actions))


def detect(text: str, actions: Mapping[PiiType, Action] | None = None) -> tuple[Finding, ...]:
    """Findings in ``text``, overlaps resolved (see :func:`resolve_overlaps`), in text order."""
    return _resolve(candidates(text), _effective_actions(actions))


def mask(value: str) -> str:
    """``****`` plus the last :data:`MASK_KEEP` characters (all stars when the value is that short)."""
    return "****" + (value[-MASK_KEEP:] if len(value) > MASK_KEEP else "")


def redact(text: str, actions: Mapping[PiiType, Action] | None = None) -> RedactionResult:
    """Apply the per-type action to every finding in ``text``.

    ``actions`` overrides :data:`DEFAULT_ACTIONS` per type (unknown types or actions raise
    ``ValueError``). Text outside findings is kept byte for byte. Idempotent: redacting the output
    again finds nothing new.
    """
    effective = _effective_actions(actions)
    findings = _resolve(candidates(text), effective)
    if not findings:
        return RedactionResult(text=text, findings=(), blocked=False, block_reasons=())
    parts: list[str] = []
    reasons: list[PiiType] = []
    pos = 0
    for f in findings:
        action = effective[f.type]
        parts.append(text[pos : f.start])
        if action == "mask":
            parts.append(mask(f.text))
        elif action == "keep":
            parts.append(f.text)
        else:
            parts.append(f"[REDACTED:{f.type}]")
        if action == "block" and f.type not in reasons:
            reasons.append(f.type)
        pos = f.end
    parts.append(text[pos:])
    return RedactionResult(
        text="".join(parts),
        findings=findings,
        blocked=bool(reasons),
        block_reasons=tuple(f"secret:{t}" if t in SECRET_TYPES else f"block:{t}" for t in reasons),
    )
