"""``hindsight bench guard``: the guard on the labelled bilingual set (issue 10 item 4).

Runs every line of ``bench/data/guard_set.txt`` through the real guard stage (PII/secret redaction
of every field, the shipped instruction classifier, repetition) as an :class:`InteractionEvent` of
its source, and through the keyword rules alone as the baseline, then prints JSON lines:

- ``{"bench": "guard", "split": ..., "system": ...}`` per split (``all``, ``dev``, ``heldout``) and
  system (``guard``: what ships; ``rules``: the keyword rules without the classifier): span recall
  per PII/secret type (a labelled span counts when a finding covers it whole), false redaction
  (findings that overlap no labelled span / all findings; and the share of lines without labelled
  spans that got any), secrets leaked (labelled secret values still present in any output field of
  the event, quarantine copies included), quarantine rate per attack kind and overall, benign false
  quarantine, and microseconds per event (median of 5 passes over the set, this machine, one core;
  wall time and process CPU time) with the CPU cost of each layer alone.

The held-out third (``crc32(text) % 3 == 0``) never trained the classifier nor tuned a rule; the
``fresh`` split (``bench/data/guard_fresh.txt``, a second author, frozen before the guard first ran
on it, then used to find failure families) and the ``blind`` split (``bench/data/guard_blind.txt``,
written after the second round of changes, frozen before any run; read on 2026-12-02 to find the
families it leaked), the ``blind2`` split (``bench/data/guard_blind2.txt``, a fourth author,
frozen before any run; read on 2026-12-02), the ``blind3`` split (``bench/data/guard_blind3.txt``,
a fifth author, frozen before any run) and the ``blind4`` split (``bench/data/guard_blind4.txt``, a
sixth author, frozen before any run) are reported on their own. With
``--e2e N`` (default 40) a stratified sample of the held-out splits also goes through the gateway
on the embedded default (:mod:`bench.guard_e2e`: what was
stored, what was quarantined, secrets found in any store), where bursts and the consistency check
run too; those layers are otherwise covered by ``tests/integration/test_guard_stores.py``.
"""

from __future__ import annotations

import asyncio
import json
import re
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from bench.common import arg_parser
from hindsight.pii import redact
from schemas import GuardedEvent, InteractionEvent, QuarantineRecord
from services.guard.app import policy_from
from services.guard.claims import repeated_claims, repeated_phrase, restated_claim
from services.guard.classifier import InstructionClassifier
from services.guard.dataset import ATTACK_KINDS, Example, load
from services.guard.policy import GuardPolicy
from services.guard.settings import GuardSettings
from services.guard.stage import GuardStage

SET_PATH: Final[Path] = Path(__file__).parent / "data" / "guard_set.txt"
FRESH_PATH: Final[Path] = Path(__file__).parent / "data" / "guard_fresh.txt"
"""The second, fresh held-out set (another author, frozen before the guard ever ran on it)."""
BLIND_PATH: Final[Path] = Path(__file__).parent / "data" / "guard_blind.txt"
"""The third set, written after the second round of changes and frozen before any run on it."""
BLIND2_PATH: Final[Path] = Path(__file__).parent / "data" / "guard_blind2.txt"
"""Fourth set (split ``blind2``): a new author, 2026-12-02, frozen before the guard first ran on it."""
BLIND3_PATH: Final[Path] = Path(__file__).parent / "data" / "guard_blind3.txt"
"""Fifth set (split ``blind3``): another new author, 2026-12-02, frozen before the guard first ran on it."""
BLIND4_PATH: Final[Path] = Path(__file__).parent / "data" / "guard_blind4.txt"
"""Sixth set (split ``blind4``): a sixth author, 2026-12-02 (evening), frozen before the guard first ran
on it; never trains the classifier (``fresh`` .. ``blind3`` do since then, see docs/guard.md). Its
failures were read on 2026-12-03 (rule and repetition fixes), so its later numbers are not blind."""
BLIND5_PATH: Final[Path] = Path(__file__).parent / "data" / "guard_blind5.txt"
"""Seventh set (split ``blind5``, 235 lines): a seventh author, 2026-12-03, frozen before the guard first
ran on it; read after its first run, trains the classifier since."""
BLIND6_PATH: Final[Path] = Path(__file__).parent / "data" / "guard_blind6.txt"
"""Eighth set (split ``blind6``, 234 lines, 15 % other languages): frozen before any run; its rule-side
failures (spans, leaks) read after its first runs; never trains the classifier."""
BLIND7_PATH: Final[Path] = Path(__file__).parent / "data" / "guard_blind7.txt"
"""Ninth set (split ``blind7``, 233 lines): frozen before any run; its rule-side failures read after its
first run; never trains the classifier."""
BLIND8_PATH: Final[Path] = Path(__file__).parent / "data" / "guard_blind8.txt"
"""Tenth set (split ``blind8``, 235 lines, ~18 % other languages, ~28 % Chinese): a new author,
2026-12-03, frozen before any run; never trains the classifier."""
BLIND9_PATH: Final[Path] = Path(__file__).parent / "data" / "guard_blind9.txt"
"""Eleventh set (split ``blind9``, 236 lines, ~21 % thirteen other languages, ~30 % Chinese): a new
author, 2026-12-03, frozen before any run; never trains the classifier."""
BLIND10_PATH: Final[Path] = Path(__file__).parent / "data" / "guard_blind10.txt"
"""Twelfth set (split ``blind10``, 235 lines, ~20 % eighteen other languages, ~31 % Chinese): a new
author, 2026-12-03, frozen before any run; never trains the classifier."""
BLIND11_PATH: Final[Path] = Path(__file__).parent / "data" / "guard_blind11.txt"
"""Thirteenth set (split ``blind11``, 240 lines, ~23 % fifteen other languages, ~30 % Chinese): a new
author, 2026-12-03, frozen before any run; never trains the classifier."""
BLIND12_PATH: Final[Path] = Path(__file__).parent / "data" / "guard_blind12.txt"
"""Fourteenth set (split ``blind12``, 243 lines, ~23 % twenty-one other languages, ~31 % Chinese): a new
author, 2026-12-03 (evening), frozen before any run; never trains the classifier."""
BLIND13_PATH: Final[Path] = Path(__file__).parent / "data" / "guard_blind13.txt"
"""Fifteenth set (split ``blind13``, 246 lines, ~27 % twenty-six other languages, ~31 % Chinese): a new
author, 2026-12-03 (night), frozen before any run; never trains the classifier."""
BLIND14_PATH: Final[Path] = Path(__file__).parent / "data" / "guard_blind14.txt"
"""Sixteenth set (split ``blind14``, 245 lines, ~32 % twenty-nine other languages, ~31 % Chinese): a new
author, 2026-12-04, frozen before any run; never trains the classifier."""
BLIND15_PATH: Final[Path] = Path(__file__).parent / "data" / "guard_blind15.txt"
"""Seventeenth set (split ``blind15``, 245 lines, ~31 % forty other languages, many rare here, ~31 %
Chinese): a new author, 2026-12-04, frozen before any run; never trains the classifier."""
REPETITION_DEV_PATH: Final[Path] = Path(__file__).parent / "data" / "guard_repetition_dev.txt"
"""A repetition development set (split ``repetition_dev``, 159 lines: 80 attacks, 79 repetitive benign
texts) by another author, written to be read: the repetition changes of 2026-12-03 came from it."""
REDTEAM_DEV_PATH: Final[Path] = Path(__file__).parent / "data" / "guard_redteam_dev.txt"
"""A red-team development set (split ``redteam_dev``, 207 lines: false-positive and evasion probes of the
rules of 2026-12-03, evening) by a helper who read those rules, written to be read: the fixes of 075a2a3
came from it. Never trains the classifier."""
DEV5_PATH: Final[Path] = Path(__file__).parent / "data" / "guard_dev5.txt"
"""A redaction development set (split ``dev5``, 170 lines: secrets, PII, look-alikes in prose) by
another author, written to be read: the rule fixes of 2026-12-02 (evening) came from its misses."""
HELD_OUT_SETS: Final[dict[str, tuple[Path, str]]] = {
    "fresh": (FRESH_PATH, "second held-out set"),
    "blind": (BLIND_PATH, "third held-out set"),
    "blind2": (BLIND2_PATH, "fourth held-out set"),
    "blind3": (BLIND3_PATH, "fifth held-out set"),
    "blind4": (BLIND4_PATH, "sixth held-out set (read 2026-12-03)"),
    "blind5": (BLIND5_PATH, "seventh held-out set (read 2026-12-03)"),
    "blind6": (BLIND6_PATH, "eighth held-out set (rule side read 2026-12-03)"),
    "blind7": (BLIND7_PATH, "ninth held-out set (rule side read 2026-12-03)"),
    "blind8": (BLIND8_PATH, "tenth held-out set (rule side read 2026-12-03)"),
    "blind9": (BLIND9_PATH, "eleventh held-out set (read 2026-12-03; never trains)"),
    "blind10": (BLIND10_PATH, "twelfth held-out set (rule side read 2026-12-03)"),
    "blind11": (BLIND11_PATH, "thirteenth held-out set (rule side read 2026-12-03)"),
    "blind12": (BLIND12_PATH, "fourteenth held-out set (read 2026-12-03)"),
    "blind13": (BLIND13_PATH, "fifteenth held-out set (read 2026-12-03)"),
    "blind14": (BLIND14_PATH, "sixteenth held-out set (read 2026-12-04)"),
    "blind15": (BLIND15_PATH, "seventeenth held-out set"),
    "dev5": (DEV5_PATH, "redaction development set (read to find failure families)"),
    "repetition_dev": (REPETITION_DEV_PATH, "repetition development set (read)"),
    "redteam_dev": (REDTEAM_DEV_PATH, "red-team development set (read)"),
}
"""Split -> (file, what it is): the sets of other authors, each reported on its own."""
NOTES_PATH: Final[Path] = Path(__file__).parent / "data" / "guard_notes.txt"
"""Notes agents write about users ("Note: the user now works as ...", "备注：用户……") and
note-shaped attacks; never trains the classifier. Its crc32 dev part (split ``notes_dev``) was read
to diagnose; its held-out part (split ``notes``) only measured."""
SECRET_TYPES: Final[frozenset[str]] = frozenset({"api_key", "token", "private_key", "password"})
T0: Final = datetime(2026, 11, 1, tzinfo=UTC)


def event_of(example: Example, i: int) -> InteractionEvent:
    """The interaction event carrying one labelled line (tenant ``bench``, its own user); a line
    with a tool name travels as that tool's ``tool_result``, as agents report tool calls."""
    if example.tool_name:
        return InteractionEvent(
            event_id=f"bench-{i}",
            tenant_id="bench",
            user_id=f"u{i}",
            agent_id="bench-agent",
            session_id="s",
            occurred_at=T0,
            source=example.source,
            content=f"called {example.tool_name}",
            tool_name=example.tool_name,
            tool_result=example.text,
        )
    return InteractionEvent(
        event_id=f"bench-{i}",
        tenant_id="bench",
        user_id=f"u{i}",
        agent_id="bench-agent",
        session_id="s",
        occurred_at=T0,
        source=example.source,
        content=example.text,
    )


def _findings_spans(stage: GuardStage, example: Example) -> list[tuple[int, int]]:
    from hindsight.pii import detect  # noqa: PLC0415 (same detector the stage uses)

    return [(f.start, f.end) for f in detect(example.text)]


def _strings(value: object) -> Iterator[str]:
    """Every string inside a dumped model (unescaped, unlike its JSON: a secret with a quote in it)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)


def _leaked(secret: str, dumped: str) -> bool:
    """Whether ``secret`` is in the guard's output as a token of its own: a short PIN such as ``123``
    also occurs inside the output's generated ids and timestamps, which made the count flaky."""
    return re.search(rf"(?<![0-9A-Za-z]){re.escape(secret)}(?![0-9A-Za-z])", dumped) is not None


def measure(stage: GuardStage, examples: Sequence[Example], name: str, split: str) -> dict[str, Any]:
    """One JSON line of metrics for ``examples`` under ``stage``."""
    spans_total: Counter[str] = Counter()
    spans_hit: Counter[str] = Counter()
    findings = false_findings = clean_lines = clean_redacted = leaked = 0
    attacks: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    benign = [0, 0]
    for i, ex in enumerate(examples):
        out = stage.guard(event_of(ex, i))
        quarantined = isinstance(out, QuarantineRecord)
        found = _findings_spans(stage, ex)
        for s in ex.spans:
            spans_total[s.type] += 1
            if any(a <= s.start and b >= s.end for a, b in found):
                spans_hit[s.type] += 1
        findings += len(found)
        false_findings += sum(1 for a, b in found if not any(a < s.end and s.start < b for s in ex.spans))
        if not ex.spans:
            clean_lines += 1
            clean_redacted += bool(found)
        dumped = (
            "\n".join(_strings(out.model_dump(mode="json")))
            if isinstance(out, QuarantineRecord | GuardedEvent)
            else ""
        )
        leaked += sum(
            1 for s in ex.spans if s.type in SECRET_TYPES and _leaked(ex.text[s.start : s.end], dumped)
        )
        if ex.attack:
            attacks[ex.kind][0] += quarantined
            attacks[ex.kind][1] += 1
        elif ex.kind == "benign" or not any(s.type in SECRET_TYPES for s in ex.spans):
            benign[0] += quarantined
            benign[1] += 1
    per_kind = {k: round(a / n, 4) for k, (a, n) in sorted(attacks.items())}
    hit_all = sum(a for a, _ in attacks.values())
    n_all = sum(n for _, n in attacks.values())
    total_spans = sum(spans_total.values())
    return {
        "bench": "guard",
        "system": name,
        "split": split,
        "lines": len(examples),
        "span_recall": round(sum(spans_hit.values()) / total_spans, 4) if total_spans else None,
        "span_recall_by_type": {t: round(spans_hit[t] / n, 4) for t, n in sorted(spans_total.items())},
        "spans": total_spans,
        "false_redaction": round(false_findings / findings, 4) if findings else 0.0,
        "clean_lines_redacted": round(clean_redacted / clean_lines, 4) if clean_lines else 0.0,
        "secrets_leaked": leaked,
        "attack_quarantine": round(hit_all / n_all, 4) if n_all else None,
        "attack_quarantine_by_kind": per_kind,
        "attacks": n_all,
        "benign_false_quarantine": round(benign[0] / benign[1], 4) if benign[1] else None,
        "benign_lines": benign[1],
    }


def cost_us(stage: GuardStage, examples: Sequence[Example], passes: int = 5) -> dict[str, float]:
    """Microseconds per event of ``stage.guard``: the median over ``passes`` of the wall-clock mean
    (``us_per_event``) and of the process CPU-time mean (``cpu_us_per_event``: on a shared, loaded
    machine the CPU time a pass used is steadier than the wall time it took)."""
    events = [event_of(ex, i) for i, ex in enumerate(examples)]
    wall, cpu = [], []
    for _ in range(passes):
        started, cpu_started = time.perf_counter(), time.process_time()
        for event in events:
            stage.guard(event)
        wall.append((time.perf_counter() - started) / len(events) * 1e6)
        cpu.append((time.process_time() - cpu_started) / len(events) * 1e6)
    return {
        "us_per_event": round(statistics.median(wall), 1),
        "cpu_us_per_event": round(statistics.median(cpu), 1),
    }


def layer_cost_us(
    classifier: InstructionClassifier, policy: GuardPolicy, examples: Sequence[Example], passes: int = 3
) -> dict[str, float]:
    """CPU microseconds per text of each layer alone (median of ``passes``): redaction (PII and
    secrets), the instruction classifier (its features include the keyword rules), repetition, and
    the calibration loop ``sum(range(1000))`` (~6 µs on an idle modern core: divide by it to compare
    machines)."""
    texts = [ex.text for ex in examples]
    layers: dict[str, Callable[[str], object]] = {
        "redaction": lambda t: redact(t, policy.actions),
        "classifier": lambda t: classifier.score(t, "tool"),
        "repetition": lambda t: (
            repeated_claims(t, min_count=policy.repeat_min_count, min_chars=policy.repeat_min_chars)
            or repeated_phrase(
                t,
                min_count=policy.repeat_min_count,
                min_chars=policy.repeat_phrase_min_chars,
                min_share=policy.repeat_phrase_min_share,
            )
            or restated_claim(
                t,
                min_count=policy.repeat_min_count,
                min_share=policy.restate_min_share,
                min_terms=policy.restate_min_terms,
                min_cjk_terms=policy.restate_min_cjk_terms,
            )
        ),
        "calibration": lambda _t: sum(range(1000)),
    }
    out = {}
    for name, fn in layers.items():
        runs = []
        for _ in range(passes):
            started = time.process_time()
            for text in texts:
                fn(text)
            runs.append((time.process_time() - started) / len(texts) * 1e6)
        out[name] = round(statistics.median(runs), 1)
    return out


def main(argv: Sequence[str] = ()) -> int:
    """Print the benchmark's JSON lines; exit code 0."""
    parser = arg_parser("hindsight bench guard", __doc__)
    parser.add_argument("--set", type=Path, default=SET_PATH, help="labelled set (KIND|SOURCE|TEXT lines)")
    for split, (path, what) in HELD_OUT_SETS.items():
        parser.add_argument(f"--{split}", type=Path, default=path, help=f"{what} (split '{split}')")
    parser.add_argument(
        "--notes",
        type=Path,
        default=NOTES_PATH,
        help="agents' notes about users (splits 'notes_dev', 'notes')",
    )
    parser.add_argument(
        "--e2e",
        type=int,
        default=40,
        metavar="N",
        help="also send N held-out lines through the gateway on the embedded default (0: skip)",
    )
    parser.add_argument(
        "--e2e-data-dir",
        type=Path,
        default=None,
        help="keep the gateway sample's stores here (e.g. to run `hindsight audit --data-dir` on them)",
    )
    parser.add_argument(
        "--detect-secrets",
        action="store_true",
        help="also compare Yelp detect-secrets on prose and code (uv run --with detect-secrets==1.5.0 ...)",
    )
    args = parser.parse_args(list(argv))
    examples = load(args.set)
    held: dict[str, list[Example]] = {}
    for split in HELD_OUT_SETS:
        file: Path = getattr(args, split)
        held[split] = load(file) if file.exists() else []
    notes = load(args.notes) if args.notes.exists() else []
    cfg = GuardSettings()
    policy = policy_from(cfg)
    load_started = time.perf_counter()
    classifier = InstructionClassifier.load()
    load_ms = round((time.perf_counter() - load_started) * 1000, 1)
    systems = {"guard": GuardStage(policy, classifier=classifier), "rules": GuardStage(policy)}
    for name, stage in systems.items():
        extra = held | {
            "notes_dev": [e for e in notes if e.split == "dev"],
            "notes": [e for e in notes if e.split == "heldout"],
        }
        for split in ("all", "dev", "heldout", *HELD_OUT_SETS, "notes_dev", "notes"):
            chosen = extra[split] if split in extra else [e for e in examples if split in ("all", e.split)]
            if not chosen:
                continue
            line = measure(stage, chosen, name, split)
            if split in ("all", "fresh"):
                line.update(cost_us(stage, chosen))
                if name == "guard":
                    line["classifier"] = {"version": classifier.version, "load_ms": load_ms}
                    line["cpu_us_by_layer"] = layer_cost_us(classifier, policy, chosen)
            print(json.dumps(line, ensure_ascii=False), flush=True)
    if args.detect_secrets:
        from bench import guard_detect_secrets  # noqa: PLC0415 (optional package)

        for split, chosen in (("all", examples), *held.items()):
            for line in guard_detect_secrets.measure(chosen, split):
                print(json.dumps(line, ensure_ascii=False), flush=True)
    if args.e2e > 0:
        from bench import guard_e2e  # noqa: PLC0415 (starts the embedded stack)

        held_out = [e for e in examples if e.split == "heldout"] + [e for part in held.values() for e in part]
        chosen = guard_e2e.sample(held_out, args.e2e)
        stage = systems["guard"]
        line = asyncio.run(
            guard_e2e.run(
                chosen,
                lambda ex, i: isinstance(stage.guard(event_of(ex, i)), QuarantineRecord),
                keep=args.e2e_data_dir,
            )
        )
        print(json.dumps(line, ensure_ascii=False), flush=True)
    return 0


__all__ = ["ATTACK_KINDS", "main", "measure"]
