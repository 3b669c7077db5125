"""Value shapes for every layer of :mod:`hindsight.secrets`, and the span type the layers yield.

Whether a token can be the credential after a credential word (:func:`credential_like`), looks
generated (:func:`entropy`, :func:`random_letters`), looks made up by a person
(:func:`made_up_shape`, :func:`typed_made_up`, :func:`strong_password_shape`,
:func:`character_classes`) or is a name made of words (:func:`_word_shaped`).

Not secrets (tested): version numbers, OIDs, UUIDs (:func:`_looks_like_id`), masked values
(``sk-XXXX...``, ``****1234``, ``138****5678``) and placeholders (``<your-api-key>``,
``[REDACTED:...]``): :func:`is_masked`.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Final, Literal

from hindsight.secrets.stopwords import _STOP_VALUES

SecretType = Literal["api_key", "token", "private_key", "password"]
_Span = tuple[SecretType, int, int]

_TRAILING: Final = ".,;:?"
"""Trailing characters stripped from a value (a sentence's end); ``!`` stays: over-redacting one
character is harmless, leaving the last character of ``Winter2024!`` in clear is not."""

MIN_ENTROPY_BITS: Final[float] = 3.5
"""Shannon entropy per character a context value needs (ours; random base62 of 20+ chars has
~4.2-4.5, English words ~2.5-3.3, so 3.5 separates them with margin on the dev split)."""

_UUID_RE: Final = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")

_MASKED_RE: Final = re.compile(r"[xX*•·…]{3,}|\.{3,}|\*{2,}")
_PLACEHOLDER_RE: Final = re.compile(
    r"\[REDACTED(?::[a-z_]+)?\]|<[^<>]{1,40}>|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|%\([a-z_]+\)s|"
    r"\{\{?[a-z_ ]+\}\}?|"
    r"(?:your|my|the)[_\-]?(?:api[_\-]?)?(?:key|token|secret|password)(?:[_\-]?here)?(?:[_\-][A-Za-z0-9]*)*|"
    r"(?:xxx+|changeme|example|placeholder|dummy|redacted|hidden|none|null|undefined|todo|tbd|"
    r"[0-9]*(?:YYYY|MMDD|NNN)[0-9A-Z]*|"
    r"\*+|•+|…|\.\.\.)",
    re.IGNORECASE,
)


def entropy(value: str) -> float:
    """Shannon entropy of ``value`` in bits per character (0.0 for an empty string)."""
    if not value:
        return 0.0
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


def is_masked(value: str) -> bool:
    """True for masked or placeholder values (``sk-XXXX...``, ``****1234``, ``<api-key>``, ``${TOKEN}``)."""
    return bool(_MASKED_RE.search(value)) or _PLACEHOLDER_RE.fullmatch(value) is not None


def _has_letter_and_digit(value: str) -> bool:
    return any(c.isascii() and c.isalpha() for c in value) and any(c.isdigit() for c in value)


def credential_like(value: str, *, kind: str) -> bool:  # noqa: PLR0911 (one return per rule)
    """Whether ``value`` (the token after a credential word) can be the credential itself.

    ``kind`` is ``pin`` (PIN / OTP / verification code / CVV: 3-10 digits), ``password`` (any
    non-descriptive token: a digit, a symbol, mixed case or a non-dictionary shape) or ``key``
    (8+ characters with letters and digits, or 16+ random-looking characters).
    """
    v = value.strip(_TRAILING)
    if len(v) < 3 or is_masked(v) or v.lower() in _STOP_VALUES:
        return False
    if kind == "pin":
        digits = v.strip("#*").replace(" ", "").replace("-", "")
        return (
            (digits.isdigit() and 3 <= len(digits) <= 10)
            or (_has_letter_and_digit(v) and len(v) >= 4)
            or random_letters(v)
        )
    if kind == "key":
        if len(v) >= 8 and _has_letter_and_digit(v):
            return not _looks_like_id(v)
        return len(v) >= 16 and entropy(v) >= MIN_ENTROPY_BITS and not _looks_like_id(v)
    # password: anything that is not a plain lower-case dictionary-looking word, or one that ends the clause
    if not v.isascii():
        return any(c.isascii() and c.isalnum() for c in v) and len(v) >= 4
    if any(not c.isalpha() for c in v) or (any(c.isupper() for c in v[1:]) and any(c.islower() for c in v)):
        return True
    return len(v) >= 4


def random_letters(value: str) -> bool:
    """12+ ASCII letters with under a quarter vowels: generated, not a word (a mail provider's
    16-letter authorisation code ``xkqbnmrtpzdfhwae``; English words run ~40 % vowels, uniformly random
    letters ~19 %)."""
    if len(value) < 12 or not (value.isascii() and value.isalpha()):
        return False
    return sum(c in "aeiouAEIOU" for c in value) / len(value) < 0.25


def _looks_like_id(value: str) -> bool:
    """UUIDs, dotted versions and plain numbers are identifiers, not secrets."""
    if _UUID_RE.fullmatch(value):
        return True
    return bool(re.fullmatch(r"v?\d+(?:\.\d+){1,5}", value))


MIN_LATER_VALUE_CHARS: Final[int] = 6
"""Shortest value taken from a later sentence (ours): "3pm", "2025" and "100%" are not passwords."""


def _strong_value(value: str) -> bool:
    """A letter and a digit or a symbol, at least :data:`MIN_LATER_VALUE_CHARS` long: the shape of a
    password told in a sentence of its own, not of a time, a year or a share."""
    return (
        len(value) >= MIN_LATER_VALUE_CHARS
        and any(c.isalpha() for c in value)
        and _has_symbol_or_digit(value)
    )


def _has_symbol_or_digit(value: str) -> bool:
    return any(c.isdigit() or not c.isalnum() for c in value)


def made_up_shape(value: str) -> bool:
    """8-64 characters with all four classes (lower case, upper case, digit, symbol) and not a URL, an
    e-mail address, a path, an identifier or a masked or placeholder value: the shape of a password
    someone made up ("Biscuit2019!", "Kedr_Sibir_71"), which names, dates, versions and ticket numbers
    ("JohnSmith2", "INC-2041", "v2.3.1") do not have."""
    return (
        MIN_MADE_UP_CHARS <= len(value) <= MAX_MADE_UP_CHARS
        and character_classes(value) == ALL_CLASSES
        and "://" not in value
        and "/" not in value
        and "\\" not in value
        and _EMAIL_SHAPE_RE.fullmatch(value) is None
        and not is_masked(value)
        and not _looks_like_id(value)
    )


_TYPED_SYMBOLS: Final = frozenset("!@#$%^&*?~")
"""Symbols people type into passwords; model names, versions and encoded data (base64, hex) do not
have them (:func:`typed_made_up`, :func:`hindsight.secrets.structured._note_line_spans`)."""
_JOINERS: Final = frozenset("-.+")


def typed_made_up(value: str) -> bool:
    """:func:`made_up_shape` with a symbol people type into passwords (``!@#$%^&*?~``, or ``_`` in a
    value without ``-``, ``.`` or ``+``): model names, versions, tickets and dates join their parts with
    those instead ("ThinkPad-X1c", "Firefox-121.0b3", "SEC-Policy_v2", "03-Dec-2024"), and a value after
    an identifier word is the identifier ("PR Auth-Refactor#1182", "case Case#00412-Ab")."""
    if not made_up_shape(value):
        return False
    if _TYPED_SYMBOLS.intersection(value):
        return True
    return "_" in value and not _JOINERS.intersection(value)


MIN_MADE_UP_CHARS: Final[int] = 8
ALL_CLASSES: Final[int] = 4
"""Lower case, upper case, digits, symbols (:func:`character_classes`)."""
MAX_MADE_UP_CHARS: Final[int] = 64
_EMAIL_SHAPE_RE: Final = re.compile(r"[^@\s]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}")


def _shaped_like_password(value: str) -> bool:
    """A value named without a separator must look made up: a digit or a symbol, or capitals inside
    a word ("hunter2", "Blu3Whale$2026", "CorrectHorse"); a plain word is prose ("This is my password")."""
    if len(value) < 4 or is_masked(value) or _PLACEHOLDER_RE.fullmatch(value) or _looks_like_id(value):
        return False
    return any(not c.isalpha() for c in value) or (
        any(c.isupper() for c in value[1:]) and any(c.islower() for c in value)
    )


def strong_password_shape(value: str) -> bool:
    """8+ characters using at least three of: lower case, upper case, digits, symbols (the usual
    password composition rule, NIST SP 800-63B appendix A's description of composition policies)."""
    return len(value) >= 8 and character_classes(value) >= 3 and not is_masked(value)


def character_classes(value: str) -> int:
    """How many of lower case, upper case, digits and symbols (anything not alphanumeric) ``value`` uses."""
    return sum(
        (
            any(c.islower() for c in value),
            any(c.isupper() for c in value),
            any(c.isdigit() for c in value),
            any(not c.isalnum() for c in value),
        )
    )


_SEGMENT_RE: Final = re.compile(r"[A-Z]{2,}(?![a-z])|[A-Z]?[a-z]+|[0-9]+|[^A-Za-z0-9]+")
MIN_WORD_SEGMENT_CHARS: Final[float] = 4.0
"""Mean length of a value's case/digit runs above which it is a name made of words, not a generated
string: camel-case identifiers and algorithm names run 4-6 characters a segment
("sha256WithRSAEncryption": sha 256 With RSA Encryption, 4.6), uniformly random base62 strings about
1.6 (a run breaks at ~62 % of positions)."""


def _word_shaped(value: str) -> bool:
    """Whether ``value`` is built of word-like runs (see :data:`MIN_WORD_SEGMENT_CHARS`)."""
    segments = _SEGMENT_RE.findall(value)
    return bool(segments) and len(value) / len(segments) >= MIN_WORD_SEGMENT_CHARS
