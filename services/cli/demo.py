"""``hindsight demo``: real conversations through the whole pipeline, then recall through the gateway.

1. start the embedded stack (or use ``--bootstrap``'s Kafka);
2. publish every LoCoMo turn (or every line of ``--jsonl``) to ``memory.interactions.v1`` with an
   aiokafka producer, exactly as an agent would, and a session-closed event after each session;
3. wait until every consumer group has caught up (consumer lag 0, not a sleep);
4. ask every category 1-4 question through the gateway's HTTP API and score evidence recall@5/@10;
5. print one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
from aiokafka import AIOKafkaProducer
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from hindsight.brokers.admin import consumer_lag
from hindsight.eval import locomo
from hindsight.stores.vector import MemoryFilter
from schemas import InteractionEvent, SessionClosedEvent, Topic, partition_key

if TYPE_CHECKING:
    from services.cli.embedded import Stack

AnyEvent = InteractionEvent | SessionClosedEvent


@contextmanager
def progress(total: int, desc: str, unit: str, *, disable: bool = False) -> Iterator[tqdm[Any]]:
    """A transient progress bar on stderr; a log line written meanwhile goes above the bar instead of
    being glued to it (tqdm's logging redirect swaps the root logger's console handler while it runs)."""
    with (
        logging_redirect_tqdm(),
        tqdm(total=total, desc=desc, unit=unit, leave=False, disable=disable) as bar,
    ):
        yield bar


@dataclass
class DemoResult:
    """Numbers the demo prints as its final JSON line."""

    conversations: int = 0
    events: int = 0
    memories: int = 0
    questions: int = 0
    recall_at_5: float | None = None
    recall_at_10: float | None = None
    all_evidence_at_10: float | None = None
    ingest_seconds: float = 0.0
    ingest_events_per_s: float = 0.0
    recall_p50_ms: float | None = None
    recall_p95_ms: float | None = None
    reconcile_lag: int | None = None
    """Stored memories reconcile had not reached yet when the questions were asked (None: off)."""
    reconcile_seconds: float | None = None
    """Seconds reconcile needed to catch up after ingest did (when the run waited for it)."""
    by_category: dict[str, dict[str, float]] = field(default_factory=dict)

    def line(self) -> str:
        """The JSON line (keys in the documented order, rounded)."""

        def r(x: float | None, n: int = 4) -> float | None:
            return None if x is None else round(x, n)

        return json.dumps(
            {
                "conversations": self.conversations,
                "events": self.events,
                "memories": self.memories,
                "questions": self.questions,
                "recall_at_5": r(self.recall_at_5),
                "recall_at_10": r(self.recall_at_10),
                "all_evidence_at_10": r(self.all_evidence_at_10),
                "ingest_seconds": r(self.ingest_seconds, 2),
                "ingest_events_per_s": r(self.ingest_events_per_s, 1),
                "recall_p50_ms": r(self.recall_p50_ms, 1),
                "recall_p95_ms": r(self.recall_p95_ms, 1),
                "reconcile_lag": self.reconcile_lag,
                "reconcile_seconds": r(self.reconcile_seconds, 1),
            }
        )


def read_jsonl(path: Path) -> list[AnyEvent]:
    """Interaction events, one JSON object per line; session-closed events are added per session.

    Raises:
        locomo.DatasetError: the file is missing, or a line is not a valid interaction event (the
            message names the line and field).
    """
    from pydantic import ValidationError  # noqa: PLC0415

    from hindsight.consumer import describe_validation_error  # noqa: PLC0415

    if not path.is_file():
        raise locomo.DatasetError(f"JSONL transcript not found: {path}")
    events: list[AnyEvent] = []
    sessions: dict[tuple[str, str, str], tuple[InteractionEvent, int]] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            event = InteractionEvent.model_validate_json(line)
        except ValidationError as exc:
            raise locomo.DatasetError(f"{path}:{n}: {describe_validation_error(exc)}") from exc
        events.append(event)
        key = (event.tenant_id, event.user_id, event.session_id)
        sessions[key] = (event, sessions.get(key, (event, 0))[1] + 1)
    for (_, _, session_id), (last, count) in sessions.items():
        events.append(
            SessionClosedEvent(
                event_id=f"{session_id}:close",
                tenant_id=last.tenant_id,
                user_id=last.user_id,
                agent_id=last.agent_id,
                session_id=session_id,
                closed_at=last.occurred_at,
                event_count=count,
            )
        )
    return events


def _key_and_id(event: AnyEvent) -> tuple[bytes, str]:
    return partition_key(event.tenant_id, event.user_id), event.event_id


async def publish(bootstrap: str, events: Sequence[AnyEvent], *, chunk: int = 500) -> None:
    """Publish ``events`` in order (interactions and closes to their topics), acks=all, in chunks."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        for start in range(0, len(events), chunk):
            futures = []
            for event in events[start : start + chunk]:
                topic = Topic.INTERACTIONS if isinstance(event, InteractionEvent) else Topic.SESSIONS
                key, _ = _key_and_id(event)
                futures.append(await producer.send(str(topic), event.model_dump_json().encode(), key=key))
            await asyncio.gather(*futures)
    finally:
        await producer.stop()


RECONCILE_GROUP = "ingest-reconcile"
"""Group suffix of reconcile: behind ingest; memories are searchable before it reaches them."""


async def wait_with_progress(stack: Stack, interactions: int, sessions: int, timeout_s: float) -> None:
    """Show a progress bar of the interactions through guard, write-trigger and embedding (each
    stage's consumer lag subtracted; the embed stage is the slow one), then one of the ``sessions``
    closes through reflection (an LLM call each on CPU; a close parked until its turns are stored
    counts as not done), then wait until every group but reconcile has lag 0 (every memory is
    searchable, every session reflected, the access log written).

    Raises:
        TimeoutError: a group still lags after ``timeout_s``.
    """
    kafka = stack.resources.settings.kafka
    stages = (
        (kafka.group("guard"), [Topic.INTERACTIONS]),
        (kafka.group("ingest-trigger"), [Topic.GUARDED]),
        (kafka.group("ingest-embed"), [Topic.CANDIDATES]),
    )
    deadline = time.monotonic() + timeout_s
    with progress(interactions, "ingest", "ev") as bar:
        while time.monotonic() < deadline:
            lags = [await consumer_lag(stack.bootstrap, group, topics) for group, topics in stages]
            done = min(interactions, max(bar.n, interactions - sum(lags)))  # never moves backwards
            bar.update(done - bar.n)
            if not any(lags):
                break
            await asyncio.sleep(0.5)
    if sessions and "reflect" in stack.resources.stage_topics:
        queue = await stack.resources.reflection_queue()
        with progress(sessions, "reflect", "session") as bar:
            while time.monotonic() < deadline:
                waiting = await consumer_lag(stack.bootstrap, kafka.group("reflect"), [Topic.SESSIONS])
                waiting += await queue.parked()
                done = min(sessions, max(bar.n, sessions - waiting))
                bar.update(done - bar.n)
                if not waiting:
                    break
                await asyncio.sleep(0.5)
    await stack.wait_caught_up(timeout_s=max(1.0, deadline - time.monotonic()), exclude=(RECONCILE_GROUP,))


async def reconcile_lag(stack: Stack) -> int | None:
    """Stored-memory events reconcile has not processed yet (``None`` when it does not run here)."""
    if RECONCILE_GROUP not in stack.resources.runners:
        return None
    group = stack.resources.settings.kafka.group(RECONCILE_GROUP)
    return await consumer_lag(stack.bootstrap, group, [Topic.STORED])


async def wait_for_reconcile(stack: Stack, timeout_s: float, *, show: bool = True) -> float | None:
    """Wait until reconcile has caught up too, with a bar of the stored memories it has judged (the
    total grows when reflection stores facts and lessons meanwhile); its catch-up seconds (``None``
    when it does not run).

    Raises:
        TimeoutError: a group still lags after ``timeout_s``.
    """
    lag = await reconcile_lag(stack)
    if lag is None:
        return None
    started = time.perf_counter()
    deadline = time.monotonic() + timeout_s
    with progress(lag, "reconcile", "memory", disable=not show) as bar:
        while lag and time.monotonic() < deadline:
            await asyncio.sleep(1.0)
            lag = await reconcile_lag(stack) or 0
            bar.total = max(bar.total or 0, bar.n + lag)
            bar.update(max(0, bar.total - lag - bar.n))
    await stack.wait_caught_up(timeout_s=max(1.0, deadline - time.monotonic()))
    return time.perf_counter() - started


def count_memories(stack: Stack, tenant_id: str, user_ids: Sequence[str] | None) -> int:
    """Active memories of ``tenant_id`` (optionally only these users)."""
    store = stack.resources.vector_store()
    if user_ids is None:
        return store.count(MemoryFilter(tenant_id=tenant_id))
    return sum(store.count(MemoryFilter(tenant_id=tenant_id, user_id=u)) for u in user_ids)


async def ask(
    client: httpx.AsyncClient, question: locomo.Question, top_k: int
) -> tuple[list[list[str]], float]:
    """Recall for one question over HTTP; returns each memory's provenance refs and the latency (ms).

    Raises:
        httpx.HTTPStatusError: the gateway answered with an error.
    """
    started = time.perf_counter()
    response = await client.post(
        "/v1/recall",
        json={
            "query": question.question,
            "user_id": question.sample_id,
            "top_k": top_k,
            "reference_time": question.reference_time.isoformat(),
        },
    )
    elapsed = (time.perf_counter() - started) * 1000
    response.raise_for_status()
    body: dict[str, Any] = response.json()
    return [list(m["provenance"]["external_refs"]) for m in body["memories"]], elapsed


async def evaluate(
    stack: Stack, api_key: str, questions: Sequence[locomo.Question], top_k: int, result: DemoResult
) -> None:
    """Ask every question through the gateway and fill the recall fields of ``result``."""
    r5: list[float] = []
    r10: list[float] = []
    full10: list[float] = []
    latencies: list[float] = []
    per_cat: dict[int, list[float]] = {}
    headers = {"Authorization": f"Bearer {api_key}"}
    async with httpx.AsyncClient(base_url=stack.gateway_url, headers=headers, timeout=60.0) as client:
        with progress(len(questions), "recall", "q") as bar:
            for q in questions:
                refs, ms = await ask(client, q, top_k)
                bar.update(1)
                latencies.append(ms)
                r5.append(locomo.evidence_recall(q.evidence, refs, 5))
                r10.append(locomo.evidence_recall(q.evidence, refs, 10))
                full10.append(float(r10[-1] == 1.0))
                per_cat.setdefault(q.category, []).append(r10[-1])
    if questions:
        result.recall_at_5 = statistics.fmean(r5)
        result.recall_at_10 = statistics.fmean(r10)
        result.all_evidence_at_10 = statistics.fmean(full10)
        result.recall_p50_ms = statistics.median(latencies)
        result.recall_p95_ms = (
            statistics.quantiles(latencies, n=20)[18] if len(latencies) > 1 else latencies[0]
        )
        result.by_category = {
            str(c): {"recall_at_10": round(statistics.fmean(v), 4), "n": len(v)}
            for c, v in sorted(per_cat.items())
        }


async def run_demo(
    stack: Stack,
    api_key: str,
    events: Sequence[AnyEvent],
    questions: Sequence[locomo.Question],
    *,
    conversations: int,
    top_k: int,
    timeout_s: float,
    wait_reconcile: bool = False,
) -> DemoResult:
    """Publish, wait until every memory is searchable (and, with ``wait_reconcile``, reconciled),
    evaluate; returns the numbers. Reconcile runs behind ingest: without ``wait_reconcile`` the
    questions are asked while it works through its backlog (``reconcile_lag`` says how far behind)."""
    result = DemoResult(conversations=conversations, events=len(events), questions=len(questions))
    interactions = sum(isinstance(e, InteractionEvent) for e in events)
    started = time.perf_counter()
    await publish(stack.bootstrap, events)
    sessions = sum(isinstance(e, SessionClosedEvent) for e in events)
    await wait_with_progress(stack, interactions, sessions, timeout_s)
    result.ingest_seconds = time.perf_counter() - started
    result.ingest_events_per_s = len(events) / result.ingest_seconds if result.ingest_seconds else 0.0
    if wait_reconcile:
        result.reconcile_seconds = await wait_for_reconcile(stack, timeout_s)
    result.reconcile_lag = await reconcile_lag(stack)
    tenants = sorted({e.tenant_id for e in events})
    users = sorted({e.user_id for e in events})
    result.memories = sum([await asyncio.to_thread(count_memories, stack, t, users) for t in tenants])
    await evaluate(stack, api_key, questions, top_k, result)
    return result
