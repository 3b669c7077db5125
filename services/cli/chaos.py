"""``hindsight chaos``: prove on loopback that faults lose and duplicate nothing (docs/delivery.md).

The run is bounded in time and count. It starts a real Apache Kafka (or uses ``--bootstrap``), a
persistent ``redis-server`` (AOF, ``appendfsync always``) and the pipeline as separate service
processes (``faststream run``): guard x2, write-trigger x3 (one consumer group, shared Redis) and one
embed process owning the embedded vector store (qdrant-edge allows one process per directory; in
production the embed stage scales out against a Qdrant server). It then publishes ``--events``
interaction events (unique ids, a SHA-256 checksum of the content in ``external_ref``) and some
malformed records, while it SIGKILLs and restarts consumer processes at random points, restarts Redis
once and makes the vector store unavailable for a few seconds once (a file flag read by
:class:`OutageVectorStore`, installed by :func:`create_ingest_app`). When every group's lag is 0 it
stops the processes (SIGTERM), opens the vector store and checks that every valid event is exactly
one memory (its own point, or a near-duplicate merged into another one's ``merged_ids``) or one dead
letter, every malformed record exactly one dead letter, and that the write-trigger saw each user's
events in order (session ledger ordinals). It prints one JSON line and exits non-zero on any loss,
duplicate or reordering.

This module also holds the pieces the fault tests and ``hindsight bench load`` share: the
:class:`ServiceProcess` harness and the fault-injecting vector store wrapper.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import json
import logging
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, Self, cast

from aiokafka import AIOKafkaProducer
from faststream import FastStream

from hindsight.brokers import KafkaServer, committed_offsets, ensure_topics, read_topic, wait_for_zero_lag
from hindsight.brokers.kafka_server import free_port
from hindsight.errors import ConfigurationError, HindsightError, StoreUnavailableError
from hindsight.ids import turn_memory_id
from hindsight.observability import configure_logging
from hindsight.runtime import Resources, open_vector_store, service_app
from hindsight.settings import AllSettings
from hindsight.stores.redis_server import Backend, EmbeddedRedis
from hindsight.stores.vector import MemoryFilter, VectorRecord
from schemas import DeadLetter, InteractionEvent, MemoryCandidate, Topic, partition_key
from services.ingest import app as ingest_app

if TYPE_CHECKING:
    from hindsight.stores.vector import VectorStore

log = logging.getLogger("hindsight.chaos")

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The checkout whose code the service processes run (their working directory)."""


class ServiceProcess:
    """One Hindsight process on loopback, by default a service app run as
    ``python -m faststream run <app> --factory``.

    The environment is ours plus ``env``; stdout and stderr go to ``log_path``. :meth:`kill` is
    SIGKILL (nothing drains), :meth:`terminate` SIGTERM (the batch in flight drains and commits).
    """

    def __init__(
        self,
        name: str,
        app: str,
        env: Mapping[str, str],
        log_path: Path,
        *,
        argv: Sequence[str] | None = None,
    ) -> None:
        """Configure (nothing starts yet).

        :param name: label for logs and reports, e.g. ``trigger-2``.
        :param app: FastStream app factory, e.g. ``services.guard.app:create_app``.
        :param env: extra environment (``HINDSIGHT_*`` settings).
        :param log_path: file receiving the process's output (appended across restarts).
        :param argv: run this command instead of ``faststream run <app>`` (``app`` is then a label).
        """
        self.name = name
        self.app = app
        self.argv = (
            list(argv) if argv is not None else [sys.executable, "-m", "faststream", "run", app, "--factory"]
        )
        self.env = dict(env)
        self.log_path = log_path
        self.starts = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """Process id while running."""
        return self._process.pid if self.alive and self._process is not None else None

    @property
    def alive(self) -> bool:
        """True while the process runs."""
        return self._process is not None and self._process.poll() is None

    def start(self) -> Self:
        """Launch the process (no wait for readiness: consumers join their group on their own)."""
        if self.alive:
            return self
        self._close_log()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        env = {**os.environ, **self.env, "PYTHONUNBUFFERED": "1"}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        self._process = subprocess.Popen(
            self.argv,
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.starts += 1
        return self

    def kill(self) -> None:
        """SIGKILL and reap the process (a crash: nothing is drained or committed)."""
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGKILL)
            self._process.wait()
        self._close_log()

    def terminate(self, timeout_s: float = 30.0) -> tuple[int | None, float]:
        """SIGTERM and wait up to ``timeout_s`` seconds; SIGKILL if it is still running then.

        :returns: the exit code (negative: killed by that signal; ``None``: was not running) and the
            seconds the process took to exit.
        """
        began = time.monotonic()
        if self._process is None or self._process.poll() is not None:
            self._close_log()
            return (None if self._process is None else self._process.returncode), 0.0
        self._process.send_signal(signal.SIGTERM)
        try:
            code = self._process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self._process.kill()
            code = self._process.wait()
        self._close_log()
        return code, time.monotonic() - began

    def log_tail(self, n_bytes: int = 3000) -> str:
        """The end of the process's log (for failure messages)."""
        if not self.log_path.exists():
            return "(no log)"
        data = self.log_path.read_bytes()
        return data[-n_bytes:].decode(errors="replace")

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> Self:
        """Start (see :meth:`start`)."""
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """SIGTERM, then SIGKILL after 30 s."""
        self.terminate()


def stop_all(processes: Sequence[ServiceProcess], timeout_s: float = 30.0) -> None:
    """SIGTERM every process at once, then wait for each (SIGKILL after ``timeout_s``)."""
    for proc in processes:
        if proc.alive and proc._process is not None:
            proc._process.send_signal(signal.SIGTERM)
    for proc in processes:
        proc.terminate(timeout_s)


# ---------------------------------------------------------------------------------------------
# Fault injection: a vector store that fails while a flag file exists
# ---------------------------------------------------------------------------------------------

OUTAGE_FLAG_ENV = "HINDSIGHT_CHAOS_VECTOR_OUTAGE_FILE"
"""Environment variable naming the flag file of :func:`create_ingest_app`'s vector store."""


class OutageVectorStore:
    """A :class:`~hindsight.stores.vector.VectorStore` that raises ``StoreUnavailableError`` from
    every call while ``flag`` exists, and delegates to ``inner`` otherwise.

    Methods are delegated by name (``__getattr__``), so the wrapper follows the protocol whatever
    methods it gains; the check costs one ``stat`` per call.
    """

    def __init__(self, inner: VectorStore, flag: Path) -> None:
        self._inner = inner
        self._flag = flag
        self.dim = inner.dim
        self.failures = 0
        """Calls refused so far (in this process)."""

    def close(self) -> None:
        """Close the wrapped store (never refused)."""
        self._inner.close()

    def __getattr__(self, name: str) -> Any:
        """The wrapped store's attribute; methods refuse to run while the flag file exists."""
        target = getattr(self._inner, name)
        if not callable(target):
            return target

        @functools.wraps(target)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            if self._flag.exists():
                self.failures += 1
                raise StoreUnavailableError(f"vector store unavailable (fault injected by {self._flag})")
            return target(*args, **kwargs)

        return guarded


def create_ingest_app() -> FastStream:
    """The ingest service of ``services.ingest.app`` with its vector store behind
    :class:`OutageVectorStore` on the flag file named by ``$HINDSIGHT_CHAOS_VECTOR_OUTAGE_FILE``.

    ``faststream run services.cli.chaos:create_ingest_app --factory``; chaos runs and fault tests only.

    Raises:
        ConfigurationError: the environment variable is not set.
    """
    flag = os.environ.get(OUTAGE_FLAG_ENV)
    if not flag:
        raise ConfigurationError(f"{OUTAGE_FLAG_ENV} must name the outage flag file")
    path = Path(flag)

    async def register(resources: Resources) -> None:
        def wrap(store: VectorStore) -> VectorStore:
            return cast("VectorStore", OutageVectorStore(store, path))

        resources.vector_store_wrapper = wrap
        await ingest_app.register(resources)

    return service_app(register)


# ---------------------------------------------------------------------------------------------
# Workload: distinct interaction events with checksums, and malformed records
# ---------------------------------------------------------------------------------------------

_WORDS = (  # noqa: SIM905 (a word list reads better as one string)
    "harbour lantern orchard violin glacier bakery cathedral meadow compass telescope quarry "
    "saffron tundra pottery mosaic vineyard lighthouse canyon monastery marathon chess origami "
    "volcano bamboo caravan espresso falcon granite hammock iceberg jasmine kayak labyrinth mango "
    "nebula oasis pelican quilt raccoon sapphire tram umbrella walnut yacht zebra accordion bonfire "
    "cinnamon dolphin elevator fjord gondola hazelnut igloo jukebox kettle lagoon marble noodle "
    "opera parsley quinoa rooftop sailboat tangerine ukulele velvet waterfall xylophone yoghurt "
    "zeppelin archive bicycle cottage dumpling embroidery festival greenhouse harmonica inkwell "
    "jigsaw kimono lavender mandolin notebook observatory pancake"
).split()
_PLACES = (  # noqa: SIM905
    "Lisbon Kyoto Oslo Nairobi Lima Hanoi Tbilisi Quito Porto Leipzig Valparaiso Tallinn Cusco "
    "Bergen Hobart Matera Ghent Luang Zanzibar Bruges"
).split()


def event_content(rng: random.Random, i: int) -> str:
    """A distinct, PII-free sentence for event ``i`` (no digits long enough to look like an id)."""
    a, b, c, d = rng.sample(_WORDS, 4)
    place = rng.choice(_PLACES)
    return (
        f"Note {i}: I talked about the {a} and the {b} near {place}, "
        f"then we compared a {c} with a {d} for {rng.randint(2, 99)} minutes."
    )


def checksum(content: str) -> str:
    """``sha256:<first 16 hex digits>`` of ``content`` (UTF-8): carried in ``external_ref``."""
    return "sha256:" + hashlib.sha256(content.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Workload:
    """What one run publishes: valid events, malformed records, and how to recognise each."""

    tenant: str
    events: list[InteractionEvent]
    malformed: list[tuple[bytes, bytes]]
    """(key, value) of each malformed record; the value holds the marker ``bad-<run>-<j>``."""
    order: list[tuple[str, int]]
    """Publish order: ``("event", i)`` or ``("bad", j)``."""

    def bad_marker(self, j: int) -> str:
        """The marker inside malformed record ``j``."""
        return f"bad-{self.tenant}-{j}"


def make_workload(run: str, n_events: int, n_malformed: int, n_users: int, seed: int) -> Workload:
    """``n_events`` valid events over ``n_users`` users (one session each, turns in order, 30 s
    apart in event time so the guard sees no burst) and ``n_malformed`` malformed records of four
    kinds (invalid JSON, schema-invalid, not UTF-8, wrong shape), shuffled in at random points."""
    rng = random.Random(seed)
    tenant = f"chaos-{run}"
    t0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
    turns: dict[int, int] = {}
    events: list[InteractionEvent] = []
    for i in range(n_events):
        u = rng.randrange(n_users)
        turn = turns.get(u, 0)
        turns[u] = turn + 1
        content = event_content(rng, i)
        events.append(
            InteractionEvent(
                event_id=f"ev-{run}-{i}",
                tenant_id=tenant,
                user_id=f"user-{u}",
                agent_id=f"agent-{u}",
                session_id=f"session-{u}",
                occurred_at=t0 + timedelta(seconds=30 * turn),
                source="user",
                content=content,
                turn_index=turn,
                external_ref=checksum(content),
            )
        )
    malformed: list[tuple[bytes, bytes]] = []
    for j in range(n_malformed):
        marker = f"bad-{tenant}-{j}"
        key = partition_key(tenant, f"user-{rng.randrange(n_users)}")
        kind = j % 4
        if kind == 0:
            value = f'{{"event_id": "{marker}", "content": "cut off'.encode()
        elif kind == 1:
            bad = json.loads(events[0].model_dump_json()) if events else {}
            bad.update(event_id=marker, occurred_at="2026-11-01T08:00:00")  # no time zone
            value = json.dumps(bad).encode()
        elif kind == 2:
            value = b"\xff\xfe" + marker.encode() + b"\x80"
        else:
            value = json.dumps({"marker": marker, "content": 42}).encode()
        malformed.append((key, value))
    order = [("event", i) for i in range(n_events)]
    for j in range(n_malformed):
        order.insert(rng.randrange(len(order) + 1), ("bad", j))
    return Workload(tenant, events, malformed, order)


@dataclass
class PublishProgress:
    """How far :func:`publish` is: records acknowledged so far out of ``total``."""

    total: int
    acked: int = 0

    def fraction(self) -> float:
        """Acknowledged share of the records, 0..1."""
        return self.acked / self.total if self.total else 1.0


async def publish(
    bootstrap: str,
    work: Workload,
    *,
    rate: float,
    idempotent: bool,
    progress: PublishProgress | None = None,
) -> None:
    """Publish the workload in order at about ``rate`` records per second (``acks=all``)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=idempotent)
    await producer.start()
    try:
        began = time.monotonic()
        pending: list[asyncio.Future[Any]] = []
        for n, (kind, idx) in enumerate(work.order):
            if kind == "event":
                ev = work.events[idx]
                key, value = partition_key(ev.tenant_id, ev.user_id), ev.model_dump_json().encode()
            else:
                key, value = work.malformed[idx]
            pending.append(await producer.send(str(Topic.INTERACTIONS), value, key=key))
            if len(pending) >= 10:
                await asyncio.gather(*pending)
                pending.clear()
                if progress is not None:
                    progress.acked = n + 1
                ahead = (n + 1) / rate - (time.monotonic() - began)
                if ahead > 0:
                    await asyncio.sleep(ahead)
        await asyncio.gather(*pending)
        if progress is not None:
            progress.acked = len(work.order)
    finally:
        await producer.stop()


# ---------------------------------------------------------------------------------------------
# The pipeline as processes
# ---------------------------------------------------------------------------------------------

STAGE_TOPICS: dict[str, list[str]] = {
    "guard": [str(Topic.INTERACTIONS)],
    "ingest-trigger": [str(Topic.GUARDED)],
    "ingest-embed": [str(Topic.CANDIDATES)],
}
"""Consumer group suffix -> topics, for the stages a chaos run or a scale-out test runs."""


@dataclass
class Pipeline:
    """Guard, write-trigger and embed processes sharing one broker, one Redis and one group prefix.

    Every write-trigger and guard process gets its own data directory (they keep nothing there);
    the embed process owns ``<workdir>/embed`` (the embedded vector store) across restarts.
    """

    bootstrap: str
    redis_url: str
    workdir: Path
    prefix: str
    idempotent: bool = True
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def outage_flag(self) -> Path:
        """While this file exists the embed process's vector store refuses every call."""
        return self.workdir / "vector-outage"

    @property
    def embed_data_dir(self) -> Path:
        """The embed process's ``HINDSIGHT_DATA_DIR`` (its vector store is under ``qdrant/``)."""
        return self.workdir / "embed"

    def groups(self) -> dict[str, list[str]]:
        """Full consumer group id -> topics, for lag checks."""
        return {f"{self.prefix}-{name}": topics for name, topics in STAGE_TOPICS.items()}

    def group(self, name: str) -> str:
        """Full consumer group id of stage group ``name`` (e.g. ``ingest-trigger``)."""
        return f"{self.prefix}-{name}"

    def _env(self, name: str, data_dir: Path, extra: Mapping[str, str]) -> dict[str, str]:
        return {
            "HINDSIGHT_KAFKA_BOOTSTRAP": self.bootstrap,
            "HINDSIGHT_KAFKA_GROUP_PREFIX": self.prefix,
            "HINDSIGHT_KAFKA_IDEMPOTENT": "true" if self.idempotent else "false",
            "HINDSIGHT_KAFKA_SESSION_TIMEOUT_MS": "6000",
            "HINDSIGHT_REDIS_URL": self.redis_url,
            "HINDSIGHT_DATA_DIR": str(data_dir),
            "HINDSIGHT_INGEST_KEEP_THRESHOLD": "0",
            "HINDSIGHT_LOG_LEVEL": "INFO",
            **self.extra_env,
            **extra,
        }

    def guard(self, i: int) -> ServiceProcess:
        """Guard process ``i`` (stateless; group ``<prefix>-guard``)."""
        name = f"guard-{i}"
        env = self._env(name, self.workdir / name, {})
        return ServiceProcess(
            name, "services.guard.app:create_app", env, self.workdir / "logs" / f"{name}.log"
        )

    def trigger(self, i: int) -> ServiceProcess:
        """Write-trigger process ``i`` (state in Redis; group ``<prefix>-ingest-trigger``)."""
        name = f"trigger-{i}"
        env = self._env(name, self.workdir / name, {"HINDSIGHT_INGEST_STAGES": '["trigger"]'})
        return ServiceProcess(
            name, "services.ingest.app:create_app", env, self.workdir / "logs" / f"{name}.log"
        )

    def embed(self, **extra: str) -> ServiceProcess:
        """The one embed process (owns the embedded vector store, behind :class:`OutageVectorStore`)."""
        env = self._env(
            "embed",
            self.embed_data_dir,
            {"HINDSIGHT_INGEST_STAGES": '["embed"]', OUTAGE_FLAG_ENV: str(self.outage_flag), **extra},
        )
        return ServiceProcess(
            "embed", f"{__name__}:create_ingest_app", env, self.workdir / "logs" / "embed.log"
        )

    def settings(self) -> AllSettings:
        """Settings of the embed process (to open its vector store once it has stopped)."""
        cfg = AllSettings()
        cfg.runtime.data_dir = self.embed_data_dir
        cfg.qdrant.url = ""
        return cfg


def memories_of(settings: AllSettings, tenant: str) -> list[VectorRecord]:
    """Every point of ``tenant`` in the vector store of ``settings`` (whatever its status).

    Raises:
        StoreUnavailableError: the store is held by a running process or cannot be opened.
    """
    store = open_vector_store(settings)
    try:
        found: list[VectorRecord] = []
        offset: str | None = None
        while True:
            page, offset = store.scroll(MemoryFilter(tenant_id=tenant, statuses=None), 1000, offset)
            found.extend(page)
            if offset is None:
                return found
    finally:
        store.close()


# ---------------------------------------------------------------------------------------------
# Verification
# ---------------------------------------------------------------------------------------------


@dataclass
class Verdict:
    """What the stores and topics hold for one workload."""

    memories: int = 0
    merged: int = 0
    dead_letters: int = 0
    dead_letter_copies: int = 0
    lost: int = 0
    duplicated: int = 0
    corrupted: int = 0
    out_of_order: int = 0
    examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Nothing lost, duplicated, corrupted or reordered."""
        return not (self.lost or self.duplicated or self.corrupted or self.out_of_order)

    def note(self, text: str) -> None:
        """Keep the first few problems as examples for the report."""
        if len(self.examples) < 10:
            self.examples.append(text)


def dead_letter_identity(letter: DeadLetter) -> tuple[str, str, int, int]:
    """What makes two dead letters the same: the stage and the source record's coordinates.

    The DLQ is at-least-once like every topic (a stage that crashes after dead-lettering and before
    its commit dead-letters the record again): tools count identities, not records.
    """
    return (letter.stage, letter.topic, letter.partition, letter.offset)


def verify(
    work: Workload,
    points: Sequence[VectorRecord],
    letters: Sequence[DeadLetter],
    candidates: Sequence[MemoryCandidate],
) -> Verdict:
    """Check that every valid event is exactly one memory (own point or merged id) or one dead
    letter, every malformed record exactly one dead letter, stored contents match their checksums,
    and the write-trigger emitted each user's candidates in turn order (first occurrences;
    ``candidates`` in topic order per partition)."""
    verdict = Verdict(memories=len(points))
    reps = _count_memories(work, points, verdict)
    bad_counts = _count_dead_letters(work, letters, verdict, reps)
    for i in range(len(work.events)):
        if reps[i] == 0:
            verdict.lost += 1
            verdict.note(f"event {i} ({work.events[i].event_id}) is neither a memory nor a dead letter")
        elif reps[i] > 1:
            verdict.duplicated += 1
            verdict.note(f"event {i} ({work.events[i].event_id}) is represented {reps[i]} times")
    for j in range(len(work.malformed)):
        if bad_counts[j] != 1:
            verdict.lost += bad_counts[j] == 0
            verdict.duplicated += bad_counts[j] > 1
            verdict.note(f"malformed record {j} has {bad_counts[j]} dead letters")
    verdict.out_of_order = _order_violations(work, candidates, verdict)
    return verdict


def _count_memories(work: Workload, points: Sequence[VectorRecord], verdict: Verdict) -> Counter[int]:
    """Representations of each event among the points (own id, or a merged id); checks checksums."""
    index = {turn_memory_id(work.tenant, ev.event_id): i for i, ev in enumerate(work.events)}
    reps: Counter[int] = Counter()
    for point in points:
        payload = point.payload
        i = index.get(point.id)
        if i is not None:
            reps[i] += 1
            refs = payload.get("provenance", {}).get("external_refs", [])
            if checksum(str(payload.get("content", ""))) not in refs:
                verdict.corrupted += 1
                verdict.note(f"event {i}: stored content does not match its checksum")
        for merged in payload.get("merged_ids", []):
            j = index.get(str(merged))
            if j is not None:
                reps[j] += 1
                verdict.merged += 1
    return reps


def _count_dead_letters(
    work: Workload, letters: Sequence[DeadLetter], verdict: Verdict, reps: Counter[int]
) -> Counter[int]:
    """Distinct dead letters of this workload: adds valid events to ``reps``, returns the count per
    malformed record."""
    event_re = re.compile(rf"ev-{re.escape(work.tenant.removeprefix('chaos-'))}-(\d+)\b".encode())
    bad_re = re.compile(rf"{re.escape(work.bad_marker(0)[:-1])}(\d+)\b".encode())
    identities: dict[tuple[str, str, int, int], bytes] = {}
    for letter in letters:
        raw = base64.b64decode(letter.original_b64)
        if work.tenant.encode() in raw:
            verdict.dead_letter_copies += 1
            identities.setdefault(dead_letter_identity(letter), raw)
    verdict.dead_letters = len(identities)
    bad_counts: Counter[int] = Counter()
    for raw in identities.values():
        if found := bad_re.search(raw):
            bad_counts[int(found.group(1))] += 1
        elif found := event_re.search(raw):
            reps[int(found.group(1))] += 1
    return bad_counts


def _order_violations(work: Workload, candidates: Sequence[MemoryCandidate], verdict: Verdict) -> int:
    """Users whose candidates (first occurrence of each turn) are not in turn order."""
    by_id = {ev.event_id: ev for ev in work.events}
    seen: dict[str, set[int]] = defaultdict(set)
    last: dict[str, int] = {}
    broken: set[str] = set()
    for cand in candidates:
        ev = by_id.get(cand.provenance.event_ids[0]) if cand.provenance.event_ids else None
        if ev is None or ev.turn_index is None or ev.turn_index in seen[ev.user_id]:
            continue
        seen[ev.user_id].add(ev.turn_index)
        if ev.turn_index < last.get(ev.user_id, -1):
            if ev.user_id not in broken:
                verdict.note(f"{ev.user_id}: turn {ev.turn_index} processed after turn {last[ev.user_id]}")
            broken.add(ev.user_id)
        last[ev.user_id] = max(last.get(ev.user_id, -1), ev.turn_index)
    return len(broken)


async def read_dead_letters(bootstrap: str) -> list[DeadLetter]:
    """Every record of ``memory.dlq.v1`` (copies included), parsed."""
    return [
        DeadLetter.model_validate_json(rec.value)
        for rec in await read_topic(bootstrap, str(Topic.DLQ))
        if rec.value is not None
    ]


async def read_candidates(bootstrap: str) -> list[MemoryCandidate]:
    """Every record of ``memory.candidates.v1``, in offset order per partition."""
    return [
        MemoryCandidate.model_validate_json(rec.value)
        for rec in await read_topic(bootstrap, str(Topic.CANDIDATES))
        if rec.value is not None
    ]


# ---------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------


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


@dataclass
class _Faults:
    kills: int = 0
    redis_restarts: int = 0
    vector_outages: int = 0
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
    *,
    published: Callable[[], float],
    rng: random.Random,
    deadline: float,
) -> _Faults:
    """Fire the faults at random points of the publishing (10-90 % of the records published):
    SIGKILLs (one of them hits the embed process) each followed by a restart 0.5-2.5 s later, one
    Redis restart, one vector store outage of ``outage_s`` seconds. Before each fault the embed
    stage must have committed more since the previous one (the pipeline recovered) and 2 s must
    have passed, so no fault lands on a pipeline that is still down."""
    faults = _Faults()
    kills = cfg.kills if cfg.kills is not None else min(12, max(4, cfg.events // 600))
    actions = ["kill-embed"] + ["kill"] * (kills - 1) + ["redis", "outage"]
    rng.shuffle(actions)
    marks = sorted(rng.uniform(0.1, 0.9) for _ in actions)
    embed = next(p for p in procs if p.name == "embed")
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
            victim = embed if action == "kill-embed" and embed.alive else rng.choice(alive)
            last_victim = victim
            log.info("chaos: SIGKILL %s", victim.name)
            victim.kill()
            faults.kills += 1
            faults.restarts.append(asyncio.create_task(_restart_later(victim, rng.uniform(0.5, 2.5))))
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
    cfg.workdir.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        bootstrap = cfg.bootstrap
        if bootstrap is None:
            kafka = KafkaServer(cfg.workdir / "kafka", num_partitions=6, offsets_topic_partitions=3)
            bootstrap = stack.enter_context(kafka).bootstrap
        backend: Backend = "redis-server" if shutil.which("redis-server") else "auto"
        redis = EmbeddedRedis(cfg.workdir / "redis", backend=backend, port=free_port(), appendfsync="always")
        stack.enter_context(redis)
        await ensure_topics(bootstrap, {str(t): 6 for t in Topic})
        pipe = Pipeline(
            bootstrap,
            redis.url,
            cfg.workdir,
            f"chaos-{run}",
            cfg.idempotent,
            {"HINDSIGHT_KAFKA_MAX_BATCH": "16"},
        )
        procs = [pipe.guard(i) for i in range(cfg.guards)]
        procs += [pipe.trigger(i) for i in range(cfg.triggers)]
        procs.append(pipe.embed())
        stack.callback(stop_all, procs)
        for proc in procs:
            proc.start()
        progress = PublishProgress(len(work.order))
        publishing = asyncio.create_task(
            publish(bootstrap, work, rate=cfg.rate, idempotent=cfg.idempotent, progress=progress)
        )
        faults = await _inject_faults(
            cfg, pipe, procs, redis, published=progress.fraction, rng=rng, deadline=deadline
        )
        await publishing
        await asyncio.gather(*faults.restarts)
        for proc in procs:
            if not proc.alive:
                raise RuntimeError(f"{proc.name} exited on its own:\n{proc.log_tail()}")
        for _ in range(2):
            await wait_for_zero_lag(bootstrap, pipe.groups(), timeout_s=max(1.0, deadline - time.monotonic()))
        drained = [proc.terminate(30.0) for proc in procs]
        letters = await read_dead_letters(bootstrap)
        candidates = await read_candidates(bootstrap)
        points = await asyncio.to_thread(memories_of, pipe.settings(), work.tenant)
    verdict = verify(work, points, letters, candidates)
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
        "processes": len(procs),
        "sigterm_max_s": round(max(s for _, s in drained), 2),
        "sigterm_nonzero_exits": sum(1 for code, _ in drained if code not in (0, None)),
        "examples": verdict.examples,
    }


def report_ok(report: Mapping[str, Any]) -> bool:
    """True when the report shows no loss, duplicate, corruption or reordering."""
    return not any(report.get(k) for k in ("lost", "duplicated", "corrupted", "out_of_order"))


def main_chaos(
    *,
    events: int,
    kills: int | None,
    seed: int,
    bootstrap: str | None,
    workdir: Path | None,
    timeout_s: float,
) -> int:
    """``hindsight chaos``: run, print the JSON line (problem examples to stderr), return the exit
    code: 0 clean, 1 loss/duplicate/corruption/reordering, 2 the run itself failed."""
    settings = AllSettings()
    configure_logging(settings.runtime)
    temp = workdir is None
    root = workdir or Path(tempfile.mkdtemp(prefix="hindsight-chaos-"))
    cfg = ChaosConfig(root, events=events, kills=kills, seed=seed, bootstrap=bootstrap, timeout_s=timeout_s)
    try:
        report = asyncio.run(run_chaos(cfg))
    except (HindsightError, TimeoutError, RuntimeError) as exc:
        print(json.dumps({"error": str(exc)[:2000], "workdir": str(root)}), flush=True)
        return 2
    for example in report.pop("examples"):
        print(f"chaos: {example}", file=sys.stderr)
    print(json.dumps(report), flush=True)
    ok = report_ok(report)
    if temp and ok:
        shutil.rmtree(root, ignore_errors=True)
    elif not ok:
        print(f"chaos: files kept in {root}", file=sys.stderr)
    return 0 if ok else 1
