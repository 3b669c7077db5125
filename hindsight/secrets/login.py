"""Login phrases (a layer of :mod:`hindsight.secrets`): the password given with a user name.

"logging in as X with Y", "username X password Y", "账号X 密码Y", "credentials: alice / hunter2",
"just use my email and Biscuit2019", "the pass is Tulip!Garden2024", "... Biscuit2019. use that to
log in" (Y and the named values are the secret, never the user name).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

from hindsight.secrets.values import (
    _TRAILING,
    _has_letter_and_digit,
    _shaped_like_password,
    _Span,
    credential_like,
    is_masked,
    strong_password_shape,
)

_LOGIN_AS_RE: Final = re.compile(
    r"(?:(?:log(?:ging|ged)?\s*(?:in|on)|sign(?:ing|ed)?\s*(?:in|on)|login)"
    r"(?:\s*(?:to|into|on|at)\s+[^\s,，.。]+(?:\s+[^\s,，.。]+){0,3}?)?|"
    r"authenticat(?:e|ing|ed)|connect(?:ing|ed)?|ssh(?:\s+in)?)\s+(?:as|with\s+(?:user(?:name)?|account|login))\s+"
    r"[\"'`“‘]?[^\s\"'`“”‘’,，]{1,64}[\"'`”’]?[\s,，]+(?:with|using|and|pass(?:word|phrase)?(?![A-Za-z])|pw|pwd|/|:)"
    r"(?:\s+(?:the\s+)?(?:password|passphrase|pw|pwd|pass|key|secret|credentials?))?(?:\s*(?:[:=]|is))?\s*"
    r"[\"'`“‘]?([^\s\"'`“”‘’,，;；。、]{3,128})",
    re.IGNORECASE,
)
_LOGIN_AS_OTHER_RE: Final = re.compile(
    r"(?<![^\W\d_])(?:"
    r"entra(?:r)?|inici(?:a|ar)\s+sesi[oó]n|acced(?:e|er|i)|con[eé]ctate|entre|acess(?:e|ar)|fa[cç]a\s+login|"
    r"logue|collegati|connecte[sz]?-(?:toi|vous)|identifie[sz]?-(?:toi|vous)|meld(?:e|et)?\s+(?:dich|euch|sich)|"
    r"log(?:ge)?\s+(?:dich|in)|inloggen|zaloguj\s+si[eę]|войди|зайди|залогинься|авторизуйся|logga\s+in"
    r")(?:\s+[^\s,，.。]+){0,4}?\s+(?:como|come|en\s+tant\s+que|comme|als|jako|как|под|som)\s+"
    r"[\"'`“‘]?[^\s\"'`“”‘’,，]{1,64}[\"'`”’]?\s+(?:con|com|avec|mit|met|z|с|med)\s+"
    r"(?:(?:la|el|a|o|le|il|dem|het|sua|su|tu|ta|hasłem|паролем|lösenordet|contraseña|senha|password|"
    r"mot\s+de\s+passe|passwort|wachtwoord|clave)\s+){0,2}[\"'`“‘]?([^\s\"'`“”‘’,，;；。、]{3,128})",
    re.IGNORECASE,
)
""""logging in as X with Y" in es, pt, it, fr, de, nl, pl, ru, sv ("Entra al panel como soporte con
Y", "melde dich als admin mit Y an"); the value must look made up (:func:`_shaped_like_password`)."""
_LOGIN_AS_WORDS: Final = (
    " como ",
    " come ",
    " comme ",
    " en tant que ",
    " als ",
    " jako ",
    " как ",
    " под ",
    " som ",
)
"""One of them is in every match of :data:`_LOGIN_AS_OTHER_RE` (the text is scanned only then)."""
_USER_PASS_RE: Final = re.compile(
    r"(?:user(?:name)?|login|account|账号|帐号|用户名)\s*[:=：]\s*[\"'`“‘]?[^\s\"'`“”‘’,，;；/]{1,64}[\"'`”’]?"
    r"\s*[,，;；/|]?\s*(?:and\s+)?(?:pass(?:word)?|pwd|pw|密码|口令)\s*[:=：]?\s*(?:是|为)?\s*"
    r"[\"'`“‘]?([^\s\"'`“”‘’,，;；。、]{3,128})",
    re.IGNORECASE,
)
"""``user alice / pass hunter2``; only used when a password word follows the user name."""
_USER_PASS_LOOSE_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:user(?:name)?|login|account)\s+[\"'`“‘]?[^\s\"'`“”‘’,，;；/:=]{1,64}[\"'`”’]?\s*[,，;；/|]\s*"
    r"(?:and\s+)?(?:pass(?:word)?|pwd|pw)\s+[\"'`“‘]?([^\s\"'`“”‘’,，;；。、]{3,128})",
    re.IGNORECASE,
)
"""``user root, pass Blu3Whale$2026`` (no separators): the value must look made up."""
_CRED_PAIR_RE: Final = re.compile(
    r"(?<![A-Za-z0-9])(?:credentials?|creds|login|凭证|账密|账号密码)\s*(?:are|is|[:=：]|是|为)\s*"
    r"[^\s:/,，]{1,64}\s*[:/]\s*([^\s\"'`“”‘’,，;；。、]{3,128})",
    re.IGNORECASE,
)
"""``credentials: alice / hunter2``, ``creds are admin:P@ss1``: the second half is the secret."""
_ID_AND_PASS_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:use|using|with|enter|type)\s+(?:my|the|our|his|her|your|their)\s+"
    r"(?:e-?mail(?:\s+address)?|user\s?name|login|account|phone(?:\s+number)?|id)\s+(?:and|\+|&|/|with)\s+"
    r"(?:the\s+password\s+)?[\"'`“‘]?([^\s\"'`“”‘’,，;；。]{4,64})",
    re.IGNORECASE,
)
"""A password named by what it is typed with: "just use my email and Biscuit2019" (must look made up)."""


_BARE_PASS_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:the|my|your|his|her|our|their)\s+pass\s*(?:is|was|[:=：])\s*[\"'`“‘]?([^\s\"'`“”‘’,，;；。、]{6,128})",
    re.IGNORECASE,
)
"""``the pass is Tulip!Garden2024``: "pass" for the password, only with a strong-password shape
("the pass is valid until May" is a ticket)."""


_USE_THAT_RE: Final = re.compile(
    r"[.,;:]?\s+(?:just\s+)?(?:use|type|enter)\s+(?:that|it|this)\s+"
    r"(?:to|for|when)\s+(?:you\s+)?(?:log|sign)(?:ging)?\s*(?:in|on|into)",
    re.IGNORECASE,
)
"""A value named afterwards: "... so Biscuit2019. use that to log into the pharmacy app" (the phrase is
found first, then the token right before it: a scan from every position costs 10x more)."""
_TOKEN_BEFORE_RE: Final = re.compile(r"(?<![A-Za-z0-9!@#$%^&*_\-+=~])([A-Za-z0-9!@#$%^&*_\-+=~]{6,64})$")


def _named_after_spans(text: str) -> Iterator[_Span]:
    for m in _USE_THAT_RE.finditer(text):
        token = _TOKEN_BEFORE_RE.search(text, max(0, m.start() - 64), m.start())
        if token is None:
            continue
        value = token.group(1).rstrip(_TRAILING)
        if _has_letter_and_digit(value) and not is_masked(value):
            yield "password", token.start(1), token.start(1) + len(value)


def _login_spans(text: str, *, gated: bool = True) -> Iterator[_Span]:
    # with ``gated``, each pattern runs only when a literal every one of its matches holds is in the
    # text (scanning a long alternation from every position is what costs; same spans on every line)
    low = text.lower()
    has_pass = not gated or "pass" in low or "pw" in low or "密码" in text or "口令" in text
    if not gated or (("log" in low or "sign" in low) and ("use" in low or "type" in low or "enter" in low)):
        yield from _named_after_spans(text)
    for m in _BARE_PASS_RE.finditer(text) if not gated or "pass" in low else ():
        value = m.group(1).rstrip(_TRAILING)
        if strong_password_shape(value):
            yield "password", m.start(1), m.start(1) + len(value)
    patterns = [
        pattern
        for pattern, present in (
            (_LOGIN_AS_RE, any(w in low for w in ("log", "sign", "authenticat", "connect", "ssh"))),
            (
                _CRED_PAIR_RE,
                "cred" in low or "login" in low or any(w in text for w in ("凭证", "账密", "账号密码")),
            ),
        )
        if present or not gated
    ]
    for pattern in patterns:
        for m in pattern.finditer(text):
            value = m.group(1).rstrip(_TRAILING)
            if credential_like(value, kind="password"):
                yield "password", m.start(1), m.start(1) + len(value)
    for m in _LOGIN_AS_OTHER_RE.finditer(text) if not gated or any(w in low for w in _LOGIN_AS_WORDS) else ():
        value = m.group(1).rstrip(_TRAILING)
        if _shaped_like_password(value):
            yield "password", m.start(1), m.start(1) + len(value)
    for m in _ID_AND_PASS_RE.finditer(text):
        value = m.group(1).rstrip(_TRAILING)
        if _shaped_like_password(value):
            yield "password", m.start(1), m.start(1) + len(value)
    if has_pass:
        yield from _user_pass_spans(text)


def _user_pass_spans(text: str) -> Iterator[_Span]:
    for m in _USER_PASS_LOOSE_RE.finditer(text):
        value = m.group(1).rstrip(_TRAILING)
        if _shaped_like_password(value):
            yield "password", m.start(1), m.start(1) + len(value)
    for m in _USER_PASS_RE.finditer(text):
        between = text[m.start() : m.start(1)]
        if not re.search(r"pass|pwd|pw|密码|口令|/", between, re.IGNORECASE):
            continue
        value = m.group(1).rstrip(_TRAILING)
        if credential_like(value, kind="password"):
            yield "password", m.start(1), m.start(1) + len(value)
