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

Modules, one layer each (imported in this order; none imports a later one):
:mod:`~hindsight.secrets.stopwords` and :mod:`~hindsight.secrets.values` (value shapes, the span
type), :mod:`~hindsight.secrets.providers` (layer 1's formats), :mod:`~hindsight.secrets.patterns`
(layer 2's credential words and fillers), :mod:`~hindsight.secrets.spoken` (values read out or
dictated), :mod:`~hindsight.secrets.codes` (access codes, recovery material),
:mod:`~hindsight.secrets.keyword` (layer 2: the value after a credential word),
:mod:`~hindsight.secrets.login` (login phrases), :mod:`~hindsight.secrets.structured` (formats,
flags, notes and layer 3) and :mod:`~hindsight.secrets.detect` (:func:`detect_secrets`, the entry
point).
"""

from hindsight.secrets.detect import detect_secrets
from hindsight.secrets.keyword import TEST_CARDS, TEST_CONTEXT_CHARS, TEST_CONTEXT_RE
from hindsight.secrets.providers import PROVIDER_PATTERNS
from hindsight.secrets.spoken import spoken_word_value
from hindsight.secrets.structured import CONTEXT_WINDOW
from hindsight.secrets.values import (
    MIN_ENTROPY_BITS,
    SecretType,
    character_classes,
    credential_like,
    entropy,
    is_masked,
    made_up_shape,
    random_letters,
    strong_password_shape,
    typed_made_up,
)

__all__ = [
    "CONTEXT_WINDOW",
    "MIN_ENTROPY_BITS",
    "PROVIDER_PATTERNS",
    "TEST_CARDS",
    "TEST_CONTEXT_CHARS",
    "TEST_CONTEXT_RE",
    "SecretType",
    "character_classes",
    "credential_like",
    "detect_secrets",
    "entropy",
    "is_masked",
    "made_up_shape",
    "random_letters",
    "spoken_word_value",
    "strong_password_shape",
    "typed_made_up",
]
