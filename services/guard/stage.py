"""The guard stage: redact PII, block secrets, quarantine poisoning, attach source trust (DESIGN.md s6).

Consumes ``memory.interactions.v1`` (raw, possibly unredacted), publishes redacted
:class:`~schemas.GuardedEvent` to ``memory.guarded.v1`` or a :class:`~schemas.QuarantineRecord` to
``memory.quarantine.v1``. Every free-text field that can reach a store or a log is guarded:
``content`` and ``tool_result`` get the whole policy (PII, secrets, poisoning); ``speaker``,
``tool_name``, ``external_ref``, every tag and every string value of ``metadata`` are redacted, and
a secret in any of them blocks the event (issue 13 defect 5). Nothing unredacted leaves this stage
except inside dead letters of records that could not even be parsed.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from hindsight.consumer import Envelope, Rejection, parse_model
from schemas import GuardedEvent, InteractionEvent, QuarantineRecord, Topic, partition_key
from services.guard.poisoning import BurstDetector
from services.guard.policy import GuardDecision, GuardPolicy, evaluate, redact_field

if TYPE_CHECKING:
    from hindsight.publisher import EventPublisher
    from services.guard.claims import ClaimBursts
    from services.guard.classifier import InstructionClassifier


_ORDER = {"pass": 0, "quarantine": 1, "block": 2}


def _merge(a: GuardDecision, b: GuardDecision | None) -> tuple[str, Counter[str], list[str]]:
    """Combine the decisions on content and tool result: the stricter verdict wins."""
    if b is None:
        return a.verdict, Counter(a.findings), list(a.reasons)
    verdict = a.verdict if _ORDER[a.verdict] >= _ORDER[b.verdict] else b.verdict
    return verdict, Counter(a.findings) + Counter(b.findings), [*a.reasons, *b.reasons]


class GuardStage:
    """Guard: PII redaction, secret blocking, poisoning quarantine, source trust."""

    name = "guard"

    def __init__(
        self,
        policy: GuardPolicy,
        burst: BurstDetector | None = None,
        *,
        classifier: InstructionClassifier | None = None,
        claims: ClaimBursts | None = None,
        seen_max: int = 100_000,
    ) -> None:
        self._policy = policy
        self._burst = burst
        self._classifier = classifier
        self._claims = claims
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

    def _redact_fields(self, event: InteractionEvent) -> tuple[dict[str, object], Counter[str], list[str]]:
        """Redacted ``speaker``, ``tool_name``, ``external_ref``, tags and metadata string values."""
        updates: dict[str, object] = {}
        findings: Counter[str] = Counter()
        blocks: list[str] = []

        def one(value: str) -> str:
            text, counts, reasons = redact_field(value, self._policy)
            findings.update(counts)
            blocks.extend(reasons)
            return text

        for name in ("speaker", "tool_name", "external_ref"):
            value = getattr(event, name)
            if value:
                updates[name] = one(value)
        if event.tags:
            updates["tags"] = tuple(one(tag) for tag in event.tags)
        if event.metadata:
            updates["metadata"] = {k: one(v) if isinstance(v, str) else v for k, v in event.metadata.items()}
        return updates, findings, blocks

    def guard(self, event: InteractionEvent, *, claim_burst: bool = False) -> GuardedEvent | QuarantineRecord:
        """Apply the policy to one event (pure apart from the clock and the burst window).

        ``claim_burst`` is the :class:`~services.guard.claims.ClaimBursts` verdict of the event
        (reason ``burst:claim``). Bursts are judged on event time (``occurred_at``), so a replay is
        judged like the original.
        """
        policy, classifier = self._policy, self._classifier
        content = evaluate(
            event.content, event.source, policy, burst=self._is_burst(event), classifier=classifier
        )
        result = (
            evaluate(event.tool_result, event.source, policy, classifier=classifier)
            if event.tool_result
            else None
        )
        verdict, findings, reasons = _merge(content, result)
        updates, field_findings, field_blocks = self._redact_fields(event)
        findings.update(field_findings)
        if field_blocks:
            verdict = "block"
            reasons.extend(field_blocks)
        if claim_burst:
            reasons.append("burst:claim")
            verdict = verdict if verdict == "block" else "quarantine"
        reasons = list(dict.fromkeys(reasons))
        counts = dict(sorted(findings.items()))
        redacted = event.model_copy(
            update={
                "content": content.content,
                "tool_result": result.content if result else None,
                **updates,
            }
        )
        now = datetime.now(UTC)
        scores = {
            **content.scores,
            **{f"tool_result_{k}": v for k, v in (result.scores if result else {}).items()},
        }
        if verdict != "pass":
            blocked = verdict == "block"
            return QuarantineRecord(
                tenant_id=event.tenant_id,
                user_id=event.user_id,
                agent_id=event.agent_id,
                session_id=event.session_id,
                event_id=event.event_id,
                verdict="block" if blocked else "quarantine",
                reasons=tuple(reasons),
                findings=counts,
                source=event.source,
                content_redacted=None if blocked else content.content,
                quarantined_at=now,
                stage="guard",
                trust=content.trust,
                external_ref=None if blocked else redacted.external_ref,
                tool_name=None if blocked else redacted.tool_name,
                scores=scores,
                interaction=None if blocked else redacted,
            )
        return GuardedEvent(interaction=redacted, trust=content.trust, findings=counts, guarded_at=now)

    async def handle(
        self, batch: Sequence[Envelope[InteractionEvent]], out: EventPublisher
    ) -> Sequence[Rejection]:
        """Guard every event; publish guarded or quarantined records.

        Raises:
            StoreUnavailableError: the claim counter (Redis) failed; the batch is retried and the
                stored verdicts make the retry idempotent.
        """
        events = [env.event for env in batch]
        claim_bursts = await self._claims.observe(events) if self._claims is not None else set()
        for event in events:
            verdict = self.guard(event, claim_burst=event.event_id in claim_bursts)
            topic = Topic.GUARDED if isinstance(verdict, GuardedEvent) else Topic.QUARANTINE
            out.send(topic, partition_key(event.tenant_id, event.user_id), verdict)
        return ()
