"""Triton clients against a real ``tritonserver`` (CPU repository, python backend) on loopback."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import numpy as np
import pytest

from hindsight.errors import ConfigurationError, ModelUnavailableError
from hindsight.inference.embedder import LocalE5Embedder, build_embedder
from hindsight.inference.llm import SamplingParams, StandinLLM, build_llm, standin_pieces
from hindsight.inference.llm_triton import TritonLLM
from hindsight.inference.reranker import EmbeddingCosineReranker, build_reranker
from hindsight.inference.triton_client import TritonModel, TritonTarget
from hindsight.inference.triton_embedder import TritonEmbedder
from hindsight.inference.triton_reranker import TritonReranker
from hindsight.inference.triton_server import TritonServer, free_port
from hindsight.settings import EmbedderSettings, LLMSettings, RerankerSettings

pytestmark = pytest.mark.integration

Proto = Literal["grpc", "http"]
PROTOCOLS: tuple[Proto, ...] = ("grpc", "http")

TEXTS = [
    "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    "Melanie: Painting a sunrise over the lake was my therapy this summer.",
    "用户喜欢靠窗的座位，并且对花生过敏。",
    "Der Nutzer bevorzugt Zugreisen statt Flüge.",
    "",
    "a long text " * 60,
]


def target(server: TritonServer, protocol: Proto, model: str, **extra: float) -> TritonTarget:
    return TritonTarget(server.url(protocol), protocol, model, **extra)  # type: ignore[arg-type]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_triton_embeddings_equal_in_process_backend(
    triton_server: TritonServer, local_e5: LocalE5Embedder, protocol: Proto
) -> None:
    embedder = TritonEmbedder(target(triton_server, protocol, "embedder"), name=local_e5.name, dim=384)
    try:
        passages = embedder.embed_passages(TEXTS)
        queries = embedder.embed_queries(TEXTS[:3])
    finally:
        embedder.close()
    assert passages.shape == (len(TEXTS), 384)
    assert passages.dtype == np.float32
    np.testing.assert_allclose(passages, local_e5.embed_passages(TEXTS), atol=1e-5, rtol=0)
    np.testing.assert_allclose(queries, local_e5.embed_queries(TEXTS[:3]), atol=1e-5, rtol=0)
    np.testing.assert_allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-4)
    assert embedder.embed_passages([]).shape == (0, 384)


def test_http_and_grpc_give_same_results(triton_server: TritonServer) -> None:
    results = {}
    for protocol in PROTOCOLS:
        embedder = TritonEmbedder(target(triton_server, protocol, "embedder"), name="e5", dim=384)
        reranker = TritonReranker(target(triton_server, protocol, "reranker"), name="standin")
        llm = TritonLLM(target(triton_server, protocol, "llm"), name="standin")
        try:
            results[protocol] = (
                embedder.embed_passages(TEXTS[:4]),
                reranker.score("who went to a support group?", TEXTS[:4]),
                list(llm.stream("summarise: Caroline went to a support group", SamplingParams(max_tokens=9))),
            )
        finally:
            embedder.close()
            reranker.close()
            llm.close()
    grpc, http = results["grpc"], results["http"]
    np.testing.assert_array_equal(grpc[0], http[0])
    np.testing.assert_array_equal(grpc[1], http[1])
    assert grpc[2] == http[2]


def _settled_statistics(embedder: TritonEmbedder, before: dict[str, Any], inferences: int) -> dict[str, Any]:
    """The model's statistics once ``inferences`` more are recorded (the server records a request just
    after answering it), polled for at most 5 s; the caller asserts on what it gets."""
    deadline = time.monotonic() + 5.0
    after = embedder.model.statistics()
    while int(after["inference_count"]) - int(before["inference_count"]) < inferences:
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
        after = embedder.model.statistics()
    return after


def test_client_splits_requests_at_the_model_max_batch_size(triton_server: TritonServer) -> None:
    embedder = TritonEmbedder(target(triton_server, "grpc", "embedder"), name="e5", dim=384, batch_size=1000)
    texts = [f"memory number {i}" for i in range(70)]
    try:
        assert embedder.model.info().max_batch_size == 64
        before = embedder.model.statistics()
        vectors = embedder.embed_passages(texts)
        after = _settled_statistics(embedder, before, 70)
    finally:
        embedder.close()
    assert vectors.shape == (70, 384)
    assert int(after["inference_count"]) - int(before["inference_count"]) == 70
    requests = int(after["inference_stats"]["success"]["count"]) - int(
        before["inference_stats"]["success"]["count"]
    )
    assert requests == 2  # 64 + 6 rows


def test_dynamic_batching_merges_concurrent_requests(triton_server: TritonServer) -> None:
    embedder = TritonEmbedder(target(triton_server, "grpc", "embedder"), name="e5", dim=384)
    n = 24
    barrier = threading.Barrier(n, timeout=30)

    def one(i: int) -> np.ndarray:
        embedder.model.info()  # connect first, so the requests below leave together
        barrier.wait()
        return embedder.embed_passages([f"concurrent request {i} about camping"])

    try:
        before = embedder.model.statistics()
        with ThreadPoolExecutor(max_workers=n) as pool:
            vectors = list(pool.map(one, range(n), timeout=120))
        after = _settled_statistics(embedder, before, n)
    finally:
        embedder.close()
    inferences = int(after["inference_count"]) - int(before["inference_count"])
    executions = int(after["execution_count"]) - int(before["execution_count"])
    assert all(v.shape == (1, 384) for v in vectors)
    assert inferences == n
    assert executions < inferences, (
        f"{executions} executions for {inferences} inferences: nothing was batched"
    )


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_llm_streams_text_through_the_decoupled_model(triton_server: TritonServer, protocol: Proto) -> None:
    llm = TritonLLM(target(triton_server, protocol, "llm"), name="standin-echo")
    prompt = "Review these memories: Caroline joined a support group; Melanie paints sunrises."
    params = SamplingParams(max_tokens=10)
    try:
        config = llm.model.once(
            "config", lambda c: c.get_model_config("llm", **({"as_json": True} if protocol == "grpc" else {}))
        )
        pieces = list(llm.stream(prompt, params))
        whole = llm.complete(prompt, SamplingParams(max_tokens=64, stop=("paints",)))
    finally:
        llm.close()
    assert config.get("config", config)["model_transaction_policy"]["decoupled"] is True
    assert pieces == standin_pieces(prompt, 10)[0]
    assert len(pieces) == 10  # one response per piece, streamed
    assert "".join(pieces) == StandinLLM().complete(prompt, params)
    assert whole == StandinLLM().complete(prompt, SamplingParams(max_tokens=64, stop=("paints",)))
    assert "paints" not in whole


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_standin_reranker_on_triton_matches_the_local_backend(
    triton_server: TritonServer, local_e5: LocalE5Embedder, protocol: Proto
) -> None:
    reranker = TritonReranker(
        target(triton_server, protocol, "reranker"), name="standin-e5-cosine", batch_size=2
    )
    query = "what does the user prefer when travelling?"
    try:
        scores = reranker.score(query, TEXTS)
    finally:
        reranker.close()
    assert scores.shape == (len(TEXTS),)
    assert scores.dtype == np.float32
    np.testing.assert_allclose(scores, EmbeddingCosineReranker(local_e5).score(query, TEXTS), atol=1e-5)
    assert int(np.argmax(scores[:4])) == 3  # the travel preference ranks first


def test_backends_built_from_settings_serve_the_same_interface(
    triton_server: TritonServer, local_e5: LocalE5Embedder
) -> None:
    embedder = build_embedder(
        EmbedderSettings(backend="triton", triton_url=triton_server.http_url, triton_protocol="http")
    )
    reranker = build_reranker(RerankerSettings(backend="triton", triton_url=triton_server.grpc_url))
    llm = build_llm(LLMSettings(backend="triton", triton_url=triton_server.grpc_url, max_tokens=5))
    assert isinstance(embedder, TritonEmbedder)
    assert isinstance(reranker, TritonReranker)
    assert isinstance(llm, TritonLLM)
    try:
        np.testing.assert_allclose(embedder.embed_queries(["hi"]), local_e5.embed_queries(["hi"]), atol=1e-5)
        assert reranker.score("hi", ["hello", "bye"]).shape == (2,)
        assert llm.complete("one two three") == StandinLLM().complete(
            "one two three", SamplingParams(max_tokens=5)
        )
    finally:
        embedder.close()
        reranker.close()
        llm.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_unknown_model_is_a_configuration_error_naming_model_and_url(
    triton_server: TritonServer, protocol: Proto
) -> None:
    embedder = TritonEmbedder(target(triton_server, protocol, "no-such-embedder"), name="e5", dim=384)
    with pytest.raises(ConfigurationError, match="no-such-embedder") as info:
        embedder.embed_passages(["hello"])
    assert triton_server.url(protocol) in str(info.value)
    assert "TRITON_MODEL" in str(info.value)


def test_wrong_dimension_is_a_configuration_error(triton_server: TritonServer) -> None:
    embedder = TritonEmbedder(target(triton_server, "grpc", "embedder"), name="e5", dim=768)
    with pytest.raises(ConfigurationError, match="DIM=768"):
        embedder.embed_passages(["hello"])


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("model", ["embedder", "reranker", "llm"])
def test_no_server_is_a_retryable_error_naming_model_url_and_what_to_check(
    protocol: Proto, model: str
) -> None:
    url = f"127.0.0.1:{free_port()}"  # nothing listens there
    t = TritonTarget(url, protocol, model, timeout_s=2.0, max_attempts=2, backoff_max_s=0.05)
    calls = {
        "embedder": lambda: TritonEmbedder(t, name="e5", dim=384).embed_passages(["hello"]),
        "reranker": lambda: TritonReranker(t, name="r").score("q", ["p"]),
        "llm": lambda: list(TritonLLM(t, name="l").stream("hello")),
    }
    with pytest.raises(ModelUnavailableError) as info:
        calls[model]()
    message = str(info.value)
    assert f"'{model}'" in message
    assert f"{protocol}://{url}" in message
    assert "tritonserver is running" in message


def test_readiness_reports_the_model_config(triton_server: TritonServer) -> None:
    model = TritonModel(target(triton_server, "http", "reranker"))
    try:
        info = model.check_ready()
    finally:
        model.close()
    assert info.max_batch_size == 64
    assert info.output_dims["score"] == (1,)
    assert info.parameters["model_name"] == "standin-e5-cosine"
