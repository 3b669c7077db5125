"""A synthetic population with a known answer for ``hindsight bench tune`` (issue 11).

Every memory is born at a uniform time in ``[0, horizon)`` days. After each use (its birth counts as
the first) the next use comes with hazard ``a * exp(-lambda * t)`` per day, ``t`` days since the last
use: exactly the reuse model :func:`hindsight.tuning.fit.fit_decay` fits, so the true half-life is
``ln 2 / lambda`` per memory type. Each use is one recall that returned the memory (labelled ``used``
by feedback) together with ``returned - 1`` other memories of the same user (left unlabelled: unused)
and ``extra`` candidates that did not make the response. Cosine similarities are drawn from
``N(used_mean, used_sd)`` for used memories and ``N(unused_mean, unused_sd)`` for the others; a
memory under the floor in force (0.65) is never returned, so the true floor is the quantile of the
*returned* used similarities that keeps ``target_recall`` of them, computed exactly from the normal
distribution truncated at 0.65.

Rows go through :meth:`hindsight.analytics.store.AnalyticsStore.insert_recalls` /
``insert_feedback`` / ``insert_memories``: the same rows the sink writes from Kafka events, built from
the same pydantic events. Times are wall-clock, the history ending now; the database gets a TTL longer
than the history (ClickHouse would otherwise drop rows past the default 90-day TTL at once).
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

import numpy as np

from hindsight.ids import stable_id
from schemas import (
    Memory,
    MemoryStoredEvent,
    Provenance,
    RecallCandidate,
    RecallFeedbackEvent,
    RecallLogEvent,
)

if TYPE_CHECKING:
    from hindsight.analytics.store import AnalyticsStore

CURRENT_FLOOR = 0.65
TENANT = "synthetic"


@dataclass(frozen=True)
class TypeTruth:
    """The reuse process of one memory type."""

    share: float
    """Share of the population."""
    half_life_days: float
    base_rate: float
    """``a``: uses per day right after a use."""

    @property
    def rate(self) -> float:
        """``lambda`` per day."""
        return math.log(2.0) / self.half_life_days


@dataclass(frozen=True)
class Truth:
    """The known answer the tuner should find."""

    types: dict[str, TypeTruth] = field(
        default_factory=lambda: {
            "episodic": TypeTruth(share=0.7, half_life_days=10.0, base_rate=0.12),
            "semantic": TypeTruth(share=0.3, half_life_days=40.0, base_rate=0.05),
        }
    )
    used_mean: float = 0.80
    used_sd: float = 0.05
    unused_mean: float = 0.70
    unused_sd: float = 0.06
    target_recall: float = 0.95
    horizon_days: float = 180.0

    def floor(self) -> float:
        """The cosine that keeps ``target_recall`` of returned used memories (normal truncated at the
        floor in force)."""
        dist = NormalDist(self.used_mean, self.used_sd)
        above = 1.0 - dist.cdf(CURRENT_FLOOR)
        return dist.inv_cdf(1.0 - self.target_recall * above)


@dataclass
class Population:
    """What was generated."""

    memories: int = 0
    recalls: int = 0
    candidates: int = 0
    uses: dict[str, int] = field(default_factory=dict)


def _next_gap(rng: np.random.Generator, a: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """Days to the next use for hazard ``a*exp(-lam*t)`` (inf: never): inversion of the cumulative
    hazard ``(a/lam)(1 - exp(-lam t))`` at an exponential draw."""
    e = rng.exponential(size=a.shape)
    limit = a / lam
    with np.errstate(divide="ignore", invalid="ignore"):
        gap = -np.log1p(-lam * e / a) / lam
    return np.where(e < limit, gap, np.inf)


def _similarities(rng: np.random.Generator, mean: float, sd: float, n: int) -> np.ndarray:
    """``n`` draws of N(mean, sd) at or above the floor in force (rejection)."""
    out = np.empty(0)
    while out.size < n:
        draw = rng.normal(mean, sd, 2 * (n - out.size) + 16)
        out = np.concatenate((out, draw[draw >= CURRENT_FLOOR]))
    return out[:n]


def generate(
    store: AnalyticsStore,
    truth: Truth,
    *,
    target_candidates: int,
    memories_per_user: int = 80,
    returned: int = 5,
    extra: int = 15,
    seed: int = 11,
    batch: int = 4000,
) -> Population:
    """Write a population of about ``target_candidates`` candidate rows into ``store`` (module doc)."""
    rng = np.random.default_rng(seed)
    per_recall = returned + extra
    recalls_wanted = max(1, target_candidates // per_recall)
    # expected uses per memory over the horizon, estimated by a pilot simulation
    pilot = _simulate(rng, truth, 2000)
    per_memory = max(0.1, len(pilot[0]) / 2000)
    n_memories = max(2 * memories_per_user, int(recalls_wanted / per_memory))
    users = max(1, n_memories // memories_per_user)
    born, types, importance, user = _population(rng, truth, n_memories, users)
    use_memory, use_time = _simulate(rng, truth, n_memories, born=born, types=types)
    order = np.argsort(use_time)
    use_memory, use_time = use_memory[order][:recalls_wanted], use_time[order][:recalls_wanted]
    now = datetime.now(UTC)
    start = now - timedelta(days=truth.horizon_days)
    type_names = list(truth.types)
    store.insert_memories(
        [
            MemoryStoredEvent(
                memory=_memory(
                    i,
                    user[i],
                    type_names[types[i]],
                    float(importance[i]),
                    start + timedelta(days=float(born[i])),
                ),
                candidate_id=str(i),
            )
            for i in range(n_memories)
        ]
    )
    by_user: dict[int, np.ndarray] = {}
    for u in range(users):
        by_user[u] = np.flatnonzero(user == u)
    population = Population(memories=n_memories)
    logs: list[RecallLogEvent] = []
    feedback: list[RecallFeedbackEvent] = []
    for k, (m, t) in enumerate(zip(use_memory.tolist(), use_time.tolist(), strict=True)):
        at = start + timedelta(days=t)
        peers = by_user[int(user[m])]
        peers = peers[(born[peers] <= t) & (peers != m)]
        others = rng.choice(peers, size=min(per_recall - 1, peers.size), replace=False) if peers.size else []
        sims = _similarities(rng, truth.unused_mean, truth.unused_sd, len(others))
        query_id = str(uuid.UUID(int=int(rng.integers(0, 2**63)) + k))
        used_sim = float(_similarities(rng, truth.used_mean, truth.used_sd, 1)[0])
        cands = [
            _candidate(
                m, type_names[types[m]], "returned", 1, used_sim, t=t, born=born, importance=importance
            )
        ]
        for j, (o, s) in enumerate(zip(others, sims, strict=True)):
            outcome = "returned" if j < returned - 1 else "below_top_k"
            rank = j + 2 if outcome == "returned" else None
            cands.append(
                _candidate(
                    int(o),
                    type_names[types[o]],
                    outcome,
                    rank,
                    float(s),
                    t=t,
                    born=born,
                    importance=importance,
                )
            )
        logs.append(_log(query_id, int(user[m]), at, cands))
        feedback.append(
            RecallFeedbackEvent(
                feedback_id=stable_id("feedback", TENANT, query_id, _mid(m)),
                query_id=query_id,
                tenant_id=TENANT,
                user_id=f"user-{int(user[m])}",
                agent_id="synthetic-agent",
                memory_id=_mid(m),
                label="used",
                given_at=at,
            )
        )
        population.uses[type_names[types[m]]] = population.uses.get(type_names[types[m]], 0) + 1
        population.candidates += len(cands)
        if len(logs) >= batch:
            store.insert_recalls(logs)
            store.insert_feedback(feedback)
            population.recalls += len(logs)
            logs, feedback = [], []
    store.insert_recalls(logs)
    store.insert_feedback(feedback)
    population.recalls += len(logs)
    return population


def _population(
    rng: np.random.Generator, truth: Truth, n: int, users: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    shares = np.array([t.share for t in truth.types.values()])
    types = rng.choice(len(shares), size=n, p=shares / shares.sum())
    born = rng.uniform(0.0, truth.horizon_days, n)
    importance = rng.uniform(0.2, 0.9, n)
    user = rng.integers(0, users, n)
    return born, types, importance, user


def _simulate(
    rng: np.random.Generator,
    truth: Truth,
    n: int,
    *,
    born: np.ndarray | None = None,
    types: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Use events (memory index, day) of ``n`` memories over the horizon, all rounds vectorised."""
    if born is None or types is None:
        born, types, _, _ = _population(rng, truth, n, 1)
    specs = list(truth.types.values())
    a = np.array([specs[t].base_rate for t in types])
    lam = np.array([specs[t].rate for t in types])
    alive = np.arange(n)
    clock = born.copy()
    memories: list[np.ndarray] = []
    times: list[np.ndarray] = []
    while alive.size:
        gap = _next_gap(rng, a[alive], lam[alive])
        nxt = clock[alive] + gap
        used = nxt < truth.horizon_days
        alive = alive[used]
        clock[alive] = nxt[used]
        memories.append(alive.copy())
        times.append(clock[alive].copy())
    return np.concatenate(memories) if memories else np.zeros(0, int), np.concatenate(
        times
    ) if times else np.zeros(0)


def _mid(i: int) -> str:
    return str(uuid.UUID(int=i + 1))


def _memory(i: int, user: int, memory_type: str, importance: float, born: datetime) -> Memory:
    return Memory(
        id=_mid(i),
        tenant_id=TENANT,
        user_id=f"user-{user}",
        agent_id="synthetic-agent",
        session_id=f"s-{user}",
        type=memory_type,
        kind="turn",
        content=f"synthetic memory {i}",
        source="user",
        importance=importance,
        confidence=0.6,
        created_at=born,
        stored_at=born,
        last_accessed_at=born,
        provenance=Provenance(),
    )


def _candidate(
    m: int,
    memory_type: str,
    outcome: str,
    rank: int | None,
    similarity: float,
    *,
    t: float,
    born: np.ndarray,
    importance: np.ndarray,
) -> RecallCandidate:
    fields: dict[str, Any] = {
        "memory_id": _mid(m),
        "memory_type": memory_type,
        "kind": "turn",
        "outcome": outcome,
        "rank": rank,
        "similarity": similarity,
        "dense_rank": rank,
        "lexical_rank": None,
        "lexical_score": None,
        "rerank_score": None,
        "relevance": similarity,
        "time_weight": 1.0,
        "final_score": similarity,
        "in_time_window": False,
        "age_days": float(t - born[m]),
        "since_access_days": float(t - born[m]),
        "access_count": 0,
        "importance": float(importance[m]),
        "confidence": 0.6,
        "status": "active",
        "version": 1,
    }
    return RecallCandidate.model_construct(**fields)


def _log(query_id: str, user: int, at: datetime, candidates: list[RecallCandidate]) -> RecallLogEvent:
    return RecallLogEvent.model_construct(
        query_id=query_id,
        tenant_id=TENANT,
        user_id=f"user-{user}",
        agent_id="synthetic-agent",
        query_text="synthetic",
        intent="question",
        entities=(),
        window_start=None,
        window_end=None,
        wants_recent=False,
        top_k=5,
        similarity_floor=CURRENT_FLOOR,
        time_mode="step",
        order="relevance",
        rerank=False,
        token_budget=2000,
        tokens=0,
        truncated=False,
        candidates=tuple(candidates),
        timings_ms={"total": 20.0},
        reference_time=at,
        recalled_at=at,
    )


def main(argv: list[str] | None = None) -> int:
    """Child process of ``bench tune``: write a population into an embedded chDB, print one JSON line
    (chDB allows one process per directory, so the timed ``hindsight tune`` runs after this exits)."""
    import argparse  # noqa: PLC0415
    import json  # noqa: PLC0415
    import time  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    import clickhouse_connect  # noqa: PLC0415

    from hindsight.analytics.schema import SchemaNames, TtlDays  # noqa: PLC0415
    from hindsight.analytics.store import AnalyticsStore  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog="python -m bench.tune_synthetic")
    parser.add_argument("--dir", type=Path, required=True, help="chDB data directory.")
    parser.add_argument("--database", default="hindsight_synthetic")
    parser.add_argument("--rows", type=int, default=1_000_000, help="Candidate rows to write.")
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    client = clickhouse_connect.get_client(dsn=f"chdb://{args.dir.resolve()}")
    ttl = TtlDays(access=3650, recall=3650, feedback=3650, inventory=3650)
    store = AnalyticsStore(client, SchemaNames(args.database, ttl=ttl))
    store.migrate()
    truth = Truth()
    started = time.perf_counter()
    population = generate(store, truth, target_candidates=args.rows, seed=args.seed)
    print(
        json.dumps(
            {
                "memories": population.memories,
                "recalls": population.recalls,
                "candidate_rows": population.candidates,
                "uses": population.uses,
                "generate_seconds": round(time.perf_counter() - started, 1),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
