"""Write-trigger heuristic and text features."""

from __future__ import annotations

import pytest

from hindsight.text import entities, intent, tags
from services.ingest.write_trigger import compress, decide

pytestmark = pytest.mark.unit


def test_chatter_is_skipped_and_facts_are_kept() -> None:
    assert not decide("Thanks!", "user").keep
    assert not decide("Wow, that sounds great!", "user").keep
    kept = decide("I went to the LGBTQ support group yesterday and it was so powerful.", "user")
    assert kept.keep
    assert kept.importance == pytest.approx(0.6)


def test_health_preference_is_most_important() -> None:
    allergy = decide("I am allergic to peanuts", "user")
    chatter = decide("lol yeah the weather is nice today", "user")
    assert allergy.importance == pytest.approx(0.75)
    assert "health" in allergy.features.tags
    assert allergy.importance > chatter.importance


def test_assistant_content_counts_less_than_the_same_user_statement() -> None:
    text = "I moved to Berlin last year for a new job at Siemens."
    assert decide(text, "assistant").importance == pytest.approx(decide(text, "user").importance - 0.05)


def test_entities_are_capitalised_runs_not_sentence_starts() -> None:
    assert entities("I met Jon Snow in New York yesterday.") == ("Jon Snow", "New York")
    assert entities("Yesterday was fun. Then we left.") == ()


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("I really love hiking", "preference"),
        ("We're going to Rome next week", "plan"),
        ("I adopted a puppy", "event"),
        ("My sister is a nurse", "fact"),
        ("What time is it?", "question"),
        ("cool", "chatter"),
    ],
)
def test_intent_rules(text: str, label: str) -> None:
    assert intent(text) == label


def test_health_tag_in_english_and_chinese() -> None:
    assert tags("my doctor said so") == ("health",)
    assert tags("我对花生过敏") == ("health",)
    assert tags("nice weather") == ()


def test_compress_collapses_whitespace_and_cuts() -> None:
    assert compress("a   b\n c") == "a b c"
    long = compress("x" * 500, max_chars=10)
    assert len(long) == 10
    assert long.endswith("…")


@pytest.mark.parametrize(
    "text",
    [
        "I now work at a bakery in Porto.",
        "I switched jobs; I now work at a bakery in Porto.",
        "Please never book me on Ryanair again.",
    ],
)
def test_statements_a_newcomer_saw_skipped_are_kept(text: str) -> None:
    # found by a newcomer test: these were scored as chatter and only kept in working memory
    assert decide(text, "user").keep
