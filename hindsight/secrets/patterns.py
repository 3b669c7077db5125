"""Layer 2 of :mod:`hindsight.secrets`, keyword in context: the credential words and what may
stand between a word and its value.

The credential words (:data:`_KEYWORD_RE`): password, passcode, passphrase, PIN, secret, token,
API key, OTP / verification code, CVV and their equivalents in other languages; 密码, 口令, 密钥,
秘钥, 令牌, 验证码, 校验码, 动态码, 安全码; session cookies and ids (``sessionid=``, ``PHPSESSID``,
``JSESSIONID``, "session key"). :func:`_kw_kind` and :func:`_kw_type` read a match's kind of
value and secret type. The filler words ("is", "for the router", "是", "为", "改成了",
:data:`FILLER_WORDS`, :data:`ZH_FILLERS`), separators and the value token's shape are used by
:mod:`hindsight.secrets.keyword` to find the value after a word.
"""

from __future__ import annotations

import re
from typing import Final

from hindsight.secrets.values import SecretType

_EN_PASSWORD: Final = (
    r"pass\s?words?|passwd|passphrase|pass\s?codes?|pwd|pw|pin(?:\s?(?:code|number))?|"
    r"security\s+code|security\s+(?:question\s+)?answer|secret\s+answer|cvv2?|cvc|otp|"
    # a security question, then its answer later in the clause ("security question 'first pet', answer: X")
    r"(?:security|secret)\s+question[^.\n]{0,60}?\banswer|"
    # the code word a bank or a call centre asks for (en, ru, uk)
    r"code\s?word|кодов(?:ое|ого|ым)\s+слов(?:о|а|ом)|кодов(?:е|ого|им)\s+слов(?:о|а|ом)|"
    # the words banks and call centres ask for beside a PIN ("the security word?", "your memorable word")
    r"(?:security|secret|memorable)\s+word|memorable\s+information|"
    r"one[\s\-]time\s+(?:code|password|passcode)|"
    r"verification\s+code|2fa\s+code|auth(?:entication)?\s+code|log[\s-]?in\s+code|sign[\s-]?in\s+code|"
    r"unlock\s+code|"
    r"door\s+code|alarm\s+code|access\s+code|wi-?fi\s+key|(?<=[_\-.])pass(?=[\"']?\s*[:=])|"
    # Redis' password directives and options (redis.conf, redis-server --requirepass X), "--pass X"
    r"requirepass|masterauth|(?<=--)pass(?=[\s=])|"
    # a bare "key ... is" names a value only near a Wi-Fi word (checked in _wifi_key)
    r"(?<=\s)key(?=\s+(?:is|was)[\s:])|"
    # other languages: de, es, fr, pt, nl, it, ru (the words users write before a password)
    r"passwort|kennwort|contrase(?:ñ|n)a|clave|mot\s+de\s+passe|mdp|senha|wachtwoord|parola\s+d'ordine|пароль|"
    # one-time and verification codes in those languages (SMS and e-mail wording of banks and apps)
    r"c[oó]digo\s+de\s+(?:verificaci[oó]n|verifica[cç][aã]o|seguridad|seguran[cç]a|acceso|acesso|un\s+solo\s+uso)|"
    r"code\s+de\s+(?:v[ée]rification|s[ée]curit[ée]|validation)|code\s+d'acc[èe]s|"
    r"(?:best[äa]tigungs|sicherheits|verifizierungs|freigabe)code|"
    r"codice\s+(?:di\s+(?:verifica|sicurezza|accesso)|otp)|verificatiecode|beveiligingscode|"
    r"kod\s+(?:weryfikacyjny|sms|dost[eę]pu)|код\s+(?:подтверждения|из\s+смс|доступа)|проверочный\s+код|"
    r"doğrulama\s+kod\w*|mã\s+(?:xác\s+(?:nhận|thực|minh)|otp)|kode\s+(?:verifikasi|otp|akses)|"
    r"verifieringskod\w*|engångskod\w*|bekræftelseskode|verifiseringskode|vahvistuskoodi|"
    r"κωδικ(?:ός|ό|ού)\s+επαλήθευσης|"
    # and sv, da/no, fi, cs/sk, pl, hu, ro, tr, el, vi, id, hi, ar, fa, he, th
    # (inflected: "lösenordet", "hasła", "şifrem", "jelszavam", "κωδικού")
    r"lösenord\w*|losenord\w*|adgangskode\w*|passord\w*|salasan\w*|hesl[oa]\w*|has[łl][oae]\w*|haśle|jelsz\w*|"
    r"parolă|parola\s+(?:mea|ta)|[şs]ifre(?:m|n|si|niz|miz|yi)?|κωδικ(?:ός|ό|ού)\s+(?:πρόσβασης|μου|σου)|"
    r"mật\s+khẩu|kata\s+sandi|पासवर्ड|"
    # Hindi PIN, OTP and verification code ("मेरा UPI पिन 4729 है", "आपका ओटीपी 482913 है")
    r"पिन(?:\s?(?:कोड|नंबर))?|ओटीपी|सत्यापन\s+कोड|"
    r"كلمة\s+(?:المرور|السر)|رمز\s+عبور|סיסמ[הא]|รหัสผ่าน|"
    # and ms, sw, hr/sr/bs, ta, bn, ur; their one-time and verification codes
    r"kata\s+laluan|nenosiri|lozink[aeiu]|கடவுச்சொல்|পাসওয়ার্ড|پاس\s?ورڈ|"
    r"kod\s+(?:pengesahan|tac|keselamatan)|msimbo\s+wa\s+(?:uthibitisho|siri)|ওটিপি|ভেরিফিকেশন\s+কোড|"
    r"যাচাইকরণ\s+কোড|ஓடிபி|சரிபார்ப்பு\s+குறியீடு|تصدیقی\s+کوڈ|او\s?ٹی\s?پی|"
    # and ca, gl, eu, et, lt, sl, sr/mk/bg, sq, is, ga, cy, af, zu, so, ha, az, uz, mn, ka, hy, si, km, lo,
    # my, ml, te, kn, gu, pa, ps (the password word); PIN in Cyrillic; the one-time and login codes of
    # mk/bg/sr and the verification code of km
    r"contrasenya|contrasinal|pasahitz\w*|parool\w*|slaptažod\w*|gesl[oa]|лозинк\w*|парол(?:а|ата|и)|"
    r"fjalëkalim\w*|lykilorð\w*|pasfhocal|cyfrinair|wagwoord|iphasiwedi|furaha\s+sirta|kalmar\s+sirri|"
    r"şifrə\w*|parol(?:i|im|ingiz|ni)?|нууц\s+үг|პაროლ\w*|գաղտնաբառ\w*|මුරපදය|ពាក្យសម្ងាត់|ລະຫັດຜ່ານ|"
    r"စကားဝှက်|പാസ്\u200c?വേഡ്|పాస్\u200c?వర్డ్|ಪಾಸ್\u200c?ವರ್ಡ್|પાસવર્ડ|ਪਾਸਵਰਡ|پټنوم|"
    r"пин(?:-?\s?код\w*)?|еднократен\s+код|код\s+за\s+(?:најава|потврда|верификација|вход|потвърждение)|"
    r"លេខកូដ\w*"
)
_ZH_PASSWORD: Final = (
    r"密码|口令|验证码|校验码|动态码|安全码|支付码|取件码|门禁码|解锁码|开锁码|开门码|"
    r"配对码|提取码|授权码|暗号|PIN码|パスワード|暗証番号|비밀번호|비번|암호|密保答案|"
    # a security question, then its answer ("密保问题“第一只宠物的名字”，答案是X")
    r"密保问题[^。\n]{0,40}?答案|安全问题[^。\n]{0,40}?答案|"
    r"认证码|認証コード|確認コード|인증\s?번호|인증\s?코드|رمز\s+(?:التحقق|التفعيل)"
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
            "认证码",
            # the one-time and verification codes of other languages (above)
            "código",
            "codice",
            "kod",
            "kood",
            "κωδικ",
            "код",
            "kode ",
            "mã ",
            "コード",
            "인증",
            "رمز ال",
            "पिन",
            "ओटीपी",
            "कोड",
            "msimbo",
            "ওটিপি",
            "কোড",
            "ஓடிபி",
            "குறியீடு",
            "کوڈ",
            "ٹی",
            "пин",
            "កូដ",
        )
        spoken_word = "word" in word or "слов" in word  # a code word is a word ("кодовое слово")
        if any(w in word for w in digitish) and "pass" not in word and "密码" not in word and not spoken_word:
            return "pin"
        return "password"
    return "key"


def _kw_type(m: re.Match[str]) -> SecretType:
    if m.group("tok") or m.group("ztok"):
        return "token"
    if m.group("key") or m.group("zkey"):
        return "api_key"
    return "password"


_PIN_VALUE_RE: Final = re.compile(
    r"[^.。!！?？\n]{0,40}?(?<![0-9A-Za-z])([0-9]{3,10}(?:[ \-][0-9]{3,4}(?![0-9]))?[#*]?|"
    r"[0-9](?:[ \-][0-9]){3,7}(?![ \-]?[0-9]))(?![0-9A-Za-z])"
)
"""A code somewhere in the clause after a PIN word: ``482913``, ``602 918`` (codes are often shown
in groups), ``2580#`` (keypad codes end with # or *), ``1 2 3 4`` (4-8 digits read out one by one)."""
