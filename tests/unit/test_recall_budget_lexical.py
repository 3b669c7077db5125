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


def test_budget_uses_the_token_count_stored_at_write_and_counts_older_payloads() -> None:
    payload = {"content": "I adopted a dog", "speaker": "Caroline", "text_tokens": 1500}
    stored = RecalledMemory("s", payload, 0.9, 0.5, 1.0, 0.5)
    kept, total, truncated = fit([stored, mem("old", "I adopted a dog", "Caroline")], 2000)
    assert [m.tokens for m in kept] == [1500, count_tokens("Caroline: I adopted a dog")]
    assert total == 1500 + kept[1].tokens
    kept, total, truncated = fit([stored], 1000)  # over the budget by its stored count: an excerpt
    assert [m.trimmed for m in kept] == [True]
    assert total == kept[0].tokens <= 1000
    assert truncated


@pytest.mark.parametrize(
    "sentence",
    [
        "Caroline told Melanie about the adoption agency meeting and the paperwork it needs. ",
        "卡罗琳告诉梅兰妮她去了领养机构开会，还需要准备很多材料。",
    ],
    ids=["en", "zh"],
)
def test_a_first_memory_larger_than_the_whole_budget_comes_back_as_an_excerpt_not_nothing(
    sentence: str,
) -> None:
    # issue 13, defect 6: a 4,753-token memory was the one match and recall answered [] (truncated)
    long = sentence * 400
    first, second = mem("long", long, "Caroline"), mem("short", "I adopted a dog")
    kept, total, truncated = fit([first, second], 2000)
    assert truncated
    assert [m.id for m in kept] == ["long"]
    [cut] = kept
    assert cut.trimmed
    assert 1800 <= cut.tokens == total <= 2000  # the budget is used, not wasted
    assert cut.tokens == count_tokens("Caroline: " + cut.payload["content"])
    assert cut.payload["content"].endswith("…")
    assert long.startswith(cut.payload["content"][:-1].rstrip())
    assert first.payload["content"] == long  # the caller's memory is not changed
    kept, _, truncated = fit([second, first], 2000)  # a later memory that does not fit is left out
    assert [(m.id, m.trimmed) for m in kept] == [("short", False)]
    assert truncated


def test_payload_stores_the_token_count_the_budget_would_count() -> None:
    from datetime import UTC, datetime  # noqa: PLC0415

    from hindsight.records import from_payload, to_payload  # noqa: PLC0415
    from schemas import Memory  # noqa: PLC0415

    now = datetime(2026, 1, 1, tzinfo=UTC)
    memory = Memory(
        id="00000000-0000-0000-0000-000000000001",
        tenant_id="t",
        user_id="u",
        agent_id="a",
        session_id="s",
        type="episodic",
        content="I adopted a dog named Max last spring",
        source="user",
        speaker="Caroline",
        importance=0.5,
        confidence=0.8,
        created_at=now,
        stored_at=now,
        last_accessed_at=now,
    )
    payload = to_payload(memory)
    assert payload["text_tokens"] == count_tokens("Caroline: I adopted a dog named Max last spring")
    assert from_payload(payload) == memory


def test_bm25_stems_and_drops_stop_words() -> None:
    enc = LexicalEncoder()
    doc = enc.document("Caroline is running the support groups")
    assert set(enc.query("group run").indices) <= set(doc.indices)
    assert not enc.query("the is")


def test_chinese_is_segmented_so_a_word_matches_a_longer_compound() -> None:
    enc = LexicalEncoder()
    assert "故宫" in segment_cjk("故宫博物院").split()
    assert set(enc.query("故宫").indices) <= set(enc.document("我去了故宫博物院").indices)


def test_chinese_function_words_are_not_lexical_evidence() -> None:
    enc = LexicalEncoder()
    question = set(enc.query("用户的饮食习惯是什么？").indices)
    for filler in ("好的", "嗯", "还有别的需要吗？", "好了吗"):
        assert not question & set(enc.document(filler).indices), filler
    assert question & set(enc.document("他的饮食很清淡").indices)  # 饮食 still matches
    assert set(enc.query("买房吗").indices) <= set(enc.document("我们打算明年买房").indices)
    assert segment_cjk("我吃素").split() == ["吃素"]
