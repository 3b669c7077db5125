"""The layers that need no value after a credential word, and layer 3 (entropy with context).

- Layer 1, known token formats (:mod:`hindsight.secrets.providers`), and the other fixed formats:
  PEM/OpenSSH private-key blocks, connection strings with a password, ``Bearer``/``Basic`` values.
- Wi-Fi QR payloads (``WIFI:S:<ssid>;T:WPA;P:<password>;;``).
- Cookies and headers listed as name / value (a browser's dev tools, HAR files, cookie exports:
  ``Name: session_id`` then ``Value: f648...``): the value of a session, token or auth name.
- App passwords: four groups of four letters after an app-password word (Google's and Apple's
  format, ``qwhm zpta lkfj ruxe``), which carry no digit for the other layers to see.
- Command-line flags (``curl -u user:PASS``, ``mysql -pPASS``, ``--token TOKEN``) and
  ``user / password`` pairs.
- Note lines: a made-up value alone on its line under a line naming an account.
- **Entropy with context**: a random-looking run of 20+ characters (Shannon entropy >= 3.5 bits
  per character, letters and digits) within :data:`CONTEXT_WINDOW` characters after a credential
  word ("key", "secret", "credential", "auth", 密钥...) is a secret even in an unknown format;
  hex digests named as ids or hashes (git commits, sha256, md5), SSH fingerprints, paths and
  names made of words are not.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import Final

from hindsight.secrets.providers import (
    _BEARER_RE,
    _LITERAL_OWNERS,
    _LITERALS,
    _PEM_RE,
    _URL_CREDENTIALS_RE,
    _URL_PLACEHOLDERS,
    _WIFI_QR_RE,
    PROVIDER_PATTERNS,
)
from hindsight.secrets.stopwords import _STOP_VALUES
from hindsight.secrets.values import (
    _PLACEHOLDER_RE,
    _TRAILING,
    _TYPED_SYMBOLS,
    MIN_ENTROPY_BITS,
    _has_letter_and_digit,
    _looks_like_id,
    _Span,
    _word_shaped,
    entropy,
    is_masked,
    strong_password_shape,
    typed_made_up,
)

CONTEXT_WINDOW: Final[int] = 48
"""Characters after a credential word searched for a random-looking value (ours: one clause)."""

MIN_RANDOM_LEN: Final[int] = 20
"""Shortest run that entropy alone (with a context word) may call a secret."""

_RANDOM_RUN_RE: Final = re.compile(r"(?<![A-Za-z0-9_+/=\-])[A-Za-z0-9_+/=\-.]{20,512}(?![A-Za-z0-9_+/=\-])")
_HASH_CONTEXT_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:sha-?\d*|md5|hash(?:es)?|digest|checksum|commit|revision|rev|git|etag|"
    r"fingerprint|uuid|guid|request[\s_\-]?id|trace[\s_\-]?id|order|invoice|tracking|"
    r"哈希|摘要|校验和|提交|版本号|订单号|请求号)(?![A-Za-z])",
    re.IGNORECASE,
)

_HEX_RE: Final = re.compile(r"[0-9a-fA-F]+")


_CONTEXT_WORD_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:key|keys|secret|secrets|credential|credentials|auth|token|tokens|password|"
    r"passphrase|bearer|signature|private|apikey|api_key|access_key|secret_key|client_secret)(?![A-Za-z])|"
    r"密钥|秘钥|私钥|令牌|凭证|凭据|密码|口令",
    re.IGNORECASE,
)


_FLAG_RE: Final = re.compile(
    r"(?<![A-Za-z0-9_\-])(?:"
    r"(?:-u|--user)[ =]+[^\s:/@\"']{1,64}:(?P<userpass>[^\s\"']{3,128})|"
    r"(?:-p|--password|--passwd|--pass|--token|--api-key|--apikey|--secret|--auth-token|--access-token)"
    r"(?:=|[ ]+)[\"']?(?P<value>[^\s\"']{3,128})|"
    r"-p(?:'(?P<squoted>[^'\s]{3,128})'|\"(?P<dquoted>[^\"\s]{3,128})\")"
    r")"
)
"""Credentials on command lines: ``curl -u user:PASS``, ``docker login -u bot -p PASS``,
``mysql -p PASS``, ``mysql -p'PASS'`` (attached and quoted), ``--password=PASS``, ``--token TOKEN``
(POSIX/GNU option syntax)."""
_PAIR_RE: Final = re.compile(
    r"(?<![A-Za-z0-9_./\-])[A-Za-z][A-Za-z0-9_.\-]{1,31}\s+/\s+([^\s\"'`,，;；。]{8,64})(?![^\s\"'`,，;；。])"
)
"""``admin / Gr33nTea#77``: a user name, a spaced slash, then a value shaped like a strong password."""


_MYSQL_ATTACHED_RE: Final = re.compile(
    r"(?<![A-Za-z0-9_\-])(?:mysql|mysqldump|mysqladmin|mysqlimport|mariadb(?:-dump|-admin)?)(?![A-Za-z0-9_\-])"
    r"[^\n]*?\s-p(?P<value>[^\s\"']{3,128})"
)
"""The MySQL client's attached password, ``mysql -u root -pS3cret db`` (its ``-p`` takes the password
glued to it, MySQL reference manual 6.2.2.1; only after a MySQL client name: elsewhere ``-p`` is a
port, a parent directory or a path)."""


_CLIENT_PASSWORD_RES: Final = (
    re.compile(
        r"(?<![A-Za-z0-9_\-])(?:redis-cli|keydb-cli|valkey-cli)(?![A-Za-z0-9_\-])[^\n]*?\s-a[ ]+[\"']?"
        r"(?P<value>[^\s\"']{3,128})"
    ),
    re.compile(r"(?<![A-Za-z0-9_\-])sshpass[ ]+-p[ ]*[\"']?(?P<value>[^\s\"']{3,128})"),
)
"""Clients whose short option takes the password: ``redis-cli -a PASS`` (redis-cli's ``-a``, "Password to
use when connecting"), ``sshpass -p PASS``; elsewhere ``-a`` and ``-p`` mean anything."""


def _flag_spans(text: str) -> Iterator[_Span]:
    for pattern in _CLIENT_PASSWORD_RES if ("-cli" in text or "sshpass" in text) else ():
        for m in pattern.finditer(text):
            value = m.group("value").rstrip(_TRAILING)
            if not is_masked(value) and _PLACEHOLDER_RE.fullmatch(value) is None and len(value) >= 3:
                yield "password", m.start("value"), m.start("value") + len(value)
    for m in _MYSQL_ATTACHED_RE.finditer(text):
        value = m.group("value").rstrip(_TRAILING)
        if not is_masked(value) and _PLACEHOLDER_RE.fullmatch(value) is None and len(value) >= 3:
            yield "password", m.start("value"), m.start("value") + len(value)
    for m in _FLAG_RE.finditer(text):
        group = next(g for g in ("userpass", "value", "squoted", "dquoted") if m.group(g))
        value = m.group(group).rstrip(_TRAILING)
        if (
            (_has_letter_and_digit(value) or strong_password_shape(value))
            and _PLACEHOLDER_RE.fullmatch(value) is None
            and not is_masked(value)
        ):
            yield "password", m.start(group), m.start(group) + len(value)
    for m in _PAIR_RE.finditer(text):
        value = m.group(1).rstrip(_TRAILING)
        if strong_password_shape(value) and not value.startswith(("http", "/")):
            yield "password", m.start(1), m.start(1) + len(value)


def _wifi_spans(text: str) -> Iterator[_Span]:
    for m in _WIFI_QR_RE.finditer(text):
        if not is_masked(m.group(1)):
            yield "password", m.start(1), m.end(1)


_FINGERPRINT_PREFIX_RE: Final = re.compile(r"(?:SHA256|SHA1|MD5):$", re.IGNORECASE)


def _entropy_spans(text: str) -> Iterator[_Span]:
    for kw in _CONTEXT_WORD_RE.finditer(text):
        hi = min(len(text), kw.end() + CONTEXT_WINDOW)
        for m in _RANDOM_RUN_RE.finditer(text, kw.end(), hi):
            value = m.group().strip(".-=")
            if len(value) < MIN_RANDOM_LEN or is_masked(value) or _looks_like_id(value):
                continue
            if "/" in value and value.count("/") >= 2 and not re.search(r"[A-Z]", value):
                continue  # a path
            if "." in value and not _has_letter_and_digit(value.replace(".", "")):
                continue
            if _HEX_RE.fullmatch(value) and _HASH_CONTEXT_RE.search(text[max(0, m.start() - 40) : m.start()]):
                continue  # "commit 3f2a...", "sha256 9f86..."
            if _FINGERPRINT_PREFIX_RE.search(text, max(0, m.start() - 8), m.start()):
                continue  # "SHA256:nThbg6kX...": an SSH key's public fingerprint (base64 of a hash)
            if not _has_letter_and_digit(value) or entropy(value) < MIN_ENTROPY_BITS:
                continue
            if _word_shaped(value):
                continue  # "sha256WithRSAEncryption", "getUserProfileV2": a name made of words
            yield "api_key", m.start(), m.start() + len(value)


_APP_PASSWORD_RE: Final = re.compile(
    r"(?:app(?:lication)?[\s\-]?(?:specific[\s\-])?pass(?:words?|wort|codes?)|"
    r"mot\s+de\s+passe\s+d'application|contrase(?:ñ|n)a\s+de\s+(?:la\s+)?aplicaci[oó]n|"
    r"senha\s+de\s+app|应用专用密码|应用密码|アプリ\s?パスワード|앱\s?비밀번호)"
    r"[^\n]{0,60}?(?<![A-Za-z])"
    r"((?-i:[a-z]{4})([ \-]?)(?-i:[a-z]{4})\2(?-i:[a-z]{4})\2(?-i:[a-z]{4}))(?![A-Za-z])",
    re.IGNORECASE,
)
"""An app-password word, then within the line four groups of four lower-case letters (Google's
"App passwords" show ``xxxx xxxx xxxx xxxx``; Apple's app-specific passwords are ``xxxx-xxxx-xxxx-xxxx``),
the letters in lower case as both show them."""
_APP_EXAMPLE_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:e\.g\.|for\s+example|example|sample|looks?\s+like|such\s+as|placeholder|format)(?![A-Za-z])|"
    r"例如|比如|示例|格式",
    re.IGNORECASE,
)
"""Words that present four letter groups as the format's example ("App passwords look like this: cwtf
bnmq plhd zkxs (sample)"), searched from the app-password word to 40 characters after the value."""
_APP_PASSWORD_LITERALS: Final = ("pass", "Pass", "PASS", "ontrase", "senha", "应用", "アプリ", "앱")
"""One of these is in every text :data:`_APP_PASSWORD_RE` matches (a substring test gates the regex)."""


def _app_password(value: str) -> bool:
    """Whether four groups of four letters look generated: no group a stop word ("will look like
    this"), one letter repeated ("xxxx") or an alphabet run ("abcd"), under 40 % vowels (English
    words run ~40 %, random letters ~19 %)."""
    letters = "".join(c for c in value.lower() if c.isalpha())
    groups = [letters[i : i + 4] for i in range(0, 16, 4)]
    for group in groups:
        if group in _STOP_VALUES or len(set(group)) == 1:
            return False
        if all(ord(b) - ord(a) == 1 for a, b in itertools.pairwise(group)):
            return False
    return sum(c in "aeiou" for c in letters) / len(letters) < 0.4


_NAME_VALUE_RE: Final = re.compile(
    r"(?<![A-Za-z])name[\"']?\s*[:=]\s*[\"']?"
    r"([\w.\-]*(?:sess|token|auth|sid|jwt|secret|api[_\-]?key|csrf|remember)[\w.\-]*)[\"']?"
    r"[ \t]*[,;\n](?:[^\n]{0,80}?[,\n])?[ \t]*[\"']?value[\"']?\s*[:=]\s*[\"']?([^\s\"',;]{16,512})",
    re.IGNORECASE,
)
"""A cookie or header listed as name then value (dev tools' ``Name: session_id`` / ``Value: ...``,
a HAR entry's ``"name": "sid", "value": "..."``), the name one of a session, token or auth value,
at most one line or one field between them."""


HEX_MIN_ENTROPY_BITS: Final[float] = 3.0
"""Least entropy per character of a hex cookie value (ours: of 16 symbols a random 32-digit run
measures ~3.4-3.9; a hex word such as ``deadbeefcafe`` far less)."""


def _generated(value: str) -> bool:
    """A cookie value that looks generated: letters and digits, not made of words or a date
    (``oauth2-google-v1``, ``2024-05-01T10:22:31.000Z``, ``customer-support-chat-2024`` are
    settings), and at least :data:`MIN_ENTROPY_BITS` bits per character over its letters and digits
    (:data:`HEX_MIN_ENTROPY_BITS` for hex)."""
    core = "".join(c for c in value if c.isalnum())
    parts = [p for p in re.split(r"[^A-Za-z0-9]+", value) if p]
    if all(p.isalpha() or p.isdigit() for p in parts):
        return False  # words and numbers joined: "customer-support-chat-2024"
    # hex carries at most 4 bits a character: a 32-digit session id measures ~3.4-3.9
    least = HEX_MIN_ENTROPY_BITS if all(c in "0123456789abcdefABCDEF" for c in core) else MIN_ENTROPY_BITS
    return (
        len(core) >= 16
        and _has_letter_and_digit(core)
        and not _word_shaped(value)
        and not _looks_like_id(value)
        and entropy(core) >= least
    )


def _listed_spans(text: str, *, gated: bool = True) -> Iterator[_Span]:
    """Cookies listed as name / value (:data:`_NAME_VALUE_RE`) and app passwords
    (:data:`_APP_PASSWORD_RE`)."""
    if not gated or ("alue" in text and "ame" in text):
        for m in _NAME_VALUE_RE.finditer(text):
            value = m.group(2).rstrip(_TRAILING)
            if _generated(value) and not is_masked(value) and not _PLACEHOLDER_RE.fullmatch(value):
                yield "token", m.start(2), m.start(2) + len(value)
    if not gated or any(word in text for word in _APP_PASSWORD_LITERALS):
        for m in _APP_PASSWORD_RE.finditer(text):
            if _app_password(m.group(1)) and not _APP_EXAMPLE_RE.search(
                text, m.start(), min(len(text), m.end(1) + 40)
            ):
                yield "password", m.start(1), m.end(1)


def _structured_spans(text: str, *, gated: bool = True) -> Iterator[_Span]:
    if not gated or "PRIVATE KEY" in text or "PuTTY" in text:
        for m in _PEM_RE.finditer(text):
            yield "private_key", m.start(), m.end()
    if gated:
        present = {
            owner
            for index, _, _ in _LITERALS.find_matches_as_indexes(text, overlapping=True)
            for owner in _LITERAL_OWNERS[index]
        }
        providers = [PROVIDER_PATTERNS[i] for i in sorted(present)]
    else:
        providers = list(PROVIDER_PATTERNS)
    for kind, pattern, group in providers:
        for m in pattern.finditer(text):
            value = m.group(group)
            if is_masked(value) or not _has_letter_and_digit(value):
                continue
            yield kind, m.start(group), m.end(group)
    for m in _BEARER_RE.finditer(text):
        if _has_letter_and_digit(m.group(1)) and not is_masked(m.group(1)):
            yield "token", m.start(1), m.end(1)
    yield from _listed_spans(text, gated=gated)
    if gated and ("://" not in text or "@" not in text):
        return
    for m in _URL_CREDENTIALS_RE.finditer(text):
        # "postgres://USER:PASSWORD@localhost:5432/app" is a template (e.g. .env.example)
        placeholder = m.group(1).lower() in _URL_PLACEHOLDERS or _PLACEHOLDER_RE.fullmatch(m.group(1))
        if not is_masked(m.group(1)) and not placeholder:
            yield "password", m.start(1), m.end(1)


_LONE_LINE_RE: Final = re.compile(r"^[ \t]*([0-9A-Za-z][0-9A-Za-z!@#$%^&*?~_\-.]{7,63})[ \t]*$", re.MULTILINE)
_NOTE_CONTEXT_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:vpn|wi-?fi|wlan|ssid|log\s?in|sign\s?in|user(?:name)?|account|admin|root|ssh|pw|pwd|"
    r"pass(?:word)?|konto|compte|cuenta|conta)(?![A-Za-z])|账号|用户名|账户|登录|密码|口令",
    re.IGNORECASE,
)
NOTE_CONTEXT_LINES: Final[int] = 2
"""Lines above a lone value searched for what it logs into (ours: a note's service and user lines)."""


def _note_line_spans(text: str) -> Iterator[_Span]:
    """A made-up value alone on its line under a line naming an account, as on a sticky note or a
    screenshot of one ("VPN  jdoe\nSummer!Lake77"): :func:`made_up_shape` with a typed symbol
    (``!@#$%^&*?~``, which encoded data such as base64 never has)."""
    for m in _LONE_LINE_RE.finditer(text):
        value = m.group(1).rstrip(_TRAILING)
        if not typed_made_up(value) or not _TYPED_SYMBOLS.intersection(value):  # "_" alone is not enough here
            continue
        above = text[: m.start()].rstrip("\n").split("\n")[-NOTE_CONTEXT_LINES:]
        if any(_NOTE_CONTEXT_RE.search(line) for line in above):
            yield "password", m.start(1), m.start(1) + len(value)
