"""Write-trigger: is this interaction worth remembering, and how important is it? (DESIGN.md s1, s4)

A documented, rule-based heuristic (the baseline an LLM judge must beat later). Importance starts at
0.2 and moves with what the turn says:

| signal | change |
|---|---|
| intent preference (love, prefer, allergic, favourite ...) | +0.35 |
| intent plan / event (going to, next week / went, adopted, yesterday ...) | +0.25 |
| intent fact (I am, my ..., I work) | +0.20 |
| intent chatter (nothing above, not a question) | -0.10 |
| each named entity (max 3) | +0.05 |
| a number or date | +0.05 |
| tag ``health`` | +0.20 |
| 12+ words / under 4 words | +0.10 / -0.15 |
| source tool / assistant | +0.10 / -0.05 |

clipped to [0, 1]. A turn is kept as an episodic memory when importance >= ``threshold`` (default
0.2): greetings and thanks are skipped, but stay in working memory and are compressed into episodic
memory when they are pushed out (DESIGN.md section 2), so nothing is silently dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hindsight.text import TextFeatures, compress, features

__all__ = ["KEEP_THRESHOLD", "WriteDecision", "compress", "decide"]

KEEP_THRESHOLD = 0.2
_NUMBER = re.compile(r"\d")
_INTENT_BONUS = {
    "preference": 0.35,
    "plan": 0.25,
    "event": 0.25,
    "fact": 0.2,
    "question": 0.0,
    "chatter": -0.1,
}
_SOURCE_BONUS = {"tool": 0.1, "assistant": -0.05, "user": 0.0, "system": 0.0}


@dataclass(frozen=True)
class WriteDecision:
    """Outcome of the write-trigger for one interaction."""

    keep: bool
    importance: float
    reason: str
    features: TextFeatures


def decide(content: str, source: str, *, threshold: float = KEEP_THRESHOLD) -> WriteDecision:
    """Score ``content`` from ``source`` (user/assistant/tool/system) with the table above. Pure."""
    f = features(content)
    parts = [f"intent={f.intent}"]
    score = 0.2 + _INTENT_BONUS[f.intent]
    if f.entities:
        score += 0.05 * min(3, len(f.entities))
        parts.append(f"entities={len(f.entities)}")
    if _NUMBER.search(content):
        score += 0.05
        parts.append("number")
    if "health" in f.tags:
        score += 0.2
        parts.append("health")
    if f.words >= 12:
        score += 0.1
    elif f.words < 4:
        score -= 0.15
        parts.append("short")
    score += _SOURCE_BONUS.get(source, 0.0)
    importance = round(max(0.0, min(1.0, score)), 4)
    keep = importance >= threshold
    return WriteDecision(keep, importance, ("keep: " if keep else "skip: ") + ", ".join(parts), f)
