"""``hindsight bench recall``: Hindsight against plain baselines on LoCoMo, in the same run (issue 4).

1. ingest the chosen LoCoMo conversations through the real pipeline exactly like the demo
   (embedded stack, every turn published with aiokafka, wait for consumer lag 0);
2. ask every category 1-4 question through the gateway's HTTP API ``/v1/recall`` with
   ``top_k=k`` (and ``"rerank": <bool>``; if the gateway rejects that field with 422 the run
   continues without it and says so in the output); read each memory's
   ``provenance.external_refs`` and ``tokens`` (counted with the e5 tokenizer when absent);
3. over the same turns with the same embedder, run the baselines of
   :mod:`hindsight.eval.baselines` (``dense``, ``bm25``, ``hybrid``: one index per conversation);
4. score every system with :mod:`hindsight.eval.metrics` (evidence credit per the data README) and
   return one dict per system, per category and overall; ``main()`` prints one JSON line each,
   Hindsight last with ``vs_best_baseline_recall_at_10``.

Run: ``.venv/bin/python -m bench.recall --conversations conv-26,conv-30``.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import DEFAULT_DATA, arg_parser, loadavg, print_line, scratch_dir
from bench.stack import embedded
from hindsight.eval import locomo, metrics
from hindsight.eval.baselines import SYSTEMS, EmbeddingCache, TurnIndex, conversation_turns
from hindsight.tokens import count_tokens

if TYPE_CHECKING:
    from services.cli.embedded import Stack

log = logging.getLogger("hindsight.bench.recall")

API_KEY = "dev-bench-recall-key"
_METRIC_KEYS = (
    "questions",
    "recall_at_5",
    "recall_at_10",
    "all_evidence_at_10",
    "ndcg_at_10",
    "mean_tokens",
    "p50_ms",
    "p95_ms",
)


@dataclass
class HindsightRun:
    """What the pipeline part of the benchmark measured."""

    scores: list[metrics.QuestionScore] = field(default_factory=list)
    rerank_sent: bool = False
    """Whether the ``rerank`` field was part of the request bodies (False: the gateway refused it)."""
    tokens_from_response: int = 0
    """Memories whose ``tokens`` came from the response (the rest were counted here)."""
    memories_returned: int = 0
    broad_returned: int = 0
    """Returned memories whose provenance lists more than 3 turns (they earn no evidence credit)."""
    events: int = 0
    stored_memories: int = 0
    ingest_seconds: float = 0.0
    reconcile_lag: int | None = None
    """Stored memories reconcile had not reached when the questions were asked (None: it is off)."""
    reconcile_seconds: float | None = None
    """Seconds reconcile needed to catch up after ingest (only with ``wait_reconcile``)."""


def _memory_tokens(memory: dict[str, Any]) -> tuple[int, bool]:
    tokens = memory.get("tokens")
    if isinstance(tokens, int) and tokens > 0:
        return tokens, True
    speaker = memory.get("speaker")
    content = str(memory.get("content", ""))
    # what a caller puts in its prompt (as the recall token budget counts it): "speaker: content"
    return count_tokens(f"{speaker}: {content}" if speaker else content), False


async def ask_all(
    gateway_url: str,
    api_key: str,
    questions: Sequence[locomo.Question],
    *,
    k: int,
    rerank: bool,
    run: HindsightRun,
    progress: bool = True,
) -> None:
    """Ask every question over HTTP ``/v1/recall``; fills ``run.scores`` and the counters.

    Raises:
        httpx.HTTPStatusError: the gateway answered with an error other than a 422 on ``rerank``.
    """
    import httpx  # noqa: PLC0415
    from tqdm import tqdm  # noqa: PLC0415

    send_rerank = True
    headers = {"Authorization": f"Bearer {api_key}"}
    async with httpx.AsyncClient(base_url=gateway_url, headers=headers, timeout=120.0) as client:
        for q in tqdm(questions, desc="recall hindsight", unit="q", leave=False, disable=not progress):
            body: dict[str, Any] = {
                "query": q.question,
                "user_id": q.sample_id,
                "top_k": k,
                "reference_time": q.reference_time.isoformat(),
            }
            if send_rerank:
                body["rerank"] = rerank
            started = time.perf_counter()
            response = await client.post("/v1/recall", json=body)
            elapsed = (time.perf_counter() - started) * 1000
            if response.status_code == 422 and send_rerank and "rerank" in response.text:
                log.warning("the gateway refuses the 'rerank' field (422): asking without it from now on")
                send_rerank = False
                body.pop("rerank")
                started = time.perf_counter()
                response = await client.post("/v1/recall", json=body)
                elapsed = (time.perf_counter() - started) * 1000
            response.raise_for_status()
            memories: list[dict[str, Any]] = response.json()["memories"]
            refs = [list(m.get("provenance", {}).get("external_refs", [])) for m in memories]
            tokens = 0
            for m in memories:
                n, from_response = _memory_tokens(m)
                tokens += n
                run.tokens_from_response += int(from_response)
            run.memories_returned += len(memories)
            run.broad_returned += sum(len(r) > locomo.MAX_REFS_FOR_CREDIT for r in refs)
            run.scores.append(
                metrics.score_question(
                    q.evidence, refs, category=q.category, tokens=tokens, latency_ms=elapsed
                )
            )
    run.rerank_sent = send_rerank


async def _pipeline(
    convs: Sequence[locomo.Conversation],
    *,
    k: int,
    rerank: bool,
    data_dir: Path,
    timeout_s: float,
    progress: bool,
    wait_reconcile: bool = False,
) -> HindsightRun:
    from services.cli.demo import (  # noqa: PLC0415
        count_memories,
        publish,
        reconcile_lag,
        wait_for_reconcile,
        wait_with_progress,
    )

    events = [e for c in convs for e in c.events]
    questions = [q for c in convs for q in c.questions]
    interactions = sum(c.turns for c in convs)
    run = HindsightRun(events=len(events))
    stack: Stack
    async with embedded(data_dir, {API_KEY: locomo.TENANT}, max_top_k=max(k, 15)) as stack:
        started = time.perf_counter()
        await publish(stack.bootstrap, events)
        await wait_with_progress(stack, interactions, len(events) - interactions, timeout_s)
        run.ingest_seconds = time.perf_counter() - started
        if wait_reconcile:
            run.reconcile_seconds = await wait_for_reconcile(stack, timeout_s, show=progress)
        run.reconcile_lag = await reconcile_lag(stack)
        run.stored_memories = await asyncio.to_thread(
            count_memories, stack, locomo.TENANT, [c.sample_id for c in convs]
        )
        await ask_all(stack.gateway_url, API_KEY, questions, k=k, rerank=rerank, run=run, progress=progress)
    return run


def baseline_scores(
    convs: Sequence[locomo.Conversation], *, k: int, cache_dir: Path | None = None, progress: bool = True
) -> dict[str, list[metrics.QuestionScore]]:
    """Score ``dense``, ``bm25`` and ``hybrid`` on every question, one index per conversation."""
    from tqdm import tqdm  # noqa: PLC0415

    from hindsight.inference.embedder import LocalE5Embedder  # noqa: PLC0415

    embedder = LocalE5Embedder()
    cache = EmbeddingCache(embedder) if cache_dir is None else EmbeddingCache(embedder, cache_dir)
    embedder.embed_queries(["warm-up"])
    out: dict[str, list[metrics.QuestionScore]] = {s: [] for s in SYSTEMS}
    for conv in convs:
        index = TurnIndex(conversation_turns(conv), embedder, cache, progress=progress)
        for q in tqdm(
            conv.questions, desc=f"baselines {conv.sample_id}", unit="q", leave=False, disable=not progress
        ):
            for system, res in index.search(q.question, k).items():
                out[system].append(
                    metrics.score_question(
                        q.evidence,
                        res.refs,
                        category=q.category,
                        tokens=res.tokens,
                        latency_ms=res.latency_ms,
                    )
                )
    return out


def _round(value: object) -> object:
    if isinstance(value, float):
        return round(value, 4) if abs(value) <= 1.0 else round(value, 1)
    if isinstance(value, dict):
        return {key: _round(v) for key, v in value.items()}
    return value


def system_line(system: str, scores: Sequence[metrics.QuestionScore]) -> dict[str, Any]:
    """The result dict of one system: overall metrics and ``by_category`` (rounded)."""
    agg = metrics.aggregate(scores)
    line: dict[str, Any] = {"system": system}
    line.update({key: agg[key] for key in _METRIC_KEYS})
    line["by_category"] = agg["by_category"]
    return {key: _round(v) for key, v in line.items()}


def run_recall_bench(
    data: Path = DEFAULT_DATA,
    conversations: list[str] | None = None,
    k: int = 10,
    rerank: bool = True,
    *,
    data_dir: Path | None = None,
    timeout_s: float = 1800.0,
    cache_dir: Path | None = None,
    progress: bool = True,
    wait_reconcile: bool = False,
) -> list[dict[str, Any]]:
    """Run the benchmark; returns one dict per system: ``dense``, ``bm25``, ``hybrid``, ``hindsight``.

    Args:
        data: any LoCoMo-format file.
        conversations: sample ids to use; None = every sample in the file.
        k: ``top_k`` asked of every system (recall@10 needs ``k >= 10``).
        rerank: value of the request's ``rerank`` field.
        data_dir: where the embedded stores keep their files (a temp dir removed at the end when None).
        timeout_s: most seconds to wait for the pipeline to catch up.
        cache_dir: passage embedding cache of the baselines (default ``.cache/bench``).
        wait_reconcile: ask only once reconcile (behind ingest) has caught up too.

    Raises:
        locomo.DatasetError: the file is missing/malformed or an id is not in it.
        TimeoutError: the pipeline did not catch up in ``timeout_s``.
    """
    convs = [locomo.conversation(s) for s in locomo.select(locomo.load(data), conversations)]
    load_before = loadavg()
    with scratch_dir("hindsight-bench-recall-", data_dir) as workdir:
        run = asyncio.run(
            _pipeline(
                convs,
                k=k,
                rerank=rerank,
                data_dir=workdir,
                timeout_s=timeout_s,
                progress=progress,
                wait_reconcile=wait_reconcile,
            )
        )
    base = baseline_scores(convs, k=k, cache_dir=cache_dir, progress=progress)
    lines = [system_line(system, base[system]) for system in SYSTEMS]
    common = {"conversations": [c.sample_id for c in convs], "k": k}
    for line in lines:
        line.update(common)
    best = max(lines, key=lambda x: x["recall_at_10"] if x["recall_at_10"] is not None else -1.0)
    mine = system_line("hindsight", run.scores)
    mine.update(common)
    mine.update(
        {
            "rerank": rerank,
            "rerank_field_accepted": run.rerank_sent,
            "events": run.events,
            "memories": run.stored_memories,
            "ingest_seconds": round(run.ingest_seconds, 1),
            "reconcile_lag": run.reconcile_lag,
            "reconcile_seconds": None if run.reconcile_seconds is None else round(run.reconcile_seconds, 1),
            "mean_memories_returned": round(run.memories_returned / max(1, len(run.scores)), 2),
            "broad_memories_returned": run.broad_returned,
            "tokens_source": (
                "counted"
                if run.tokens_from_response == 0
                else "response"
                if run.tokens_from_response == run.memories_returned
                else "mixed"
            ),
            "load_avg_at_start": load_before,
            "load_avg_at_end": loadavg(),
            "best_baseline": best["system"],
        }
    )
    if mine["recall_at_10"] is not None and best["recall_at_10"] is not None:
        mine["vs_best_baseline_recall_at_10"] = round(mine["recall_at_10"] - best["recall_at_10"], 4)
        mine["vs_best_baseline_by_category"] = {
            name: round(cat["recall_at_10"] - best["by_category"][name]["recall_at_10"], 4)
            for name, cat in mine["by_category"].items()
            if name in best["by_category"]
        }
    return [*lines, mine]


def main(argv: Sequence[str] | None = None) -> int:
    """``bench recall`` command line: prints one JSON line per system, Hindsight last."""
    parser = arg_parser("hindsight bench recall", __doc__)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo-format JSON file.")
    parser.add_argument("--conversations", default=None, help="Comma-separated sample ids (default: all).")
    parser.add_argument("--k", type=int, default=10, help="top_k of every system (default 10).")
    parser.add_argument(
        "--no-rerank", dest="rerank", action="store_false", help="Ask Hindsight not to rerank."
    )
    parser.add_argument(
        "--data-dir", type=Path, default=None, help="Embedded stores' directory (default: temp)."
    )
    parser.add_argument("--timeout-s", type=float, default=1800.0, help="Max wait for ingest to catch up.")
    parser.add_argument(
        "--cache-dir", type=Path, default=None, help="Embedding cache (default .cache/bench)."
    )
    parser.add_argument("--quiet", action="store_true", help="No progress bars.")
    parser.add_argument(
        "--wait-reconcile",
        action="store_true",
        help="Ask only once reconcile (behind ingest) has caught up; reports its catch-up seconds.",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every index build at DEBUG
    ids = [c.strip() for c in args.conversations.split(",") if c.strip()] if args.conversations else None
    try:
        lines = run_recall_bench(
            args.data,
            ids,
            args.k,
            args.rerank,
            data_dir=args.data_dir,
            timeout_s=args.timeout_s,
            cache_dir=args.cache_dir,
            progress=not args.quiet,
            wait_reconcile=args.wait_reconcile,
        )
    except (locomo.DatasetError, TimeoutError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for line in lines:
        print_line(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
