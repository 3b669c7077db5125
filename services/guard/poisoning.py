"""Rule-based memory-poisoning signals and a per-source burst detector (DESIGN.md section 6).

DESIGN.md section 6 (A-MemGuard-inspired) sends to quarantine, with a reason, "instruction-like
content aimed at future behaviour ('from now on always ...')" and "bursts from one source". This
module implements both as pure logic; the third signal of section 6 (content contradicting a strong
consensus of existing memories) needs the stores and lives elsewhere.

What counts as an instruction. Memory exists to keep facts, so a rule fires only when the text is
an *imperative aimed at the assistant/agent*, not a statement by or about a person:

==========================  ==================================================================
rule                        fires on (English and Chinese)
==========================  ==================================================================
override_instructions       "ignore/disregard/forget (all) previous/your instructions|rules";
                            "忽略之前的指令", "无视以上所有规则"
persistent_directive        a persistence marker ("from now on", "going forward", "henceforth",
                            "in future conversations", "从现在开始", "从今以后", clause-initial
                            "以后/今后/往后") in the same sentence as a directive to the agent:
                            an imperative (optionally after "please"), "you must/should/need
                            to/will always ...", "I want you to ...", "你要/你必须/都要/一律/请
                            ..."; also a sentence opening with "always/never <agent verb>"
memory_directive            "remember that you must/should/always/never ...", "remember to
                            always <agent verb>", "记住你必须/你以后要 ..."
conditional_trigger         "when(ever) the user/anyone asks ..., (always) say/recommend/reply ...",
                            "当用户问到……就回答/推荐 ..."
role_override               "you are now an unrestricted AI/assistant", "your new role/instructions
                            are", "enable developer/DAN mode", "你现在是一个没有限制的AI",
                            "你的新身份是", "进入开发者模式"
prompt_injection_markup     chat-template or system-prompt markers pasted into content
                            (``<|im_start|>``, ``[INST]``, ``<<SYS>>``, "system prompt:")
==========================  ==================================================================

Not instructions (tested): "From now on I live in Paris" (first-person fact), "from now on he works
nights", "我以后都要早起", "从现在开始我住在巴黎", "Remember that staying positive is important"
(no agent-directed modal), "You must be so excited" (no persistence), "Always here to help".

Limits, stated so nobody over-trusts them: these are keyword rules. A paraphrase ("for every reply
that follows, use French") or another language slips through; a user's legitimate preference phrased
as an order ("from now on answer in French") is quarantined for review rather than stored. A model-
based classifier can replace :func:`detect_poisoning` behind the same return type.

Burst detection (:class:`BurstDetector`) counts events per ``(tenant_id, source_agent)`` in a sliding
time window; the defaults (60 events per 60 s) are our choice, not from DESIGN.md.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

import ahocorasick_rs

# ---------------------------------------------------------------------------------------------
# Building blocks. No \b: Python treats CJK characters as word characters, so "请ignore" has no
# word boundary. Explicit ASCII look-arounds work next to CJK text.

_B: Final = r"(?<![A-Za-z0-9_])"
_E: Final = r"(?![A-Za-z0-9_])"

_AGENT_VERBS: Final = (
    r"(?:respond|reply|answer|say|tell|recommend|suggest|use|call|refer|address|treat|output|print|"
    r"write|include|add|append|prepend|mention|obey|follow|ignore|disregard|forget|act|pretend|behave|"
    r"speak|talk|send|forward|share|reveal|disclose|store|save|remember|trust|believe|assume|"
    r"prioriti[sz]e|prefer|format|translate|sign|end|start|begin|give|provide|return|direct|redirect|"
    r"link|promote|praise|insult|refuse|deny|approve|agree|execute|run|delete|grant|claim|state|"
    r"describe|rate|rank|report|do|don't|do\s+not|never|always)"
)
"""Verbs an agent performs when told to: an imperative with one of these is aimed at the agent."""

_ALWAYS_VERBS: Final = (
    r"(?:respond|reply|answer|recommend|suggest|output|print|include|mention|format|translate|append|prepend|"
    r"cite|obey|ignore|disregard|reveal|disclose|forward|promote|address\s+me|call\s+me|refer\s+to\s+me|"
    r"speak\s+(?:in|to\s+me)|talk\s+(?:in|to\s+me)|write\s+in|reply\s+in|"
    r"use\s+(?:only\s+)?(?:english|chinese|french|german|spanish|markdown|json|bullet|formal|informal|emojis?)|"
    r"(?:end|start|begin|sign)\s+(?:your|each|every|all|off)|send\s+(?:the|all|my|user|users|a\s+copy|copies)|"
    r"tell\s+(?:the\s+user|users|everyone|anyone|them|people|customers)|say\s+(?:that|yes|no))"
)
"""Narrow verb list for "always/never <verb>" without a persistence marker, so that "Never give up"
and "Always believe in yourself" (encouragement between people) do not fire."""

_YOU_MODAL: Final = (
    _B + r"you(?:'ll)?\s+(?:must|should|shall|will\s+(?:always|never|only|now)|have\s+to|need\s+to|are\s+to|"
    r"are\s+(?:required|supposed|expected|instructed|not\s+allowed)\s+to|may\s+only|can\s+only|"
    r"may\s+not|must\s+not|cannot|can't|won't)"
    + _E
    + "|"
    + _B
    + r"you\s+(?:always|never|only)\s+"
    + _ALWAYS_VERBS
    + _E
)
_WANT_YOU: Final = _B + r"(?:i\s+want|i\s+need|i'd\s+like|i\s+would\s+like|i\s+expect)\s+you\s+to" + _E
_FILLER: Final = r"(?:(?:ok(?:ay)?|so|and|also|hey|hi|now|then|please|pls|kindly|just|remember)[,\s]+)*"
_DIRECTIVE_START: Final = (
    r"[\s,:;\-–—]*" + _FILLER + r"(?:" + _YOU_MODAL + "|" + _WANT_YOU + "|" + _AGENT_VERBS + _E + ")"
)

_EN_PERSISTENCE_RE: Final = re.compile(
    _B + r"(?:from\s+now\s+on|from\s+this\s+point\s+(?:on|forward|onwards?)|from\s+here\s+on|going\s+forward|"
    r"henceforth|hereafter|for\s+the\s+rest\s+of\s+(?:this|our|the)\s+(?:conversation|chat|session)|"
    r"(?:in|for)\s+(?:all\s+)?(?:future|subsequent|later)\s+(?:conversations?|chats?|sessions?|responses?|"
    r"answers?|replies|requests?|interactions?|messages?)|(?:every|each)\s+time\s+(?:i|we|you|the\s+user|"
    r"someone|anyone)\s+[a-z]+)" + _E,
    re.IGNORECASE,
)
_EN_DIRECTIVE_START_RE: Final = re.compile(_DIRECTIVE_START, re.IGNORECASE)
_EN_NEW_SUBJECT_RE: Final = re.compile(
    r"[\s,;:\-–—]*(?:i|i'm|i've|i'll|we|we're|he|he's|she|she's|they|they're|it|it's|my|our|his|her|their|"
    r"the|this|that|there|things|life)" + _E,
    re.IGNORECASE,
)
_EN_ALWAYS_START_RE: Final = re.compile(
    r"\s*" + _FILLER + r"(?:always|never)\s+" + _ALWAYS_VERBS + _E, re.IGNORECASE
)

_EN_OVERRIDE_RE: Final = re.compile(
    _B + r"(?:ignore|disregard|forget|override|bypass|discard|drop)\s+(?:about\s+)?"
    r"(?:(?:all|any|every|each|the|of|your|my|these|those)\s+)*"
    r"(?:(?:previous|prior|preceding|above|earlier|former|original|initial|old|existing|system|current|"
    r"safety)\s+)+(?:instructions?|prompts?|rules|directives?|guidelines|guardrails|constraints|"
    r"programming|commands?|system\s+prompt)"
    + _E
    + "|"
    + _B
    + r"(?:ignore|disregard|forget|override|bypass)\s+(?:all\s+)?(?:of\s+)?your\s+"
    r"(?:instructions?|prompts?|rules|directives?|guidelines|guardrails|constraints|programming|system\s+prompt)"
    + _E
    + "|"
    + _B
    + r"(?:ignore|disregard|forget)\s+everything\s+(?:you\s+were\s+told|above|before|previously|"
    r"said\s+before)" + _E,
    re.IGNORECASE,
)
_EN_MEMORY_RE: Final = re.compile(
    _B + r"(?:remember|note|memori[sz]e|keep\s+in\s+mind|don't\s+forget|do\s+not\s+forget)\s*[,:]?\s+"
    r"(?:that\s+)?(?:"
    + _YOU_MODAL
    + r"|(?:to\s+)?(?:always|never)\s+"
    + _ALWAYS_VERBS
    + _E
    + r"|(?:this|the\s+following)\s+(?:rule|instruction|directive|policy)"
    + _E
    + ")",
    re.IGNORECASE,
)
_EN_CONDITION_RE: Final = re.compile(
    _B + r"(?:when(?:ever)?|if|each\s+time|every\s+time|any\s+time)\s+(?:the\s+|a\s+|any\s+)?"
    r"(?:user|users|customer|customers|someone|anyone|somebody|anybody|people|they|he|she|i)\s+"
    r"(?:asks?|mentions?|says?|requests?|wants?|types?|writes?|searches?|quer(?:y|ies)|talks?|brings?\s+up|"
    r"inquires?|enquires?)" + _E,
    re.IGNORECASE,
)
_EN_CONSEQUENCE_RE: Final = re.compile(
    r"(?:[,;:]|"
    + _B
    + r"then"
    + _E
    + r")\s*(?:"
    + _YOU_MODAL
    + r"|"
    + _FILLER
    + r"(?:always\s+|never\s+|only\s+)?"
    r"(?:respond|reply|answer|say|tell|recommend|suggest|direct|redirect|send|include|mention|output|"
    r"claim|state|link|promote)" + _E + ")",
    re.IGNORECASE,
)
_EN_ROLE_RE: Final = re.compile(
    _B + r"you\s+are\s+now\s+(?:an?\s+|the\s+|my\s+)?(?:(?:unrestricted|unfiltered|uncensored|jailbroken|"
    r"evil|new|different)\s+)*(?:ai|assistant|bot|chatbot|model|agent|dan|persona|character|system|admin)"
    + _E
    + "|"
    + _B
    + r"your\s+new\s+(?:role|persona|identity|instructions?|rules|task|purpose|goal|objective|"
    r"directives?|system\s+prompt)\s+(?:is|are)"
    + _E
    + "|"
    + _B
    + r"(?:enter|enable|activate|switch\s+to)\s+(?:developer|god|jailbreak|dan|debug|admin)\s+mode"
    + _E,
    re.IGNORECASE,
)
_MARKUP_RE: Final = re.compile(
    r"<\|(?:im_start|im_end|system|assistant|user|endoftext)\|>|\[/?INST\]|<</?SYS>>|"
    r"(?:^|\n)[ \t]*#{2,}[ \t]*(?:system|instructions?)[ \t]*:|"
    + _B
    + r"(?:begin|end)\s+system\s+prompt"
    + _E
    + "|"
    + _B
    + r"new\s+system\s+prompt\s*:",
    re.IGNORECASE,
)

# Chinese -------------------------------------------------------------------------------------

_ZH_MODAL: Final = (
    r"(?:都要|都得|都必须|都用|都说|都回答|都回复|都称呼|都叫|都只|一律|必须|务必|一定要|要|得|应该|应当|需要|"
    r"只能|只可以|只用|只许|不许|不准|不能|不可以|不要|别|总是|始终|永远|请|记得|记住|回答|回复|称呼|叫我|用|说)"
)
_ZH_OVERRIDE_RE: Final = re.compile(
    r"(?:忽略|无视|忘记|忘掉|不要理会|不用管|别管|跳过|覆盖)掉?[^。！？\n]{0,6}?"
    r"(?:之前|以前|先前|此前|上面|上述|前面|以上|原来|原有|原先|所有|全部|一切|系统|你的)"
    r"[^。！？\n]{0,6}?(?:指令|指示|规则|设定|提示词|提示|要求|命令|约束|限制)"
)
_ZH_PERSISTENCE_RE: Final = re.compile(
    r"(?:从现在开始|从现在起|从今天起|从今天开始|从今以后|从今往后|从此以后|从此|此后|"
    r"(?:(?<=^)|(?<=[\s，,。！？!?；;：:、你您]))(?:以后|今后|往后|每次))"
)
_ZH_AFTER_MARKER_RE: Final = re.compile(r"[\s，,、：:]*(?:你们?|您)?(?:以后|今后)?(?:就|也|都)?" + _ZH_MODAL)
_ZH_OTHER_SUBJECT_BEFORE_RE: Final = re.compile(r"(?:我|我们|咱们?|他|她|它|他们|她们|大家)$")
_ZH_MEMORY_RE: Final = re.compile(
    r"(?:记住|记得|牢记|别忘了|不要忘记)[\s，,：:]*(?:你们?|您)(?:以后|今后)?(?:必须|要|应该|只能|永远|总是|始终|不能|"
    r"不可以|不许|不准|一定要|务必)"
)
_ZH_CONDITION_RE: Final = re.compile(
    r"(?:当|如果|每当|只要|一旦|凡是)(?:有)?(?:用户|客户|别人|有人|任何人|其他人|他人|对方)(?:问|提到|询问|说|要求|咨询|想)"
    r"[^。！？\n]{0,40}?(?:就|都|你就|你要|你必须|请|一律)[^。！？\n]{0,4}?(?:回答|说|推荐|告诉|回复|介绍|引导|发送|提供)"
)
_ZH_ROLE_RE: Final = re.compile(
    r"你(?:现在|从现在起|从现在开始)[，,]?(?:就)?是(?:一个|一名)?(?:不受限制|没有限制|无限制|越狱|全新)?的?"
    r"(?:AI|人工智能|助手|机器人|模型|DAN)|你的新(?:角色|身份|指令|任务|规则|人设|设定)是|"
    r"(?:进入|开启|切换到)(?:开发者|越狱|上帝|DAN|调试)模式",
    re.IGNORECASE,
)

CONDITION_WINDOW: Final[int] = 160
"""Characters after "when the user asks ..." searched for the planted answer (our choice: one clause)."""

_SENTENCE_SPLIT_RE: Final = re.compile(r"(?<=[.!?。！？；;])\s*|\n+")


@dataclass(frozen=True, slots=True)
class PoisoningSignal:
    """One fired rule: a stable ``rule`` id and a human ``reason`` (never a quote of the content)."""

    rule: str
    reason: str


RULE_REASONS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "override_instructions": "asks to ignore or override earlier instructions",
        "persistent_directive": "directs the agent's future behaviour (persistence marker + imperative)",
        "memory_directive": "asks the agent to remember a rule about its own behaviour",
        "conditional_trigger": "plants a trigger: when someone asks X, the agent must answer Y",
        "role_override": "tries to replace the agent's role or enable a privileged mode",
        "prompt_injection_markup": "contains chat-template or system-prompt markup",
    }
)
"""Rule id -> reason text (DESIGN.md section 6: quarantine 'with a reason')."""


def _en_persistent(sentence: str) -> bool:
    """English persistent directive: a persistence marker tied to a directive aimed at the agent."""
    if _EN_ALWAYS_START_RE.match(sentence):
        return True
    markers = list(_EN_PERSISTENCE_RE.finditer(sentence))
    if not markers:
        return False
    if any(_EN_DIRECTIVE_START_RE.match(sentence, m.end()) for m in markers):
        return True  # "From now on, (please) answer in French" / "from now on you must ..."
    if not _EN_DIRECTIVE_START_RE.match(sentence):
        return False
    # "Answer in French from now on" / "You must, from now on, ..." - unless the marker opens a new
    # clause about someone else: "Call me tomorrow, from now on I'm free on Tuesdays".
    return any(not _EN_NEW_SUBJECT_RE.match(sentence, m.end()) for m in markers)


def _zh_persistent(sentence: str) -> bool:
    for m in _ZH_PERSISTENCE_RE.finditer(sentence):
        if _ZH_OTHER_SUBJECT_BEFORE_RE.search(sentence, max(0, m.start() - 2), m.start()):
            continue  # "我以后都要早起": the speaker's own plan, a fact
        if _ZH_AFTER_MARKER_RE.match(sentence, m.end()):
            return True
    return False


def _en_conditional(sentence: str) -> bool:
    return any(
        _EN_CONSEQUENCE_RE.search(sentence, m.end(), m.end() + CONDITION_WINDOW)
        for m in _EN_CONDITION_RE.finditer(sentence)
    )


_WHOLE_TRIGGERS: Final[tuple[str, ...]] = (
    *[
        "ignore",
        "disregard",
        "forget",
        "override",
        "bypass",
        "discard",
        "drop",
        "remember",
        "note",
        "memori",
        "keep",
        "mode",
        "system",
        "instruction",
    ],
    "you are now",
    "your new",
    "<|",
    "[inst]",
    "[/inst]",
    "<<sys>>",
    "<</sys>>",
    *[
        "忽略",
        "无视",
        "忘记",
        "忘掉",
        "不要理会",
        "不用管",
        "别管",
        "跳过",
        "覆盖",
        "记住",
        "记得",
        "牢记",
        "别忘了",
        "不要忘记",
        "你现在",
        "你从现在",
        "你的新",
        "模式",
    ],
    *["用户", "客户", "别人", "有人", "任何人", "其他人", "他人", "对方"],
)
"""A literal every whole-text rule needs (override, memory, role, markup, Chinese condition)."""
_SENTENCE_TRIGGERS: Final[tuple[str, ...]] = (
    *["always", "never", "henceforth", "hereafter", "future", "subsequent", "later"],
    "from now",
    "from this point",
    "from here",
    "going forward",
    "rest of",
    "every time",
    "each time",
    *["从现在", "从今", "从此", "此后", "以后", "今后", "往后", "每次"],
)
"""A literal the per-sentence rules (persistence, always/never) need."""
_TRIGGERS: Final = ahocorasick_rs.AhoCorasick(
    [*_WHOLE_TRIGGERS, *_SENTENCE_TRIGGERS], matchkind=ahocorasick_rs.MatchKind.Standard
)
_N_WHOLE: Final[int] = len(_WHOLE_TRIGGERS)


def _triggers(text: str) -> tuple[bool, bool]:
    """Whether ``text`` holds a whole-text trigger and a sentence trigger (lower case, whitespace
    collapsed, one Aho-Corasick scan): without them the rules that need them cannot fire."""
    folded = " ".join(text.lower().split())
    whole = sentence = False
    for index, _, _ in _TRIGGERS.find_matches_as_indexes(folded, overlapping=True):
        if index < _N_WHOLE:
            whole = True
        else:
            sentence = True
        if whole and sentence:
            break
    return whole, sentence


def detect_poisoning(text: str) -> tuple[PoisoningSignal, ...]:
    """Poisoning signals in ``text``, one per fired rule, in :data:`RULE_REASONS` order.

    Rules and their false-positive stance are in the module docstring (DESIGN.md section 6).
    An empty tuple means no rule fired. Texts without any trigger word skip the rules that need one
    (same result, tested against :func:`detect_poisoning_unfiltered` on every labelled line).
    """
    return _detect(text, prefilter=True)


def detect_poisoning_unfiltered(text: str) -> tuple[PoisoningSignal, ...]:
    """:func:`detect_poisoning` without the trigger-word pre-filter (the reference for tests)."""
    return _detect(text, prefilter=False)


def _detect(text: str, *, prefilter: bool) -> tuple[PoisoningSignal, ...]:
    fired: set[str] = set()
    whole, sentence_words = _triggers(text) if prefilter else (True, True)
    if whole:
        if _EN_OVERRIDE_RE.search(text) or _ZH_OVERRIDE_RE.search(text):
            fired.add("override_instructions")
        if _EN_MEMORY_RE.search(text) or _ZH_MEMORY_RE.search(text):
            fired.add("memory_directive")
        if _EN_ROLE_RE.search(text) or _ZH_ROLE_RE.search(text):
            fired.add("role_override")
        if _MARKUP_RE.search(text):
            fired.add("prompt_injection_markup")
        if _ZH_CONDITION_RE.search(text):
            fired.add("conditional_trigger")
    if not sentence_words and not _EN_CONDITION_RE.search(text):
        return tuple(PoisoningSignal(rule, reason) for rule, reason in RULE_REASONS.items() if rule in fired)
    for sentence in _SENTENCE_SPLIT_RE.split(text):
        if not sentence:
            continue
        if "persistent_directive" not in fired and (_en_persistent(sentence) or _zh_persistent(sentence)):
            fired.add("persistent_directive")
        if "conditional_trigger" not in fired and _en_conditional(sentence):
            fired.add("conditional_trigger")
    return tuple(PoisoningSignal(rule, reason) for rule, reason in RULE_REASONS.items() if rule in fired)


# ---------------------------------------------------------------------------------------------
# Burst detection

DEFAULT_BURST_LIMIT: Final[int] = 60
"""Default burst limit: more than 60 events per window from one (tenant, source agent) (our choice)."""
DEFAULT_BURST_WINDOW_S: Final[float] = 60.0
"""Default burst window in seconds (our choice; DESIGN.md section 6 names bursts, not numbers)."""


class BurstDetector:
    """Sliding-window event counter per ``(tenant_id, source_agent)`` (DESIGN.md section 6: bursts).

    Pure: the caller passes the event time (seconds, any epoch; use the event's own timestamp so
    replays judge the same way). Events may arrive out of order. Only the newest ``limit + 1``
    timestamps per key are kept, so memory per key is bounded; call :meth:`prune` now and then to
    forget quiet keys.
    """

    def __init__(self, *, limit: int = DEFAULT_BURST_LIMIT, window_s: float = DEFAULT_BURST_WINDOW_S) -> None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        if window_s <= 0:
            raise ValueError(f"window_s must be > 0, got {window_s}")
        self.limit = limit
        self.window_s = window_s
        self._events: dict[tuple[str, str], list[float]] = {}

    def observe(self, tenant_id: str, source_agent: str, at: float) -> bool:
        """Record one event at time ``at``; True when the window ending at ``at`` holds more than ``limit``.

        The window is ``(at - window_s, at]``. Every event is recorded, including those over the
        limit, so a sustained flood stays flagged.
        """
        times = self._events.setdefault((tenant_id, source_agent), [])
        bisect.insort(times, at)
        if len(times) > self.limit + 1:
            del times[: len(times) - self.limit - 1]
        in_window = len(times) - bisect.bisect_right(times, at - self.window_s)
        in_window -= len(times) - bisect.bisect_right(times, at)  # events later than `at` (out of order)
        return in_window > self.limit

    def prune(self, now: float) -> int:
        """Forget keys with no event in the window ending at ``now``; returns how many were dropped."""
        stale = [key for key, times in self._events.items() if not times or times[-1] <= now - self.window_s]
        for key in stale:
            del self._events[key]
        return len(stale)

    def __len__(self) -> int:
        """Number of ``(tenant_id, source_agent)`` keys currently tracked."""
        return len(self._events)
