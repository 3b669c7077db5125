"""Judge logic without a model: probabilities from log-probabilities, the verdict policy, features,
settings and backend selection, and invalid replies (the in-process stand-in LLM answers in prose)."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from hindsight.errors import ConfigurationError
from hindsight.inference.chat import ChatRequest, TextLLMChat, TokenLogprob, chatml, parse_reply
from hindsight.inference.judge import (
    JudgePair,
    Statement,
    build_chat_model,
    build_fact_extractor,
    build_judge,
)
from hindsight.inference.judge_features import pair_features
from hindsight.inference.llm import StandinLLM
from hindsight.inference.llm_judge import JudgePolicy, LLMFactExtractor, LLMJudge, relation_probabilities
from hindsight.settings import AllSettings, JudgeSettings, LLMSettings

pytestmark = pytest.mark.unit

T0 = datetime(2025, 1, 1, tzinfo=UTC)
T1 = datetime(2025, 2, 1, tzinfo=UTC)


def tok(text: str, *alts: tuple[str, float]) -> TokenLogprob:
    return TokenLogprob(text, alts[0][1] if alts else 0.0, tuple(alts))


def test_relation_probabilities_renormalise_over_relation_prefixes() -> None:
    text = '{"relation":"update"}'
    tokens = (
        tok('{"relation":"'),
        tok("update", ("update", math.log(0.5)), ("ref", math.log(0.2)), ("u", math.log(0.2)), ("Up", -9.0)),
        tok('"}'),
    )
    [probs] = relation_probabilities(tokens, text)
    # "u" is ambiguous (update / unrelated) and counts for neither; "Up" counts for update
    assert probs["update"] == pytest.approx((0.5 + math.exp(-9.0)) / (0.5 + 0.2 + math.exp(-9.0)), rel=1e-6)
    assert probs["refinement"] == pytest.approx(0.2 / (0.5 + 0.2 + math.exp(-9.0)), rel=1e-6)
    assert probs["same"] == 0.0


def test_relation_probabilities_for_a_batch_and_for_misaligned_tokens() -> None:
    text = '{"relations":["same","unrelated"]}'
    tokens = (
        tok('{"relations":["'),
        tok("same", ("same", -0.1), ("update", -2.5)),
        tok('","'),
        tok("un", ("un", -0.2), ("ref", -1.8)),
        tok("related"),
        tok('"]}'),
    )
    first, second = relation_probabilities(tokens, text)
    assert first["same"] > 0.9
    assert second["unrelated"] > 0.8
    assert relation_probabilities(tokens[:2], text) == []  # tokens do not spell the text: no guess


def test_a_change_word_lowers_the_evidence_needed_to_supersede() -> None:
    policy = JudgePolicy(update_threshold=0.65, cue_update_threshold=0.4)
    probs = {"update": 0.45, "refinement": 0.5, "same": 0.03, "unrelated": 0.02}
    assert policy.decide(probs, "refinement")[0] == "refinement"
    assert policy.decide(probs, "refinement", cue=True) == ("update", 0.45)
    low = {"update": 0.3, "refinement": 0.6, "same": 0.05, "unrelated": 0.05}
    assert policy.decide(low, "refinement", cue=True)[0] == "refinement"


def test_policy_needs_more_evidence_to_supersede_than_to_keep() -> None:
    policy = JudgePolicy(update_threshold=0.7, cue_update_threshold=0.7, min_confidence=0.5)
    assert policy.decide({"update": 0.8, "refinement": 0.1, "same": 0.05, "unrelated": 0.05}, "update") == (
        "update",
        0.8,
    )
    relation, _ = policy.decide({"update": 0.6, "refinement": 0.3, "same": 0.05, "unrelated": 0.05}, "update")
    assert relation == "unsure"  # the model's top answer, but not sure enough to hide a memory
    assert policy.decide({"update": 0.2, "refinement": 0.1, "same": 0.1, "unrelated": 0.6}, "unrelated")[
        0
    ] == ("unrelated")
    assert policy.decide({"update": 0.3, "refinement": 0.3, "same": 0.2, "unrelated": 0.2}, "refinement")[
        0
    ] == ("unsure")
    # without log-probabilities the bare answer counts with the fallback confidence
    assert JudgePolicy(update_threshold=0.7, fallback_confidence=0.6).decide(None, "update") == (
        "unsure",
        0.6,
    )
    assert JudgePolicy(update_threshold=0.7, fallback_confidence=0.8).decide(None, "update") == (
        "update",
        0.8,
    )
    assert JudgePolicy(fallback_confidence=0.6).decide(None, "same") == ("same", 0.6)


def test_features_see_retractions_numbers_and_other_names() -> None:
    f = pair_features(
        JudgePair(Statement("My budget is 5,000 yuan.", T0), Statement("预算改成8000元了。", T1), 0.8)
    )
    assert f.retraction
    assert f.numbers_differ
    assert f.numbers_older == {"5000"}
    assert f.numbers_newer == {"8000"}
    g = pair_features(
        JudgePair(Statement("Tom's birthday is May 3.", T0), Statement("Lisa's birthday is May 9.", T1), 0.9)
    )
    assert not g.retraction
    assert "different names" in g.cues()
    h = pair_features(JudgePair(Statement("I like tea.", T0), Statement("I like green tea.", T1), 0.9))
    assert h.cues() == ""


def test_invalid_replies_are_retried_then_unsure() -> None:
    chat = TextLLMChat(StandinLLM(defaults=None))
    judge = LLMJudge(chat, max_attempts=3)
    [verdict] = judge.judge([JudgePair(Statement("a", T0), Statement("b", T1), 0.5)])
    assert verdict.relation == "unsure"
    assert verdict.confidence == 0.0
    assert "invalid reply" in verdict.reason
    assert judge.calls == 3
    extractor = LLMFactExtractor(chat, max_attempts=2)
    assert extractor.extract([Statement("I live in Oslo.", T0)]) == [[]]
    assert extractor.lessons("t", "failure", "bad") == []
    assert extractor.calls == 4


def test_chatml_and_reply_parsing() -> None:
    prompt = chatml(({"role": "system", "content": "S"}, {"role": "user", "content": "U"}))
    assert prompt == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
    reply = parse_reply(
        {
            "choices": [
                {"message": {"content": "{}"}, "logprobs": {"content": [{"token": "{}", "logprob": -0.1}]}}
            ],
            "usage": {
                "prompt_tokens": 10,
                "completion_tokens": 1,
                "prompt_tokens_details": {"cached_tokens": 8},
            },
        },
        0.5,
    )
    assert (reply.text, reply.prompt_tokens, reply.cached_tokens, len(reply.logprobs)) == ("{}", 10, 8, 1)
    with pytest.raises(ConfigurationError):
        parse_reply({"oops": 1}, 0.0)
    body = ChatRequest(messages=({"role": "user", "content": "x"},), schema={"type": "object"}, slot=1).body(
        with_slot=False
    )
    assert "id_slot" not in body
    assert body["response_format"]["json_schema"]["schema"] == {"type": "object"}


def test_settings_and_backend_selection(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.setenv("HINDSIGHT_JUDGE_BACKEND", "llm")
    monkeypatch.setenv("HINDSIGHT_JUDGE_UPDATE_THRESHOLD", "0.8")
    monkeypatch.setenv("HINDSIGHT_MODELS_DIR", "/models")
    cfg = AllSettings()
    assert cfg.judge.backend == "llm"
    assert cfg.judge.update_threshold == 0.8
    assert str(cfg.judge.resolved_model_path()) == "/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    with pytest.raises(ConfigurationError, match="stand-in"):
        build_chat_model(JudgeSettings(backend="llm"), LLMSettings(backend="local"))
    with pytest.raises(ConfigurationError, match=r"setup\.sh"):
        build_chat_model(JudgeSettings(backend="local", model_path="/nonexistent/model.gguf"))
    judge = build_judge(JudgeSettings(backend="llm"), LLMSettings(backend="triton", triton_url="127.0.0.1:1"))
    assert judge.name == "llm-judge:standin-echo"  # built without contacting the server
    extractor = build_fact_extractor(JudgeSettings(backend="llm"), LLMSettings(backend="openai", model="m"))
    assert extractor.name == "llm-facts:m"


def test_extracted_values_must_rest_on_the_turn() -> None:
    from hindsight.inference.llm_judge import grounded  # noqa: PLC0415

    assert grounded("2018 Subaru Outback", "I drive a 2018 Subaru Outback.")
    assert grounded("tea only", "I'm not a coffee person, tea only.")
    assert grounded("高血压", "医生说我血压有点高，让我少吃盐。")
    assert grounded("去海南的旅行", "去海南的旅行取消了。")
    assert not grounded("nurse", "总结请一律用中文，控制在一页以内。")  # copied from a few-shot example
    assert not grounded("Maple Elementary", "I have a cat named Mochi.")


async def test_resources_share_one_chat_model_between_judge_and_extractor() -> None:
    from hindsight.runtime import make_broker, open_resources  # noqa: PLC0415
    from hindsight.settings import KafkaSettings  # noqa: PLC0415

    settings = AllSettings(
        kafka=KafkaSettings(bootstrap="127.0.0.1:1"),
        judge=JudgeSettings(backend="llm"),
        llm=LLMSettings(backend="openai", model="shared", openai_base_url="http://127.0.0.1:1/v1"),
    )
    async with open_resources(settings, make_broker(settings.kafka)) as resources:
        judge, extractor = resources.judge(), resources.fact_extractor()
        assert isinstance(judge, LLMJudge)
        assert isinstance(extractor, LLMFactExtractor)
        assert judge.chat_model is resources.chat_model()
        assert resources.judge() is judge  # built once per process
        assert extractor.name == "llm-facts:shared"
