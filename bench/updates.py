"""``hindsight bench updates``: does memory revise itself? (issue 9)

Drives the embedded default through its gateway the way an agent would: for each scenario of
``bench/data/updates.json`` (122 hand-written English and Chinese cases: knowledge updates,
cancellations, corrected health facts, look-alikes that must not supersede, refinements, lessons
from failed and successful tasks; one user each) it retains every statement in its own session,
days or weeks apart (late arrivals in their delivery order, not event order), with filler turns
around it; once ingest has caught up it closes every session (with task, outcome and feedback for
lessons), waits until every consumer group has caught up, then asks ``recall`` the scenario's probe
questions and reads each statement's status and version chain with ``GET /v1/memories/{id}``.

It runs twice over the same events: with reconcile on (the default) and off (write-trigger and
embed only: the baseline a plain vector memory gives), each on a fresh embedded stack, and prints
JSON lines:

- per mode and split (``all``, ``dev``, ``heldout``): ``newest_first_at_1`` (updates,
  cancellations and corrections: the probe's top memory derives from the newest statement), in
  English and Chinese separately; ``superseded_recall`` (old statements whose memory ended
  ``superseded``), ``superseded_precision`` (superseded turns that are old statements, over every
  superseded turn of these users, fillers included), ``chain_reachable`` (the old version is in
  the new one's chain), ``false_supersede_lookalike`` (look-alike statements superseded or merged),
  ``refinements_active``, ``lesson_top3`` (a lesson among the top 3 for the follow-up task);
- per mode: writes reconciled, the fraction that needed the judge, judge pairs and calls per 100
  writes, ms per judge call and per pair, fact extractor calls, ingest turns/s until searchable and
  until ingested (searchable and, with reconcile on, reconciled), from the process's Prometheus
  metrics and wall time;
- one ``compare`` line: reconcile on vs off.

``--split dev`` / ``--limit N`` run a subset; ``--modes reconcile`` skips the off run.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bench.common import arg_parser, loadavg, print_line, scratch_dir
from bench.stack import embedded
from hindsight.ids import turn_memory_id
from hindsight.observability import configure_logging
from hindsight.settings import AllSettings
from services.ingest.settings import IngestSettings

log = logging.getLogger("hindsight.bench.updates")

DATA = Path(__file__).parent / "data" / "updates.json"
TENANT = "bench-updates"
API_KEY = "dev-bench-updates"
T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
ZONES = {"en": UTC, "zh": timezone(timedelta(hours=8))}
ZONE_NAMES = {"en": "UTC", "zh": "Asia/Shanghai"}
REVISION_KINDS = ("update", "cancellation", "correction")
CONCURRENCY = 8
"""Scenarios driven at once (each scenario's own calls stay in order)."""
NOT_SEARCHABLE = ("ingest-reconcile", "reflect", "accesslog")
"""Groups a turn need not pass to be searchable (guard, write-trigger, embed are enough)."""
NOT_INGEST = ("reflect", "accesslog")
"""Groups outside ingest: ``ingested`` = searchable and (with reconcile on) reconciled."""
COMPARED = ("newest_first_at_1_en", "newest_first_at_1_zh", "superseded_recall", "lesson_top3")


@dataclass(frozen=True)
class Turn:
    """One retained interaction."""

    event_id: str
    text: str
    source: str
    occurred_at: datetime
    mark: str | None


@dataclass(frozen=True)
class Session:
    """One session: its turns, then a close (with task/outcome/feedback for lessons)."""

    session_id: str
    turns: tuple[Turn, ...]
    close: dict[str, Any]


@dataclass
class Outcome:
    """What one scenario measured."""

    scenario: dict[str, Any]
    probes: list[dict[str, Any]] = field(default_factory=list)
    statuses: dict[str, str] = field(default_factory=dict)
    """mark -> status of the statement's turn memory ('missing' when not stored)."""
    reachable: dict[str, bool] = field(default_factory=dict)
    """'old>new' -> the old version is in the new one's version chain."""
    superseded_turns: list[str] = field(default_factory=list)
    """Event ids of every superseded turn of the user (fillers included)."""


def user_of(scenario: dict[str, Any]) -> str:
    """The scenario's user id."""
    return f"u-{scenario['id']}"


def sessions(scenario: dict[str, Any], filler: Sequence[Sequence[str]]) -> list[Session]:
    """The scenario's sessions in delivery order: each statement (lessons: the whole task) in its own
    session at its ``day``, with 0-2 filler turns before and 1-2 after (deterministic per scenario)."""
    rng = random.Random(scenario["id"])
    zone = ZONES[scenario["lang"]]
    user = user_of(scenario)
    by_mark = {s["mark"]: s for s in scenario["statements"]}
    groups: list[list[dict[str, Any]]]
    if scenario["kind"] == "lesson":
        groups = [[by_mark[m] for m in scenario["deliver"]]]
    else:
        groups = [[by_mark[m]] for m in scenario["deliver"]]
    out = []
    for n, group in enumerate(groups):
        start = (T0 + timedelta(days=group[0]["day"])).astimezone(zone)
        texts: list[tuple[str, str, str | None]] = [
            (f[0], f[1], None) for f in rng.sample(list(filler), rng.randint(0, 2))
        ]
        texts += [(s.get("source", "user"), s["text"], s["mark"]) for s in group]
        texts += [(f[0], f[1], None) for f in rng.sample(list(filler), rng.randint(1, 2))]
        sid = f"{user}-s{n}"
        turns = tuple(
            Turn(
                event_id=f"{sid}-t{i}" if mark is None else f"{user}:{mark}",
                text=text,
                source=source,
                occurred_at=start + timedelta(minutes=i),
                mark=mark,
            )
            for i, (source, text, mark) in enumerate(texts)
        )
        close = dict(scenario.get("close") or {}) if scenario["kind"] == "lesson" else {}
        out.append(Session(sid, turns, close))
    return out


async def retain_all(client: httpx.AsyncClient, scenario: dict[str, Any], plan: Sequence[Session]) -> int:
    """Retain every turn of the scenario through the HTTP API, in delivery order; returns the count."""
    user = user_of(scenario)
    for session in plan:
        for turn in session.turns:
            response = await client.post(
                "/v1/memories",
                json={
                    "user_id": user,
                    "session_id": session.session_id,
                    "content": turn.text,
                    "source": turn.source,
                    "occurred_at": turn.occurred_at.isoformat(),
                    "event_id": turn.event_id,
                },
            )
            response.raise_for_status()
    return sum(len(session.turns) for session in plan)


async def close_all(client: httpx.AsyncClient, scenario: dict[str, Any], plan: Sequence[Session]) -> int:
    """Close every session (task, outcome and feedback for lessons); returns the count."""
    for session in plan:
        response = await client.post(
            f"/v1/sessions/{session.session_id}/close",
            json={"user_id": user_of(scenario), "event_count": len(session.turns), **session.close},
        )
        response.raise_for_status()
    return len(plan)


def _probe_time(scenario: dict[str, Any], probe: dict[str, Any]) -> datetime:
    last = max(s["day"] for s in scenario["statements"])
    return T0 + timedelta(days=max(last, probe.get("day", 0)) + 1)


async def evaluate(client: httpx.AsyncClient, scenario: dict[str, Any]) -> Outcome:
    """Recall the probes, read each statement's status and chain, and the user's superseded turns."""
    user = user_of(scenario)
    outcome = Outcome(scenario)
    for probe in scenario["probes"]:
        response = await client.post(
            "/v1/recall",
            json={
                "query": probe["q"],
                "user_id": user,
                "top_k": 5,
                "reference_time": _probe_time(scenario, probe).isoformat(),
                "time_zone": ZONE_NAMES[scenario["lang"]],
            },
        )
        response.raise_for_status()
        body = response.json()
        outcome.probes.append({"probe": probe, "memories": body["memories"], "conflicts": body["conflicts"]})
    ids = {s["mark"]: turn_memory_id(TENANT, f"{user}:{s['mark']}") for s in scenario["statements"]}
    chains: dict[str, list[str]] = {}
    for mark, memory_id in ids.items():
        response = await client.get(f"/v1/memories/{memory_id}")
        if response.status_code == 404:
            outcome.statuses[mark] = "missing"
            continue
        response.raise_for_status()
        detail = response.json()
        outcome.statuses[mark] = detail["memory"]["status"]
        chains[mark] = [m["id"] for m in detail["chain"]]
    for old, new in scenario["supersede"]:
        both_ways = ids[old] in chains.get(new, []) and ids[new] in chains.get(old, [])
        outcome.reachable[f"{old}>{new}"] = both_ways
    response = await client.get("/v1/memories", params={"user_id": user, "limit": 1000})
    response.raise_for_status()
    for memory in response.json()["memories"]:
        if memory["kind"] == "turn" and memory["status"] == "superseded":
            outcome.superseded_turns.extend(memory["provenance"]["event_ids"])
    return outcome


def _top_ok(outcome: Outcome, entry: dict[str, Any]) -> bool:
    probe, memories = entry["probe"], entry["memories"]
    if probe.get("lesson_top3"):
        return any(m["kind"] == "lesson" for m in memories[:3])
    wanted = probe["top"] if isinstance(probe["top"], list) else [probe["top"]]
    events = {f"{user_of(outcome.scenario)}:{mark}" for mark in wanted}
    return bool(memories) and bool(events & set(memories[0]["provenance"]["event_ids"]))


def _ratio(hits: int, total: int) -> float | None:
    return round(hits / total, 4) if total else None


def _statuses(outcomes: Sequence[Outcome], kind: str) -> list[str | None]:
    """Statuses of the statements that must stay active in scenarios of ``kind``."""
    return [o.statuses.get(m) for o in outcomes if o.scenario["kind"] == kind for m in o.scenario["active"]]


def aggregate(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """The quality metrics of a set of scenario outcomes (module doc)."""
    row: dict[str, Any] = {"scenarios": len(outcomes)}
    for lang in ("", "en", "zh"):
        suffix = f"_{lang}" if lang else ""
        chosen = [o for o in outcomes if not lang or o.scenario["lang"] == lang]
        revisions = [o for o in chosen if o.scenario["kind"] in REVISION_KINDS]
        tops = [_top_ok(o, e) for o in revisions for e in o.probes]
        row[f"newest_first_at_1{suffix}"] = _ratio(sum(tops), len(tops))
        olds = [o.statuses.get(old) == "superseded" for o in revisions for old, _ in o.scenario["supersede"]]
        row[f"superseded_recall{suffix}"] = _ratio(sum(olds), len(olds))
        lessons = [_top_ok(o, e) for o in chosen if o.scenario["kind"] == "lesson" for e in o.probes]
        row[f"lesson_top3{suffix}"] = _ratio(sum(lessons), len(lessons))
    revisions = [o for o in outcomes if o.scenario["kind"] in REVISION_KINDS]
    old_events = {f"{user_of(o.scenario)}:{old}" for o in revisions for old, _ in o.scenario["supersede"]}
    superseded = [e for o in outcomes for e in o.superseded_turns]
    row["superseded_precision"] = _ratio(sum(e in old_events for e in superseded), len(superseded))
    reach = [v for o in revisions for v in o.reachable.values()]
    row["chain_reachable"] = _ratio(sum(reach), len(reach))
    looks = _statuses(outcomes, "lookalike")
    row["false_supersede_lookalike"] = _ratio(sum(s in ("superseded", "merged") for s in looks), len(looks))
    refines = _statuses(outcomes, "refinement")
    row["refinements_active"] = _ratio(sum(s == "active" for s in refines), len(refines))
    statements = [s for o in outcomes for s in o.statuses.values()]
    row["statements_missing"] = sum(s == "missing" for s in statements)
    row["conflict_pairs_reported"] = sum(len(e["conflicts"]) for o in outcomes for e in o.probes)
    return row


def _metric_values(text: str) -> dict[str, float]:
    """Prometheus samples summed over labels, plus ``<name>{judged="yes"}`` for reconcile writes."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[sample.name] = out.get(sample.name, 0.0) + sample.value
            if sample.name == "hindsight_reconcile_writes_total" and sample.labels.get("judged") == "yes":
                out["writes_judged"] = out.get("writes_judged", 0.0) + sample.value
    return out


def cost(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    """Reconcile's model work between two metric snapshots."""

    def delta(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    writes = delta("hindsight_reconcile_writes_total")
    pairs = delta("hindsight_reconcile_judge_pairs_total")
    calls = delta("hindsight_reconcile_judge_calls_total")
    seconds = delta("hindsight_reconcile_judge_seconds_sum")
    ex_calls = delta("hindsight_reconcile_extract_calls_total")
    ex_seconds = delta("hindsight_reconcile_extract_seconds_sum")
    return {
        "writes_reconciled": int(writes),
        "writes_needing_judge": _ratio(int(delta("writes_judged")), int(writes)),
        "judge_pairs_per_100_writes": round(100 * pairs / writes, 2) if writes else None,
        "judge_calls_per_100_writes": round(100 * calls / writes, 2) if writes else None,
        "ms_per_judge_call": round(1000 * seconds / calls, 1) if calls else None,
        "ms_per_judge_pair": round(1000 * seconds / pairs, 1) if pairs else None,
        "free_verdicts": int(delta("hindsight_reconcile_free_verdicts_total")),
        "extract_statements": int(delta("hindsight_reconcile_extract_statements_total")),
        "extract_calls": int(ex_calls),
        "ms_per_extract_call": round(1000 * ex_seconds / ex_calls, 1) if ex_calls else None,
        "facts_written": int(delta("hindsight_reconcile_facts_total")),
    }


async def run_mode(
    scenarios: Sequence[dict[str, Any]], filler: dict[str, Any], *, reconcile: bool, workdir: Path
) -> tuple[list[Outcome], dict[str, Any]]:
    """One fresh embedded stack, every scenario driven, caught up, evaluated."""
    stages = ("trigger", "embed", "reconcile") if reconcile else ("trigger", "embed")
    async with embedded(workdir, {API_KEY: TENANT}, ingest=IngestSettings(stages=stages)) as stack:
        headers = {"Authorization": f"Bearer {API_KEY}"}
        async with httpx.AsyncClient(base_url=stack.gateway_url, headers=headers, timeout=120) as client:
            before = _metric_values((await client.get("/metrics")).text)
            plans = [sessions(s, filler[s["lang"]]) for s in scenarios]
            gate = asyncio.Semaphore(CONCURRENCY)

            async def each(step: Any) -> int:
                async def one(scenario: dict[str, Any], plan: list[Session]) -> int:
                    async with gate:
                        return int(await step(client, scenario, plan))

                counts = await asyncio.gather(*(one(s, p) for s, p in zip(scenarios, plans, strict=True)))
                return sum(counts)

            started = time.perf_counter()
            turns = await each(retain_all)
            await stack.wait_caught_up(timeout_s=7200, exclude=NOT_SEARCHABLE)
            searchable = time.perf_counter()
            await stack.wait_caught_up(timeout_s=7200, exclude=NOT_INGEST)
            reconciled = time.perf_counter()
            closes = await each(close_all)  # sessions end after their turns, as an agent's do
            await stack.wait_caught_up(timeout_s=7200)
            done = time.perf_counter()
            after = _metric_values((await client.get("/metrics")).text)
            outcomes = []
            for scenario in scenarios:
                outcomes.append(await evaluate(client, scenario))
    run = {
        "loadavg": loadavg(),
        "turns": turns,
        "session_closes": closes,
        "searchable_s": round(searchable - started, 1),
        "ingested_s": round(reconciled - started, 1),
        "reflected_s": round(done - reconciled, 1),
        "ingest_turns_per_s_searchable": round(turns / (searchable - started), 2),
        "ingest_turns_per_s_ingested": round(turns / (reconciled - started), 2),
    }
    if reconcile:
        run |= cost(before, after)
    return outcomes, run


def details(mode: str, outcome: Outcome) -> dict[str, Any]:
    """One scenario's outcome for reading: statuses, chains reached, each probe's verdict and top 3."""
    probes = []
    for entry in outcome.probes:
        top = [
            {
                "kind": m["kind"],
                "status": m["status"],
                "score": (m.get("scores") or {}).get("final"),
                "events": m["provenance"]["event_ids"],
                "text": m["content"][:160],
            }
            for m in entry["memories"][:3]
        ]
        ok = _top_ok(outcome, entry)
        probes.append({"q": entry["probe"]["q"], "ok": ok, "conflicts": len(entry["conflicts"]), "top": top})
    return {
        "mode": mode,
        "id": outcome.scenario["id"],
        "kind": outcome.scenario["kind"],
        "statuses": outcome.statuses,
        "reachable": outcome.reachable,
        "probes": probes,
    }


def load(path: Path = DATA) -> dict[str, Any]:
    """The scenario file."""
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def select(scenarios: Sequence[dict[str, Any]], split: str, limit: int | None) -> list[dict[str, Any]]:
    """Scenarios of ``split`` (``all``, ``dev``, ``heldout``), the first ``limit`` of each language."""
    chosen = [s for s in scenarios if split == "all" or s["split"] == split]
    if limit is None:
        return chosen
    out: list[dict[str, Any]] = []
    for lang in ("en", "zh"):
        out += [s for s in chosen if s["lang"] == lang][:limit]
    return out


def lines(mode: str, outcomes: Sequence[Outcome], run: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSON lines of one mode: one per split, then the run line."""
    out = []
    for split in ("all", "dev", "heldout"):
        chosen = [o for o in outcomes if split == "all" or o.scenario["split"] == split]
        if chosen:
            out.append({"bench": "updates", "mode": mode, "split": split, **aggregate(chosen)})
    out.append({"bench": "updates", "mode": mode, "run": True, **run})
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``hindsight bench updates``; prints JSON lines, returns the exit code."""
    parser = arg_parser("hindsight bench updates", __doc__)
    parser.add_argument("--split", choices=("all", "dev", "heldout"), default="all")
    parser.add_argument("--limit", type=int, default=None, help="First N scenarios of each language.")
    parser.add_argument(
        "--modes",
        default="reconcile,baseline",
        help="Runs, in order: 'reconcile' (on) and/or 'baseline' (reconcile off), comma-separated.",
    )
    parser.add_argument("--data", type=Path, default=DATA, help="Scenario file.")
    parser.add_argument("--workdir", type=Path, default=None, help="Keep store files here.")
    parser.add_argument(
        "--details",
        type=Path,
        default=None,
        help="Append one JSON line per scenario and mode here (what failed).",
    )
    args = parser.parse_args(argv)
    configure_logging(AllSettings().runtime)
    doc = load(args.data)
    scenarios = select(doc["scenarios"], args.split, args.limit)
    known = {"reconcile": True, "baseline": False}
    wanted = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not wanted or any(m not in known for m in wanted):
        parser.error(f"--modes takes 'reconcile' and/or 'baseline', not {args.modes!r}")
    modes = [(m, known[m]) for m in wanted]
    results: dict[str, tuple[list[Outcome], dict[str, Any]]] = {}
    for mode, on in modes:
        keep = args.workdir / mode if args.workdir else None
        with scratch_dir(f"hindsight-updates-{mode}-", keep) as workdir:
            print(f"bench updates: {mode}, {len(scenarios)} scenarios", file=sys.stderr)
            results[mode] = asyncio.run(run_mode(scenarios, doc["filler"], reconcile=on, workdir=workdir))
        for line in lines(mode, *results[mode]):
            print_line(line)
        if args.details is not None:
            with args.details.open("a", encoding="utf-8") as out:
                for outcome in results[mode][0]:
                    out.write(json.dumps(details(mode, outcome), ensure_ascii=False) + "\n")
    if "baseline" in results and "reconcile" in results:
        with_rc, without = (aggregate(results[m][0]) for m in ("reconcile", "baseline"))
        run_on, run_off = results["reconcile"][1], results["baseline"][1]
        compare = {
            "bench": "updates",
            "compare": "reconcile_vs_baseline",
            **{f"{k}_reconcile": with_rc[k] for k in COMPARED},
            **{f"{k}_baseline": without[k] for k in COMPARED},
            "ingest_turns_per_s_searchable_reconcile": run_on["ingest_turns_per_s_searchable"],
            "ingest_turns_per_s_searchable_baseline": run_off["ingest_turns_per_s_searchable"],
            "ingest_turns_per_s_ingested_reconcile": run_on["ingest_turns_per_s_ingested"],
            "ingest_turns_per_s_ingested_baseline": run_off["ingest_turns_per_s_ingested"],
        }
        print_line(compare)
    return 0
