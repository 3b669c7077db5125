"""Token budget and BM25 sparse vectors."""

from __future__ import annotations

import pytest

from hindsight.lexical import LexicalEncoder, segment_cjk
from hindsight.recall.budget import count_tokens, fit
from hindsight.recall.rank import RecalledMemory

pytestmark = pytest.mark.unit


def mem(mid: str, content: str, speaker: str | None = None) -> RecalledMemory:
    payload = {"content": content, "speaker": speaker}
    return RecalledMemory(mid, payload, 0.9, 0.5, 1.0, 0.5)


def test_budget_cuts_at_the_first_memory_that_does_not_fit() -> None:
    words = {"a": 10, "b": 20, "c": 5, "d": 1}
    memories = [mem(k, k) for k in words]
    kept, total, truncated = fit(memories, 30, counter=lambda text: words[text])
    assert [m.id for m in kept] == ["a", "b"]
    assert [m.tokens for m in kept] == [10, 20]
    assert total == 30
    assert truncated


def test_budget_counts_the_speaker_prefix_with_a_real_tokenizer() -> None:
    plain = count_tokens("I adopted a dog")
    assert 3 <= plain <= 8
    kept, total, truncated = fit([mem("a", "I adopted a dog", "Caroline")], 2000)
    assert total == count_tokens("Caroline: I adopted a dog") > plain
    assert not truncated
    assert kept[0].tokens == total


def test_bm25_stems_and_drops_stop_words() -> None:
    enc = LexicalEncoder()
    doc = enc.document("Caroline is running the support groups")
    assert set(enc.query("group run").indices) <= set(doc.indices)
    assert not enc.query("the is")


def test_chinese_is_segmented_so_a_word_matches_a_longer_compound() -> None:
    enc = LexicalEncoder()
    assert "故宫" in segment_cjk("故宫博物院").split()
    assert set(enc.query("故宫").indices) <= set(enc.document("我去了故宫博物院").indices)
