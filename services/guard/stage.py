"""The guard stage: redact PII, block secrets, quarantine poisoning, attach source trust (DESIGN.md s6).

Consumes ``memory.interactions.v1`` (raw, possibly unredacted), publishes redacted
:class:`~schemas.GuardedEvent` to ``memory.guarded.v1`` or a :class:`~schemas.QuarantineRecord` to
``memory.quarantine.v1``. Nothing unredacted leaves this stage except inside dead letters of records
that could not even be parsed.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from hindsight.consumer import Envelope, Rejection, parse_model
from schemas import GuardedEvent, InteractionEvent, QuarantineRecord, Topic, partition_key
from services.guard.poisoning import BurstDetector
from services.guard.policy import GuardDecision, GuardPolicy, evaluate

if TYPE_CHECKING:
    from hindsight.publisher import EventPublisher


def _merge(a: GuardDecision, b: GuardDecision | None) -> tuple[str, dict[str, int], tuple[str, ...]]:
    """Combine the decisions on content and tool result: the stricter verdict wins."""
    order = {"pass": 0, "quarantine": 1, "block": 2}
    if b is None:
        return a.verdict, dict(a.findings), tuple(a.reasons)
    verdict = a.verdict if order[a.verdict] >= order[b.verdict] else b.verdict
    findings = dict(a.findings)
    for kind, n in b.findings.items():
        findings[kind] = findings.get(kind, 0) + n
    return verdict, findings, (*a.reasons, *b.reasons)


class GuardStage:
    """Guard: PII redaction, secret blocking, poisoning quarantine, source trust."""

    name = "guard"

    def __init__(
        self, policy: GuardPolicy, burst: BurstDetector | None = None, *, seen_max: int = 100_000
    ) -> None:
        self._policy = policy
        self._burst = burst
        self._seen: OrderedDict[str, bool] = OrderedDict()
        self._seen_max = seen_max

    def _is_burst(self, event: InteractionEvent) -> bool:
        """Burst verdict of ``event``; a redelivered event gets its first verdict and is not counted twice."""
        if self._burst is None:
            return False
        known = self._seen.get(event.event_id)
        if known is not None:
            self._seen.move_to_end(event.event_id)
            return known
        verdict = self._burst.observe(event.tenant_id, event.agent_id, event.occurred_at.timestamp())
        self._seen[event.event_id] = verdict
        if len(self._seen) > self._seen_max:
            self._seen.popitem(last=False)
        return verdict

    def parse(self, topic: str, raw: bytes) -> InteractionEvent:
        """Validate an interaction event; raises ``ValidationError`` with the failing fields."""
        return parse_model(InteractionEvent, raw)

    def guard(self, event: InteractionEvent) -> GuardedEvent | QuarantineRecord:
        """Apply the policy to one event (pure apart from the clock and the burst window).

        Bursts are judged on event time (``occurred_at``), so a replay is judged like the original.
        """
        content = evaluate(event.content, event.source, self._policy, burst=self._is_burst(event))
        result = evaluate(event.tool_result, event.source, self._policy) if event.tool_result else None
        verdict, findings, reasons = _merge(content, result)
        now = datetime.now(UTC)
        if verdict != "pass":
            return QuarantineRecord(
                tenant_id=event.tenant_id,
                user_id=event.user_id,
                agent_id=event.agent_id,
                session_id=event.session_id,
                event_id=event.event_id,
                verdict="block" if verdict == "block" else "quarantine",
                reasons=reasons,
                findings=findings,
                source=event.source,
                content_redacted=None if verdict == "block" else content.content,
                quarantined_at=now,
            )
        redacted = event.model_copy(
            update={"content": content.content, "tool_result": result.content if result else None}
        )
        return GuardedEvent(interaction=redacted, trust=content.trust, findings=findings, guarded_at=now)

    async def handle(
        self, batch: Sequence[Envelope[InteractionEvent]], out: EventPublisher
    ) -> Sequence[Rejection]:
        """Guard every event; publish guarded or quarantined records (stateless: no store writes)."""
        for env in batch:
            event = env.event
            verdict = self.guard(event)
            topic = Topic.GUARDED if isinstance(verdict, GuardedEvent) else Topic.QUARANTINE
            out.send(topic, partition_key(event.tenant_id, event.user_id), verdict)
        return ()
