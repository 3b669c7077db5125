"""Layer 1 of :mod:`hindsight.secrets`: known token formats of the major providers.

:data:`PROVIDER_PATTERNS`: cloud access keys (AWS, Alibaba Cloud, Tencent Cloud, Google, Azure
storage keys), Git hosting (GitHub, GitLab), model hubs and model APIs (Hugging Face,
OpenAI/Anthropic ``sk-``, Groq, Replicate, Perplexity), chat platforms (Slack tokens and webhooks,
Feishu/Lark and Teams webhooks, Discord, Telegram bots), payment providers (Stripe, Square), package
registries (npm, PyPI) and JWTs. The prefixes are the providers' documented formats (as collected by
gitleaks and detect-secrets); each match must also look generated (letters and digits). One Aho-Corasick
automaton over the patterns' literals (:data:`_LITERALS`) says which patterns a text may match.

Also the other fixed formats: PEM/OpenSSH/PuTTY private-key blocks, connection strings with a
password, Wi-Fi QR payloads and ``Bearer``/``Basic`` values. The spans are found by
:mod:`hindsight.secrets.structured`.
"""

from __future__ import annotations

import re
from typing import Final

import ahocorasick_rs

from hindsight.secrets.values import SecretType

_L: Final = r"(?<![A-Za-z0-9_\-])"
"""Left boundary for a token: not inside a longer identifier (no \\b: CJK counts as a word char)."""
_R: Final = r"(?![A-Za-z0-9_\-])"

# (type, pattern, group holding the secret or 0 for the whole match)
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
    # Feishu / Lark custom bots (the hook id in the path) and Microsoft Teams incoming webhooks
    ("token", r"open\.(?:feishu\.cn|larksuite\.com)/open-apis/bot/v2/hook/([0-9A-Za-z\-]{20,64})", 1),
    ("token", r"\.webhook\.office\.com/webhookb2/([0-9A-Za-z\-@/]{40,300})", 1),
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
    ("open-apis/bot",),
    ("webhookb2",),
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
