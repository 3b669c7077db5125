"""``hindsight chaos``: prove on loopback that faults lose and duplicate nothing (docs/delivery.md).

The run is bounded in time and count. It starts a real Apache Kafka (or uses ``--bootstrap``), a
persistent ``redis-server`` (AOF, ``appendfsync always``) and the pipeline as separate service
processes (``faststream run``): guard x2, write-trigger x3 (one consumer group, shared Redis) and
one embed process owning the embedded vector store (qdrant-edge allows one process per directory; in
production the embed stage scales out against a Qdrant server). It then publishes ``--events``
interaction events (unique ids, a SHA-256 checksum of the content in ``external_ref``) and some
malformed records, while it SIGKILLs and restarts consumer processes at random points, restarts
Redis once and makes the vector store unavailable for a few seconds once (a file flag read by
:class:`bench.procs.OutageVectorStore`, installed by :func:`bench.procs.create_ingest_app`). When
every group's lag is 0 it stops the processes (SIGTERM), opens the vector store and checks that
every valid event is exactly one memory (its own point, or a near-duplicate merged into another
one's ``merged_ids``) or one dead letter, every malformed record exactly one dead letter, and that
the write-trigger saw each user's events in order (session ledger ordinals). With ``--updates N``
(default 6) the embed process also runs reconcile, N users revise a durable statement
(:mod:`bench.chains`), their events are replayed once more after the run, and their version chains
must equal those of a fault-free reference reconcile of the same turns. It prints one JSON line and
exits non-zero on any loss, duplicate, reordering or chain difference.

``--qdrant-server`` runs the production topology of the vector store instead: a real Qdrant server
(:class:`hindsight.stores.qdrant_server.QdrantServer`) whose one collection two embed processes
share, and the faults then include a SIGKILL of the server, restarted 1-3 s later.

The pieces it shares with the fault tests and ``hindsight bench load`` are in :mod:`bench.procs`
(processes, fault-injecting store), :mod:`bench.workload` (events) and :mod:`bench.verify` (check).
"""

from __future__ import annotations

import asyncio
import logging
import random
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.chains import chain_snapshot, differences, reference_chains, revision_events
from bench.common import print_line
from bench.procs import Pipeline, ServiceProcess, stop_all
from bench.verify import memories_of, read_candidates, read_dead_letters, verify
from bench.workload import PublishProgress, Workload, make_workload, publish, publish_events
from hindsight.brokers import KafkaServer, committed_offsets, ensure_topics, read_topic, wait_for_zero_lag
from hindsight.brokers.kafka_server import free_port
from hindsight.errors import HindsightError
from hindsight.ids import turn_memory_id
from hindsight.observability import configure_logging
from hindsight.runtime import open_vector_store
from hindsight.settings import AllSettings
from hindsight.stores.qdrant_server import QdrantServer
from hindsight.stores.redis_server import Backend, EmbeddedRedis
from schemas import InteractionEvent, MemoryStoredEvent, Topic

if TYPE_CHECKING:
    from hindsight.stores.vector import VectorRecord

log = logging.getLogger("hindsight.chaos")


@dataclass(frozen=True)
class ChaosConfig:
    """Size and faults of one run; ``None`` fields scale with ``events``."""

    workdir: Path
    events: int = 5000
    malformed: int | None = None
    """Default ``max(8, events // 100)``."""
    users: int | None = None
    """Default ``max(10, events // 50)``."""
    kills: int | None = None
    """SIGKILLs (each followed by a restart); default ``min(12, max(4, events // 600))``."""
    seed: int = 7
    rate: float = 20.0
    """Records published per second (about what the embed stage sustains, so every stage stays busy)."""
    outage_s: float = 4.0
    bootstrap: str | None = None
    """An existing Kafka; default: start a real Apache Kafka in ``workdir``."""
    idempotent: bool = True
    timeout_s: float = 1800.0
    guards: int = 2
    triggers: int = 3
    qdrant_server: bool = False
    """Run a real Qdrant server (``hindsight.stores.qdrant_server``): the embed processes share one
    collection of it, and the faults include SIGKILL and restart of the server."""
    embeds: int | None = None
    """Embed processes; default 1, or 2 with ``qdrant_server`` (the embedded store allows one)."""
    updates: int = 6
    """Revision users whose version chains are checked (0: reconcile does not run)."""


@dataclass
class _Faults:
    kills: int = 0
    redis_restarts: int = 0
    vector_outages: int = 0
    qdrant_restarts: int = 0
    restarts: list[asyncio.Task[None]] = field(default_factory=list)


async def _embedded_progress(pipe: Pipeline) -> int:
    """Candidates the embed group has committed (each valid event is one candidate)."""
    offsets = await committed_offsets(pipe.bootstrap, pipe.group("ingest-embed"), [str(Topic.CANDIDATES)])
    return sum(max(0, o) for o in offsets.values())


async def _inject_faults(
    cfg: ChaosConfig,
    pipe: Pipeline,
    procs: list[ServiceProcess],
    redis: EmbeddedRedis,
    qdrant: QdrantServer | None = None,
    *,
    published: Callable[[], float],
    rng: random.Random,
    deadline: float,
) -> _Faults:
    """Fire the faults at random points of the publishing (10-90 % of the records published):
    SIGKILLs (one of them hits the embed process) each followed by a restart 0.5-2.5 s later, one
    Redis restart, one vector store outage of ``outage_s`` seconds, and with a Qdrant server one
    SIGKILL of the server restarted 1-3 s later (it replays its write-ahead log). Before each fault the embed
    stage must have committed more since the previous one (the pipeline recovered) and 2 s must
    have passed, so no fault lands on a pipeline that is still down."""
    faults = _Faults()
    kills = cfg.kills if cfg.kills is not None else min(12, max(4, cfg.events // 600))
    actions = ["kill-embed"] + ["kill"] * (kills - 1) + ["redis", "outage"] + (["qdrant"] if qdrant else [])
    rng.shuffle(actions)
    marks = sorted(rng.uniform(0.1, 0.9) for _ in actions)
    embeds = [p for p in procs if p.name.startswith("embed")]
    last_done, last_at = await _embedded_progress(pipe), time.monotonic()
    last_victim: ServiceProcess | None = None
    for action, mark in zip(actions, marks, strict=True):
        while True:
            done = await _embedded_progress(pipe)
            recovered = done > last_done or done >= cfg.events
            if published() >= mark and recovered and time.monotonic() - last_at >= 2.0:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"chaos: the pipeline stopped making progress ({done} events stored)")
            await asyncio.sleep(0.25)
        if action in ("kill", "kill-embed"):
            alive = [p for p in procs if p.alive and p is not last_victim] or [p for p in procs if p.alive]
            busy = [p for p in embeds if p.alive]
            victim = rng.choice(busy) if action == "kill-embed" and busy else rng.choice(alive)
            last_victim = victim
            log.info("chaos: SIGKILL %s", victim.name)
            victim.kill()
            faults.kills += 1
            faults.restarts.append(asyncio.create_task(_restart_later(victim, rng.uniform(0.5, 2.5))))
        elif action == "qdrant" and qdrant is not None:
            log.info("chaos: SIGKILL the Qdrant server")
            await asyncio.to_thread(qdrant.kill)
            await asyncio.sleep(rng.uniform(1.0, 3.0))
            await asyncio.to_thread(qdrant.start)
            faults.qdrant_restarts += 1
        elif action == "redis":
            log.info("chaos: restarting Redis")
            await asyncio.to_thread(redis.stop)
            await asyncio.sleep(rng.uniform(0.5, 1.5))
            await asyncio.to_thread(redis.start)
            faults.redis_restarts += 1
        else:
            log.info("chaos: vector store unavailable for %.1f s", cfg.outage_s)
            await asyncio.to_thread(pipe.outage_flag.touch)
            faults.restarts.append(asyncio.create_task(_end_outage(pipe.outage_flag, cfg.outage_s)))
            faults.vector_outages += 1
        last_done, last_at = await _embedded_progress(pipe), time.monotonic()
    return faults


async def _restart_later(proc: ServiceProcess, delay_s: float) -> None:
    await asyncio.sleep(delay_s)
    proc.start()


async def _end_outage(flag: Path, after_s: float) -> None:
    await asyncio.sleep(after_s)
    await asyncio.to_thread(flag.unlink, missing_ok=True)


async def run_chaos(cfg: ChaosConfig) -> dict[str, Any]:
    """Run one chaos round (see the module docstring) and return the report.

    The report has the issue's keys (``published``, ``valid``, ``malformed``, ``memories``,
    ``dead_letters``, ``lost``, ``duplicated``, ``kills``, ``seconds``) and more detail.

    Raises:
        TimeoutError: the pipeline did not catch up within ``cfg.timeout_s`` seconds.
        ConfigurationError / StoreUnavailableError: Kafka or Redis could not be started.
    """
    began = time.monotonic()
    deadline = began + cfg.timeout_s
    rng = random.Random(cfg.seed)
    run = f"{cfg.seed}{uuid.uuid4().hex[:6]}"
    malformed = cfg.malformed if cfg.malformed is not None else max(8, cfg.events // 100)
    users = cfg.users if cfg.users is not None else max(10, cfg.events // 50)
    work = make_workload(run, cfg.events, malformed, users, cfg.seed)
    revisions = revision_events(run, work.tenant, cfg.updates, cfg.seed)
    _interleave(work, revisions, random.Random(cfg.seed + 1))
    cfg.workdir.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        bootstrap = cfg.bootstrap
        if bootstrap is None:
            kafka = KafkaServer(cfg.workdir / "kafka", num_partitions=6, offsets_topic_partitions=3)
            bootstrap = stack.enter_context(kafka).bootstrap
        backend: Backend = "redis-server" if shutil.which("redis-server") else "auto"
        redis = EmbeddedRedis(cfg.workdir / "redis", backend=backend, port=free_port(), appendfsync="always")
        stack.enter_context(redis)
        qdrant = (
            stack.enter_context(QdrantServer(cfg.workdir / "qdrant-server")) if cfg.qdrant_server else None
        )
        await ensure_topics(bootstrap, {str(t): 6 for t in Topic})
        pipe = Pipeline(
            bootstrap,
            redis.url,
            cfg.workdir,
            f"chaos-{run}",
            cfg.idempotent,
            {"HINDSIGHT_KAFKA_MAX_BATCH": "16"},
            qdrant_url=qdrant.url if qdrant is not None else "",
            qdrant_collection=f"chaos_{run}",
            reconcile=cfg.updates > 0,
        )
        procs = [pipe.guard(i) for i in range(cfg.guards)]
        procs += [pipe.trigger(i) for i in range(cfg.triggers)]
        procs += [pipe.embed(i) for i in range(cfg.embeds or (2 if qdrant is not None else 1))]
        stack.callback(stop_all, procs)
        for proc in procs:
            proc.start()
        progress = PublishProgress(len(work.order))
        publishing = asyncio.create_task(
            publish(bootstrap, work, rate=cfg.rate, idempotent=cfg.idempotent, progress=progress)
        )
        faults = await _inject_faults(
            cfg, pipe, procs, redis, qdrant, published=progress.fraction, rng=rng, deadline=deadline
        )
        await publishing
        await asyncio.gather(*faults.restarts)
        for proc in procs:
            if not proc.alive:
                raise RuntimeError(f"{proc.name} exited on its own:\n{proc.log_tail()}")
        for _ in range(2):
            await wait_for_zero_lag(bootstrap, pipe.groups(), timeout_s=max(1.0, deadline - time.monotonic()))
        if revisions:  # a replay: an agent re-sends, or the DLQ replays, what was already stored
            await publish_events(bootstrap, revisions, idempotent=cfg.idempotent)
            for _ in range(2):
                await wait_for_zero_lag(
                    bootstrap, pipe.groups(), timeout_s=max(1.0, deadline - time.monotonic())
                )
        drained = [proc.terminate(30.0) for proc in procs]
        letters = await read_dead_letters(bootstrap)
        candidates = await read_candidates(bootstrap)
        points = await asyncio.to_thread(memories_of, pipe.settings(), work.tenant)
        chains = await _check_chains(bootstrap, pipe, points, revisions, cfg.workdir / "reference")
    verdict = verify(work, points, letters, candidates)
    verdict.examples += chains[1][: max(0, 10 - len(verdict.examples))]
    return {
        "published": len(work.order),
        "valid": len(work.events),
        "malformed": len(work.malformed),
        "memories": verdict.memories,
        "dead_letters": verdict.dead_letters,
        "lost": verdict.lost,
        "duplicated": verdict.duplicated,
        "kills": faults.kills,
        "seconds": round(time.monotonic() - began, 1),
        "merged": verdict.merged,
        "dead_letter_copies": verdict.dead_letter_copies,
        "corrupted": verdict.corrupted,
        "out_of_order": verdict.out_of_order,
        "redis_restarts": faults.redis_restarts,
        "vector_outages": faults.vector_outages,
        "qdrant_server": cfg.qdrant_server,
        "qdrant_restarts": faults.qdrant_restarts,
        "embed_processes": sum(1 for p in procs if p.name.startswith("embed")),
        "processes": len(procs),
        "sigterm_max_s": round(max(s for _, s in drained), 2),
        "sigterm_nonzero_exits": sum(1 for code, _ in drained if code not in (0, None)),
        "chain_users": cfg.updates,
        "chain_memories": chains[0],
        "superseded": sum(1 for p in points if p.payload.get("status") == "superseded"),
        "chain_differences": len(chains[1]),
        "examples": verdict.examples,
    }


def _interleave(work: Workload, extra: list[InteractionEvent], rng: random.Random) -> None:
    """Add ``extra`` events to ``work`` at random points of its publish order, keeping their order."""
    first = len(work.events)
    work.events.extend(extra)
    positions = sorted(rng.randrange(len(work.order) + 1) for _ in extra)
    for n, position in enumerate(reversed(positions)):
        work.order.insert(position, ("event", first + len(extra) - 1 - n))


async def _check_chains(
    bootstrap: str,
    pipe: Pipeline,
    points: list[VectorRecord],
    revisions: list[InteractionEvent],
    workdir: Path,
) -> tuple[int, list[str]]:
    """Compare the revision users' chains with a fault-free reference (:mod:`bench.chains`):
    ``(memories compared, differences)``."""
    if not revisions:
        return 0, []
    users = {e.user_id for e in revisions}
    actual = chain_snapshot(points, users)
    turn_ids = {turn_memory_id(e.tenant_id, e.event_id) for e in revisions}
    order: list[str] = []
    for rec in await read_topic(bootstrap, str(Topic.STORED)):
        stored = MemoryStoredEvent.model_validate_json(rec.value or b"{}")
        if stored.memory.id in turn_ids and stored.memory.id not in order:
            order.append(stored.memory.id)
    turns = await asyncio.to_thread(_with_vectors, pipe.settings(), order)
    expected = await reference_chains(turns, order, pipe.settings(), workdir)
    return len(set(actual) | set(expected)), differences(actual, expected)


def _with_vectors(settings: AllSettings, ids: list[str]) -> list[VectorRecord]:
    store = open_vector_store(settings)
    try:
        return store.retrieve(ids, with_vectors=True)
    finally:
        store.close()


def report_ok(report: Mapping[str, Any]) -> bool:
    """True when the report shows no loss, duplicate, corruption, reordering or chain difference."""
    keys = ("lost", "duplicated", "corrupted", "out_of_order", "chain_differences")
    return not any(report.get(k) for k in keys)


def main_chaos(
    *,
    events: int,
    kills: int | None,
    seed: int,
    bootstrap: str | None,
    workdir: Path | None,
    timeout_s: float,
    qdrant_server: bool = False,
    embeds: int | None = None,
    updates: int = 6,
) -> int:
    """``hindsight chaos``: run, print the JSON line (problem examples to stderr), return the exit
    code: 0 clean, 1 loss/duplicate/corruption/reordering, 2 the run itself failed."""
    settings = AllSettings()
    configure_logging(settings.runtime)
    temp = workdir is None
    root = workdir or Path(tempfile.mkdtemp(prefix="hindsight-chaos-"))
    cfg = ChaosConfig(
        root,
        events=events,
        kills=kills,
        seed=seed,
        bootstrap=bootstrap,
        timeout_s=timeout_s,
        qdrant_server=qdrant_server,
        embeds=embeds,
        updates=updates,
    )
    try:
        report = asyncio.run(run_chaos(cfg))
    except (HindsightError, TimeoutError, RuntimeError) as exc:
        print_line({"error": str(exc)[:2000], "workdir": str(root)})
        return 2
    for example in report.pop("examples"):
        print(f"chaos: {example}", file=sys.stderr)
    print_line(report)
    ok = report_ok(report)
    if temp and ok:
        shutil.rmtree(root, ignore_errors=True)
    elif not ok:
        print(f"chaos: files kept in {root}", file=sys.stderr)
    return 0 if ok else 1
