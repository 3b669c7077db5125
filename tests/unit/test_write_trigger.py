"""Write-trigger heuristic and text features."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hindsight.text import entities, features, intent, tags
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
        ("I drive a 2015 VW Golf.", "fact"),  # possession and habits are durable facts
        ("We speak Portuguese at home", "fact"),
        ("I take metformin every morning", "fact"),
        ("What time is it?", "question"),
        ("cool", "chatter"),
    ],
)
def test_intent_rules(text: str, label: str) -> None:
    assert intent(text) == label


@pytest.mark.parametrize(
    "text",
    [
        "The concert is on March 3.",  # a date makes a plain sentence specific
        "The standup moved to 9:30.",
        "婚宴定在十月五号。",
        "我们每周五吃火锅。",
        "I collect vintage cameras.",  # a first-person statement no keyword rule knows
        "我收藏老式相机。",
        "我不喝酒。",
        "Our landlord raised the rent.",
        "Reserved a table for two at Nopa.",  # an agent's step report
        "已把会议改到周四。",
        "The cat is called Miso.",
    ],
)
def test_statements_no_keyword_rule_names_are_still_durable(text: str) -> None:
    assert intent(text) in ("fact", "event", "plan")
    assert decide(text, "user").keep


@pytest.mark.parametrize(
    "text",
    [
        "I see what you mean",
        "I hope so!",
        "I think so too",
        "我也觉得",
        "我知道了",
        "我先去忙了",
        "我也是这么想的",
        "好的谢谢你",
    ],
)
def test_acknowledgements_and_hedges_stay_chatter(text: str) -> None:
    assert intent(text) == "chatter"
    assert not decide(text, "user").keep


def test_health_tag_in_english_and_chinese() -> None:
    assert tags("my doctor said so") == ("health",)
    assert tags("我对花生过敏") == ("health",)
    assert tags("nice weather") == ()


@pytest.mark.parametrize(
    "text",
    [
        "I work as a nurse at St Mary's hospital.",
        "My sister is a doctor in Leeds.",
        "I got a job at the clinic on Elm Street.",
        "He started night shifts at the city hospital.",
        "我在市医院上班。",
    ],
)
def test_a_job_at_a_hospital_is_not_a_health_matter(text: str) -> None:
    assert tags(text) == ()


@pytest.mark.parametrize(
    "text",
    [
        "I was in hospital after a fall.",
        "The doctor says my knee needs surgery.",
        "I work at the hospital and my asthma got worse.",
        "I'm going to the hospital tomorrow for a checkup.",
        "医生说我需要做手术。",
    ],
)
def test_health_matters_keep_the_tag_even_beside_work(text: str) -> None:
    assert tags(text) == ("health",)


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


@pytest.mark.parametrize(
    "text",
    [
        # a newcomer's German, French and Spanish facts were all chatter (2026-12-03, night); in other words
        "Meine Schwester arbeitet jetzt in Hamburg.",
        "Wir haben zwei Katzen und einen Hund.",
        "J'habite à Lyon depuis trois ans.",
        "Nous partons au Portugal en août.",
        "Trabajo como enfermera en Valencia.",
        "Lavoro in banca a Torino da due anni.",
        "Eu moro em Curitiba com a minha família.",
        "Ik werk sinds januari bij een ziekenhuis.",
        "Я работаю учителем в Казани.",
        "Benim kızım üniversitede okuyor.",
        # Traditional Chinese reads as Simplified
        "我女兒下個月要去台北念書。",
        "我不喜歡吃香菜。",
    ],
)
def test_statements_in_other_languages_are_kept(text: str) -> None:
    assert intent(text) != "chatter"
    assert decide(text, "user").keep


@pytest.mark.parametrize(
    "text", ["ok danke", "Merci beaucoup !", "Gracias, perfecto", "Спасибо!", "好的，謝謝"]
)
def test_thanks_in_other_languages_stay_chatter(text: str) -> None:
    assert not decide(text, "user").keep


def test_words_of_other_alphabets_count_as_words() -> None:
    # "München" was two words and Cyrillic none: short statements lost importance for it
    assert features("Я живу в Москве").words == 4
    assert features("Ich wohne in München").words == 4


_LABELLED = json.loads((Path(__file__).parent / "data" / "write_trigger_labelled.json").read_text("utf-8"))


@pytest.mark.parametrize("text", _LABELLED["dev"]["durable"])
def test_durable_statements_notes_and_chinese_plans_are_kept_at_once(text: str) -> None:
    # issue 9 item 6: durable statements waited in working memory until the session closed
    assert decide(text, "user").keep
    assert decide(text, "assistant").keep  # an agent's note about the user counts too


@pytest.mark.parametrize("text", _LABELLED["dev"]["filler"])
def test_filler_is_not_kept(text: str) -> None:
    assert not decide(text, "user").keep


def test_held_out_statements_are_classified_as_well_as_the_dev_set() -> None:
    held = _LABELLED["heldout"]
    cases = [(t, True) for t in held["durable"]] + [(t, False) for t in held["filler"]]
    right = sum(decide(text, "user").keep == keep for text, keep in cases)
    assert len(cases) == 38
    assert right / len(cases) >= 0.95  # measured 37/38: "Our dog is called Pepper." is missed


def test_durable_statements_outrank_filler_by_importance() -> None:
    durable = [decide(t, "user").importance for t in _LABELLED["dev"]["durable"]]
    filler = [decide(t, "user").importance for t in _LABELLED["dev"]["filler"]]
    assert min(durable) > max(filler)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Please email me at [REDACTED:email] or call [REDACTED:phone], Bob Smith said.", ("Bob Smith",)),
        ("I met Anna [REDACTED:phone] Meier in Berlin.", ("Anna", "Meier", "Berlin")),
        ("[REDACTED:cn_id] is what I gave to Lufthansa", ("Lufthansa",)),
    ],
)
def test_redaction_markers_are_never_entities(text: str, expected: tuple[str, ...]) -> None:
    assert entities(text) == expected
