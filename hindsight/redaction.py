"""Redaction of the free text of events that do not pass the guard stage (issue 13 defect 5).

Interactions reach memory only through the guard (``memory.interactions.v1`` -> guard ->
``memory.guarded.v1``). A session close (``memory.sessions.v1``) goes straight to reflection, and
its ``task`` and ``feedback`` become part of the episode (and of lessons). :func:`redact_session_close`
applies the guard's PII/secret rules (:mod:`hindsight.pii`) to them where the reflect stage reads
the event, so no stage after it ever sees the raw text. A secret is replaced like any finding
(``[REDACTED:password]``) instead of blocking: the close itself (outcome, counts, its session's
episode) must not be lost because the user pasted a password into the feedback box.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from hindsight.pii import DEFAULT_ACTIONS, Action, PiiType, redact
from schemas import SessionClosedEvent


def redact_session_close(
    close: SessionClosedEvent, actions: Mapping[PiiType, Action] | None = None
) -> tuple[SessionClosedEvent, dict[str, int]]:
    """``close`` with ``task`` and ``feedback`` redacted, and the finding counts by type (never values).

    ``actions`` overrides :data:`hindsight.pii.DEFAULT_ACTIONS` per type, except that ``block``
    (the default for secrets) redacts here (see the module docstring).

    Raises:
        ValueError: unknown PII types or actions in ``actions``.
    """
    effective = {
        t: ("redact" if a == "block" else a) for t, a in {**DEFAULT_ACTIONS, **(actions or {})}.items()
    }
    findings: Counter[str] = Counter()
    update: dict[str, str] = {}
    for name in ("task", "feedback"):
        value = getattr(close, name)
        if not value:
            continue
        result = redact(value, effective)
        if result.findings:
            findings.update(f.type for f in result.findings)
            update[name] = result.text
    return (close.model_copy(update=update) if update else close), dict(sorted(findings.items()))
