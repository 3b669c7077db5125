"""``hindsight bench tune``: does the tuner find known answers, and do tuned settings help? (issue 11)

Two parts, each printing JSON lines:

1. ``synthetic``: a population with a known reuse decay per memory type and known similarity
   distributions (:mod:`bench.tune_synthetic`) is written into an embedded chDB by a child process,
   then the real ``hindsight tune`` command runs on it in another process (timed: wall clock and CPU
   seconds of the whole command, and the tuner's own per-step seconds). Reports fitted vs true
   half-life per type and floor. Goals: half-life within 20%, floor within 0.03; ``tune`` on 1 million
   candidate rows under 10 s on 2 cores.
2. ``locomo``: LoCoMo conversations replayed as a user's life through the real pipeline (embedded
   stack: Kafka-protocol broker, every consumer, the gateway over HTTP). Every question is asked some
   days after the last session holding its evidence (1-14 days, seeded); questions are ordered by that
   time and split: the first ``--history`` share is the past. For each past question the gateway
   recalls (``reference_time`` = the question's time) and the agent's feedback marks the returned
   memories holding evidence as ``used`` (the rest unused). The tuner then fits on what the analytics
   sink wrote to ClickHouse (``--clock reference``). At the cut (the first future question) the real
   eviction policy (:func:`services.evict.policy.decide`) is applied to every stored memory with default
   and with tuned settings, and the tuned arm also drops memories under the tuned keep threshold; the
   future questions are then asked in each arm (tuned arm: tuned similarity floor) and scored by
   evidence recall@10. The tuned arm uses only what the tuner applies (fits that validated on its own
   held-out part of the past; the rest keeps the defaults), and the future questions are never seen
   by the tuner. The reconcile stage is off (turn memories only; its CPU judge would take hours). Beside
   the arms, an oracle line (``tune-locomo-oracle``) says the most any expiry or keep threshold of the
   eviction policy's score could expire of never-used memories without expiring one used later,
   knowing the future: whether the expiry goal is reachable on this data at all. Goals: tuned
   recall@10 >= default, >= 20% of never-used memories expired, no memory
   used later expired (reported in total and as ``later_used_expired_by_tuning``: those the tuned arm
   removes and the default arm keeps).

Run: ``uv run hindsight bench tune`` (both), ``--part synthetic|locomo``, ``--rows``, ``--conversations``
(default: every conversation of the data file, 7 in ``locomo_dev.json``: with two, every fit but the
decay was refused for too little data).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import DEFAULT_DATA, REPO_ROOT, arg_parser, loadavg, print_line, scratch_dir
from bench.tune_synthetic import Truth

if TYPE_CHECKING:
    import httpx

    from hindsight.eval import locomo

log = logging.getLogger("hindsight.bench.tune")
API_KEY = "dev-bench-tune-key"
SYNTHETIC_DB = "hindsight_synthetic"


# -- part 1: synthetic population --------------------------------------------------------------------


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_synthetic(rows: int, workdir: Path, seed: int) -> dict[str, Any]:
    """Generate, then time ``hindsight tune`` on it in a fresh process; one JSON-ready dict."""
    generate = [sys.executable, "-m", "bench.tune_synthetic", "--dir", str(workdir / "clickhouse")]
    generate += ["--rows", str(rows), "--database", SYNTHETIC_DB, "--seed", str(seed)]
    gen = subprocess.run(generate, cwd=REPO_ROOT, capture_output=True, text=True, check=True, timeout=3600)
    population = json.loads(gen.stdout.strip().splitlines()[-1])
    cpu_before = _child_cpu()
    started = time.perf_counter()
    command = [str(Path(sys.executable).parent / "hindsight"), "tune", "--data-dir", str(workdir)]
    command += ["--database", SYNTHETIC_DB, "--dry-run"]
    tune = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=1800, check=False)
    wall = time.perf_counter() - started
    cpu = _child_cpu() - cpu_before
    if tune.returncode not in (0, 3):
        raise RuntimeError(f"hindsight tune failed ({tune.returncode}): {tune.stderr[-2000:]}")
    report = json.loads(tune.stdout.strip().splitlines()[-1])
    truth = Truth()
    fits = report["fits"]
    out: dict[str, Any] = {
        "bench": "tune-synthetic",
        "candidate_rows": population["candidate_rows"],
        "recalls": population["recalls"],
        "memories": population["memories"],
        "uses": population["uses"],
    }
    floor = fits["similarity_floor"]
    true_floor = truth.floor()
    out["floor_true"] = round(true_floor, 4)
    out["floor_fitted"] = floor.get("floor")
    out["floor_abs_error"] = round(abs(floor["floor"] - true_floor), 4) if floor.get("fitted") else None
    out["floor_goal_met"] = bool(floor.get("fitted") and abs(floor["floor"] - true_floor) <= 0.03)
    errors = {}
    for name, spec in truth.types.items():
        d = fits["decay"].get(name, {})
        fitted = d.get("half_life_days") if d.get("fitted") else None
        out[f"half_life_true_{name}"] = spec.half_life_days
        out[f"half_life_fitted_{name}"] = fitted
        errors[name] = (
            None if fitted is None else round(abs(fitted - spec.half_life_days) / spec.half_life_days, 4)
        )
        out[f"half_life_ci95_{name}"] = d.get("half_life_ci95")
    out["half_life_rel_error"] = errors
    out["half_life_goal_met"] = all(e is not None and e <= 0.2 for e in errors.values())
    out["tune_command_wall_s"] = round(wall, 2)
    out["tune_command_cpu_s"] = round(cpu, 2)
    out["tuner_seconds"] = report["seconds"]
    out["tune_goal_met"] = wall < 10.0
    out["expire_below_fitted"] = fits["expire_below"].get("expire_below")
    out["load_avg"] = loadavg()
    return out


# -- part 2: LoCoMo replay ---------------------------------------------------------------------------


def question_times(
    conversations: Sequence[locomo.Conversation], seed: int
) -> list[tuple[datetime, locomo.Question]]:
    """Each question asked 1-14 days (seeded) after the last session holding its evidence, in time order."""
    from schemas import InteractionEvent  # noqa: PLC0415

    rng = random.Random(seed)
    out = []
    for conv in conversations:
        when = {e.external_ref: e.occurred_at for e in conv.events if isinstance(e, InteractionEvent)}
        for q in conv.questions:
            known = [when[ref] for ref in q.evidence if ref in when]
            base = max(known) if known else q.reference_time
            out.append((base + timedelta(days=rng.uniform(1.0, 14.0)), q))
    out.sort(key=lambda pair: (pair[0], pair[1].question))
    return out


async def _ask(
    client: httpx.AsyncClient, q: locomo.Question, at: datetime, *, feedback: bool
) -> tuple[list[list[str]], list[str]]:
    """Recall for ``q`` at time ``at``; with ``feedback``, label evidence-bearing returns ``used``.
    Returns each memory's refs and the ids labelled used."""
    resp = await client.post(
        "/v1/recall",
        json={"query": q.question, "user_id": q.sample_id, "top_k": 10, "reference_time": at.isoformat()},
    )
    resp.raise_for_status()
    body = resp.json()
    refs = [list(m["provenance"]["external_refs"]) for m in body["memories"]]
    evidence = set(q.evidence)
    used = [m["id"] for m, r in zip(body["memories"], refs, strict=True) if evidence & set(r)]
    if feedback and body["memories"]:
        unused = [m["id"] for m in body["memories"] if m["id"] not in used]
        fb = await client.post(
            f"/v1/recall/{body['query_id']}/feedback", json={"used": used, "unused": unused}
        )
        fb.raise_for_status()
    return refs, used


def _memory_refs(payload: dict[str, Any]) -> set[tuple[str, str]]:
    """The memory's dialogue refs with its owner: LoCoMo refs (``D6:16``: session 6, turn 16) repeat in
    every conversation, so a ref names a turn only together with the conversation (the user)."""
    refs = set(payload.get("provenance", {}).get("external_refs", ())) | set(payload.get("merged_refs", ()))
    return {(str(payload["user_id"]), ref) for ref in refs}


def _scores_at(
    payloads: dict[str, dict[str, Any]],
    uses: dict[str, list[float]],
    cut: datetime,
    *,
    decay: float,
    decay_by_type: dict[str, float],
) -> dict[str, float]:
    """Eviction score of every memory born before ``cut``, as the real eviction policy
    (:func:`services.evict.policy.decide`) computes it then from the replayed uses before the cut."""
    from services.evict.policy import AccessTotals, decide, effective_access_count  # noqa: PLC0415

    now = cut.timestamp()
    state = {}
    for mid, p in payloads.items():
        before = [t for t in uses.get(mid, []) if t < now]
        replayed = {**p, "last_accessed_ts": float(p["created_ts"]), "access_count": 0}
        state[mid] = (replayed, AccessTotals(len(before), max(before) if before else None))
    most: dict[tuple[str, str], int] = {}
    for p, logged in state.values():
        owner = (p["tenant_id"], p["user_id"])
        most[owner] = max(most.get(owner, 0), effective_access_count(p, logged))
    scores = {}
    for mid, (p, logged) in state.items():
        if float(p["created_ts"]) >= now:
            continue
        d = decide(
            p,
            logged,
            most[(p["tenant_id"], p["user_id"])],
            cut,
            expire_below=0.0,
            retention_days=30.0,
            decay_per_day=decay_by_type.get(str(p.get("type")), decay),
        )
        scores[mid] = d.score
    return scores


def _arm(
    payloads: dict[str, dict[str, Any]],
    uses: dict[str, list[float]],
    cut: datetime,
    *,
    decay: float,
    decay_by_type: dict[str, float],
    expire_below: float,
    keep_threshold: float | None,
) -> set[str]:
    """Ids the real eviction policy expires at ``cut`` (score under ``expire_below``; plus, with
    ``keep_threshold``, memories the write-trigger would not have kept), from the replayed history of
    uses before the cut."""
    scores = _scores_at(payloads, uses, cut, decay=decay, decay_by_type=decay_by_type)
    return {
        mid
        for mid, score in scores.items()
        if score < expire_below
        or (keep_threshold is not None and float(payloads[mid].get("importance", 0)) < keep_threshold)
    }


ORACLE_DECAYS: tuple[float, ...] = (0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2)
"""Decay rates (per day) the expiry oracle tries."""


def expiry_oracle(
    payloads: dict[str, dict[str, Any]],
    uses: dict[str, list[float]],
    cut: datetime,
    later_used: set[str],
    never_used: set[str],
) -> dict[str, Any]:
    """The most the eviction policy's own score could do on this replay, knowing the future: for each
    decay in :data:`ORACLE_DECAYS`, the largest expiry threshold that expires no memory used after
    the cut (just under the least score of a later-used memory) and the share of never-used memories
    it expires; and the same for a keep threshold on importance alone. If even the best of these stays
    under the goal's share, no tuned parameter of this policy can meet it on this data."""
    by_decay = []
    for decay in ORACLE_DECAYS:
        scores = _scores_at(payloads, uses, cut, decay=decay, decay_by_type={})
        floor = min((scores[m] for m in later_used if m in scores), default=1.0)
        never = [scores[m] for m in never_used if m in scores]
        share = sum(s < floor for s in never) / max(1, len(never))
        by_decay.append(
            {
                "decay_per_day": decay,
                "threshold": round(floor, 4),
                "never_used_expired_share": round(share, 4),
            }
        )
    born = {m for m, p in payloads.items() if float(p["created_ts"]) < cut.timestamp()}
    least = min((float(payloads[m].get("importance", 0)) for m in later_used & born), default=1.0)
    never_born = never_used & born
    keep_share = sum(float(payloads[m].get("importance", 0)) < least for m in never_born) / max(
        1, len(never_born)
    )
    best = max(by_decay, key=lambda row: row["never_used_expired_share"])
    return {
        "bench": "tune-locomo-oracle",
        "later_used_born_before_cut": len(later_used & born),
        "never_used_born_before_cut": len(never_born),
        "zero_regret_by_decay": by_decay,
        "best_zero_regret_never_used_expired_share": best["never_used_expired_share"],
        "keep_threshold_zero_regret": round(least, 4),
        "keep_threshold_never_used_expired_share": round(keep_share, 4),
        "goal_reachable": max(best["never_used_expired_share"], keep_share) >= 0.2,
    }


async def run_locomo(  # noqa: PLR0915 (one replay, read top to bottom)
    data: Path, ids: list[str] | None, workdir: Path, *, history: float, seed: int, timeout_s: float
) -> list[dict[str, Any]]:
    """The LoCoMo replay (module doc); JSON-ready lines."""
    import httpx  # noqa: PLC0415

    from hindsight.eval import locomo  # noqa: PLC0415
    from hindsight.scoring import EXPIRE_BELOW, RECENCY_DECAY_PER_DAY  # noqa: PLC0415
    from hindsight.settings import AllSettings  # noqa: PLC0415
    from hindsight.stores.vector import MemoryFilter  # noqa: PLC0415
    from hindsight.tuning.run import Current, TuneOptions, run_and_write  # noqa: PLC0415
    from schemas import InteractionEvent  # noqa: PLC0415
    from services.cli.demo import publish, wait_with_progress  # noqa: PLC0415
    from services.cli.embedded import embedded_stack  # noqa: PLC0415
    from services.gateway.settings import GatewaySettings  # noqa: PLC0415
    from services.ingest.settings import IngestSettings  # noqa: PLC0415

    convs = [locomo.conversation(s) for s in locomo.select(locomo.load(data), ids)]
    ids = [c.sample_id for c in convs]
    # turns only: the replay is about turn memories; session closes would add episode consolidation
    # (and its LLM) to the ingest without changing what is asked
    events = [e for c in convs for e in c.events if isinstance(e, InteractionEvent)]
    timeline = question_times(convs, seed)
    split = int(len(timeline) * history)
    past, future = timeline[:split], timeline[split:]
    cut = future[0][0]
    lines: list[dict[str, Any]] = []
    cfg = AllSettings()
    cfg.runtime.data_dir = workdir
    gateway = GatewaySettings(port=0, api_keys={API_KEY: locomo.TENANT})  # its floor is switched per arm
    # reconcile off: the replay measures eviction and the floor over turn memories; on CPU the local
    # judge would need hours per conversation (docs/reconcile.md) and share the cores with the recalls
    ingest = IngestSettings(stages=("trigger", "embed"))
    async with embedded_stack(cfg, gateway, ingest=ingest) as stack:
        started = time.perf_counter()
        await publish(stack.bootstrap, events)
        await wait_with_progress(stack, len(events), 0, timeout_s)
        ingest_s = time.perf_counter() - started
        headers = {"Authorization": f"Bearer {API_KEY}"}
        uses: dict[str, list[float]] = {}
        async with httpx.AsyncClient(base_url=stack.gateway_url, headers=headers, timeout=60) as client:
            for at, q in past:
                _, used = await _ask(client, q, at, feedback=True)
                for mid in used:
                    uses.setdefault(mid, []).append(at.timestamp())
        await stack.wait_caught_up(timeout_s)
        tuned_path = workdir / "tuning" / "tuned-settings.json"
        outcome = await asyncio.to_thread(
            run_and_write,
            stack.resources.analytics(),
            TuneOptions(clock="reference", tenant=locomo.TENANT),
            Current(),
            tuned_path=tuned_path,
            plots_dir=workdir / "tuning" / "plots",
            write=False,
        )
        proposed = outcome.report.proposed()
        store = stack.resources.vector_store()
        payloads: dict[str, dict[str, Any]] = {}
        offset = None
        while True:
            page, offset = store.scroll(
                MemoryFilter(tenant_id=locomo.TENANT, statuses=("active",)), 1024, offset
            )
            payloads.update({r.id: r.payload for r in page})
            if offset is None:
                break
        future_evidence = {(q.sample_id, ref) for _, q in future for ref in q.evidence}
        all_evidence = {(q.sample_id, ref) for _, q in timeline for ref in q.evidence}
        later_used = {mid for mid, p in payloads.items() if _memory_refs(p) & future_evidence}
        never_used = {
            mid for mid, p in payloads.items() if not _memory_refs(p) & all_evidence and mid not in uses
        }
        arms = {
            "default": {
                "floor": 0.65,
                "decay": RECENCY_DECAY_PER_DAY,
                "by_type": {},
                "expire": EXPIRE_BELOW,
                "keep": None,
            },
            "tuned": {
                "floor": proposed.get("similarity_floor", 0.65),
                "decay": proposed.get("decay_per_day", RECENCY_DECAY_PER_DAY),
                "by_type": proposed.get("decay_per_day_by_type", {}),
                "expire": proposed.get("expire_below", EXPIRE_BELOW),
                "keep": proposed.get("keep_threshold"),
            },
        }
        removed: dict[str, set[str]] = {}
        for name, arm in arms.items():
            gone = removed[name] = _arm(
                payloads, uses, cut, decay=arm["decay"], decay_by_type=arm["by_type"],
                expire_below=arm["expire"], keep_threshold=arm["keep"],
            )  # fmt: skip
            if gone:
                store.set_payload(sorted(gone), {"status": "expired"})
            gateway.similarity_floor = float(arm["floor"])  # what a restart with the tuned file sets
            scores = []
            returned = holding = 0
            async with httpx.AsyncClient(base_url=stack.gateway_url, headers=headers, timeout=60) as client:
                for at, q in future:
                    refs, _ = await _ask(client, q, at, feedback=False)
                    scores.append(locomo.evidence_recall(q.evidence, refs, 10))
                    returned += len(refs)
                    holding += sum(1 for r in refs if set(q.evidence) & set(r))
            if gone:
                store.set_payload(sorted(gone), {"status": "active"})
            lines.append(
                {
                    "bench": "tune-locomo",
                    "arm": name,
                    "conversations": ids,
                    "settings": {k: v for k, v in arm.items() if v is not None},
                    "future_questions": len(future),
                    "recall_at_10": round(sum(scores) / len(scores), 4) if scores else None,
                    "mean_returned": round(returned / max(1, len(future)), 2),
                    "returned_holding_evidence": round(holding / max(1, returned), 4),
                    "stored_memories": len(payloads) - len(gone),
                    "removed_memories": len(gone),
                    "never_used_memories": len(never_used),
                    "never_used_expired_share": round(len(gone & never_used) / max(1, len(never_used)), 4),
                    "later_used_memories": len(later_used),
                    "later_used_expired": len(gone & later_used),
                }
            )
        gateway.similarity_floor = 0.65
        lines.append(expiry_oracle(payloads, uses, cut, later_used, never_used))
        fits = outcome.report.as_dict()["fits"]
        lines.insert(
            0,
            {
                "bench": "tune-locomo-fit",
                "conversations": ids,
                "events": len(events),
                "ingest_s": round(ingest_s, 1),
                "past_questions": len(past),
                "cut": cut.isoformat(),
                "proposed": proposed,
                "summary": outcome.report.summary,
                "refused": {
                    k: v["reason"]
                    for k, v in fits.items()
                    if isinstance(v, dict) and v.get("fitted") is False
                },
                "not_applied": {
                    k: v["not_applied_because"]
                    for k, v in fits.items()
                    if isinstance(v, dict) and v.get("fitted") and not v.get("validated")
                },
                "decay_note": fits["decay_note"],
                "decay": fits["decay"],
                "tuner_seconds": outcome.report.seconds["total"],
                "plots": str(workdir / "tuning" / "plots"),
            },
        )
    default, tuned, oracle = lines[1], lines[2], lines[3]
    # what tuning itself expired: memories the tuned arm removes and the default arm keeps
    by_tuning = len((removed["tuned"] - removed["default"]) & later_used)
    lines.append(
        {
            "bench": "tune-locomo-goals",
            "recall_at_10_default": default["recall_at_10"],
            "recall_at_10_tuned": tuned["recall_at_10"],
            "recall_goal_met": (tuned["recall_at_10"] or 0) >= (default["recall_at_10"] or 0),
            "never_used_expired_share_tuned": tuned["never_used_expired_share"],
            "never_used_goal_met": tuned["never_used_expired_share"] >= 0.2,
            "later_used_expired_default": default["later_used_expired"],
            "later_used_expired_tuned": tuned["later_used_expired"],
            "later_used_expired_by_tuning": by_tuning,
            "later_used_goal_met": tuned["later_used_expired"] == 0,
            "later_used_by_tuning_goal_met": by_tuning == 0,
            "expiry_goal_reachable_by_any_threshold": oracle["goal_reachable"],
            "returned_holding_evidence_default": default["returned_holding_evidence"],
            "returned_holding_evidence_tuned": tuned["returned_holding_evidence"],
            "applied": sorted(proposed),
            "stored_default": default["stored_memories"],
            "stored_tuned": tuned["stored_memories"],
            "load_avg": loadavg(),
        }
    )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """``bench tune`` command line: JSON lines per part."""
    parser = arg_parser("hindsight bench tune", __doc__)
    parser.add_argument(
        "--part", choices=("both", "synthetic", "locomo"), default="both", help="Which part to run."
    )
    parser.add_argument("--rows", type=int, default=1_000_000, help="Synthetic candidate rows.")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo-format JSON file.")
    parser.add_argument(
        "--conversations",
        default="all",
        help="Comma-separated sample ids, or 'all' (every conversation in --data; 7 in the dev file).",
    )
    parser.add_argument("--history", type=float, default=0.6, help="Share of questions in the past.")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--workdir", type=Path, default=None, help="Keep files here (default: temp).")
    parser.add_argument("--timeout-s", type=float, default=1800.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if args.part in ("both", "synthetic"):
        with scratch_dir("hindsight-bench-tune-syn-", args.workdir and args.workdir / "synthetic") as work:
            print_line(run_synthetic(args.rows, work, args.seed))
    if args.part in ("both", "locomo"):
        wanted = [c.strip() for c in args.conversations.split(",") if c.strip()]
        ids = None if wanted == ["all"] else wanted
        with scratch_dir("hindsight-bench-tune-locomo-", args.workdir and args.workdir / "locomo") as work:
            for line in asyncio.run(
                run_locomo(
                    args.data, ids, work, history=args.history, seed=args.seed, timeout_s=args.timeout_s
                )
            ):
                print_line(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
