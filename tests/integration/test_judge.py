"""Judge and fact-extractor backends against real models.

The local backend runs Qwen2.5-Coder-1.5B in-process (llama.cpp); the LLM backend talks to a real
OpenAI-compatible HTTP server serving that same model (``openai_server``), with
``response_format`` enforced by llama.cpp. Pairs are ones a weak judge gets wrong (a look-alike
about another person, a Chinese number update); every assertion could fail.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest

from hindsight.errors import ModelUnavailableError
from hindsight.inference.chat import ChatRequest, LlamaCppChat
from hindsight.inference.judge import (
    JudgePair,
    Statement,
    build_chat_model,
    build_fact_extractor,
    build_judge,
)
from hindsight.inference.llm_judge import LLMFactExtractor, LLMJudge
from hindsight.settings import JudgeSettings, LLMSettings

pytestmark = pytest.mark.integration

T0 = datetime(2025, 1, 10, 9, 0, tzinfo=UTC)
T1 = datetime(2025, 4, 2, 18, 30, tzinfo=UTC)


def pair(older: str, newer: str, cosine: float = 0.8) -> JudgePair:
    return JudgePair(Statement(older, T0), Statement(newer, T1), cosine)


UPDATES = [
    pair("I work as an engineer at Airbus.", "I moved to Siemens last month, new job."),
    pair("我的旅行预算是5000元。", "旅行预算提高到8000元了。"),
]
LOOKALIKE = pair(
    "My colleague Tom's birthday is on May 3.", "My colleague Lisa's birthday is on May 9.", 0.93
)


@pytest.fixture(scope="module")
def local_judge(local_chat: LlamaCppChat) -> LLMJudge:
    judge = build_judge(JudgeSettings(), chat=local_chat)
    assert isinstance(judge, LLMJudge)
    return judge


def test_local_judge_supersedes_updates_and_keeps_lookalikes(local_judge: LLMJudge) -> None:
    verdicts = local_judge.judge([*UPDATES, LOOKALIKE])
    assert [v.relation for v in verdicts] == ["update", "update", "unrelated"]
    assert all(0.0 <= v.confidence <= 1.0 for v in verdicts)
    assert verdicts[0].backend == "llm-judge:qwen2.5-coder-1.5b-instruct-q4_k_m"
    assert "update" in verdicts[0].reason  # the model's distribution is recorded


def test_openai_backend_serves_the_same_verdicts_schema_constrained(openai_server: str) -> None:
    llm = LLMSettings(backend="openai", openai_base_url=openai_server, model="qwen-test", timeout_s=600)
    judge = build_judge(JudgeSettings(backend="llm", pairs_per_prompt=1), llm)
    verdicts = judge.judge([UPDATES[0], LOOKALIKE])
    assert [v.relation for v in verdicts] == ["update", "unrelated"]
    assert judge.name == "llm-judge:qwen-test"


def test_openai_backend_batches_pairs_in_one_request(openai_server: str) -> None:
    llm = LLMSettings(backend="openai", openai_base_url=openai_server, model="qwen-test", timeout_s=600)
    judge = build_judge(JudgeSettings(backend="llm", pairs_per_prompt=3), llm)
    assert isinstance(judge, LLMJudge)
    verdicts = judge.judge([*UPDATES, LOOKALIKE])
    assert judge.calls == 1  # three pairs, one request
    assert len(verdicts) == 3
    assert verdicts[0].relation == "update"
    assert verdicts[2].relation != "update"


def test_local_model_call_past_its_bound_is_model_unavailable(local_chat: LlamaCppChat) -> None:
    request = ChatRequest(messages=({"role": "user", "content": "Count from 1 to 50."},), max_tokens=8)
    with pytest.raises(ModelUnavailableError, match="no answer within"):
        local_chat.handle(request.body(with_slot=False), timeout_s=0.001)


def test_a_call_queued_behind_another_is_bounded_from_its_start_not_from_its_submission(
    local_chat: LlamaCppChat,
) -> None:
    long = ChatRequest(
        messages=({"role": "user", "content": "Count from 1 to 200, comma-separated."},), max_tokens=64
    )
    short = ChatRequest(messages=({"role": "user", "content": "Say yes."},), max_tokens=1)
    with ThreadPoolExecutor(max_workers=1) as pool:
        started = time.monotonic()
        first = pool.submit(local_chat.handle, long.body(with_slot=False), timeout_s=300)
        time.sleep(0.3)  # the long call is on the model's thread now
        # its own work is a 1-token answer; the wait behind the long call is load, not a timeout
        reply = local_chat.handle(short.body(with_slot=False), timeout_s=4.0)
        waited = time.monotonic() - started
        assert first.result()["choices"][0]["message"]["content"]
    assert "choices" in reply
    assert waited > 4.0, f"the long call took {waited:.1f} s: too short to show the queue wait"


def test_a_call_queued_past_its_queue_bound_is_withdrawn(local_chat: LlamaCppChat) -> None:
    long = ChatRequest(
        messages=({"role": "user", "content": "Count from 1 to 200, comma-separated."},), max_tokens=32
    )
    short = ChatRequest(messages=({"role": "user", "content": "Say yes."},), max_tokens=1)
    with ThreadPoolExecutor(max_workers=1) as pool:
        first = pool.submit(local_chat.handle, long.body(with_slot=False), timeout_s=300)
        time.sleep(0.3)
        started = time.monotonic()
        with pytest.raises(ModelUnavailableError, match="withdrawn"):
            local_chat.handle(short.body(with_slot=False), timeout_s=60, queue_timeout_s=0.2)
        assert time.monotonic() - started < 2.0  # it did not wait for the long call
        assert first.result()["choices"]
    assert "choices" in local_chat.handle(short.body(with_slot=False), timeout_s=60)  # the model still serves


def test_openai_timeout_and_unreachable_server_are_model_unavailable(openai_server: str) -> None:
    slow = LLMSettings(
        backend="openai", openai_base_url=openai_server, model="q", timeout_s=0.001, max_attempts=1
    )
    with pytest.raises(ModelUnavailableError):
        build_judge(JudgeSettings(backend="llm"), slow).judge([LOOKALIKE])
    gone = LLMSettings(backend="openai", openai_base_url="http://127.0.0.1:9/v1", model="q", max_attempts=1)
    with pytest.raises(ModelUnavailableError):
        build_chat_model(JudgeSettings(backend="llm"), gone).chat(
            ChatRequest(messages=({"role": "user", "content": "hi"},))
        )


def test_local_extractor_finds_durable_facts_and_ignores_filler(local_chat: LlamaCppChat) -> None:
    extractor = build_fact_extractor(JudgeSettings(), chat=local_chat)
    assert isinstance(extractor, LLMFactExtractor)
    moved, filler, cancelled = extractor.extract(
        [
            Statement("I just moved to Munich with my wife Clara.", T0),
            Statement("ok, thanks! talk soon", T0),
            Statement("我们下个月不去日本了，行程已经取消。", T1),
        ]
    )
    assert any("Munich" in f.value for f in moved)
    assert filler == []
    assert cancelled
    assert any(f.negated for f in cancelled)


def test_local_lesson_writer_phrases_the_feedback(local_chat: LlamaCppChat) -> None:
    writer = LLMFactExtractor(local_chat)
    lessons = writer.lessons("book a flight to Rome", "failure", "Never put me in a middle seat again.")
    assert 1 <= len(lessons) <= 2
    assert any("seat" in lesson.text.lower() for lesson in lessons)
