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
  quarantine, and microseconds per event (median of 5 passes over the set, this machine, one core).

The held-out third (``crc32(text) % 3 == 0``) never trained the classifier nor tuned a rule.
Bursts across events and the consistency check need Redis and the vector store: they are covered by
``tests/integration/test_guard_stores.py``, not here.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from schemas import GuardedEvent, InteractionEvent, QuarantineRecord
from services.guard.classifier import InstructionClassifier
from services.guard.dataset import ATTACK_KINDS, Example, load
from services.guard.policy import GuardPolicy
from services.guard.settings import GuardSettings
from services.guard.stage import GuardStage

SET_PATH: Final[Path] = Path(__file__).parent / "data" / "guard_set.txt"
SECRET_TYPES: Final[frozenset[str]] = frozenset({"api_key", "token", "private_key", "password"})
T0: Final = datetime(2026, 11, 1, tzinfo=UTC)


def event_of(example: Example, i: int) -> InteractionEvent:
    """The interaction event carrying one labelled line (tenant ``bench``, its own user)."""
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
        dumped = out.model_dump_json() if isinstance(out, QuarantineRecord | GuardedEvent) else ""
        leaked += sum(1 for s in ex.spans if s.type in SECRET_TYPES and ex.text[s.start : s.end] in dumped)
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


def cost_us(stage: GuardStage, examples: Sequence[Example], passes: int = 5) -> float:
    """Median over ``passes`` of the mean microseconds per event of ``stage.guard``."""
    events = [event_of(ex, i) for i, ex in enumerate(examples)]
    runs = []
    for _ in range(passes):
        started = time.perf_counter()
        for event in events:
            stage.guard(event)
        runs.append((time.perf_counter() - started) / len(events) * 1e6)
    return round(statistics.median(runs), 1)


def main(argv: Sequence[str] = ()) -> int:
    """Print the benchmark's JSON lines; exit code 0."""
    parser = argparse.ArgumentParser(prog="hindsight bench guard", description=__doc__.split("\n")[0])
    parser.add_argument("--set", type=Path, default=SET_PATH, help="labelled set (KIND|SOURCE|TEXT lines)")
    args = parser.parse_args(list(argv))
    examples = load(args.set)
    cfg = GuardSettings()
    policy = GuardPolicy(
        instruction_threshold=cfg.instruction_threshold,
        repeat_min_count=cfg.repeat_min_count,
        repeat_min_chars=cfg.repeat_min_chars,
    )
    load_started = time.perf_counter()
    classifier = InstructionClassifier.load()
    load_ms = round((time.perf_counter() - load_started) * 1000, 1)
    systems = {"guard": GuardStage(policy, classifier=classifier), "rules": GuardStage(policy)}
    for name, stage in systems.items():
        for split in ("all", "dev", "heldout"):
            chosen = [e for e in examples if split in ("all", e.split)]
            line = measure(stage, chosen, name, split)
            if split == "all":
                line["us_per_event"] = cost_us(stage, chosen)
                if name == "guard":
                    line["classifier"] = {"version": classifier.version, "load_ms": load_ms}
            print(json.dumps(line, ensure_ascii=False), flush=True)
    return 0


__all__ = ["ATTACK_KINDS", "main", "measure"]
