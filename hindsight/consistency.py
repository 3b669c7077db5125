"""Consistency against memory: the guard's second poisoning layer, run where the store is (issue 10).

A low-trust source (anything but the user, by default) that overturns what the user's memories
strongly support, above all a safety-critical fact (allergies, medication, identity, credentials,
payment details), is held back for review instead of superseding it. :class:`ConsistencyCheck`
takes the vector store and any :class:`~hindsight.inference.judge.Judge`; the embed stage calls it
today, and the reconcile stage calls it before it supersedes (see ``docs/guard.md``).

Decision for one candidate (its embedding already computed):

1. skip when the candidate was released by an operator (``reviewed``) or comes from a source that
   may overturn (``user`` by default: people may change their own facts);
2. search the user's active memories (same tenant and user, any scope) for the ``candidates``
   nearest ones with cosine >= ``min_cosine``;
3. keep those that are *protected*: safety-critical (:func:`safety_category` of their text or a
   ``health`` tag) or strongly supported (confidence >= ``strong_confidence`` and stated by the
   user, or reinforced by >= ``strong_support`` events);
4. ask the judge about (protected memory, candidate) pairs; a verdict ``update`` with confidence >=
   ``judge_confidence`` holds the candidate back with reason ``consistency:safety_critical`` or
   ``consistency:strong_support``.

:class:`CorrectionJudge` is a small rule judge for exactly this question (the newer statement shares
the older one's subject and negates, cancels or "corrects" it), so the check works before an LLM
judge is deployed; any other judge can replace it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

from hindsight.inference.judge import Judge, JudgePair, Statement, Verdict
from hindsight.stores.vector import MemoryFilter

if TYPE_CHECKING:
    import numpy as np

    from hindsight.stores.vector import ScoredRecord, VectorStore
    from schemas import MemoryCandidate

SAFETY_CATEGORIES: Final[dict[str, re.Pattern[str]]] = {
    "allergy": re.compile(r"allerg|anaphyla|epipen|过敏|过敏史", re.I),
    "medication": re.compile(
        r"medicat|prescri|dosage|\bdose\b|\bmg\b|insulin|warfarin|metformin|epinephrine|antibiotic|"
        r"用药|药物|处方|剂量|胰岛素|华法林|停药|服用",
        re.I,
    ),
    "identity": re.compile(
        r"legal name|real name|date of birth|birthday|passport|national id|social security|blood type|"
        r"真实姓名|出生日期|身份证|护照|血型",
        re.I,
    ),
    "credentials": re.compile(
        r"password|passcode|\bpin\b|2fa|two-factor|recovery code|密码|口令|验证码", re.I
    ),
    "payment": re.compile(
        r"bank account|\biban\b|payout|card ending|credit card|payment (?:method|details)|"
        r"收款|银行卡|账户|支付",
        re.I,
    ),
}
"""Safety-critical topics (issue 10: allergies, medication, identity, credentials, payment details)."""

_NEGATION_RE: Final = re.compile(
    r"\b(?:not|no longer|never|no known|none|isn't|aren't|wasn't|don't|doesn't|cancel+ed|removed|"
    r"stopped|discontinued|error|mistake|wrong|invalid|obsolete|deprecated|disregard|replac\w*|"
    r"corrected|changed to|now is|is now|misdiagnos\w*)\b|"
    r"不|没有|无|停用|作废|错误|有误|取消|删除|更正|改为|变更|已改|覆盖",
    re.I,
)
_STOP: Final = frozenset(
    {"user", "users", "that", "this", "with", "from", "have", "their", "patient", "用户", "患者", "过敏"}
)


def _words(text: str) -> set[str]:
    """Content words: Latin words of 4+ letters and overlapping CJK character bigrams."""
    latin = {w.lower() for w in re.findall(r"[a-z]{4,}", text, re.I)}
    cjk = "".join(c if "\u4e00" <= c <= "\u9fff" else " " for c in text)
    return latin | {run[i : i + 2] for run in cjk.split() for i in range(len(run) - 1)}


def safety_category(text: str) -> str | None:
    """The safety-critical topic ``text`` is about (first match of :data:`SAFETY_CATEGORIES`), or None."""
    for name, pattern in SAFETY_CATEGORIES.items():
        if pattern.search(text):
            return name
    return None


class CorrectionJudge:
    """Rule judge: ``update`` when the newer statement is about the same safety-critical topic as
    the older one, shares a content word with it (the allergen, the drug, the account) and negates,
    cancels or corrects it; ``unrelated`` when they share no topic; otherwise ``unsure``.
    Confidence 0.8 for a rule hit (it is a rule, not a calibrated model)."""

    name = "rules:correction-v1"

    def judge(self, pairs: Sequence[JudgePair]) -> list[Verdict]:
        """One verdict per pair, in order (never raises)."""
        out = []
        for pair in pairs:
            old, new = pair.older.text, pair.newer.text
            topic = safety_category(old)
            shared = (_words(old) & _words(new)) - _STOP
            if topic is None or safety_category(new) != topic:
                out.append(Verdict("unrelated", 0.6, "no shared safety-critical topic", self.name))
            elif shared and _NEGATION_RE.search(new) and not _NEGATION_RE.search(old):
                out.append(
                    Verdict("update", 0.8, f"{topic}: negates or corrects the older statement", self.name)
                )
            else:
                out.append(Verdict("unsure", 0.4, f"{topic}: same topic, no correction found", self.name))
        return out


@dataclass(frozen=True)
class ConsistencySettings:
    """Thresholds of :class:`ConsistencyCheck` (env ``HINDSIGHT_INGEST_CONSISTENCY_*``)."""

    min_cosine: float = 0.80
    """Nearest memories at or above this cosine are compared (multilingual-e5-small: paraphrases of one
    fact score 0.85-0.95, unrelated facts of one user 0.70-0.80)."""
    candidates: int = 5
    strong_confidence: float = 0.6
    """DESIGN.md section 4: a user statement starts at 0.6."""
    strong_support: int = 2
    """Events (the memory's own plus merged near-duplicates) that make a fact strongly supported."""
    judge_confidence: float = 0.5
    may_overturn: tuple[str, ...] = ("user",)


@dataclass(frozen=True)
class Hold:
    """Why a candidate is held back: reason, the memory it would overturn, the judge's verdict."""

    reason: str
    memory_id: str
    verdict: Verdict
    cosine: float


def _protection(record: ScoredRecord, settings: ConsistencySettings) -> str | None:
    payload = record.payload
    content = str(payload.get("content", ""))
    if safety_category(content) or "health" in payload.get("tags", ()):
        return "safety_critical"
    support = 1 + len(payload.get("merged_ids", ()))
    confident = float(payload.get("confidence", 0.0)) >= settings.strong_confidence
    if confident and (payload.get("source") == "user" or support >= settings.strong_support):
        return "strong_support"
    return None


def _created_at(payload: dict[str, object], default: datetime) -> datetime:
    """When the stored memory's fact happened (its ``created_ts``), for the judge's sense of order."""
    ts = payload.get("created_ts")
    return datetime.fromtimestamp(float(ts), UTC) if isinstance(ts, int | float) else default


class ConsistencyCheck:
    """Holds back low-trust candidates that overturn protected memories (see the module docstring).

    Args:
        store: the vector store holding the user's memories.
        judge: any :class:`~hindsight.inference.judge.Judge` (``CorrectionJudge`` by default).
        settings: thresholds.
    """

    def __init__(
        self, store: VectorStore, judge: Judge | None = None, settings: ConsistencySettings | None = None
    ) -> None:
        self._store = store
        self._judge: Judge = judge or CorrectionJudge()
        self._cfg = settings or ConsistencySettings()

    def check(self, candidate: MemoryCandidate, vector: np.ndarray) -> Hold | None:
        """The reason to hold ``candidate`` back, or None to store it (blocking; run in a thread).

        Raises:
            StoreUnavailableError: the vector store failed.
            ModelUnavailableError: the judge backend failed (retry later).
        """
        cfg = self._cfg
        if candidate.reviewed or candidate.source in cfg.may_overturn:
            return None
        flt = MemoryFilter(tenant_id=candidate.tenant_id, user_id=candidate.user_id, statuses=("active",))
        hits = self._store.search(vector, flt, cfg.candidates)
        protected = [
            (hit, kind)
            for hit in hits
            if hit.score >= cfg.min_cosine
            and hit.id != candidate.memory_id
            and (kind := _protection(hit, cfg)) is not None
        ]
        if not protected:
            return None
        newer = Statement(candidate.content, candidate.occurred_at, candidate.source, candidate.speaker)
        pairs = [
            JudgePair(
                older=Statement(
                    str(hit.payload.get("content", "")),
                    _created_at(hit.payload, candidate.occurred_at),
                    str(hit.payload.get("source", "user")),
                    hit.payload.get("speaker"),
                ),
                newer=newer,
                cosine=hit.score,
            )
            for hit, _ in protected
        ]
        for (hit, kind), verdict in zip(protected, self._judge.judge(pairs), strict=True):
            if verdict.relation == "update" and verdict.confidence >= cfg.judge_confidence:
                return Hold(f"consistency:{kind}", hit.id, verdict, hit.score)
        return None
