"""Secret detection in prose and code, English and Chinese (DESIGN.md section 6; issue 10 item 1).

Three layers, each yielding ``(type, start, end)`` spans over the (full-width-folded) text; the
caller (:mod:`hindsight.pii`) resolves overlaps and applies the action (secrets block by default):

1. **Known token formats** of the major providers (:data:`PROVIDER_PATTERNS`): cloud access keys
   (AWS, Alibaba Cloud, Tencent Cloud, Google, Azure storage keys), Git hosting (GitHub, GitLab),
   model hubs and model APIs (Hugging Face, OpenAI/Anthropic ``sk-``, Groq, Replicate, Perplexity),
   chat platforms (Slack tokens and webhooks, Discord, Telegram bots), payment providers (Stripe,
   Square), package registries (npm, PyPI), JWTs, PEM/OpenSSH private-key blocks and
   connection strings with a password. The prefixes are the providers' documented formats (as
   collected by gitleaks and detect-secrets); each match must also look generated (letters and digits).
2. **Keyword in context**: a credential word (password, passcode, passphrase, PIN, secret, token,
   API key, OTP / verification code, CVV; 密码, 口令, 密钥, 秘钥, 令牌, 验证码, 校验码, 动态码, 安全码)
   followed, with or without a separator and with up to a few filler words ("is", "for the router",
   "是", "为", "改成了"), or after a later separator or copula of the clause, or after a question
   the text answers ("my password? it's X"), by a value that looks like a credential
   (:func:`credential_like`); session cookies and ids (``sessionid=``, ``PHPSESSID``,
   ``JSESSIONID``, "session key"); "logging in as X with Y", "username X password Y", "账号X 密码Y"
   (Y is the secret).
3. **Entropy with context**: a random-looking run of 20+ characters (Shannon entropy >= 3.5 bits
   per character, letters and digits) within :data:`CONTEXT_WINDOW` characters after a credential
   word ("key", "secret", "credential", "auth", 密钥...) is a secret even in an unknown format.

Not secrets (tested): version numbers, OIDs, UUIDs and hex digests named as ids or hashes (git
commits, sha256, md5), masked values (``sk-XXXX...``, ``****1234``, ``138****5678``), placeholders
(``<your-api-key>``, ``[REDACTED:...]``) and prose about credentials ("my password is strong",
"reset your password here", "the secret to a good cake").
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator
from typing import Final, Literal

import ahocorasick_rs

SecretType = Literal["api_key", "token", "private_key", "password"]
_Span = tuple[SecretType, int, int]

_L: Final = r"(?<![A-Za-z0-9_\-])"
"""Left boundary for a token: not inside a longer identifier (no \\b: CJK counts as a word char)."""
_R: Final = r"(?![A-Za-z0-9_\-])"

# ---------------------------------------------------------------------------------------------
# 1. Provider formats: (type, pattern, group holding the secret or 0 for the whole match)

_PROVIDER_SPECS: Final[tuple[tuple[SecretType, str, int], ...]] = (
    # model APIs: OpenAI sk-/sk-proj-, Anthropic sk-ant-, DeepSeek/Moonshot/Qwen DashScope sk-
    ("api_key", _L + r"sk-[A-Za-z0-9_\-]{20,}", 0),
    ("api_key", _L + r"(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}", 0),  # Stripe secret/restricted
    ("api_key", _L + r"whsec_[A-Za-z0-9]{20,}", 0),  # Stripe webhook secret
    ("api_key", _L + r"sq0(?:atp|csp)-[0-9A-Za-z_\-]{22,60}", 0),  # Square
    ("api_key", _L + r"EAAA[A-Za-z0-9_\-]{60}" + _R, 0),  # Square access token
    (
        "api_key",
        r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|APKA)[0-9A-Z]{16}(?![0-9A-Za-z])",
        0,
    ),
    ("api_key", r"(?<![A-Za-z0-9])LTAI[A-Za-z0-9]{12,24}(?![0-9A-Za-z])", 0),  # Alibaba Cloud
    ("api_key", r"(?<![A-Za-z0-9])AKID[A-Za-z0-9]{13,40}(?![0-9A-Za-z])", 0),  # Tencent Cloud
    ("api_key", _L + r"AIza[0-9A-Za-z_\-]{35}" + _R, 0),  # Google API key
    ("api_key", _L + r"GOCSPX-[A-Za-z0-9_\-]{24,}", 0),  # Google OAuth client secret
    ("token", _L + r"ya29\.[0-9A-Za-z_\-]{20,}", 0),  # Google OAuth access token
    ("api_key", r"AccountKey=([A-Za-z0-9+/]{40,}={0,2})", 1),  # Azure storage
    ("token", r"[?&]sig=([A-Za-z0-9%+/]{30,}={0,2})", 1),  # Azure SAS signature
    # a key in a URL's query string (WeCom / Feishu / DingTalk webhooks: ``send?key=<uuid>``,
    # ``?access_token=...``): whoever holds the URL can post; a UUID here is a secret, not an id
    (
        "token",
        r"[?&](?:key|api_?key|access_?token|token|secret|client_secret|auth)=([A-Za-z0-9\-_.~%]{16,256})",
        1,
    ),
    ("token", _L + r"(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{22,255})", 0),
    ("token", _L + r"gl(?:pat|dt|rt|ptt|cbt|oas)-[A-Za-z0-9_\-]{20,}", 0),  # GitLab
    ("token", _L + r"hf_[A-Za-z0-9]{30,}" + _R, 0),  # Hugging Face
    ("api_key", _L + r"gsk_[A-Za-z0-9]{40,}", 0),  # Groq
    ("api_key", _L + r"r8_[A-Za-z0-9]{30,}", 0),  # Replicate
    ("api_key", _L + r"pplx-[A-Za-z0-9]{40,}", 0),  # Perplexity
    ("api_key", _L + r"dapi[a-f0-9]{32}" + _R, 0),  # Databricks
    ("token", _L + r"dop_v1_[a-f0-9]{64}", 0),  # DigitalOcean
    ("token", _L + r"(?:secret|ntn)_[A-Za-z0-9]{40,50}" + _R, 0),  # Notion
    ("api_key", _L + r"lin_api_[A-Za-z0-9]{32,}", 0),  # Linear
    ("token", _L + r"xox[abposre]-[A-Za-z0-9\-]{10,}", 0),  # Slack tokens
    ("token", r"hooks\.slack\.com/services/(T[A-Z0-9]{6,}/B[A-Z0-9]{6,}/[A-Za-z0-9]{20,})", 1),
    ("token", r"discord(?:app)?\.com/api/webhooks/(\d{15,20}/[A-Za-z0-9_\-]{40,})", 1),
    (
        "token",
        r"(?<![A-Za-z0-9_.\-])[MNO][A-Za-z0-9_\-]{23,27}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,40}" + _R,
        0,
    ),
    ("token", r"(?<![0-9A-Za-z])\d{8,10}:AA[A-Za-z0-9_\-]{33}" + _R, 0),  # Telegram bot
    ("api_key", _L + r"SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}" + _R, 0),  # SendGrid
    ("api_key", _L + r"SK[0-9a-f]{32}" + _R, 0),  # Twilio API key
    ("api_key", _L + r"key-[0-9a-zA-Z]{32}" + _R, 0),  # Mailgun
    ("token", _L + r"npm_[A-Za-z0-9]{36}" + _R, 0),
    ("token", _L + r"pypi-AgE[A-Za-z0-9_\-]{50,}", 0),
    ("token", _L + r"shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}" + _R, 0),  # Shopify
    ("token", _L + r"dckr_pat_[A-Za-z0-9_\-]{20,}", 0),  # Docker Hub personal access token
    ("token", _L + r"hvs\.[A-Za-z0-9_\-]{24,}", 0),  # HashiCorp Vault service token
    ("token", _L + r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}", 0),  # Grafana service account
    ("token", _L + r"xapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+", 0),  # Slack app-level token
    ("token", _L + r"ATATT3[A-Za-z0-9_\-=]{40,}", 0),  # Atlassian API token
    ("token", _L + r"sntrys_[A-Za-z0-9_=+/]{40,}", 0),  # Sentry
    ("token", _L + r"figd_[A-Za-z0-9_\-]{30,}", 0),  # Figma
    ("api_key", _L + r"tskey-[a-z]+-[A-Za-z0-9_\-]{16,}", 0),  # Tailscale
    ("private_key", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}", 0),  # age
    ("token", _L + r"rubygems_[a-f0-9]{48}", 0),
    ("token", _L + r"eyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]*", 0),  # JWT
    ("token", _L + r"eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}", 0),
)
PROVIDER_PATTERNS: Final[tuple[tuple[SecretType, re.Pattern[str], int], ...]] = tuple(
    (kind, re.compile(pattern), group) for kind, pattern, group in _PROVIDER_SPECS
)
"""Provider formats, most specific first. Sources: the providers' key-format documentation as
collected by gitleaks' default rules and detect-secrets' plugins (AWS, GitHub, Slack, Stripe, ...)."""

_PROVIDER_LITERALS: Final[tuple[tuple[str, ...], ...]] = (
    ("sk-",),
    ("_live_", "_test_"),
    ("whsec_",),
    ("sq0",),
    ("EAAA",),
    ("AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "APKA"),
    ("LTAI",),
    ("AKID",),
    ("AIza",),
    ("GOCSPX-",),
    ("ya29.",),
    ("AccountKey=",),
    ("sig=",),
    ("key=", "token=", "secret=", "auth=", "Key=", "Token=", "KEY=", "TOKEN="),
    ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ("glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "gloas-"),
    ("hf_",),
    ("gsk_",),
    ("r8_",),
    ("pplx-",),
    ("dapi",),
    ("dop_v1_",),
    ("secret_", "ntn_"),
    ("lin_api_",),
    ("xox",),
    ("hooks.slack.com",),
    ("discord",),
    (".",),
    (":AA",),
    ("SG.",),
    ("SK",),
    ("key-",),
    ("npm_",),
    ("pypi-AgE",),
    ("shpat_", "shpss_", "shpca_", "shppa_"),
    ("dckr_pat_",),
    ("hvs.",),
    ("glsa_",),
    ("xapp-",),
    ("ATATT3",),
    ("sntrys_",),
    ("figd_",),
    ("tskey-",),
    ("AGE-SECRET-KEY-1",),
    ("rubygems_",),
    ("eyJ",),
    ("eyJ",),
)
"""For each provider pattern, literals one of which every match contains: a pattern whose literals
are all absent from the text is not run (``str.__contains__`` is a memchr-speed scan; a regex with
look-arounds is not; one automaton finds them all). Tested: same spans with and without the gate on
every labelled line."""
assert len(_PROVIDER_LITERALS) == len(PROVIDER_PATTERNS)


def _literal_index() -> tuple[ahocorasick_rs.AhoCorasick, tuple[tuple[int, ...], ...]]:
    owners: dict[str, list[int]] = {}
    for i, literals in enumerate(_PROVIDER_LITERALS):
        for literal in literals:
            owners.setdefault(literal, []).append(i)
    keys = sorted(owners)
    automaton = ahocorasick_rs.AhoCorasick(keys, matchkind=ahocorasick_rs.MatchKind.Standard)
    return automaton, tuple(tuple(owners[k]) for k in keys)


_LITERALS, _LITERAL_OWNERS = _literal_index()
"""One Aho-Corasick automaton over every provider literal: a single scan says which patterns may match."""

_PEM_RE: Final = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
    r"(?:-----END (?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----|\Z)"
    r"|PuTTY-User-Key-File-\d: [\s\S]*?(?:Private-MAC: [0-9a-f]+|\Z)"
)
_URL_PLACEHOLDERS: Final = frozenset({"password", "pass", "passwd", "pwd", "pw", "secret", "pass123"})
"""A URL's password that is the word itself is a template's placeholder, not a credential."""
_URL_CREDENTIALS_RE: Final = re.compile(
    r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{0,31}://[^\s:/@]{1,256}:([^\s/]{1,256})@(?=[^\s@/]{1,256})"
)
_WIFI_QR_RE: Final = re.compile(r"WIFI:(?:[^;\n]*;)*?P:((?:\\.|[^;\\\n]){1,63});")
"""The Wi-Fi QR payload (``WIFI:S:<ssid>;T:WPA;P:<password>;;``, ZXing's MECARD-like format)."""
_BEARER_RE: Final = re.compile(
    r"(?<![A-Za-z0-9])(?:bearer|token|basic)\s+([A-Za-z0-9\-._~+/]{16,}=*)", re.IGNORECASE
)

# ---------------------------------------------------------------------------------------------
# 2. Keyword in context

_EN_PASSWORD: Final = (
    r"pass\s?words?|passwd|passphrase|pass\s?codes?|pwd|pw|pin(?:\s?(?:code|number))?|"
    r"security\s+code|security\s+(?:question\s+)?answer|secret\s+answer|cvv2?|cvc|otp|"
    r"one[\s\-]time\s+(?:code|password|passcode)|"
    r"verification\s+code|2fa\s+code|auth(?:entication)?\s+code|login\s+code|unlock\s+code|"
    r"door\s+code|alarm\s+code|access\s+code|wi-?fi\s+key|(?<=[_\-.])pass(?=[\"']?\s*[:=])|"
    # Redis' password directives and options (redis.conf, redis-server --requirepass X), "--pass X"
    r"requirepass|masterauth|(?<=--)pass(?=[\s=])|"
    # a bare "key ... is" names a value only near a Wi-Fi word (checked in _wifi_key)
    r"(?<=\s)key(?=\s+(?:is|was)[\s:])|"
    # other languages: de, es, fr, pt, nl, it, ru (the words users write before a password)
    r"passwort|kennwort|contrase(?:ñ|n)a|clave|mot\s+de\s+passe|senha|wachtwoord|parola\s+d'ordine|пароль|"
    # and sv, da/no, fi, cs/sk, pl, hu, ro, tr, el, vi, id, hi, ar, fa, he, th
    # (inflected: "lösenordet", "hasła", "şifrem", "jelszavam", "κωδικού")
    r"lösenord\w*|losenord\w*|adgangskode\w*|passord\w*|salasan\w*|hesl[oa]\w*|has[łl][oae]\w*|haśle|jelsz\w*|"
    r"parolă|parola\s+(?:mea|ta)|[şs]ifre(?:m|n|si|niz|miz|yi)?|κωδικ(?:ός|ό|ού)\s+(?:πρόσβασης|μου|σου)|"
    r"mật\s+khẩu|kata\s+sandi|पासवर्ड|"
    r"كلمة\s+(?:المرور|السر)|رمز\s+عبور|סיסמ[הא]|รหัสผ่าน"
)
_ZH_PASSWORD: Final = (
    r"密码|口令|验证码|校验码|动态码|安全码|支付码|取件码|门禁码|解锁码|开锁码|开门码|"
    r"配对码|提取码|授权码|暗号|PIN码|パスワード|暗証番号|비밀번호|암호|密保答案"
)
_EN_KEY: Final = (
    r"api[\s_\-]?keys?|api[\s_\-]?secret|secret[\s_\-]?(?:access[\s_\-]?)?keys?|client[\s_\-]?secret|"
    r"app[\s_\-]?secret|access[\s_\-]?keys?(?:[\s_\-]?id)?|private[\s_\-]?key|signing[\s_\-]?key|"
    r"encryption[\s_\-]?key|master[\s_\-]?key|license[\s_\-]?key|webhook[\s_\-]?secret|secrets?"
)
_ZH_KEY: Final = r"密钥|秘钥|私钥|秘密|AccessKey(?:\s?Secret)?|AppSecret|SecretKey"
_EN_TOKEN: Final = (
    r"(?:access|auth|refresh|session|bearer|bot|api|personal\s+access|id|csrf)[\s_\-]?tokens?|tokens?|"
    r"session[\s_\-]?(?:ids?|keys?|cookies?)|phpsessid|jsessionid|asp\.net_sessionid"
)
_ZH_TOKEN: Final = r"令牌"

_KEYWORD_RE: Final = re.compile(
    r"(?P<zpw>"
    + _ZH_PASSWORD
    + r")|(?P<zkey>"
    + _ZH_KEY
    + r")|(?<![A-Za-z0-9])(?:(?P<pw>"
    + _EN_PASSWORD
    + r")|(?P<key>"
    + _EN_KEY
    + r")|(?P<tok>"
    + _EN_TOKEN
    + r"))(?![A-Za-z0-9])|(?P<ztok>"
    + _ZH_TOKEN
    + ")",
    re.IGNORECASE,
)
FILLER_WORDS: Final[frozenset[str]] = frozenset(
    {
        "jetzt",
        "nun",
        "ahora",
        "maintenant",
        "agora",
        "ora",
        "is",
        "was",
        "are",
        "were",
        "'s",
        "now",
        "currently",
        "still",
        "set",
        "changed",
        "reset",
        "updated",
        "to",
        "became",
        "becomes",
        "will",
        "be",
        "should",
        "reads",
        "says",
        "of",
        "for",
        "on",
        "at",
        "in",
        "my",
        "our",
        "your",
        "his",
        "her",
        "the",
        "this",
        "that",
        "new",
        "old",
        "current",
        "temporary",
        "temp",
        # the same qualifiers after the credential word in other languages ("mot de passe provisoire X")
        "provisoire",
        "temporaire",
        "provisional",
        "temporal",
        "provisória",
        "provisório",
        "temporária",
        "temporário",
        "temporanea",
        "temporaneo",
        "tijdelijk",
        "tijdelijke",
        "vorläufig",
        "vorläufiges",
        "temporäres",
        "initial",
        "initiale",
        "inicial",
        "iniziale",
        "nouveau",
        "nouvel",
        "nuevo",
        "nueva",
        "nova",
        "novo",
        "neues",
        "neu",
        "nuovo",
        "nuova",
        "nieuw",
        "nieuwe",
        "default",
        "wifi",
        "wi-fi",
        "router",
        "account",
        "server",
        "database",
        "db",
        "admin",
        "root",
        "phone",
        "laptop",
        "bank",
        "card",
        "email",
        "mail",
        "vpn",
        "ssh",
        "github",
        "aws",
        "door",
        "safe",
        "locker",
        "app",
        "prod",
        "production",
        "staging",
        "it",
        "here",
        "below",
        "follows",
        "as",
        "like",
        "so",
        "has",
        "been",
        "got",
        "just",
        "then",
        "and",
        "number",
        "no",
        "no.",
        "#",
        "code",
        "login",
        "home",
        "office",
        "work",
        "guest",
        "word",
        "phrase",
        "string",
        "literally",
        "simply",
        "exactly",
    }
)
"""Words that may stand between a credential word and its value ("password for the router is X", "the
key is the word X", "it's literally X")."""
ZH_FILLERS: Final[tuple[str, ...]] = (
    "改成了",
    "改成",
    "改为",
    "设为",
    "设置为",
    "设置成",
    "换成了",
    "换成",
    "变成了",
    "变成",
    "就是",
    "都是",
    "还是",
    "依然是",
    "现在是",
    "目前是",
    "一直是",
    "写的是",
    "是",
    "为",
    "為",
    "叫",
    "填",
    "输入",
    "都",
    "也",
    "我的",
    "的",
    "我",
    "已经",
    "已",
    "刚刚",
    "刚",
    "被",
    "设成",
    "重置为",
    "更新为",
    "修改为",
    "更改为",
    "는",
    "은",
    "가",
    "도",
)
"""Chinese fillers between a credential word and its value ("密码现在是X", "口令改为X"), and the Korean
topic / subject particles after one ("비밀번호는 X이에요": the copula after the value is cut as any CJK
tail is)."""
_SEPARATORS: Final = frozenset(" \t\n:=：＝\"'`“”‘’「」(（-><")
_MAX_FILLERS: Final[int] = 6
_IT_IS: Final = frozenset({"it's ", "it’s "})
_VALUE_RE: Final = re.compile(r"[\"'`“‘「]?([^\s\"'`“”‘’「」,，;；。、？()（）<>\[\]{}]{1,128})")
_QUOTED_RE: Final = re.compile(
    r"[\"'`“‘「]([^\s.,;:!?\"'`“”‘’「」\n][^\"'`“”‘’「」\n]{2,63})[\"'`”’」](?![A-Za-z])"
)
_TRAILING: Final = ".,;:?"
"""Trailing characters stripped from a value (a sentence's end); ``!`` stays: over-redacting one
character is harmless, leaving the last character of ``Winter2024!`` in clear is not."""
_STOP_VALUES: Final[frozenset[str]] = frozenset(
    {
        "reset",
        "click",
        "here",
        "required",
        "incorrect",
        "wrong",
        "invalid",
        "forgotten",
        "forgot",
        "changed",
        "expired",
        "none",
        "null",
        "n/a",
        "hidden",
        "protected",
        "manager",
        "managers",
        "field",
        "below",
        "above",
        "strong",
        "weak",
        "long",
        "short",
        "simple",
        "easy",
        "hard",
        "secure",
        "insecure",
        "correct",
        "same",
        "different",
        "new",
        "old",
        "too",
        "very",
        "not",
        "still",
        "also",
        "and",
        "or",
        "but",
        "the",
        "a",
        "an",
        "my",
        "your",
        "our",
        "their",
        "his",
        "her",
        "its",
        "this",
        "that",
        "these",
        "those",
        "case-sensitive",
        "sensitive",
        "needed",
        "policy",
        "policies",
        "rules",
        "requirements",
        "length",
        "characters",
        "chars",
        "digits",
        "expires",
        "expiry",
        "rotation",
        "rotated",
        "leaked",
        "compromised",
        "stolen",
        "safe",
        "unsafe",
        "saved",
        "stored",
        "encrypted",
        "hashed",
        "salted",
        "masked",
        "redacted",
        "set",
        "sent",
        "missing",
        "empty",
        "blank",
        "default",
        "temporary",
        "generated",
        "random",
        "unique",
        "valid",
        "working",
        "broken",
        "locked",
        "unlocked",
        "shared",
        "private",
        "public",
        "secret",
        "secrets",
        "password",
        "passwords",
        "token",
        "tokens",
        "key",
        "keys",
        "code",
        "codes",
        "please",
        "again",
        "later",
        "now",
        "today",
        "yesterday",
        "tomorrow",
        "first",
        "last",
        "next",
        "into",
        "from",
        "with",
        "without",
        "for",
        "to",
        "of",
        "on",
        "in",
        "at",
        "by",
        "is",
        "was",
        "be",
        "been",
        "being",
        "will",
        "would",
        "should",
        "could",
        "can",
        "must",
        "may",
        "might",
        "if",
        "when",
        "then",
        "than",
        "so",
        "because",
        "which",
        "who",
        "what",
        "how",
        "why",
        "where",
        "it",
        "they",
        "them",
        "we",
        "you",
        "he",
        "she",
        "i",
        "me",
        "us",
        "manually",
        "automatically",
        "regularly",
        "often",
        "every",
        "each",
        "all",
        "any",
        "some",
        "no",
        "yes",
        "ok",
        "okay",
        "fine",
        "good",
        "bad",
        "great",
        "terrible",
        "ready",
        "done",
        "confirmed",
        "verified",
        "unknown",
        "unchanged",
        "updated",
        "renewed",
        "revoked",
        "disabled",
        "enabled",
        "authentication",
        "login",
        "logins",
        "account",
        "accounts",
        "user",
        "users",
        "username",
        "hint",
        "hints",
        "recovery",
        "reuse",
        "reused",
        "manager's",
        "vault",
        "1password",
        "bitwarden",
        "lastpass",
        "keychain",
        "keepass",
        "file",
        "files",
        "env",
        "environment",
        "variable",
        "variables",
        "config",
        "configuration",
        "settings",
        "screen",
        "prompt",
        "dialog",
        "box",
        "page",
        "link",
        "email",
        "sms",
        "text",
        "message",
        "phone",
        "app",
        "authenticator",
        "expire",
        "expired.",
        "protection",
        "protect",
        "management",
        "hygiene",
        "strength",
        "based",
        "less",
        "free",
        "only",
        "etc",
        "e.g.",
        "i.e.",
        "something",
        "anything",
        "nothing",
        "somewhere",
        "different.",
        "sharing",
        "share",
        "write",
        "writing",
        "written",
        "remember",
        "remembered",
        "memorize",
        "memorized",
        "type",
        "typed",
        "enter",
        "entered",
        "use",
        "used",
        "using",
        "change",
        "changing",
        "update",
        "updating",
        "rotate",
        "rotating",
        "create",
        "creating",
        "created",
        "forget",
        "forgetting",
        "keep",
        "keeping",
        "kept",
        "store",
        "storing",
        "ask",
        "asked",
        "asking",
        "request",
        "requested",
        "send",
        "sending",
        "give",
        "gave",
        "given",
        "tell",
        "told",
        "telling",
        "know",
        "knew",
        "known",
        "guess",
        "guessed",
        "crack",
        "cracked",
        "brute-force",
        "bruteforce",
        "phishing",
        "spray",
        "spraying",
        "dump",
        "dumps",
        "list",
        "lists",
        "generator",
        "generators",
        "length:",
        "complexity",
        "entropy",
        "field.",
        "prompt.",
        "flow",
        "flows",
        "grant",
        "grants",
        "type.",
        "scope",
        "scopes",
        "refresh",
        "exchange",
        "endpoint",
        "header",
        "headers",
        "cookie",
        "cookies",
        "auth",
        "oauth",
        "bucket",
        "budget",
        "limit",
        "limits",
        "count",
        "counts",
        "usage",
        "cost",
        "costs",
        "price",
        "window",
        "context",
        "economy",
        "economics",
        "ring",
        "rings",
        "sale",
        "sales",
        "holders",
        "holder",
        "gated",
        "gate",
        "launch",
        "airdrop",
        "supply",
        "minted",
        "mint",
        "standard",
        "erc-20",
        "erc20",
        "erc-721",
        "nft",
        "nfts",
        "crypto",
        "coin",
        "coins",
        "wallet",
        "wallets",
        "sauce",
        "ingredient",
        "recipe",
        "santa",
        "garden",
        "agent",
        "service",
        "services",
        "life",
        "happiness",
        "success",
        "weapon",
        "society",
        "meeting",
        "mission",
        "plan",
        "identity",
        "admirer",
        "santa's",
        # Chinese descriptive words after 密码/验证码 that are not the value
        "错误",
        "错了",
        "不对",
        "正确",
        "忘了",
        "忘记了",
        "过期",
        "过期了",
        "太简单",
        "太弱",
        "很强",
        "重置",
        "修改",
        "找回",
        "保密",
        "加密",
        "泄露",
        "泄露了",
        "被盗",
        "管理器",
        "规则",
        "长度",
        "复杂度",
        "发到",
        "发送",
        "收到",
        "输入",
        "验证",
        "登录",
        "多少",
        "什么",
        "是什么",
        "已发送",
        "已经",
        "已",
        "不能",
        "不要",
        "不会",
        "没有",
        "没",
        "别",
        "请",
        "一下",
        "保护",
        "安全",
    }
)
"""Words after a credential word that describe the credential instead of being it (FP stoplist;
grown from the benign lines of the labelled set's dev split, never from its held-out split)."""

_LOGIN_AS_RE: Final = re.compile(
    r"(?:(?:log(?:ging|ged)?\s*(?:in|on)|sign(?:ing|ed)?\s*(?:in|on)|login)"
    r"(?:\s*(?:to|into|on|at)\s+[^\s,，.。]+(?:\s+[^\s,，.。]+){0,3}?)?|"
    r"authenticat(?:e|ing|ed)|connect(?:ing|ed)?|ssh(?:\s+in)?)\s+(?:as|with\s+(?:user(?:name)?|account|login))\s+"
    r"[\"'`“‘]?[^\s\"'`“”‘’,，]{1,64}[\"'`”’]?[\s,，]+(?:with|using|and|pass(?:word|phrase)?(?![A-Za-z])|pw|pwd|/|:)"
    r"(?:\s+(?:the\s+)?(?:password|passphrase|pw|pwd|pass|key|secret|credentials?))?(?:\s*(?:[:=]|is))?\s*"
    r"[\"'`“‘]?([^\s\"'`“”‘’,，;；。、]{3,128})",
    re.IGNORECASE,
)
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

# ---------------------------------------------------------------------------------------------
# 3. Entropy with context

CONTEXT_WINDOW: Final[int] = 48
"""Characters after a credential word searched for a random-looking value (ours: one clause)."""
MIN_ENTROPY_BITS: Final[float] = 3.5
"""Shannon entropy per character a context value needs (ours; random base62 of 20+ chars has
~4.2-4.5, English words ~2.5-3.3, so 3.5 separates them with margin on the dev split)."""
MIN_RANDOM_LEN: Final[int] = 20
"""Shortest run that entropy alone (with a context word) may call a secret."""

_RANDOM_RUN_RE: Final = re.compile(r"(?<![A-Za-z0-9_+/=\-])[A-Za-z0-9_+/=\-.]{20,512}(?![A-Za-z0-9_+/=\-])")
_HASH_CONTEXT_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:sha-?\d*|md5|hash(?:es)?|digest|checksum|commit|revision|rev|git|etag|"
    r"fingerprint|uuid|guid|request[\s_\-]?id|trace[\s_\-]?id|order|invoice|tracking|"
    r"哈希|摘要|校验和|提交|版本号|订单号|请求号)(?![A-Za-z])",
    re.IGNORECASE,
)
_UUID_RE: Final = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_HEX_RE: Final = re.compile(r"[0-9a-fA-F]+")
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
_WORD_RE: Final = re.compile(r"[A-Za-z]+(?:'[a-z]+)?")


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


def _kw_kind(m: re.Match[str]) -> str:
    if m.group("pw") or m.group("zpw"):
        word = (m.group("pw") or m.group("zpw") or "").lower()
        digitish = (
            "pin",
            "cvv",
            "cvc",
            "otp",
            "code",
            "验证码",
            "校验码",
            "动态码",
            "安全码",
            "支付码",
            "取件码",
            "门禁码",
            "解锁码",
            "开锁码",
            "开门码",
            "配对码",
            "提取码",
            "授权码",
        )
        if any(w in word for w in digitish) and "pass" not in word and "密码" not in word:
            return "pin"
        return "password"
    return "key"


def _kw_type(m: re.Match[str]) -> SecretType:
    if m.group("tok") or m.group("ztok"):
        return "token"
    if m.group("key") or m.group("zkey"):
        return "api_key"
    return "password"


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
        if len(token) < 3:
            return None
        return m.start(1), token, text[pos : m.start(1)]
    return None


_PIN_WORD_RE: Final = re.compile(r"^pin(?:\s?(?:code|number))?$", re.IGNORECASE)
_PROSE_PIN_CONTEXT_RE: Final = re.compile(r"\b(?:bowling|hair|safety|rolling|push|lapel|bobby|map)\s*$", re.I)


_CLAUSE_SEPARATOR_RE: Final = re.compile(
    r"[^.。!！?？\n:：=]{0,80}?(?:[:：=]|(?<=\s)(?:is|was|are|were|will\s+be|should\s+be|es|est|ist|lautet|é|è|era|war|c'est)(?=\s)|"
    r"是|为|は)\s*"
)
"""An explicit separator or copula later in the clause: "password for the guests: X", "password
for the portal is X", "门禁卡的密码现在是X"."""
_OTHER_FIELD_RE: Final = re.compile(r"(?<![A-Za-z0-9_\-])[A-Za-z_][A-Za-z0-9_\-]*(?:=|[\"']\s*:)\s*$")
"""A code-style field name right before the separator (``contact=``, ``"contact":``): a later field's
separator, not the credential's ("password for the guests: X" is prose and still counts)."""
MAX_COPULAS: Final[int] = 3
"""Separators or copulas tried, in order, in the clause after a credential word."""
_ANSWERED_RE: Final = re.compile(
    r"[^.。!！?？\n]{0,60}?[?？]\s*(?:(?:it'?s|it\s+is|that'?s|it\s+was)(?=\s)|就?是|答\s*[：:])\s*"
)
"""The user asks the question and answers it: "my password for the vet portal? it's X", "wifi
密码？是X", "问：VPN密码多少？ 答：X"."""
_LATER_SENTENCE_RE: Final = re.compile(
    r"[^.。!！?？\n]{0,60}[.。!！]\s*(?:[^.。!！?？\n]{1,60}[.。!！]\s*)?"
    r"(?:it'?s|it’s|it\s+is|it\s+was|that'?s|that’s|that\s+is)[\s:：]+",
    re.IGNORECASE,
)
"""The value given in a sentence of its own after one or two short ones about it: "My password is
long. Really long. It is X" (a value of :func:`_strong_value` shape only)."""
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


_PIN_VALUE_RE: Final = re.compile(
    r"[^.。!！?？\n]{0,40}?(?<![0-9A-Za-z])([0-9]{3,10}(?:[ \-][0-9]{3,4}(?![0-9]))?[#*]?)(?![0-9A-Za-z])"
)
"""A code somewhere in the clause after a PIN word: ``482913``, ``602 918`` (codes are often shown
in groups), ``2580#`` (keypad codes end with # or *)."""
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
        head = re.match(r"[A-Za-z0-9!@#$%^&*_\-+=.~]{3,}", stripped)
        if head is None:
            return None
        stripped = head.group(0)
    if (
        stripped.startswith("//")  # "see https://intra.example.com/...": the colon was a URL scheme's
        or not credential_like(stripped, kind=kind)
        or _is_prose(m, stripped, gap, cjk_word=cjk_word)
    ):
        return None
    if stripped.replace("-", "").isalpha() and _PLURAL_WORD_RE.search(m.group(0)):
        return None  # "store your passwords in NoteLock": a plural names a kind of thing, not a value
    end = start + len(stripped)
    if kind == "pin" and stripped.isdigit() and _document_number(text, start):
        return None  # "校验码 58213 40921 77310 28841": an invoice's 20-digit check code, not a one-time code
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


def _has_symbol_or_digit(value: str) -> bool:
    return any(c.isdigit() or not c.isalnum() for c in value)


_PURPOSE_GAP_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:for|of|on|at|to|für|fürs|pour|para|per)(?![A-Za-z])", re.I
)
"""A preposition between a credential word and its first token: the token names what it opens."""


_STANDARD_BEFORE_RE: Final = re.compile(r"(?<![A-Za-z])(?:GB(?:/T)?|ISO|IEC|RFC|EN|DIN|ANSI|IEEE|JIS)\s*$")
"""A standard's name right before a number makes the number the standard's, not a code."""


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


def _first_or_named(text: str, m: re.Match[str], gap: str, found: _Span) -> _Span | None:
    """The credential when the first token after the keyword (``found``, after ``gap``) was accepted:
    it, or the value it turns out to describe or name."""
    if text[found[1] : found[2]].isalpha() and (later := _after_copula(text, m, (_LATER_SENTENCE_RE,))):
        # "My new password is complicated. It is: Kx9#mQ2p": the word describes it, the value follows
        return later
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
    if digits is not None and (found := _accept(text, m, digits.start(1), digits.group(1), ":")) is not None:
        return found
    if _PASSPHRASE_WORD_RE.fullmatch(m.group(0)):
        return _passphrase(text, m.end())
    return _later_made_up_value(text, m.end()) if password_word else None


def _read_out(text: str, m: re.Match[str], *, password_word: bool) -> _Span | bool:
    """A value dictated or read out after credential word ``m`` (a span); True when the words after
    it give a size instead ("the password is about twenty three characters long": no value); else
    False."""
    if password_word and (dictated := _dictated(text, m.end())) is not None:
        return dictated
    if _kw_type(m) == "password":
        spoken = _spoken(text, m.end(), word_first=_kw_kind(m) == "password")
        if spoken is not None:
            return spoken
        said = _SPOKEN_RE.match(text, m.end())
        if said is not None and _UNIT_AFTER_RE.match(text, said.end()):
            return True  # "the password was changed forty five minutes ago": a time, no value
    return _SIZE_AFTER_RE.match(text, m.end()) is not None


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


_TYPED_SYMBOL_CHARS: Final = frozenset("!@#$%^&*?~")
_JOINERS: Final = frozenset("-.+")


def typed_made_up(value: str) -> bool:
    """:func:`made_up_shape` with a symbol people type into passwords (``!@#$%^&*?~``, or ``_`` in a
    value without ``-``, ``.`` or ``+``): model names, versions, tickets and dates join their parts with
    those instead ("ThinkPad-X1c", "Firefox-121.0b3", "SEC-Policy_v2", "03-Dec-2024"), and a value after
    an identifier word is the identifier ("PR Auth-Refactor#1182", "case Case#00412-Ab")."""
    if not made_up_shape(value):
        return False
    if _TYPED_SYMBOL_CHARS.intersection(value):
        return True
    return "_" in value and not _JOINERS.intersection(value)


_IDENTIFIER_BEFORE_RE: Final = re.compile(
    r"(?<![^\W\d_])(?:pr|pull\s+request|issue|bug|ticket|case|panel|ref|order|build|version|release|model|room|train|"
    r"flight|doc|document|policy|section|branch|commit|job|host|server|device|laptop|phone|tag|sku|item|"
    r"number|no\.?|id|型号|版本|房间|工单|订单|编号)[\s:#：]*(?:is\s+|was\s+)?$",
    re.IGNORECASE,
)
MIN_MADE_UP_CHARS: Final[int] = 8
ALL_CLASSES: Final[int] = 4
"""Lower case, upper case, digits, symbols (:func:`character_classes`)."""
MAX_MADE_UP_CHARS: Final[int] = 64
_EMAIL_SHAPE_RE: Final = re.compile(r"[^@\s]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}")
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


_NUMBER_WORD: Final = (
    r"(?:zero|oh|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|"
    r"sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|"
    r"double|triple)"
)
_SPOKEN_RE: Final = re.compile(
    r"[ \t]*(?:is|was|[:=])[ \t]*(?:the\s+)?(?:(?P<word>(?!"
    + _NUMBER_WORD
    + r"(?![a-z]))[a-z]{3,20})[ \t]+)?"
    rf"(?P<numbers>{_NUMBER_WORD}(?:[ \t\-]+{_NUMBER_WORD})*)(?![A-Za-z])",
    re.IGNORECASE,
)
_NOT_SPOKEN_WORDS: Final = frozenset(
    {"about", "around", "over", "under", "only", "just", "least", "exactly", "roughly", "nearly", "almost"}
)
_SIZE_AFTER_RE: Final = re.compile(
    r"[ \t]*(?:is|was|[:=])[ \t]*(?:about|around|over|under|only|just|at\s+least|exactly|roughly|nearly|"
    rf"almost|up\s+to)[ \t]+(?:{_NUMBER_WORD}|[0-9]+)(?![A-Za-z])",
    re.IGNORECASE,
)
_UNIT_AFTER_RE: Final = re.compile(
    r"\s*(?:characters?|chars?|letters?|digits?|symbols?|bits?|bytes?|seconds?|minutes?|hours?|days?|weeks?|"
    r"months?|years?|times?|attempts?|tries|ago|max|maximum|min|minimum|long|percent|%)(?![A-Za-z])",
    re.IGNORECASE,
)
"""A unit after the number words makes them a size, a count or a time ("one hundred twenty characters
max", "forty five minutes ago")."""
MIN_SPOKEN_DIGITS: Final[int] = 3
"""Number words a spoken code needs on its own ("four four nine one"); after a word, two ("bluebird
seventy three"): fewer is a count or a size ("the code is one of six", "the password is eight long")."""


def _spoken(text: str, pos: int, *, word_first: bool = True) -> _Span | None:
    """A value read out, as in a voice transcript: number words after "is" ("the door code is four four
    nine one"), or, with ``word_first`` (a password, not a PIN: "the reset pin is GPIO twenty seven" is
    a board's pin), a word and number words ("the alarm password is bluebird seventy three")."""
    m = _SPOKEN_RE.match(text, pos)
    if m is None or _UNIT_AFTER_RE.match(text, m.end()):
        return None
    if m.group("word") and not word_first:
        return None
    numbers = len(re.findall(_NUMBER_WORD, m.group("numbers"), re.IGNORECASE))
    word = (m.group("word") or "").lower()
    if word in _NOT_SPOKEN_WORDS or word in FILLER_WORDS or word in _STOP_VALUES:
        if numbers < MIN_SPOKEN_DIGITS:
            return None
        return "password", m.start("numbers"), m.end("numbers")
    if numbers < (2 if word else MIN_SPOKEN_DIGITS):
        return None
    return "password", m.start("word") if word else m.start("numbers"), m.end("numbers")


def spoken_word_value(text: str, span: _Span) -> bool:
    """Whether a spoken value starts with a word ("tulip forty two"): after a bare "code" only number
    words count ("the lock code is easy twenty" is no code)."""
    return text[span[1] : span[2]].split(maxsplit=1)[0].lower() not in _NUMBER_WORDS_SET


_NUMBER_WORDS_SET: Final = frozenset(_NUMBER_WORD[3:-1].replace("|", " ").split())
_CODE_IS_RE: Final = re.compile(
    r"(?<![^\W\d_])(?:code|kod|koden|kode|koder|kodu|código|codice|код|κωδικός)(?![^\W\d_])"
    r"[^.!?。！？\n]{0,40}?(?:(?<![^\W\d_])(?:is|är|er|ist|est|es|é|è|je|jest|это)(?![^\W\d_])|[:=：]|是)"
    r"[ \t]*[\"'“‘]?([^\s\"'`“”‘’,，;；。、()（）<>]{8,64})",
    re.IGNORECASE,
)
"""A code word in any language, a copula or a separator in its clause, then a value: only a value of
:func:`made_up_shape` counts ("Koden till min app är Lingon#5583"; "the code is 4021" and "the code is
messy" are left to the access-code rules and prose)."""


def _code_is_spans(text: str) -> Iterator[_Span]:
    for m in _CODE_IS_RE.finditer(text):
        value = m.group(1).rstrip(_TRAILING)
        if typed_made_up(value) and not _NOT_ACCESS_CODE_RE.search(text, max(0, m.start() - 24), m.start()):
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
    }
)
"""Card numbers the payment providers publish for test mode (Stripe, Braintree and Adyen testing docs)."""
_TEST_MODE_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:sandbox|test|testing|simulat\w+)(?![A-Za-z])|测试|沙箱",
    re.IGNORECASE,
)
"""A CVV beside these words and a published test card is a payment provider's test value ("Sandbox
test cards: Visa 4111 ..., CVV 123"), not a card's secret ("Testing my new card: 5425 ..., CVV 482" is)."""
TEST_MODE_CHARS: Final[int] = 80


_SPELLED_ITEM: Final = (
    r"(?:(?:capital|upper(?:\s?case)?|lower(?:\s?case)?|small|big)\s+)?"
    r"(?:zero|one|two|three|four|five|six|seven|eight|nine|hash|pound|at|dollar|percent|ampersand|star|asterisk|"
    r"exclamation(?:\s+(?:mark|point))?|bang|dash|hyphen|underscore|dot|period|plus|equals|question\s+mark|"
    r"slash|caret|tilde|[A-Za-z0-9])"
)
_DICTATED_RE: Final = re.compile(
    rf"(?<![A-Za-z])({_SPELLED_ITEM}(?:\s*,\s*(?:then\s+)?{_SPELLED_ITEM}){{{5},31}})(?![A-Za-z0-9])",
    re.IGNORECASE,
)
DICTATED_WINDOW: Final[int] = 80
"""Characters after a password word where a dictated value may start (ours: one clause)."""


def _dictated(text: str, pos: int) -> _Span | None:
    """A password spelled out item by item, as to a voice assistant: six or more comma-separated
    letters, digits, number words or symbol names, one of them naming a case or a symbol ("capital K,
    seven, lowercase m, q, hash, two"), not inside parentheses ("kdf(p, s, n, r, 8, 1)")."""
    m = _DICTATED_RE.search(text, pos, min(len(text), pos + DICTATED_WINDOW + 400))
    if m is None or m.start(1) > pos + DICTATED_WINDOW or text[: m.start(1)].rstrip().endswith("("):
        return None
    if not _SPELLING_WORD_RE.search(m.group(1)):
        return None  # "columns A, B, C, D, E, F", "steps 1, 2, 3, 4, 5, 6": a list, not a spelling
    return "password", m.start(1), m.end(1)


_SPELLING_WORD_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:capital|upper(?:\s?case)?|lower(?:\s?case)?|small|big|hash|pound|dollar|percent|ampersand|"
    r"star|asterisk|exclamation|bang|dash|hyphen|underscore|caret|tilde|at\s+sign)(?![A-Za-z])",
    re.IGNORECASE,
)
"""Words only a spelling has: a letter's case or a symbol's name."""


_OBJECT_CODE_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:code|combination|combo|código|codice|код|kod)(?![A-Za-z])", re.IGNORECASE
)
_LOCK_CONTEXT_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:lockers?|locks?|padlocks?|alarms?|doors?|gates?|garage|safe|keypads?|lock\s?box|key\s?box|"
    r"intercom|buzzer|entry|vault|mailbox|storage\s+unit|suitcase|bike|shed|portão|puerta|portal|tür|porte|"
    r"cadenas|lucchetto|cancello|домофон\w*|двер\w*|подъезд\w*|сейф\w*|замк\w*)(?![A-Za-z])|"
    r"保险箱|保险柜|密码锁|门锁|快递柜|储物柜",
    re.IGNORECASE,
)
"""Things opened by a code: with one in the clause, "code" / "combination" names an access code
("the code on the parcel locker is 739214", "office alarm: code 1984", "safe combination 24-7-13")."""
_NOT_ACCESS_CODE_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:error|zip|postal|post|area|country|dial(?:ling)?|promo|discount|coupon|voucher|qr|bar|"
    r"source|status|http|tracking|product|course|class|dress|colou?r|reference|ref|booking|confirmation|"
    r"airport|flight|tax|sort|swift|bic|routing|exit|fault|trouble|diagnostic|obd|model|part)\s*$",
    re.IGNORECASE,
)
"""Words before "code" that make it an identifier, not an access code ("error code 4012")."""
LOCK_CONTEXT_CHARS: Final[int] = 40
"""Characters on each side of "code" searched for a thing it opens (ours: about one clause)."""
_CLAUSE_END_RE: Final = re.compile(r"[.。!！?？\n;；]")


_COMBINATION_VALUE_RE: Final = re.compile(r"(?:[0-9]{1,3}[\-/ ]){2,4}[0-9]{1,3}")
_COMBINATION_RE: Final = re.compile(
    r"[\s:：=]*(?:is\s+|was\s+)?(" + _COMBINATION_VALUE_RE.pattern + r")(?![0-9])"
)
"""A combination right after "combination" / "code": ``24-7-13``, ``is 10 20 30``."""


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


def _access_code_spans(text: str) -> Iterator[_Span]:
    for m in _DEVICE_CODE_RE.finditer(text):
        group = 1 if m.group(1) else 2
        if credential_like(m.group(group), kind="pin"):
            yield "password", m.start(group), m.end(group)
    for m in _OBJECT_CODE_RE.finditer(text):
        if _NOT_ACCESS_CODE_RE.search(text[max(0, m.start() - 24) : m.start()]):
            continue
        if not _LOCK_CONTEXT_RE.search(_clause_around(text, m.start(), m.end(), LOCK_CONTEXT_CHARS)):
            continue
        digits = _PIN_VALUE_RE.match(text, m.end()) or _COMBINATION_RE.match(text, m.end())
        if digits is None:
            spoken = _spoken(text, m.end())  # "the gate code is seven three three zero"
            if spoken is not None and not spoken_word_value(text, spoken):
                yield spoken
            continue
        value = digits.group(1)
        if credential_like(value, kind="pin") or _COMBINATION_VALUE_RE.fullmatch(value):
            yield "password", digits.start(1), digits.end(1)


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


def _shaped_like_password(value: str) -> bool:
    """A value named without a separator must look made up: a digit or a symbol, or capitals inside
    a word ("hunter2", "Blu3Whale$2026", "CorrectHorse"); a plain word is prose ("This is my password")."""
    if len(value) < 4 or is_masked(value) or _PLACEHOLDER_RE.fullmatch(value) or _looks_like_id(value):
        return False
    return any(not c.isalpha() for c in value) or (
        any(c.isupper() for c in value[1:]) and any(c.islower() for c in value)
    )


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


_ZH_RULE_WORDS_RE: Final = re.compile(r"强度|规则|要求|格式|示例|例如|比如|长度|策略|提示|复杂度|样例")
"""Words between a credential word and a value that make the value an example of a rule."""


def _handed_over_spans(text: str) -> Iterator[_Span]:
    for m in _ZH_HANDED_RE.finditer(text):
        value = m.group(1).rstrip(_TRAILING)
        if strong_password_shape(value) and not _ZH_RULE_WORDS_RE.search(text, m.start(), m.start(1)):
            yield "password", m.start(1), m.start(1) + len(value)


_USERINFO_BEFORE_RE: Final = re.compile(r"://[^\s/@]*$")


def _names_no_value(text: str, m: re.Match[str]) -> bool:
    """The credential word names no value here: it is a URL's password itself, a template's placeholder
    (``postgres://USER:PASSWORD@localhost``); "pin" in "bowling pin"; a test card's CVV in a payment
    provider's docs ("Sandbox test cards: Visa 4111 ..., CVV 123")."""
    if text.startswith("@", m.end()) and _USERINFO_BEFORE_RE.search(text, max(0, m.start() - 64), m.start()):
        return True
    if _PROSE_PIN_CONTEXT_RE.search(text, max(0, m.start() - 12), m.start()):
        return True
    return m.group(0).lower().startswith(("cvv", "cvc")) and _beside_a_test_card(text, m)


def _beside_a_test_card(text: str, m: re.Match[str]) -> bool:
    if not _TEST_MODE_RE.search(text, max(0, m.start() - TEST_MODE_CHARS), m.end() + TEST_MODE_CHARS):
        return False
    digits = re.sub(r"[ \-]", "", text)
    return any(card in digits for card in TEST_CARDS)


def _keyword_spans(text: str) -> Iterator[_Span]:
    yield from _handed_over_spans(text)
    for m in _KEYWORD_RE.finditer(text):
        word = m.group(0)
        # lower-case "pin" is usually the English word ("a pin", "pin the tab"); "PIN" / "pin code" count
        if (
            _PIN_WORD_RE.match(word)
            and not word[:3].isupper()
            and not re.search(r"pin\s?(?:code|number)", word, re.I)
            and not re.match(r"\s*(?:is|:|=|was|number|code)", text[m.end() : m.end() + 10], re.I)
        ):
            continue
        if _names_no_value(text, m):
            continue
        word = m.group(0).lower()
        if word == "key":
            found = _wifi_key(text, m)
        elif word in _OPTION_WORDS or (word == "pass" and text.startswith("--", m.start() - 2)):
            found = _option_value(text, m)
        else:
            found = _value_for(text, m)
        if found is not None:
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
_ZH_HANDED_RE: Final = re.compile(r"(?:密码|口令)[^\n。.!?！？；;A-Za-z0-9]{1,8}?\s+([!-~]{6,64})")
"""A Chinese credential word, a few words ("发你了哈", "给你"), then an ASCII value: "服务器root密码发你了哈
Wang@#5566root" (only a strong-password shape counts)."""


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


_MYSQL_ATTACHED_RE: Final = re.compile(
    r"(?<![A-Za-z0-9_\-])(?:mysql|mysqldump|mysqladmin|mysqlimport|mariadb(?:-dump|-admin)?)(?![A-Za-z0-9_\-])"
    r"[^\n]*?\s-p(?P<value>[^\s\"']{3,128})"
)
"""The MySQL client's attached password, ``mysql -u root -pS3cret db`` (its ``-p`` takes the password
glued to it, MySQL reference manual 6.2.2.1; only after a MySQL client name: elsewhere ``-p`` is a
port, a parent directory or a path)."""


def _flag_spans(text: str) -> Iterator[_Span]:
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
    if gated and ("://" not in text or "@" not in text):
        return
    for m in _URL_CREDENTIALS_RE.finditer(text):
        # "postgres://USER:PASSWORD@localhost:5432/app" is a template (e.g. .env.example)
        placeholder = m.group(1).lower() in _URL_PLACEHOLDERS or _PLACEHOLDER_RE.fullmatch(m.group(1))
        if not is_masked(m.group(1)) and not placeholder:
            yield "password", m.start(1), m.end(1)


_WORD_CLASSES: Final[dict[str, tuple[str, ...]]] = {
    # every alternative of _KEYWORD_RE and _GLUED_RE contains one of these (lower case)
    "keyword": (
        *["pass", "pwd", "pw", "pin", "code", "combo", "combination", "cvv", "cvc", "otp", "key", "secret"],
        *["lock", "门禁", "门锁"],  # _DEVICE_CODE_RE (its other words contain "key" / "码")
        *["código", "codice", "код", "kod", "answer"],
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
        *["비밀번호", "암호"],
        *["lösenord", "losenord", "adgangskode", "passord", "salasana", "heslo", "hasło", "haslo", "jelsz"],
        *["parolă", "şifre", "sifre", "κωδικ", "mật khẩu", "kata sandi", "पासवर्ड", "كلمة", "رمز", "סיסמ"],
        "รหัสผ่าน",
        "masterauth",
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


_LONE_LINE_RE: Final = re.compile(r"^[ \t]*([0-9A-Za-z][0-9A-Za-z!@#$%^&*?~_\-.]{7,63})[ \t]*$", re.MULTILINE)
_TYPED_SYMBOLS: Final = frozenset("!@#$%^&*?~")
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
        if not typed_made_up(value) or not _TYPED_SYMBOLS.intersection(value):
            continue
        above = text[: m.start()].rstrip("\n").split("\n")[-NOTE_CONTEXT_LINES:]
        if any(_NOTE_CONTEXT_RE.search(line) for line in above):
            yield "password", m.start(1), m.start(1) + len(value)


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


__all__ = ["CONTEXT_WINDOW", "PROVIDER_PATTERNS", "credential_like", "detect_secrets", "entropy", "is_masked"]
