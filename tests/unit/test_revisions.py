"""Reconcile's pure decisions (services.ingest.revisions): gates, pair order, verdicts -> chains."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hindsight.chains import ChainEditor
from hindsight.inference.judge import Fact, Verdict
from hindsight.records import DONE, PENDING, RECONCILE_STATE, to_payload
from schemas import Memory, Provenance
from services.ingest.revisions import (
    INHERITED_BACKEND,
    Candidate,
    Thresholds,
    TurnFacts,
    apply_verdicts,
    fact_memory,
    free_verdict,
    inherited_verdicts,
    judge_pair,
    select_candidates,
)

pytestmark = pytest.mark.unit

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
LIMITS = Thresholds(turn=0.86, fact=0.88, lesson=0.88, max_pairs=3, min_update_confidence=0.5)


def mem(
    ident: str,
    content: str,
    *,
    days: float = 0,
    kind: str = "turn",
    speaker: str | None = None,
    intent: str = "fact",
    entity: str | None = None,
    attribute: str | None = None,
    turn: str | None = None,
    state: str = DONE,
    **extra: Any,
) -> dict[str, Any]:
    when = T0 + timedelta(days=days)
    memory = Memory(
        id=ident,
        tenant_id="t",
        user_id="u",
        agent_id="a",
        session_id="s",
        type="semantic" if kind == "fact" else "episodic",
        kind=kind,
        content=content,
        source="user",
        speaker=speaker,
        intent=intent,
        importance=0.5,
        confidence=0.6,
        created_at=when,
        stored_at=when,
        valid_from=when,
        last_accessed_at=when,
        entity=entity,
        attribute=attribute,
        provenance=Provenance(memory_ids=(turn,) if turn else ()),
    )
    return to_payload(memory) | {RECONCILE_STATE: state, **extra}


def hit(payload: dict[str, Any], cosine: float) -> tuple[str, float, dict[str, Any]]:
    return str(payload["id"]), cosine, payload


def ids(candidates: Sequence[Candidate]) -> list[str]:
    return [c.id for c in candidates]


def test_only_reconciled_active_durable_same_kind_memories_above_the_threshold_pair_up() -> None:
    new = mem("n", "I moved to Siemens last month.", days=30)
    hits = [
        hit(new, 1.0),  # itself
        hit(mem("a", "I'm an engineer at Airbus."), 0.90),
        hit(mem("b", "I work at Airbus in Hamburg.", state=PENDING), 0.95),  # after n in partition order
        hit(mem("c", "What is Airbus?", intent="question"), 0.93),
        hit(mem("d", "Airbus is my employer.", status="superseded"), 0.92),
        hit(mem("e", "I like planes.", kind="lesson"), 0.97),
        hit(mem("f", "I like trains."), 0.80),  # below the turn threshold
    ]
    assert ids(select_candidates("n", new, hits, LIMITS)) == ["a"]


def test_two_named_speakers_never_pair_each_speaks_about_themself() -> None:
    new = mem("n", "I moved to Berlin.", speaker="Caroline", days=1)
    hits = [
        hit(mem("m", "I live in Paris.", speaker="Melanie"), 0.95),
        hit(mem("c", "I live in Paris.", speaker="Caroline"), 0.90),
        hit(mem("x", "I live in Rome."), 0.91),  # no speaker named: the user
    ]
    assert ids(select_candidates("n", new, hits, LIMITS)) == ["x", "c"]


def test_passages_of_one_long_event_never_pair_other_events_still_do() -> None:
    def passage(ident: str, content: str, event: str, index: int) -> dict[str, Any]:
        payload = mem(ident, content)
        where = {"event_ids": [event], "passage": index, "passages": 2}
        payload["provenance"] = {**payload["provenance"], **where}
        return payload

    new = passage("p1", "Part two of my long allergy history: penicillin, then cephalosporins.", "e1", 1)
    hits = [
        hit(passage("p0", "Part one of my long allergy history: penicillin since childhood.", "e1", 0), 0.97),
        hit(passage("q0", "My allergy history: penicillin since childhood.", "e2", 0), 0.93),
    ]
    assert ids(select_candidates("p1", new, hits, LIMITS)) == ["q0"]


def test_facts_pair_by_entity_and_attribute_even_below_the_threshold_never_within_one_turn() -> None:
    new = mem("n", "The user works at Siemens.", kind="fact", entity="user", attribute="employer", turn="t2")
    hits = [
        hit(
            mem(
                "a",
                "The user is employed by Airbus.",
                kind="fact",
                entity="User",
                attribute="Employer",
                turn="t1",
            ),
            0.70,
        ),
        hit(
            mem(
                "s", "The user lives in Munich.", kind="fact", entity="user", attribute="home city", turn="t2"
            ),
            0.95,
        ),
        hit(mem("p", "Recurring topic: Siemens came up in 3 of the last 10 sessions.", kind="fact"), 0.96),
        hit(
            mem(
                "b",
                "The user's colleague Ben works at BMW.",
                kind="fact",
                entity="Ben",
                attribute="employer",
                turn="t3",
            ),
            0.80,
        ),
    ]
    assert ids(select_candidates("n", new, hits, LIMITS)) == ["a"]


def test_at_most_max_pairs_closest_candidates() -> None:
    new = mem("n", "My budget is 8,000.", days=9)
    hits = [hit(mem(f"c{i}", f"My budget is {i},000."), 0.87 + i / 100) for i in range(6)]
    assert ids(select_candidates("n", new, hits, LIMITS)) == ["c5", "c4", "c3"]


def test_the_judge_sees_the_older_statement_first_by_event_time_not_arrival() -> None:
    late = mem("late", "I'm vegetarian.", days=1)
    newer = Candidate("newer", mem("newer", "I eat fish again.", days=20), 0.9)
    pair = judge_pair("late", late, newer)
    assert (pair.older.text, pair.newer.text, pair.cosine) == ("I'm vegetarian.", "I eat fish again.", 0.9)
    assert pair.older.occurred_at < pair.newer.occurred_at


def test_identical_text_from_the_same_speaker_is_same_without_a_judge() -> None:
    a = mem("a", "I'm allergic to penicillin.")
    assert free_verdict(mem("b", "i'm allergic to PENICILLIN!"), a) is not None
    assert free_verdict(mem("c", "I'm allergic to penicillin.", speaker="Bob"), a) is None
    assert free_verdict(mem("d", "I'm allergic to cephalosporins."), a) is None


def run(store: dict[str, dict[str, Any]], memory_id: str, verdicts: list[tuple[str, Verdict]]) -> list[Any]:
    editor = ChainEditor(lambda ids_: {i: dict(store[i]) for i in ids_ if i in store})
    cands = [Candidate(c, store[c], 0.9) for c, _ in verdicts]
    decisions = apply_verdicts(editor, memory_id, cands, [v for _, v in verdicts], min_update_confidence=0.5)
    for ident, fields in editor.changes().items():
        store[ident].update(fields)
    return decisions


def v(relation: str, confidence: float = 0.9) -> Verdict:
    return Verdict(relation, confidence, "test", "double")  # type: ignore[arg-type]


def test_an_update_supersedes_the_older_and_the_newer_becomes_version_two() -> None:
    store = {"old": mem("old", "Budget 5,000."), "new": mem("new", "Budget can go up to 8,000.", days=3)}
    [decision] = run(store, "new", [("old", v("update"))])
    assert decision.applied
    assert (store["old"]["status"], store["old"]["superseded_by"]) == ("superseded", "new")
    assert store["old"]["valid_to"] == store["new"]["valid_from"]
    assert (store["new"]["status"], store["new"]["parent_id"], store["new"]["version"]) == (
        "active",
        "old",
        2,
    )


def test_an_older_statement_delivered_late_becomes_the_older_version() -> None:
    store = {
        "newer": mem("newer", "I live in Munich.", days=10),
        "late": mem("late", "I live in Berlin.", days=2),
    }
    run(store, "late", [("newer", v("update"))])
    assert store["newer"]["status"] == "active"
    assert (store["late"]["status"], store["late"]["superseded_by"]) == ("superseded", "newer")
    assert store["newer"]["parent_id"] == "late"


def test_a_doubtful_update_is_a_conflict_and_both_stay_active() -> None:
    store = {"a": mem("a", "Anna's birthday is May 3."), "b": mem("b", "Anna's birthday is June 9.", days=1)}
    [decision] = run(store, "b", [("a", v("update", 0.3))])
    assert decision.relation == "unsure"
    assert (store["a"]["status"], store["b"]["status"]) == ("active", "active")
    assert (store["a"]["conflicts_with"], store["b"]["conflicts_with"]) == (["b"], ["a"])


def test_same_merges_the_new_one_into_the_existing_and_ends_the_decisions() -> None:
    store = {
        "kept": mem("kept", "I'm allergic to peanuts."),
        "other": mem("other", "I'm allergic to nuts."),
        "dup": mem("dup", "Peanuts give me an allergic reaction.", days=5),
    }
    decisions = run(store, "dup", [("kept", v("same")), ("other", v("update"))])
    assert [d.applied for d in decisions] == [True, False]
    assert (store["dup"]["status"], store["dup"]["merged_into"]) == ("merged", "kept")
    assert store["kept"]["merged_ids"] == ["dup"]
    assert store["other"]["status"] == "active"


def test_refinement_links_and_unrelated_changes_nothing() -> None:
    store = {
        "a": mem("a", "I live in Paris."),
        "b": mem("b", "I live in the 11th arrondissement of Paris.", days=1),
        "c": mem("c", "My office is in La Defense."),
    }
    run(store, "b", [("a", v("refinement")), ("c", v("unrelated"))])
    assert store["a"]["related_ids"] == ["b"]
    assert store["c"].get("related_ids", []) == []
    assert {store[i]["status"] for i in "abc"} == {"active"}


def facts_store() -> dict[str, dict[str, Any]]:
    return {
        "t1": mem("t1", "I work at Airbus and live in Toulouse.", derived_ids=["f1", "g1"]),
        "f1": mem("f1", "The user works at Airbus.", kind="fact", attribute="employer", turn="t1"),
        "g1": mem("g1", "The user lives in Toulouse.", kind="fact", attribute="home city", turn="t1"),
        "t2": mem("t2", "I moved to Siemens in Munich.", days=40, derived_ids=["f2", "g2"]),
        "f2": mem("f2", "The user works at Siemens.", kind="fact", attribute="employer", turn="t2", days=40),
        "g2": mem("g2", "The user lives in Munich.", kind="fact", attribute="home city", turn="t2", days=40),
    }


def test_a_turn_is_superseded_once_every_fact_drawn_from_it_is() -> None:
    store = facts_store()
    run(store, "f2", [("f1", v("update"))])
    assert store["t1"]["status"] == "active"  # it still says where the user lives
    run(store, "g2", [("g1", v("update"))])
    assert (store["t1"]["status"], store["t1"]["superseded_by"]) == ("superseded", "t2")
    assert (store["t2"]["parent_id"], store["t2"]["version"]) == ("t1", 2)


def test_a_conflict_between_facts_is_a_conflict_between_their_turns() -> None:
    store = facts_store()
    run(store, "f2", [("f1", v("unsure"))])
    assert store["t1"]["conflicts_with"] == ["t2"]
    assert store["t2"]["conflicts_with"] == ["t1"]


def test_a_fact_memory_keeps_the_turns_scope_time_and_provenance() -> None:
    turn = Memory.model_validate(
        {
            k: v
            for k, v in mem("9b7f4c2e-0000-4000-8000-000000000001", "我上个月跳槽去了腾讯。").items()
            if k not in ("created_ts", "stored_ts", "last_accessed_ts", "text_tokens")
        }
        | {
            "scope": "agent:a1",
            "tags": ["compressed"],
            "provenance": {"event_ids": ["e1"], "external_refs": ["D1:1"]},
        }
    )
    fact = Fact(
        entity="user", attribute="employer", value="腾讯", statement="用户在腾讯工作。", category="job"
    )
    a = fact_memory(turn, fact, 0, stored_at=T0, model="m")
    b = fact_memory(turn, fact, 0, stored_at=T0 + timedelta(days=1), model="m")
    assert a.id == b.id != fact_memory(turn, fact, 1, stored_at=T0, model="m").id
    assert (a.kind, a.type, a.scope, a.created_at, a.valid_from) == (
        "fact",
        "semantic",
        "agent:a1",
        turn.created_at,
        turn.created_at,
    )
    assert (a.entity, a.attribute, a.value, a.content) == ("user", "employer", "腾讯", "用户在腾讯工作。")
    assert a.provenance == Provenance(event_ids=("e1",), external_refs=("D1:1",), memory_ids=(turn.id,))
    assert "compressed" not in a.tags


def test_an_agents_note_never_supersedes_a_safety_critical_memory_it_becomes_a_conflict() -> None:
    store = {
        "allergy": mem("allergy", "I'm allergic to penicillin.", tags=["health"]),
        "job": mem("job", "I work at Airbus."),
        "note1": mem("note1", "Note: the user is not allergic to penicillin.", days=3, source="assistant"),
        "note2": mem("note2", "Note: the user now works at Siemens.", days=3, source="assistant"),
    }
    [refused] = run(store, "note1", [("allergy", v("update"))])
    assert (refused.relation, refused.applied) == ("unsure", True)
    assert refused.reason.startswith("consistency:safety_critical")
    assert store["allergy"]["status"] == "active"
    assert store["allergy"]["conflicts_with"] == ["note1"]
    run(store, "note2", [("job", v("update"))])  # not protected: an agent may record a new job
    assert store["job"]["superseded_by"] == "note2"


def test_a_statement_repeated_twice_is_protected_from_low_trust_sources_too() -> None:
    store = {
        "diet": mem("diet", "I'm vegan.", merged_ids=["again"]),
        "tool": mem("tool", "CRM: customer diet is omnivore.", days=5, source="tool"),
    }
    [decision] = run(store, "tool", [("diet", v("update"))])
    assert decision.relation == "unsure"
    assert decision.reason.startswith("consistency:strong_support")


def test_facts_of_chained_turns_pair_first_whatever_their_cosine_other_gates_still_hold() -> None:
    new = mem("n", "The user moved to Siemens last month.", kind="fact", attribute="move", turn="t2")
    hits = [
        hit(mem("a", "The user is an engineer at Airbus.", kind="fact", attribute="job", turn="t1"), 0.71),
        hit(mem("s", "The user lives in Munich.", kind="fact", attribute="home", turn="t2"), 0.75),  # own
        hit(mem("c", "The user's budget is 900.", kind="fact", attribute="budget", turn="t3"), 0.93),
        hit(mem("p", "The user flies Fridays.", kind="fact", attribute="x", turn="t1", state=PENDING), 0.7),
    ]
    chained = frozenset({"a", "s", "p"})
    assert ids(select_candidates("n", new, hits, LIMITS, chained)) == ["a", "c"]
    assert ids(select_candidates("n", new, hits, LIMITS)) == ["c"]  # without the chain: cosine only


def test_every_fact_of_a_chained_turn_pairs_even_beyond_max_pairs() -> None:
    """The unseen set's Lisbon trip (2026-12-04): its turn gave four facts; cut at max_pairs (3), the
    fourth was never judged against the cancellation and stayed current."""
    new = mem("n", "The user cancelled the Airbnb.", kind="fact", attribute="plan", turn="t2")
    old = [
        hit(mem(f"o{i}", text, kind="fact", attribute=f"a{i}", turn="t1"), cos)
        for i, (text, cos) in enumerate(
            [
                ("The user is going to Lisbon.", 0.805),
                ("The user is planning a trip to Lisbon.", 0.795),
                ("The user is going to Lisbon for one week.", 0.815),
                ("The user is staying in Lisbon.", 0.827),
            ]
        )
    ]
    other = hit(mem("x", "The user's Airbnb host is Ana.", kind="fact", attribute="host", turn="t9"), 0.95)
    chained = frozenset({"o0", "o1", "o2", "o3"})
    assert ids(select_candidates("n", new, [*old, other], LIMITS, chained)) == ["o3", "o2", "o0", "o1"]
    assert ids(select_candidates("n", new, [*old, other], LIMITS)) == ["x"]  # unchained: cosine gate


def _turn(content: str) -> Memory:
    payload = mem("9b7f4c2e-0000-4000-8000-000000000002", content)
    drop = ("created_ts", "stored_ts", "last_accessed_ts", "text_tokens")
    return Memory.model_validate({k: v for k, v in payload.items() if k not in drop})


@pytest.mark.parametrize(
    ("turn", "statement", "expected"),
    [
        ("我上个月跳槽去了腾讯。", "The user jumped to work at Tencent.", "我上个月跳槽去了腾讯。"),
        ("我上个月跳槽去了腾讯。", "用户跳槽去了腾讯。", "用户跳槽去了腾讯。"),
        ("我搬到深圳了。", "The user moved to深圳.", "我搬到深圳了。"),  # mostly Latin letters: English
        ("I moved to Shenzhen (深圳).", "The user moved to Shenzhen.", "The user moved to Shenzhen."),
        ("I work at Tencent.", "用户在腾讯工作。", "用户在腾讯工作。"),  # only a Chinese turn falls back
    ],
)
def test_a_fact_in_another_language_than_its_chinese_turn_keeps_the_turns_words(
    turn: str, statement: str, expected: str
) -> None:
    fact = Fact(entity="user", attribute="employer", value="x", statement=statement, category="job")
    assert fact_memory(_turn(turn), fact, 0, stored_at=T0, model="m").content == expected


def _decision(other: str, relation: str, *, applied: bool = True) -> dict[str, Any]:
    return {"with": other, "relation": relation, "confidence": 0.9, "backend": "llm", "applied": applied}


def test_a_fact_pair_takes_the_turns_update_when_each_turn_has_one_fact() -> None:
    facts = TurnFacts({"t-old": ["f-old"], "t-new": ["f-new"]})
    given = inherited_verdicts("t-new", [_decision("t-old", "update")], facts)
    verdict = given[frozenset(("f-old", "f-new"))]
    assert (verdict.relation, verdict.confidence, verdict.backend) == ("update", 0.9, INHERITED_BACKEND)


def _closest(fact: str, among: Sequence[str]) -> str | None:
    return sorted(among)[-1]


@pytest.mark.parametrize(
    ("turn_id", "other", "by_turn"),
    [
        ("t-new", "t-old", {"t-old": ["f-old"], "t-new": ["f-a", "f-b"]}),
        # the older statement arrives late: the decision is on the older turn, the order still holds
        ("t-old", "t-new", {"t-old": ["f-old"], "t-new": ["f-a", "f-b"]}),
    ],
)
def test_an_older_turns_one_fact_follows_the_update_to_the_newer_turns_closest_fact(
    turn_id: str, other: str, by_turn: dict[str, list[str]]
) -> None:
    given = inherited_verdicts(turn_id, [_decision(other, "update")], TurnFacts(by_turn), closest=_closest)
    assert list(given) == [frozenset(("f-old", "f-b"))]
    verdict = given[frozenset(("f-old", "f-b"))]
    assert (verdict.relation, verdict.confidence, verdict.backend) == ("update", 0.9, INHERITED_BACKEND)
    assert "older turn's one fact follows it" in verdict.reason


@pytest.mark.parametrize(
    ("by_turn", "closest"),
    [
        ({"t-old": ["f-old"], "t-new": ["f-a", "f-b"]}, None),  # no vectors: the judge decides
        ({"t-old": ["f-old"], "t-new": ["f-a", "f-b"]}, lambda fact, among: None),  # a vector is gone
        ({"t-old": ["f-o1", "f-o2"], "t-new": ["f-a", "f-b"]}, _closest),  # which old fact changed?
        ({"t-new": ["f-a", "f-b"], "t-old": ["f-old"]}, _closest),  # t-old is the newer turn here
    ],
)
def test_a_several_fact_turn_is_inherited_only_from_a_one_fact_older_turn(
    by_turn: dict[str, list[str]], closest: Any
) -> None:
    assert (
        inherited_verdicts("t-new", [_decision("t-old", "update")], TurnFacts(by_turn), closest=closest) == {}
    )


@pytest.mark.parametrize(
    ("by_turn", "decision"),
    [
        ({"t-old": ["f1", "f2"], "t-new": ["f-new"]}, _decision("t-old", "update")),
        ({"t-old": [], "t-new": ["f-new"]}, _decision("t-old", "update")),
        ({"t-old": ["f-old"], "t-new": ["f-new"]}, _decision("t-old", "same")),
        ({"t-old": ["f-old"], "t-new": ["f-new"]}, _decision("t-old", "unsure")),
        ({"t-old": ["f-old"], "t-new": ["f-new"]}, _decision("t-old", "refinement")),
        ({"t-old": ["f-old"], "t-new": ["f-new"]}, _decision("t-old", "update", applied=False)),
        ({"t-other": ["f-old"], "t-new": ["f-new"]}, _decision("t-old", "update")),
    ],
)
def test_every_other_fact_pair_goes_to_the_judge(
    by_turn: dict[str, list[str]], decision: dict[str, Any]
) -> None:
    """An older turn with two facts needs the judge to tell which one changed; a turn without a fact
    pairs nothing; a merge or an unapplied verdict chains nothing; turns kept both active (unsure,
    refinement) leave their facts to the judge, which may see the update in the facts alone; facts of
    a turn not in the decision are not its pair."""
    assert inherited_verdicts("t-new", [decision], TurnFacts(by_turn)) == {}
