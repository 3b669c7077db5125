"""Concept cues for the instruction classifier: bilingual word families that memory-poisoning text
combines (issue 10 item 2; A-MemGuard's observation that poisoned records are *instructions about
the memory* rather than facts about the user).

Character n-grams see phrasings; cues see concepts across phrasings. Each cue is a family of
English and Chinese words for one concept, with literals in thirteen more languages
(:data:`OTHER_LANGUAGES`); a text either shows the concept or not. The classifier
learns their weights per source group, so "remember" from the user and "remember" inside a web
page can weigh differently. A few conjunctions (``ai+memory`` ...) let the linear model score the
combination higher than its parts.

The families come from the attack classes the issue names (instructions to the assistant hidden in
tool results and documents, fake administrator notices, tool output that "corrects" safety-critical
facts, directives with persistence), from the usual hiding techniques of indirect prompt injection
(HTML comments, invisible text) and from the benign text that shares their words (the user's own
preferences, quoted attacks in security discussions, tool instructions addressed to people): general
vocabulary of each concept, no phrase of a benchmark line. ``safety_topic`` holds the words of
:data:`hindsight.consistency.SAFETY_CATEGORIES` (allergies, medication, identity, credentials, payment).

Matching is by literals, not regexes: the text's English words are joined by single spaces and
searched once for every English word, phrase and word prefix of every family (space-delimited), and
the normalised text once for every Chinese term and markup literal, each with one Aho-Corasick
automaton (``ahocorasick-rs``, overlapping matches), so all families together cost two linear scans.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Final

import ahocorasick_rs

from hindsight.folding import fold


@dataclass(frozen=True, slots=True)
class Family:
    """One concept: English words, English phrases (space-separated words), English word prefixes,
    Chinese substrings."""

    words: frozenset[str] = frozenset()
    phrases: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()
    chinese: tuple[str, ...] = ()


def _f(words: str = "", phrases: str = "", prefixes: str = "", chinese: str = "") -> Family:
    return Family(
        frozenset(words.split()),
        tuple(f" {p.strip()} " for p in phrases.split(",") if p.strip()),
        tuple(f" {p}" for p in prefixes.split()),
        tuple(chinese.split()),
    )


FAMILIES: Final[dict[str, Family]] = {
    # who is addressed or talked about
    "ai_reader": _f(
        "ai llm llms gpt gpts chatbot chatbots bot bots assistant assistants agent agents copilot "
        "copilots model models",
        "language model, language models, model instances, automated reader, automated readers, automated "
        "system, "
        "automated assistant, automated agent, automated agents, ai helper, ai helpers, memory service, "
        "memory agent, "
        "memory module, memory system",
        chinese="人工智能 智能助手 智能助理 助手 助理 机器人 大模型 模型 智能体 智能客服 "
        "记忆系统 记忆模块 记忆服务",
    ),
    "third_person_user": _f(
        phrases="the user, the user's, this user, this user's, the customer, the customer's, the patient, "
        "the patient's, the person you assist, the person you help, the account holder, the member",
        chinese="该用户 这位用户 此用户 用户 使用者 客户 患者 对方",
    ),
    "first_person": _f("i i'm i've i'd i'll me my mine myself", chinese="我 咱"),
    "second_person_modal": _f(
        phrases="you must, you should, you shall, you have to, you need to, you are required, you are "
        "obliged, "
        "you are expected, you are instructed, you are authorised, you are authorized, you are to, "
        "assistants must, assistants should, agents must, agents should, models must, bots must",
        chinese="你必须 你要 你应该 你应当 你须 你需要 你务必 你一律 你都要 须 务必 应当 不得",
    ),
    "third_party": _f(
        "anyone anybody everyone everybody whoever others coworkers colleagues visitors strangers",
        "other users, all users, every user, each user, other people, all customers, every customer, new "
        "users, "
        "the users, people who ask, anyone who asks",
        chinese="任何人 所有人 别人 其他人 大家 每个人 所有用户 其他用户 凡是 谁来问 谁问",
    ),
    # what is asked
    "safety_off": _f(
        "filter filters filtering restriction restrictions guardrail guardrails censorship moderation "
        "jailbreak "
        "jailbroken unrestricted uncensored unfiltered",
        "safety rules, safety guidelines, safety settings, content policy, no limits, without limits, "
        "developer mode, turn off, switch off",
        chinese="限制 过滤 安全规则 审核 越狱 无限制 没有限制 不受限 开发者模式 关闭安全",
    ),
    "memory_write": _f(
        "remember remembered memorise memorize memorised memorized store stored stores save saved saves "
        "persist "
        "persisted persists record recorded records retain retained retains overwrite",
        "note it, note that, note down, note this, make a note, file under, file it under, log it, log that, "
        "add to your memory, add it to your memory, add this to your memory, add to your notes, add to "
        "the profile, "
        "write into, write it into, write to, keep in mind, keep it in mind, update its records, update "
        "your records, "
        "update their records",
        chinese="记住 记下 记得 牢记 存入 保存 写入 写进 记录 登记 存档 标记 记在 录入 存到 备注",
    ),
    "memory_target": _f(
        "memory memories profile preference preferences",
        "long term memory, long-term memory, persistent memory, user facts, notes about, records of, "
        "records about, "
        "knowledge base",
        chinese="长期记忆 永久记忆 记忆 档案 用户画像 偏好 资料库 知识库 备忘",
    ),
    "persistence": _f(
        "henceforth hereafter permanently forever always",
        "from now on, from here on, going forward, for good, in future, in all future, all future, "
        "all subsequent, in subsequent, every time, every reply, every answer, each time, each reply, "
        "from this point, never again, at all times",
        chinese="以后 今后 此后 往后 从今 从现在 从此 永久 永远 长期 一直 每次 始终 一律 之后",
    ),
    "authority": _f(
        "admin admins administrator administrators official policy policies compliance headquarters verified "
        "directive notice authorised authorized",
        "system notice, system message, system administrator, system update, system policy, security team, "
        "it security, it department, platform notice, by order of, highest priority",
        "regulat mandat",
        chinese="管理员 系统公告 系统通知 官方 平台 规定 合规 监管 "
        "上级 总部 通知 公告 安全部门 最高权限 指令 授权",
    ),
    "precedence": _f(
        "supersede supersedes override overrides outrank outranks",
        "takes priority, take priority, takes precedence, priority above, priority over, above the user, "
        "above user, regardless of, ignore any conflicting, ignore conflicting, ignore earlier, ignore "
        "previous, "
        "higher priority, instead of the user",
        chinese="优先于 高于 优先级 覆盖 无视 不受",
    ),
    "concealment": _f(
        "secretly quietly silently hidden invisible",
        "do not tell, don't tell, never tell, do not inform, do not notify, don't notify, do not surface, "
        "do not mention, don't mention, do not warn, don't warn, never warn, do not ask, don't ask, "
        "without asking, without telling, without notifying, without confirming, without consent, white "
        "text, "
        "white font",
        chinese="不得向 不得告知 不得提示 不得通知 不要告诉 别告诉 悄悄 "
        "秘密地 偷偷 不用再征求 无需确认 不必确认 隐藏 隐形",
    ),
    "promotion": _f(
        "recommend recommends promote promotes",
        "only recommend, only suggest, only show, only use, only book, link to, refer readers to, refer "
        "users to, "
        "trusted store, trusted source, trusted site",
        chinese="推荐 只推荐 优先展示 优先推荐 推广 只信任 首选",
    ),
    "sensitive_data": _f(
        "password passwords credential credentials pin pins passport passports mfa 2fa",
        "card number, card numbers, recovery code, recovery codes, verification code, verification codes, "
        "one time code, one-time code, id number, id numbers, login details, bank details, bank account",
        chinese="密码 卡号 身份证 验证码 账号 银行卡 登录信息",
    ),
    "correction": _f(
        "mistake mistakes mistaken clerical erroneous wrong incorrect obsolete superseded removed resolved "
        "discontinued invalid cleared outdated replaced",
        "entered in error, recorded in error, no longer",
        "misdiagnos",
        chinese="错误 有误 作废 误诊 不再 已变更 已更改 删除 无效",
    ),
    "safety_topic": _f(
        "epipen dosage dose mg insulin warfarin metformin epinephrine antibiotic antibiotics passport pin "
        "2fa iban "
        "payout birthday",
        "legal name, real name, date of birth, national id, social security, blood type, two-factor, "
        "recovery code, "
        "bank account, card ending, credit card, payment method, payment details",
        "allerg anaphyla medicat prescri password passcode",
        chinese="过敏 用药 药物 处方 剂量 胰岛素 华法林 停药 "
        "服用 真实姓名 出生日期 身份证 护照 血型 密码 口令 验证码 "
        "收款 银行卡 账户 支付",
    ),
    "hidden_markup": _f(
        phrases="display none",
        chinese="<!-- --> display:none display: none font-size:0 color:white color:#fff [hidden [white "
        "隐藏文字 白色字体",
    ),
    "reporting": _f(
        "says said saw found explain example attack attacks attacker attackers paper article class story "
        "phishing scam defence defences defense defenses",
        "such as, red team, writing about, write about",
        chinese="论文 例子 比如 例如 攻击 钓鱼 诈骗 防范 怎么防 科普",
    ),
    "question": _f(
        "how what why",
        "should i, can you, is that",
        chinese="? 吗 怎么 如何 什么 为什么",
    ),
}

OTHER_LANGUAGES: Final[dict[str, str]] = {
    # The same concepts in the other languages users and attackers write in (German, French, Spanish,
    # Portuguese, Italian, Dutch, Polish, Russian, Turkish, Japanese, Korean, Vietnamese, Indonesian;
    # since 2026-12-03 evening also Swedish, Danish, Norwegian, Finnish, Czech, Ukrainian, Greek, Hindi,
    # Arabic, Hebrew, Thai, Romanian, Hungarian; since 2026-12-03 night also Bengali, Tamil, Swahili, Malay,
    # Tagalog, Persian, Urdu, Croatian/Serbian, Slovak and more Vietnamese and Turkish; since 2026-12-04
    # also Kazakh, more Polish, Korean, Urdu, Indonesian, Ukrainian; the user in the third person and
    # switching safety off in other languages),
    # general vocabulary as above; literals separated by "|" (they may hold spaces), matched as
    # substrings of the normalised text like the Chinese terms. More Chinese terms of safety topics.
    "ai_reader": "assistent|ki-assistent|asistente|assistente|ассистент|ии-помощник|アシスタント|"
    "エージェント|チャットボット|어시스턴트|에이전트|챗봇|trợ lý ảo|asisten ai|"
    "assistenten|ai-assistent|avustaja|tekoälyavustaja|asistent|asistenta|asistentovi|асистент|"
    "ші-асистент|βοηθός|βοηθέ|सहायक|एआई|مساعد|المساعد|עוזר|העוזר|ผู้ช่วย|asistentul|asszisztens|"
    "trợ lý|সহকারী|এআই|உதவியாளர்|msaidizi|pembantu ai|katulong|دستیار|اسسٹنٹ|asystent|көмекші|asisten",
    # the user named in the third person (the Chinese and English terms are in FAMILIES)
    "third_person_user": "사용자|ユーザー|utilisateur|usuario|utente|benutzer|nutzer|пользовател|kullanıcı|"
    "người dùng|pengguna|użytkownik|користувач|χρηστη|उपयोगकर्ता|المستخدم|המשתמש|ผู้ใช้|utilizator|"
    "felhasználó|användaren|brukeren|käyttäjä|uživatel|používateľ|کاربر|صارف|mtumiaji|gumagamit|korisnik|"
    "пайдаланушы",
    "safety_off": "حفاظتی|désactive|désactivez|desactiva|desativ|disattiva|deaktiviere|отключи|отключите|"
    "вимкни|вимкніть|wyłącz|matikan|tắt bộ lọc|비활성화|無効化|セキュリティチェックを|güvenlik kontrol",
    "memory_write": "merke dir|merk dir|speichere|vermerke|mémorise|retiens que|enregistre|memoriza|"
    "recuerda que|anota que|memorize|lembre-se|memorizza|ricorda che|onthoud|zapamiętaj|запомни|сохрани|"
    "запиши|unutma|覚えて|記憶して|保存して|登録して|記録して|기억해|저장해|기록해|등록해|hãy nhớ|ingat|"
    "kom ihåg|spara det|spara detta|husk det|husk at|gem det|lagre det|lagre dette|muista|tallenna|"
    "zapamatuj|ulož|zapiš|запам'ятай|збережи|запиши|"
    "θυμήσου|αποθήκευσε|याद रखें|याद रख|सहेजें|सेव करें|تذكر|احفظ|سجل|זכור|שמור|จำไว้|บันทึก|"
    "ține minte|salvează|jegyezd meg|mentsd el|"
    "ghi nhớ|lưu lại|lưu vào|মনে রাখ|সংরক্ষণ কর|நினைவில் வை|நினைவில் கொள்|kumbuka|hifadhi|simpan|"
    "catat|tandaan|به خاطر بسپار|ذخیره کن|یادت باشد|یاد رکھ|محفوظ کر|zapamti|spremi|zabilježi|"
    "zapamätaj|zapisz|zachowaj|dodaj do pamięci|сақта|есте сақта|sakla|kaydet|hafızana",
    "memory_target": "gedächtnis|mémoire|memoria|memória|geheugen|pamięć|памят|hafıza|長期記憶|記憶に|"
    "プロフィール|장기 기억|기억에|프로필|bộ nhớ|ingatan|"
    "i minnet|långtidsminne|hukommelse|hukommelsen|muisti|muistiin|paměť|paměti|пам'ять|пам'яті|μνήμη|"
    "μνήμης|मेमोरी|स्मृति|الذاكرة|ذاكرة|זיכרון|הזיכרון|หน่วยความจำ|ความจำ|memoria ta|memória|memóriá|"
    "trí nhớ|স্মৃতি|মেমোরি|நினைவகம்|kumbukumbu|memori|حافظه|memorij|pamięci|жадқа|жадында|жады|"
    "پروفائل|یادداشت",
    "persistence": "ab sofort|von nun an|von jetzt an|künftig|zukünftig|dauerhaft|désormais|dorénavant|"
    "à partir de maintenant|à l'avenir|a partir de ahora|de ahora en adelante|en adelante|a partir de agora|"
    "de agora em diante|daqui em diante|d'ora in poi|da ora in poi|d'ora in avanti|vanaf nu|voortaan|"
    "od teraz|od tej chwili|отныне|с этого момента|впредь|во всех будущих|bundan sonra|bundan böyle|"
    "今後すべて|今後は|これからは|永続|以降すべて|すべての会話|全ての会話|지금부터|앞으로도|앞으로 모든|"
    "모든 대화|계속 적용|영구|từ giờ|từ nay|mulai sekarang|seterusnya|"
    "från och med nu|hädanefter|framöver|i framtiden|i alla framtida|fra nu af|fremover|fra nå av|"
    "heretter|tästä lähtien|jatkossa|od teď|od nynějška|napříště|ve všech budoucích|vždy|"
    "відтепер|надалі|завжди|з цього моменту|από τώρα και στο εξής|στο εξής|πάντα|आगे से|अब से|हमेशा|"
    "भविष्य में|हर उत्तर|من الآن فصاعدا|من الآن|دائما|دائمًا|מעכשיו|מהיום|תמיד|ต่อจากนี้|ตั้งแต่นี้|"
    "ทุกครั้ง|ตลอดไป|de acum înainte|întotdeauna|mostantól|ezentúl|mindig|"
    "luôn luôn|mãi mãi|vĩnh viễn|এখন থেকে|সবসময়|স্থায়ীভাবে|இனிமேல்|எப்போதும்|நிரந்தரமாக|"
    "kuanzia sasa|daima|siku zote|kila mara|mulai hari ini|selamanya|sentiasa|mula ngayon|palagi|"
    "از این به بعد|همیشه|اب سے|ہمیشہ|od sada|ubuduće|uvijek|zauvijek|odteraz|앞으로는|항상|언제나|"
    "zawsze|na stałe|бұдан былай|әрқашан|тұрақты|selalu|her zaman|daima",
    "authority": "administrator|administrateur|administrador|amministratore|администратор|systemhinweis|"
    "avis système|aviso del sistema|aviso do sistema|системное уведомление|sicherheitsteam|"
    "équipe de sécurité|equipo de seguridad|служба безопасности|管理者|システム通知|運営事務局|"
    "관리자|시스템 공지|운영팀|공식|"
    "systemmeddelande|säkerhetsteamet|administratören|järjestelmäilmoitus|ylläpitäjä|správce|"
    "systémové oznámení|bezpečnostní tým|адміністратор|системне повідомлення|служба безпеки|"
    "διαχειριστής|ειδοποίηση συστήματος|व्यवस्थापक|सिस्टम सूचना|مسؤول النظام|إشعار النظام|"
    "מנהל המערכת|הודעת מערכת|ผู้ดูแลระบบ|ประกาศระบบ|administratorul|notificare de sistem|"
    "rendszergazda|rendszerüzenet|"
    "quản trị viên|thông báo hệ thống|প্রশাসক|সিস্টেম বিজ্ঞপ্তি|நிர்வாகி|msimamizi|"
    "taarifa ya mfumo|pentadbir|notis sistem|pemberitahuan sistem|tagapangasiwa|مدیر سیستم|"
    "اطلاعیه سیستم|منتظم|obavijest sustava|ایڈمنسٹریٹر|سسٹم|اطلاع|әкімші|жүйелік хабарлама|"
    "pemberitahuan resmi|oficjalne|komunikat",
    "precedence": "vorrang|hat priorität|priorité sur|prioridad sobre|prioridade sobre|priorità su|"
    "приоритет над|ignoriere|ignore les|ignora las|ignore as|ignora le|игнорируй|優先して|無視して|"
    "우선합니다|무시하고|"
    "har företräde|ignorera|ignorer|ignoruj|má přednost|ігноруй|має пріоритет|αγνόησε|"
    "προτεραιότητα|अनदेखा|प्राथमिकता|تجاهل|أولوية|התעלם|עדיפות|ละเว้น|เพิกเฉย|ignoră|prioritate|"
    "hagyd figyelmen kívül|elsőbbség|"
    "bỏ qua|ưu tiên hơn|উপেক্ষা|புறக்கணி|puuza|kipaumbele|abaikan|keutamaan|نادیده بگیر|zanemari|"
    "ignoriraj|ima prednost",
    "concealment": "ohne zu fragen|ohne rückfrage|ohne bestätigung|sans demander|sans confirmation|"
    "sin preguntar|sin confirmación|sem perguntar|sem confirmação|senza chiedere|senza conferma|"
    "не спрашивая|без подтверждения|sormadan|確認せずに|知らせずに|黙って|묻지 말고|확인하지 말고|"
    "알리지 말고|不需要再联系|无需联系|不用联系|不需要确认|无需征得|"
    "utan att fråga|säg inte|berätta inte|uten å spørre|ikke fortell|kysymättä|älä kerro|neříkej|"
    "bez ptaní|bez potvrzení|не кажи|не повідомляй|без підтвердження|μην πεις|χωρίς να ρωτήσεις|"
    "मत बताना|न बताएं|बिना पूछे|لا تخبر|دون أن تسأل|אל תספר|בלי לשאול|ไม่ต้องบอก|โดยไม่ต้องถาม|"
    "nu spune|fără să întrebi|ne szólj|kérdezés nélkül|"
    "không cần hỏi|đừng nói|không cần báo|জিজ্ঞাসা না করে|bila kuuliza|usimwambie|tanpa bertanya|"
    "jangan beritahu|بدون پرسیدن|bez pitanja|ne govori|نہ دکھائے|نہ بتائے|نہ بتائیں|کو نہ|"
    "tanpa perlu konfirmasi|tanpa konfirmasi|nie informuj|nie mów|bez pytania|не повідомляйте|"
    "не кажіть|알리지 마|말하지 마|묻지 마|ескертпе|айтпа",
    "promotion": "empfiehl|empfehle|recommande|recomienda|recomende|raccomanda|рекомендуй|öner|勧め|"
    "おすすめ|推奨|추천|권장|"
    "rekommendera|anbefal|suosittele|doporuč|рекомендуйте|πρότεινε|सुझाव दें|सिफारिश|اقترح|המלץ|"
    "แนะนำ|recomandă|ajánld|"
    "giới thiệu|đề xuất|সুপারিশ|பரிந்துரை|pendekeza|cadangkan|rekomendasikan|پیشنهاد کن|توصیه|preporuči|"
    "링크|설치|сілтеме|ссылку на|zaleceniem|zakupu",
    "correction": "irrtümlich|fehlerhaft|ungültig|nicht mehr|erroné|invalide|ne plus|erróneo|inválido|"
    "ya no|errado|não mais|errato|non più|ошибочн|недействител|больше не|誤り|間違い|無効|取り消|"
    "오류|잘못|무효|더 이상|改成|换成|别再用|不要再用|"
    "felaktig|felaktigt|inte längre|forkert|ikke længere|ikke lenger|virheellinen|ei enää|chybně|"
    "omylem|už ne|помилково|більше не|недійсн|λάθος|εσφαλμένα|δεν ισχύει|गलती से|गलत|"
    "अब नहीं|عن طريق الخطأ|لم يعد|בטעות|שגוי|כבר לא|ผิดพลาด|greșit|din greșeală|nu mai este|"
    "nu mai e |tévesen|"
    "már nem|"
    "nhầm lẫn|không còn|sai sót|bị sai|ভুলবশত|ভুল|தவறாக|kimakosa|si sahihi|tersilap|tidak lagi|"
    "pagkakamali|اشتباه|غلطی|greškom|pogrešno|više nije|omylom|nesprávne|už nie|yanlışlıkla|hatalı|"
    "geçersiz|видаліть|видалити|удалите|удалить|удали|usuń|supprime|supprimez|elimina|borra|lösche|"
    "silin|hapus|xóa|削除|삭제|ganti|sudah berubah|змінено|изменен|zmieniono|zmienił",
    "safety_topic": "allergie|alergia|allergia|аллерги|alerji|アレルギー|알레르기|medikament|médicament|"
    "medicamento|farmaco|лекарств|薬|복용|notfallkontakt|contact d'urgence|contacto de emergencia|"
    "contato de emergência|contatto di emergenza|экстренн|緊急連絡先|비상 연락처|보호자|紧急联系人|"
    "接走|接送|住址|家庭地址|收货地址|bankverbindung|compte bancaire|cuenta bancaria|"
    "conta bancária|conto corrente|банковск|口座|계좌|"
    "allergi|allergisk|alergie|алергі|αλλεργ|एलर्जी|حساسية|אלרגיה|แพ้|allergiá|läkemedel|lääke|ліки|"
    "φάρμακ|दवा|دواء|תרופה|gyógyszer|nödkontakt|nødkontakt|hätäyhteys|nouzový kontakt|"
    "екстрений контакт|επαφή έκτακτης|आपातकालीन संपर्क|جهة اتصال الطوارئ|איש קשר לחירום|"
    "ผู้ติดต่อฉุกเฉิน|bankkonto|pankkitili|bankovní účet|банківськ|τραπεζικό λογαριασμό|बैंक खाता|"
    "حساب بنكي|חשבון בנק|บัญชีธนาคาร|cont bancar|bankszámla|beneficiario|bénéficiaire|empfänger|"
    "begunstigde|beneficiário|"
    "dị ứng|thuốc|liên hệ khẩn cấp|tài khoản ngân hàng|অ্যালার্জি|ওষুধ|জরুরি যোগাযোগ|"
    "ব্যাংক অ্যাকাউন্ট|ஒவ்வாமை|மருந்து|அவசர தொடர்பு|வங்கி கணக்கு|mzio|mawasiliano ya dharura|"
    "akaunti ya benki|alahan|ubat|kenalan kecemasan|kontak darurat|akaun bank|rekening bank|gamot|"
    "آلرژی|حساسیت|دارو|تماس اضطراری|حساب بانکی|الرجی|alergij|lijek|hitni kontakt|bankovni račun|"
    "alergi|liek|núdzový kontakt|bankový účet|rekening|екстрен|экстрен|leków|lekarstw|kontakt alarmowy|"
    "kontakt awaryjny|numer konta|acil durum|banka hesab",
}
"""Literals per family in more languages (joined to :data:`FAMILIES` at build time)."""

RARER_LANGUAGES: Final[dict[str, str]] = {
    # The same concepts in the languages a seventeenth set (blind15, 2026-12-04) showed the cues did not
    # know, and their neighbours: Catalan, Basque, Galician, Estonian, Latvian, Lithuanian, Slovenian,
    # Serbian (Cyrillic), Bulgarian, Macedonian, Albanian, Georgian, Armenian, Azerbaijani, Uzbek,
    # Mongolian, Nepali, Marathi, Sinhala, Khmer, Lao, Burmese, Malayalam, Telugu, Kannada, Gujarati,
    # Punjabi, Pashto, Somali, Hausa, Zulu, Afrikaans, Icelandic, Irish, Welsh, Maltese. General
    # vocabulary (assistant, remember, memory, from now on, the user, administrator, correction, delete,
    # allergy, medicine, blood group); literals of two or three letters are left out (they are inside
    # too many words).
    "ai_reader": "laguntzaile|ასისტენტ|օգնական|köməkçi|yordamchi|туслах|सहाय्यक|සහායක|ជំនួយការ|ຜູ້ຊ່ວຍ|"
    "လက်ထောက်|സഹായി|సహాయక|ಸಹಾಯಕ|સહાયક|ਸਹਾਇਕ|مرستیال|caawiye|mataimaki|umsizi|aðstoðarmaður|cúntóir|"
    "cynorthwyydd",
    "memory_write": "recorda|desa-ho|gogoratu|gorde|lembra|garda|pea meeles|jäta meelde|salvesta|atceries|"
    "saglabā|įsimink|išsaugok|zapomni si|shrani|запамти|сачувај|запази|зачувај|mbaj mend|ruaj|"
    "დაიმახსოვრე|შეინახე|հիշիր|պահպանիր|yadda saxla|xatırla|eslab qol|saqlab qo|санаарай|хадгал|"
    "याद राख|लक्षात ठेव|जतन कर|මතක තබා|සුරකින්න|ចងចាំ|រក្សាទុក|ຈື່ໄວ້|ບັນທຶກ|မှတ်ထား|သိမ်းဆည်း|"
    "ഓർമ്മിക്ക|ഓർക്കുക|സൂക്ഷിക്ക|గుర్తుంచుకో|ನೆನಪಿಡಿ|ಉಳಿಸಿ|યાદ રાખો|સાચવો|ਯਾਦ ਰੱਖ|په یاد|خوندي کړ|"
    "xasuuso|kaydi|ka tuna|adana|khumbula|gcina|stoor|mundu|vistaðu|cuimhnigh|sábháil|cofiwch|cofia|"
    "ftakar|issejvja",
    "memory_target": "memòria|mälu|atmiņ|atmint|spomin|меморија|меморији|памћењ|памет|kujtes|მეხსიერებ|"
    "հիշողությ|yaddaş|xotira|санах ой|මතකය|អង្គចងចាំ|ຄວາມຈຳ|မှတ်ဉာဏ်|മെമ്മറി|ഓർമ്മയിൽ|మెమరీ|జ్ఞాపక|"
    "ಸ್ಮರಣೆ|ಮೆಮೊರಿ|મેમરી|સ્મૃતિ|ਯਾਦਦਾਸ਼ਤ|ਮੈਮੋਰੀ|xusuus|ƙwaƙwalwa|inkumbulo|geheue|minnið|cuimhne|"
    "i'r cof|yn y cof|memorja",
    "persistence": "a partir d'ara|d'ara endavant|sempre|aurrerantzean|edaspidi|alati|turpmāk|vienmēr|"
    "nuo šiol|visada|od zdaj naprej|vedno|убудуће|увек|од сада|отсега нататък|винаги|отсега|секогаш|"
    "tani e tutje|gjithmonë|ამიერიდან|ყოველთვის|այսուհետ|միշտ|həmişə|bundan buyon|har doim|doimo|"
    "цаашид|үргэлж|अबदेखि|सधैं|यापुढे|नेहमी|මෙතැන් සිට|සැමවිටම|ចាប់ពីពេលនេះ|ជានិច្ច|ຕໍ່ຈາກນີ້|ສະເໝີ|"
    "ယခုမှစ|အမြဲ|ഇനി മുതൽ|എപ്പോഴും|ఇకపై|ఎల్లప్పుడూ|ಇನ್ಮುಂದೆ|ಯಾವಾಗಲೂ|હવેથી|હંમેશા|ਹੁਣ ਤੋਂ|ਹਮੇਸ਼ਾ|"
    "له اوس|had iyo jeer|daga yanzu|koyaushe|kusukela manje|van nou af|altyd|héðan í frá|alltaf|"
    "as seo amach|i gcónaí|o hyn ymlaen|bob amser|minn issa|dejjem|trajno|трајно|dindindin|bhuan|parhaol",
    "third_person_user": "usuari|erabiltzaile|kasutaja|lietotāj|naudotoj|vartotoj|uporabnik|корисник|"
    "потребител|përdorues|მომხმარებ|օգտատեր|istifadəçi|foydalanuvchi|хэрэглэгч|प्रयोगकर्ता|वापरकर्ता|"
    "පරිශීලක|អ្នកប្រើ|ຜູ້ໃຊ້|အသုံးပြုသူ|ഉപയോക്താവ്|వినియోగదారు|ಬಳಕೆದಾರ|વપરાશકર્તા|ਵਰਤੋਂਕਾਰ|"
    "کارونکي|isticmaale|mai amfani|umsebenzisi|gebruiker|notand|úsáideoir|defnyddiwr|utent",
    "authority": "avís del sistema|administraator|süsteemiteade|skrbnik|ადმინისტრატორ|ადმინ|ադմինիստրատոր|"
    "inzibatçı|админ|प्रशासक|පරිපාලක|អ្នកគ្រប់គ្រង|ຜູ້ດູແລລະບົບ|စီမံခန့်ခွဲသူ|അഡ്മിൻ|నిర్వాహకుడు|"
    "ನಿರ್ವಾಹಕ|એડમિન|ਐਡਮਿਨ|سیسټم|maamulaha|mai gudanarwa|umlawuli|kerfisstjóri|riarthóir|gweinyddwr|"
    "amministratur|njoftim|ਨੋਟਿਸ|नोटिस",
    "correction": "correcció|zuzenketa|ezabatu|corrección|parandus|eemalda|labojums|dzēs|pataisa|ištrink|"
    "popravek|odstrani|исправка|обриши|уклони|корекция|изтрий|корекција|избриши|korrigjim|zëvendëso|"
    "hiqni|შესწორება|წაშალე|ուղղում|ջնջիր|düzəliş|tuzatish|o'chir|засвар|устга|सुधार|हटाउनुहोस्|"
    "दुरुस्ती|काढून टाका|නිවැරදි කිරීම|ඉවත් කරන්න|ការកែតម្រូវ|ການແກ້ໄຂ|ပြင်ဆင်ချက်|തിരുത്ത്|"
    "മാറ്റുക|సవరణ|తొలగించ|ತಿದ್ದುಪಡಿ|ಅಳಿಸಿ|સુધારો|દૂર કરો|ਸੁਧਾਰ|ਹਟਾਓ|لرې کړ|sixitaan|"
    "ka saar|ukulungiswa|regstelling|verwyder|leiðrétting|fjarlægðu|ceartúchán|cywiriad|dilëwch|"
    "korrezzjoni|neħħi|ususe",
    "safety_topic": "al·lèrgi|ravim|veregrupp|alerģ|asinsgrup|vaist|kraujo grup|zdravil|krvna skupina|"
    "алергиј|лекови|крвна група|хитне|алергия|лекарств|кръвна група|alergji|ilaç|grupi i gjakut|ალერგი|"
    "წამალ|სისხლის ჯგუფ|ալերգի|արյան խումբ|allergiya|dərman|qan qrupu|qon guruhi|харшил|цусны бүлэг|"
    "औषधि|रगत समूह|ऍलर्जी|औषध|रक्तगट|ආසාත්මිකතා|ඖෂධ|රුධිර වර්ගය|អាឡែហ្ស៊ី|ក្រុមឈាម|ກຸ່ມເລືອດ|"
    "သွေးအုပ်စု|അലർജി|മരുന്ന്|രക്തഗ്രൂപ്പ്|అలెర్జీ|రక్త గ్రూపు|ಅಲರ್ಜಿ|ಔಷಧ|ರಕ್ತದ ಗುಂಪು|"
    "એલર્જી|બ્લડ ગ્રુપ|ਐਲਰਜੀ|ਦਵਾਈ|ਬਲੱਡ ਗਰੁੱਪ|درمل|د وینې|xasaasiyad|kooxda dhiigga|rashin lafiya|"
    "rukunin jini|ukungezwani|iqembu legazi|medisyne|bloedgroep|noodkontak|ofnæmi|blóðflokk|ailléirge|"
    "cógas|grúpa fola|alergedd|meddyginiaeth|grŵp gwaed|allerġija|mediċina|doza|dosis|arašid|"
    "isimo esiphuthumayo",
}
"""Literals per family in rarer languages (joined to :data:`FAMILIES` at build time)."""

_WORD_RE: Final = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?")
_QUOTED_RE: Final = re.compile(r"\"[^\"\n]{6,}\"|“[^”\n]{4,}”|「[^」\n]{4,}」")
_PAIRS: Final[tuple[tuple[str, str, str], ...]] = (
    ("ai+memory", "ai_reader", "memory_write"),
    ("ai+modal", "ai_reader", "second_person_modal"),
    ("memory+third_person", "memory_write", "third_person_user"),
    ("authority+precedence", "authority", "precedence"),
    ("authority+memory", "authority", "memory_write"),
    ("safety+correction", "safety_topic", "correction"),
    ("concealment+memory", "concealment", "memory_write"),
    ("persistence+third_person", "persistence", "third_person_user"),
    ("first_person+persistence", "first_person", "persistence"),
    ("third_party+persistence", "third_party", "persistence"),
    ("third_party+modal", "third_party", "second_person_modal"),
    ("third_party+promotion", "third_party", "promotion"),
    ("concealment+third_party", "concealment", "third_party"),
    ("safety_off+persistence", "safety_off", "persistence"),
)

CUES: Final[tuple[str, ...]] = (*FAMILIES, "quoted", *(name for name, _, _ in _PAIRS))
"""Every cue name, in feature-slot order (the model file records it; changing it needs retraining)."""


def _automaton(
    patterns: dict[str, set[str]],
) -> tuple[ahocorasick_rs.AhoCorasick, tuple[frozenset[str], ...]]:
    keys = sorted(patterns)
    return (
        ahocorasick_rs.AhoCorasick(keys, matchkind=ahocorasick_rs.MatchKind.Standard),
        tuple(frozenset(patterns[k]) for k in keys),
    )


def _build() -> tuple[
    tuple[ahocorasick_rs.AhoCorasick, tuple[frozenset[str], ...]],
    tuple[ahocorasick_rs.AhoCorasick, tuple[frozenset[str], ...]],
]:
    english: dict[str, set[str]] = defaultdict(set)
    literal: dict[str, set[str]] = defaultdict(set)
    for name, family in FAMILIES.items():
        for word in family.words:
            english[f" {word} "].add(name)
        for pattern in (*family.phrases, *family.prefixes):
            english[pattern].add(name)
        for term in family.chinese:
            literal[fold(term.lower())].add(name)
    for table in (OTHER_LANGUAGES, RARER_LANGUAGES):
        for name, terms in table.items():
            for term in terms.split("|"):
                literal[fold(term.lower())].add(name)
    return _automaton(english), _automaton(literal)


_ENGLISH, _LITERAL = _build()


def cues(normalised: str) -> list[str]:
    """Names of the cues (:data:`CUES`) that ``normalised`` text shows, in :data:`CUES` order.

    ``normalised`` is :func:`services.guard.classifier.normalise` output (NFKC, lower case).
    """
    found: set[str] = set()
    joined = f" {' '.join(_WORD_RE.findall(normalised))} "
    for automaton, names, haystack in (
        (_ENGLISH[0], _ENGLISH[1], joined),
        (_LITERAL[0], _LITERAL[1], normalised),
    ):
        for index, _, _ in automaton.find_matches_as_indexes(haystack, overlapping=True):
            found.update(names[index])
    if _QUOTED_RE.search(normalised):
        found.add("quoted")
    found.update(name for name, a, b in _PAIRS if a in found and b in found)
    return [c for c in CUES if c in found]
