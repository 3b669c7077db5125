"""The entry point of :mod:`hindsight.secrets`: :func:`detect_secrets` runs the layers.

Each layer runs only when the text holds a word or literal every one of its matches contains (one
case-insensitive Aho-Corasick scan, :func:`_layers_needed`); a span overlapping one of an earlier,
more specific layer is dropped, and so is one inside a documentation key presented as an example
(``AKIAIOSFODNN7EXAMPLE``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

import ahocorasick_rs

from hindsight.secrets.keyword import _keyword_spans
from hindsight.secrets.login import _login_spans
from hindsight.secrets.structured import (
    _entropy_spans,
    _flag_spans,
    _note_line_spans,
    _structured_spans,
    _wifi_spans,
)
from hindsight.secrets.values import _TRAILING, _Span

_TOKEN_EDGE: Final = frozenset(" \t\n\"'`“”‘’「」()（）<>[]{},，;；")


_EXAMPLE_CONTEXT_RE: Final = re.compile(
    r"(?<![A-Za-z0-9/])(?:e\.g\.|examples?|sample|docs?|documentation|looks?\s+like|placeholder|such\s+as)"
    r"(?![A-Za-z0-9])|示例|例如|比如|样例|文档",
    re.IGNORECASE,
)
EXAMPLE_CONTEXT_WINDOW: Final[int] = 80
"""Characters before a key searched for a word that presents it as an example (ours)."""
_EXAMPLE_TOKEN_RE: Final = re.compile(r"[A-Za-z0-9/+_\-]*EXAMPLE[A-Za-z0-9/+_\-]*")
"""A documentation key's run (``AKIAIOSFODNN7EXAMPLE``, ``wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY``)."""


def _in_example_token(text: str, start: int, end: int) -> bool:
    """Whether the span lies in a documentation key presented as one: a run of 16+ characters with
    ``EXAMPLE`` in it (``AKIAIOSFODNN7EXAMPLE``, AWS's documentation keys), even when a detector took
    only part of the run, with "for example" / "looks like" / "docs" / "示例" in the 80 characters
    before. The same key offered as "my access key" is blocked: a user may paste a real key that a
    tutorial named that way, and a leak costs more than a false block."""
    lo = start
    while start > 0 and text[start - 1] not in _TOKEN_EDGE:
        start -= 1
    while end < len(text) and text[end] not in _TOKEN_EDGE:
        end += 1
    token = text[start:end].rstrip(_TRAILING)
    if len(token) < 16 or "EXAMPLE" not in token:
        return False
    while _EXAMPLE_CONTEXT_RE.search(text, max(0, lo - EXAMPLE_CONTEXT_WINDOW), lo) is None:
        # a block of documentation keys: the word before the first one presents the next ones too
        # ("Example from the AWS docs:\naws_access_key_id = AKIA...EXAMPLE\naws_secret_access_key = ...")
        earlier = [
            t
            for t in _EXAMPLE_TOKEN_RE.finditer(text, max(0, lo - EXAMPLE_CONTEXT_WINDOW), lo)
            if len(t.group()) >= 16
        ]
        if not earlier:
            return False
        lo = earlier[-1].start()
    return True


_WORD_CLASSES: Final[dict[str, tuple[str, ...]]] = {
    # every alternative of _KEYWORD_RE and _GLUED_RE contains one of these (lower case)
    "keyword": (
        *["pass", "pwd", "pw", "pin", "code", "combo", "combination", "cvv", "cvc", "otp", "key", "secret"],
        *["lock", "门禁", "门锁"],  # _DEVICE_CODE_RE (its other words contain "key" / "码")
        *["código", "codice", "код", "kod", "kód", "kood", "answer", "mdp", "xác", "コード", "인증"],
        *["token", "session", "sessid", "码", "口令", "暗号", "密钥", "秘钥", "私钥", "秘密", "令牌"],
        *["phrase", "words", "助记", "助記", "短语"],  # _RECOVERY_WORD_RE (its codes contain "code"/"码")
        *[
            "kennwort",
            "contrase",
            "clave",
            "senha",
            "wachtwoord",
            "parola",
            "пароль",
            "パスワード",
            "暗証番号",
        ],
        *["비밀번호", "비번", "암호", "答案"],
        *["lösenord", "losenord", "adgangskode", "passord", "salasana", "heslo", "hasło", "haslo", "jelsz"],
        *["parolă", "şifre", "sifre", "κωδικ", "mật khẩu", "kata sandi", "पासवर्ड", "كلمة", "رمز", "סיסמ"],
        *["पिन", "ओटीपी", "कोड"],
        *["memorable", "security word", "secret word", "laluan", "nenosiri", "lozink"],
        *["கடவுச்சொல்", "পাসওয়ার্ড", "پاس", "msimbo", "ওটিপি", "কোড", "ஓடிபி", "குறியீடு", "کوڈ", "ٹی"],
        "รหัสผ่าน",
        "masterauth",
        *["contrasenya", "contrasinal", "pasahitz", "parool", "slaptažod", "gesl", "лозинк", "парол", "пин"],
        *["fjalëkalim", "lykilorð", "pasfhocal", "cyfrinair", "wagwoord", "iphasiwedi", "furaha", "kalmar"],
        *["şifrə", "parol", "нууц", "პაროლ", "գաղտնաբառ", "මුරපදය", "ពាក្យសម្ងាត់", "ລະຫັດຜ່ານ", "စကားဝှက်"],
        *["പാസ്", "పాస్", "ಪಾಸ್", "પાસવર્ડ", "ਪਾਸਵਰਡ", "پټنوم", "លេខកូដ"],
    ),
    # every alternative of _CONTEXT_WORD_RE (entropy with context)
    "context": (
        *[
            "key",
            "secret",
            "credential",
            "auth",
            "token",
            "password",
            "passphrase",
            "bearer",
            "signature",
            "private",
        ],
        *["密钥", "秘钥", "私钥", "令牌", "凭证", "凭据", "密码", "口令"],
    ),
    # every login phrase (_LOGIN_AS_RE, _CRED_PAIR_RE, _USER_PASS_RE)
    "login": (
        *["log", "sign", "auth", "connect", "ssh", "cred", "user", "account", "mail", "phone", " id "],
        *["账号", "帐号", "用户名", "凭证", "账密"],
        *[" como ", " come ", " comme ", " en tant que ", " als ", " jako ", " как ", " под ", " som "],
    ),
}
"""Which layer a word in the text makes necessary; a layer whose words are all absent cannot match."""


def _word_index() -> tuple[ahocorasick_rs.AhoCorasick, tuple[frozenset[str], ...]]:
    owners: dict[str, set[str]] = {}
    for layer, words in _WORD_CLASSES.items():
        for word in words:
            owners.setdefault(word, set()).add(layer)
    keys = sorted(owners)
    automaton = ahocorasick_rs.AhoCorasick(keys, matchkind=ahocorasick_rs.MatchKind.Standard)
    return automaton, tuple(frozenset(owners[k]) for k in keys)


_WORDS, _WORD_OWNERS = _word_index()


def _layers_needed(text: str) -> set[str]:
    """The word-gated layers ``text`` may need (one case-insensitive Aho-Corasick scan)."""
    needed: set[str] = set()
    for index, _, _ in _WORDS.find_matches_as_indexes(text.lower(), overlapping=True):
        needed |= _WORD_OWNERS[index]
        if len(needed) == len(_WORD_CLASSES):
            break
    return needed


def detect_secrets(text: str, *, prefilter: bool = True) -> Iterator[_Span]:
    """Every secret candidate in ``text`` (already full-width folded): ``(type, start, end)``.

    A more specific layer wins: a span overlapping one of an earlier layer (provider formats, then
    Wi-Fi QR payloads, then keyword in context, then login phrases, then command-line flags and
    ``user / password`` pairs, then entropy) is dropped; overlaps within a layer are left to
    :func:`hindsight.pii.resolve_overlaps` (the longest wins). A span inside a documentation key
    (``AKIAIOSFODNN7EXAMPLE``) is dropped. ``prefilter=False`` runs every
    pattern even when its required literals are absent (the reference the pre-filter is tested against).
    """
    taken: list[tuple[int, int]] = []
    needed = _layers_needed(text) if prefilter else set(_WORD_CLASSES)
    layers = [_structured_spans(text, gated=prefilter)]
    if not prefilter or "WIFI:" in text:
        layers.append(_wifi_spans(text))
    if "keyword" in needed:
        layers.append(_keyword_spans(text))
    if "login" in needed:
        layers.append(_login_spans(text, gated=prefilter))
    if not prefilter or " -" in text or " / " in text:
        layers.append(_flag_spans(text))
    if not prefilter or "\n" in text:
        layers.append(_note_line_spans(text))
    if "context" in needed:
        layers.append(_entropy_spans(text))
    for layer in layers:
        found = [
            s
            for s in layer
            if not any(s[1] < e and b < s[2] for b, e in taken) and not _in_example_token(text, s[1], s[2])
        ]
        taken.extend((s[1], s[2]) for s in found)
        yield from found
