"""Inference backends: settings, selection, batching arithmetic, error mapping, streaming retries,
the stand-in LLM, and the OpenAI-compatible client's wire format (httpx mock transport)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_none
from tritonclient.utils import InferenceServerException

from hindsight.errors import ConfigurationError, ModelUnavailableError
from hindsight.inference.embedder import build_embedder
from hindsight.inference.llm import SamplingParams, StandinLLM, build_llm, standin_pieces
from hindsight.inference.llm_openai import OpenAILLM
from hindsight.inference.llm_triton import TritonLLM
from hindsight.inference.reranker import EmbeddingCosineReranker
from hindsight.inference.streaming import retry_until_first
from hindsight.inference.triton_client import (
    ModelInfo,
    TritonModel,
    TritonTarget,
    batch_limit,
    bytes_column,
    chunks,
)
from hindsight.inference.triton_embedder import TritonEmbedder
from hindsight.settings import AllSettings, EmbedderSettings, LLMSettings, RerankerSettings

pytestmark = pytest.mark.unit


def test_triton_address_defaults_to_the_protocol_port() -> None:
    assert EmbedderSettings(triton_protocol="grpc").triton_address() == "127.0.0.1:8001"
    assert EmbedderSettings(triton_protocol="http").triton_address() == "127.0.0.1:8000"
    assert EmbedderSettings(triton_url="http://triton:8000/").triton_address() == "triton:8000"


def test_settings_read_their_own_env_prefixes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HINDSIGHT_EMBEDDER_BACKEND", "triton")
    monkeypatch.setenv("HINDSIGHT_RERANKER_ENABLED", "true")
    monkeypatch.setenv("HINDSIGHT_LLM_BACKEND", "openai")
    monkeypatch.setenv("HINDSIGHT_LLM_TRITON_PROTOCOL", "http")
    cfg = AllSettings()
    assert cfg.embedder.backend == "triton"
    assert cfg.reranker.enabled is True
    assert cfg.llm.backend == "openai"
    assert cfg.llm.triton_protocol == "http"
    assert cfg.embedder.triton_protocol == "grpc"


def test_triton_backend_is_built_without_contacting_the_server() -> None:
    embedder = build_embedder(EmbedderSettings(backend="triton", triton_url="127.0.0.1:1", dim=384))
    assert isinstance(embedder, TritonEmbedder)
    assert embedder.dim == 384
    assert embedder.name == "multilingual-e5-small-q4"
    assert embedder.embed_passages([]).shape == (0, 384)  # no request for nothing


def test_llm_backends_are_selected_by_settings() -> None:
    assert isinstance(build_llm(LLMSettings()), StandinLLM)
    assert isinstance(build_llm(LLMSettings(backend="triton")), TritonLLM)
    assert isinstance(build_llm(LLMSettings(backend="openai", model="qwen2.5:7b")), OpenAILLM)


def test_chunks_cover_the_input_in_pieces_of_at_most_size() -> None:
    assert chunks(70, 64) == [(0, 64), (64, 70)]
    assert chunks(0, 8) == []
    assert chunks(3, 0) == [(0, 1), (1, 2), (2, 3)]


def test_batch_limit_is_capped_by_the_model_max_batch_size() -> None:
    assert batch_limit(1000, ModelInfo(64, {}, {})) == 64
    assert batch_limit(8, ModelInfo(64, {}, {})) == 8
    assert batch_limit(8, ModelInfo(0, {}, {})) == 8  # a model that does not batch takes one request


def test_bytes_column_is_one_utf8_row_per_text() -> None:
    col = bytes_column(["a", "é"])
    assert col.shape == (2, 1)
    assert col[1, 0] == "é".encode()


@pytest.mark.parametrize(
    ("status", "message", "retryable"),
    [
        ("StatusCode.UNAVAILABLE", "failed to connect to all addresses", True),
        ("StatusCode.DEADLINE_EXCEEDED", "Deadline Exceeded", True),
        ("503", "server not ready", True),
        ("400", "Request for unknown model: 'embedder' has no available versions", True),
        ("StatusCode.INVALID_ARGUMENT", "unexpected inference input 'texts'", False),
        ("400", "unexpected shape for input 'text'", False),
    ],
)
def test_triton_errors_map_to_retryable_or_configuration(status: str, message: str, retryable: bool) -> None:
    model = TritonModel(TritonTarget("127.0.0.1:8001", "grpc", "embedder"))
    error = model.error_for("inference", InferenceServerException(message, status=status))
    assert isinstance(error, ModelUnavailableError if retryable else ConfigurationError)
    assert "'embedder'" in str(error)
    assert "grpc://127.0.0.1:8001" in str(error)


def test_transport_errors_are_retryable_and_say_what_to_check() -> None:
    model = TritonModel(TritonTarget("10.0.0.9:8000", "http", "llm", env_prefix="HINDSIGHT_LLM_"))
    error = model.error_for("stream", ConnectionRefusedError(111, "Connection refused"))
    assert isinstance(error, ModelUnavailableError)
    assert "HINDSIGHT_LLM_TRITON_URL" in str(error)
    assert "http://10.0.0.9:8000" in str(error)


def test_unknown_protocol_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="TRITON_PROTOCOL"):
        TritonModel(TritonTarget("x:1", "tcp", "embedder"))  # type: ignore[arg-type]


def _retrying(attempts: int) -> Retrying:
    return Retrying(
        retry=retry_if_exception_type(ModelUnavailableError),
        stop=stop_after_attempt(attempts),
        wait=wait_none(),
        reraise=True,
    )


def test_stream_is_retried_until_the_first_piece_arrives() -> None:
    opened: list[int] = []

    def open_stream() -> Iterator[str]:
        opened.append(1)
        if len(opened) < 3:
            raise ModelUnavailableError("down")
        yield from ["a", "b"]

    assert list(retry_until_first(open_stream, _retrying(5))) == ["a", "b"]
    assert len(opened) == 3


def test_stream_failing_after_the_first_piece_is_not_repeated() -> None:
    opened: list[int] = []

    def open_stream() -> Iterator[str]:
        opened.append(1)
        yield "a"
        raise ModelUnavailableError("broke mid-stream")

    got: list[str] = []
    with pytest.raises(ModelUnavailableError, match="mid-stream"):
        got.extend(retry_until_first(open_stream, _retrying(5)))
    assert got == ["a"]
    assert len(opened) == 1


def test_stream_gives_up_after_bounded_attempts() -> None:
    def open_stream() -> Iterator[str]:
        raise ModelUnavailableError("down")
        yield ""  # pragma: no cover - makes this a generator

    with pytest.raises(ModelUnavailableError):
        list(retry_until_first(open_stream, _retrying(3)))


def test_standin_reply_is_deterministic_and_cut_by_max_tokens_and_stop() -> None:
    pieces, finish = standin_pieces("one two three", 16)
    assert "".join(pieces) == "[stand-in] 3 words; last: one two three"
    assert finish == "stop"
    pieces, finish = standin_pieces("one two three", 3)
    assert pieces == ["[stand-in]", " 3", " words;"]
    assert finish == "length"
    pieces, finish = standin_pieces("one two three", 16, ("two",))
    assert "".join(pieces) == "[stand-in] 3 words; last: one "
    assert finish == "stop"
    assert StandinLLM().complete("x", SamplingParams(max_tokens=2)) == "[stand-in] 1"


def test_vllm_sampling_parameters_omit_an_empty_stop_list() -> None:
    assert SamplingParams(max_tokens=5).as_vllm() == {"max_tokens": 5, "temperature": 0.0}
    assert SamplingParams(stop=("\n",)).as_vllm()["stop"] == ["\n"]


class _FixedEmbedder:
    name = "fixed"
    dim = 2

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        table = {"near": [1.0, 0.0], "far": [0.0, 1.0], "opposite": [-1.0, 0.0]}
        return np.array([table[t] for t in texts], dtype=np.float32)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return np.array([[1.0, 0.0]] * len(texts), dtype=np.float32)


def test_standin_reranker_scores_are_query_passage_cosines() -> None:
    reranker = EmbeddingCosineReranker(_FixedEmbedder())
    scores = reranker.score("q", ["far", "near", "opposite"])
    assert scores.dtype == np.float32
    np.testing.assert_allclose(scores, [0.0, 1.0, -1.0])
    assert reranker.score("q", []).shape == (0,)


def test_standin_reranker_uses_the_vectors_recall_already_holds() -> None:
    """Given the query and passage vectors, the stand-in embeds nothing (the fixed embedder would
    give other scores) and scores with them; a row count that does not match is refused."""
    reranker = EmbeddingCosineReranker(_FixedEmbedder())
    vectors = np.array([[0.6, 0.8], [0.0, 1.0]], dtype=np.float32)
    query = np.array([0.0, 1.0], dtype=np.float32)
    scores = reranker.score("q", ["far", "near"], query_vector=query, passage_vectors=vectors)
    np.testing.assert_allclose(scores, [0.8, 1.0])
    with pytest.raises(ValueError, match="2 rows for 3 passages"):
        reranker.score("q", ["a", "b", "c"], query_vector=query, passage_vectors=vectors)


def test_reranker_settings_default_to_the_documented_standin() -> None:
    settings = RerankerSettings()
    assert settings.enabled is False
    assert settings.model == "standin-e5-cosine"
    assert 20 <= settings.top_n <= 50


# -- OpenAI-compatible client over a mock transport -------------------------------------------------


def _openai(handler: httpx.MockTransport, attempts: int = 3) -> OpenAILLM:
    return OpenAILLM(
        "http://llm.test/v1",
        model="qwen",
        api_key="k",
        max_attempts=attempts,
        client=httpx.Client(transport=handler),
    )


def _sse(*pieces: str) -> bytes:
    chunks_ = [json.dumps({"choices": [{"delta": {"content": p}}]}) for p in pieces]
    return "".join(f"data: {c}\n\n" for c in chunks_).encode() + b"data: [DONE]\n\n"


def test_openai_stream_sends_chat_request_and_yields_deltas() -> None:
    seen: list[dict[str, object]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        assert request.url == "http://llm.test/v1/chat/completions"
        assert request.headers["Authorization"] == "Bearer k"
        seen.append(json.loads(request.content))
        return httpx.Response(
            200, content=_sse("Hel", "lo", ""), headers={"content-type": "text/event-stream"}
        )

    llm = _openai(httpx.MockTransport(handle))
    assert list(llm.stream("hi", SamplingParams(max_tokens=7, stop=("\n",)))) == ["Hel", "lo"]
    assert seen[0] == {
        "model": "qwen",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 7,
        "temperature": 0.0,
        "stream": True,
        "stop": ["\n"],
    }


def test_openai_complete_retries_503_then_returns_the_message() -> None:
    calls: list[int] = []

    def handle(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if len(calls) == 1:
            return httpx.Response(503, text="overloaded")
        assert json.loads(request.content)["stream"] is False
        return httpx.Response(200, json={"choices": [{"message": {"content": "ok"}}]})

    assert _openai(httpx.MockTransport(handle)).complete("hi") == "ok"
    assert len(calls) == 2


def test_openai_bad_key_is_a_configuration_error_naming_the_url() -> None:
    llm = _openai(httpx.MockTransport(lambda _: httpx.Response(401, text="bad key")))
    with pytest.raises(ConfigurationError, match=r"llm\.test/v1/chat/completions.*401"):
        list(llm.stream("hi"))


def test_openai_unreachable_server_is_retryable_after_bounded_attempts() -> None:
    calls: list[int] = []

    def handle(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        raise httpx.ConnectError("refused", request=request)

    with pytest.raises(ModelUnavailableError, match="HINDSIGHT_LLM_OPENAI_BASE_URL"):
        _openai(httpx.MockTransport(handle), attempts=2).complete("hi")
    assert len(calls) == 2


def test_local_embedder_runs_each_lane_on_its_own_thread_whoever_calls() -> None:
    """Each e5 engine runs on its own thread (its OpenMP team is bound to the first caller):
    queries on the query lane, passages on the passage lane, whichever thread calls; a query
    gives the same vector from any thread, and the same as the passage lane's engine would."""
    import threading  # noqa: PLC0415
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    from hindsight.inference.embedder import LocalE5Embedder  # noqa: PLC0415

    embedder = LocalE5Embedder()
    seen: dict[str, set[str]] = {"query": set(), "passage": set()}
    assert embedder._queries is not None
    query_model, passage_model = embedder._queries.model, embedder._model
    original_query, original_passage = query_model.query, passage_model.passage

    def spy_query(texts: list[str]) -> object:
        seen["query"].add(threading.current_thread().name)
        return original_query(texts)

    def spy_passage(texts: list[str]) -> object:
        seen["passage"].add(threading.current_thread().name)
        return original_passage(texts)

    query_model.query = spy_query
    passage_model.passage = spy_passage
    here = embedder.embed_queries(["where did Caroline move?"])
    with ThreadPoolExecutor(3) as pool:
        there = list(pool.map(lambda _: embedder.embed_queries(["where did Caroline move?"]), range(3)))
        passages = list(pool.map(lambda _: embedder.embed_passages(["Caroline moved to Lisbon."]), range(2)))
    assert seen == {"query": {"hindsight-e5-query"}, "passage": {next(iter(seen["passage"]))}}
    assert next(iter(seen["passage"])).startswith("hindsight-e5_")
    for vectors in there:
        np.testing.assert_array_equal(vectors, here)
    np.testing.assert_allclose(here[0], passage_model.query(["where did Caroline move?"])[0], atol=1e-6)
    assert passages[0].shape == (1, 384)
    np.testing.assert_array_equal(passages[0], passages[1])


async def test_concurrent_queries_are_embedded_together_with_the_vectors_of_single_calls() -> None:
    """Queries waiting while the query engine works go in its next call as one batch; each caller
    gets exactly the vector a call of its own would give."""
    import asyncio  # noqa: PLC0415

    from hindsight.inference.embedder import LocalE5Embedder, embed_queries_async  # noqa: PLC0415

    embedder = LocalE5Embedder(batch_size=8)
    assert embedder._queries is not None
    questions = [f"question {i}: where did the user travel in May?" for i in range(12)]
    questions += ["我下个月要去哪里出差？", "hi"]
    alone = [embedder.embed_queries([q])[0] for q in questions]
    calls_before = embedder._queries.batches
    together = await asyncio.gather(*(embed_queries_async(embedder, [q]) for q in questions))
    calls = embedder._queries.batches - calls_before
    assert 2 <= calls < len(questions)  # at most 8 per call, and fewer calls than queries
    for single, batched in zip(alone, together, strict=True):
        assert batched.shape == (1, 384)
        np.testing.assert_allclose(batched[0], single, atol=1e-6)


async def test_query_cache_returns_the_model_vectors_counts_hits_and_evicts_least_recent() -> None:
    from hindsight.inference.embedder import (  # noqa: PLC0415
        CachedQueryEmbedder,
        LocalE5Embedder,
        embed_queries_async,
    )

    inner = LocalE5Embedder()
    cache = CachedQueryEmbedder(inner, capacity=2)
    first = await embed_queries_async(cache, ["where is Ana?", "Ana 在哪里？", "where is Ana?"])
    assert (cache.hits, cache.misses, len(cache)) == (0, 3, 2)
    np.testing.assert_array_equal(first[0], first[2])
    np.testing.assert_allclose(first, inner.embed_queries(["where is Ana?", "Ana 在哪里？", "where is Ana?"]))
    again = cache.embed_queries(["Ana 在哪里？"])
    assert (cache.hits, cache.misses) == (1, 3)
    np.testing.assert_array_equal(again[0], first[1])
    cache.embed_queries(["a third question"])  # evicts "where is Ana?" (least recently used)
    cache.embed_queries(["where is Ana?"])
    assert (cache.hits, cache.misses, len(cache)) == (1, 5, 2)
    assert cache.embed_passages(["a passage"]).shape == (1, 384)  # passages pass through uncached
    assert (cache.hits, cache.misses) == (1, 5)
    assert cache.name == inner.name
    assert cache.dim == 384


def test_triton_target_from_settings_names_each_models_env_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    from hindsight.inference.triton_client import TritonTarget  # noqa: PLC0415
    from hindsight.settings import LLMSettings, RerankerSettings  # noqa: PLC0415

    monkeypatch.setenv("HINDSIGHT_RERANKER_TRITON_URL", "http://gpu-1:8000/")
    monkeypatch.setenv("HINDSIGHT_RERANKER_TRITON_PROTOCOL", "http")
    reranker = TritonTarget.from_settings(RerankerSettings())
    assert (reranker.url, reranker.protocol, reranker.model) == ("gpu-1:8000", "http", "reranker")
    assert "HINDSIGHT_RERANKER_TRITON_URL" in reranker.hint()
    llm = TritonTarget.from_settings(LLMSettings())
    assert (llm.model, llm.env_prefix, llm.timeout_s) == ("llm", "HINDSIGHT_LLM_", LLMSettings().timeout_s)
