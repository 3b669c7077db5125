"""Benchmark baselines (dense e5, bm25s, RRF hybrid) on a tiny hand-made conversation, with the real
e5 embedder and the real bm25s library."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hindsight.eval.baselines import EmbeddingCache, Turn, TurnIndex, conversation_turns, rrf
from hindsight.eval.locomo import conversation
from hindsight.inference.embedder import LocalE5Embedder

pytestmark = pytest.mark.integration

TURNS = [
    Turn("D1:1", "Maria: Which home team do you support? I keep forgetting."),
    Turn("D1:2", "Jon: I adopted a little puppy from the shelter, a beagle named Max."),
    Turn("D1:3", "Maria: We are presenting our paper at the Zanzibar symposium in March."),
    Turn("D1:4", "Jon: My sister bakes sourdough bread every weekend."),
    Turn("D1:5", "Maria: I went to a conference about marine biology on an island last spring."),
    Turn("D1:6", "Maria: Work, work, work. Does it ever get easier? I get so tired of how work goes."),
]


@pytest.fixture(scope="module")
def embedder() -> LocalE5Embedder:
    return LocalE5Embedder()


@pytest.fixture(scope="module")
def index(embedder, tmp_path_factory: pytest.TempPathFactory) -> TurnIndex:  # type: ignore[no-untyped-def]
    cache = EmbeddingCache(embedder, tmp_path_factory.mktemp("bench-cache"))
    return TurnIndex(TURNS, embedder, cache)


def test_bm25_ranks_the_exact_keyword_turn_first(index: TurnIndex) -> None:
    out = index.search("When is the Zanzibar symposium?", k=3)
    assert out["bm25"].refs[0] == ["D1:3"]
    # no query term in these turns: BM25 does not return them at all
    assert ["D1:4"] not in out["bm25"].refs


def test_dense_ranks_a_paraphrase_first(index: TurnIndex) -> None:
    query = "Which animal does Jon keep at home?"
    out = index.search(query, k=3)
    assert out["dense"].refs[0] == ["D1:2"]  # the puppy: no shared word but "Jon"
    assert out["bm25"].refs[0] == ["D1:1"]  # "which", "home", "keep": the keyword match wins BM25
    assert out["dense"].latency_ms > 0
    assert out["hybrid"].latency_ms >= out["dense"].latency_ms


def test_rrf_fusion_order_on_a_fixed_example() -> None:
    # dense [0,1,2,3], bm25 [3,2,0]:
    # 0: 1/61+1/63 = .032266, 3: 1/64+1/61 = .032018, 2: 1/63+1/62 = .031999, 1: 1/62 = .016129
    assert rrf([[0, 1, 2, 3], [3, 2, 0]]) == [0, 3, 2, 1]
    # ties break by id
    assert rrf([[1, 0], [0, 1]]) == [0, 1]
    # a different k changes the order: k=0 -> 0: 1+1/3, 3: 1/4+1, 2: 1/3+1/2, 1: 1/2
    assert rrf([[0, 1, 2, 3], [3, 2, 0]], k=0) == [0, 3, 2, 1]
    assert rrf([[5, 6], []]) == [5, 6]


def test_hybrid_is_the_rrf_of_dense_and_bm25(index: TurnIndex, embedder) -> None:  # type: ignore[no-untyped-def]
    query = "When is the Zanzibar symposium?"
    out = index.search(query, k=5)
    qvec = embedder.embed_queries([query])[0]
    expected = rrf([index.dense_ranking(qvec, 100), index.bm25_ranking(query, 100)])[:5]
    assert out["hybrid"].refs == [[TURNS[i].ref] for i in expected]
    assert out["hybrid"].tokens == sum(index._tokens[i] for i in expected)


def test_embedding_cache_persists_and_is_reused(embedder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    texts = [t.text for t in TURNS[:2]]
    first = EmbeddingCache(embedder, tmp_path).passages(texts)
    assert first.shape == (2, 384)
    again = EmbeddingCache(embedder, tmp_path)
    assert len(again) == 2
    np.testing.assert_allclose(again.passages(texts), first)


def test_documents_are_speaker_text_and_image_caption() -> None:
    sample = {
        "sample_id": "conv-t",
        "conversation": {
            "speaker_a": "A",
            "speaker_b": "B",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "A", "dia_id": "D1:1", "text": "Hi B!"},
                {"speaker": "B", "dia_id": "D1:2", "text": "Look", "blip_caption": "a photo of a cat"},
            ],
        },
        "qa": [],
    }
    assert conversation_turns(conversation(sample)) == [
        Turn("D1:1", "A: Hi B!"),
        Turn("D1:2", "B: Look [shared an image: a photo of a cat]"),
    ]
