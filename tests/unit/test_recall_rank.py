"""Ranking steps of recall: fusion, time weighting, boosts, floor, dedupe, order (DESIGN.md s4-5)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from hindsight.recall.rank import (
    NEAR_DUPLICATE_COSINE,
    RRF_K,
    Candidate,
    RecallParams,
    dedupe,
    fold_evidence,
    fuse,
    order,
    rrf,
    score,
)

pytestmark = pytest.mark.unit

NOW = datetime(2024, 6, 1, tzinfo=UTC)
NEUTRAL = RecallParams(frequency_weight=0.0, confidence_weight=0.0)


def cand(
    mid: str,
    cosine: float,
    days_old: float,
    *,
    dense: int | None = None,
    lexical: int | None = None,
    content: str | None = None,
    **payload: object,
) -> Candidate:
    created = NOW - timedelta(days=days_old)
    body = {"content": content or f"memory {mid}", "created_ts": created.timestamp(), **payload}
    return Candidate(mid, body, cosine, dense_rank=dense, lexical_rank=lexical)


def test_rrf_fusion_order_on_a_fixed_example() -> None:
    dense = ["a", "b", "c", "d"]
    lexical = ["c", "e", "a"]
    fused = fuse(dense, lexical)
    # a: 1/61 + 1/63, c: 1/63 + 1/61 (tie, by id), b: 1/62, e: 1/62 (tie, by id), d: 1/64
    assert [item for item, _ in fused] == ["a", "c", "b", "e", "d"]
    assert fused[0][1] == pytest.approx(1 / 61 + 1 / 63)
    assert rrf(1, None) == pytest.approx(1 / (RRF_K + 1))


def test_similarity_floor_drops_weak_matches_even_if_lexically_ranked() -> None:
    out = score([cand("a", 0.9, 1, dense=1), cand("b", 0.64, 1, dense=2, lexical=1)], NOW, NEUTRAL)
    assert [m.id for m in out] == ["a"]


def test_memory_in_both_lists_outranks_one_list_and_relevance_is_normalised() -> None:
    out = score([cand("both", 0.8, 1, dense=2, lexical=1), cand("dense", 0.9, 1, dense=1)], NOW, NEUTRAL)
    assert [m.id for m in out] == ["both", "dense"]
    k = NEUTRAL.rrf_k
    assert out[0].relevance == pytest.approx((1 / (k + 2) + 1 / (k + 1)) / (2 / (k + 1)))
    assert out[1].relevance == pytest.approx(0.5)


def test_recall_fusion_constant_lets_a_first_place_beat_two_deep_ranks() -> None:
    """k=10 (recall's default): one list's first place outranks a hit both lists put at 30 and 40;
    with the textbook k=60 the deep double hit wins (the reason for k=10, rank.py module doc)."""
    first = cand("first", 0.8, 1, dense=1)
    deep = cand("deep", 0.8, 1, dense=30, lexical=40)
    assert NEUTRAL.rrf_k == 10
    assert [m.id for m in score([first, deep], NOW, NEUTRAL)] == ["first", "deep"]
    textbook = RecallParams(frequency_weight=0.0, confidence_weight=0.0, rrf_k=RRF_K)
    assert [m.id for m in score([first, deep], NOW, textbook)] == ["deep", "first"]


def test_recency_blend_applies_when_the_query_asks_for_the_current_state() -> None:
    old = cand("old", 0.8, 90, dense=1)
    recent = cand("recent", 0.8, 2, dense=2)
    neutral = score([old, recent], NOW, NEUTRAL)
    current = score([old, recent], NOW, NEUTRAL, wants_recent=True)
    assert [m.id for m in neutral] == ["old", "recent"]
    assert [m.id for m in current] == ["recent", "old"]
    # recent: 0.7 * (1/(k+2))/(2/(k+1)) + 0.3 * 1.0
    k = NEUTRAL.rrf_k
    assert current[0].final_score == pytest.approx(0.7 * (k + 1) / (2 * (k + 2)) + 0.3)
    assert current[1].time_weight == 0.6


def test_exponential_time_mode() -> None:
    out = score([cand("x", 0.8, 20, dense=1)], NOW, RecallParams(time_mode="exp"), wants_recent=True)
    assert out[0].time_weight == pytest.approx(np.exp(-1.0))


def test_memory_inside_the_named_time_window_gets_the_bonus() -> None:
    window = (NOW - timedelta(days=10), NOW - timedelta(days=3))
    out = score(
        [cand("outside", 0.8, 1, dense=1), cand("inside", 0.8, 5, dense=2)], NOW, NEUTRAL, window=window
    )
    assert [m.id for m in out] == ["inside", "outside"]
    assert out[0].in_time_window
    assert not out[1].in_time_window


def test_confidence_and_access_frequency_break_ties() -> None:
    params = RecallParams()
    low = cand("low", 0.8, 1, dense=1, lexical=2, confidence=0.4, access_count=0)
    high = cand("high", 0.8, 1, dense=2, lexical=1, confidence=0.8, access_count=5)
    assert [m.id for m in score([low, high], NOW, params)] == ["high", "low"]


def test_identical_text_collapses_to_the_newest_version() -> None:
    scored = score(
        [
            cand("v1", 0.95, 40, dense=1, content="User prefers window seats.", version=1),
            cand("v2", 0.90, 3, dense=2, content="user prefers window seats", version=2),
        ],
        NOW,
        NEUTRAL,
    )
    out = dedupe(scored)
    assert [m.id for m in out] == ["v2"]
    assert out[0].duplicates == ("v1",)
    assert out[0].final_score == max(m.final_score for m in scored)


def test_near_identical_vectors_collapse_but_distinct_ones_do_not() -> None:
    a, b, c = np.array([1.0, 0.0]), np.array([0.999, 0.0447]), np.array([0.0, 1.0])
    scored = score(
        [
            cand("a", 0.9, 5, dense=1, content="x"),
            cand("b", 0.89, 1, dense=2, content="y"),
            cand("c", 0.88, 1, dense=3, content="z"),
        ],
        NOW,
        NEUTRAL,
    )
    out = dedupe(scored, {"a": a, "b": b / np.linalg.norm(b), "c": c})
    assert [m.id for m in out] == ["b", "c"]  # b is the newer of the a/b pair


def test_a_newer_version_becomes_the_group_vector_and_its_old_text_still_matches() -> None:
    """Group of v1 (oldest, best score); v2 joins by vector and, being newer, represents it; v3 is
    close to v2 only (not to v1) and joins; v1's exact text again joins by text; d stays apart."""
    v1, v2 = np.array([1.0, 0.0, 0.0]), np.array([0.98, 0.199, 0.0])
    v3, d = np.array([0.92, 0.39, 0.0]), np.array([0.0, 0.0, 1.0])
    norm = {k: v / np.linalg.norm(v) for k, v in {"v1": v1, "v2": v2, "v3": v3, "d": d}.items()}
    assert float(norm["v1"] @ norm["v3"]) < NEAR_DUPLICATE_COSINE < float(norm["v2"] @ norm["v3"])
    scored = score(
        [
            cand("v1", 0.95, 40, dense=1, content="Moved to Berlin.", version=1),
            cand("v2", 0.94, 20, dense=2, content="Moved to Berlin in May.", version=2),
            cand("d", 0.93, 20, dense=3, content="Likes tea."),
            cand("v3", 0.92, 2, dense=4, content="Moved to Berlin in May 2023.", version=3),
            cand("v1b", 0.91, 50, dense=5, content="moved to berlin", version=1),
        ],
        NOW,
        NEUTRAL,
    )
    out = dedupe(scored, {**norm, "v1b": norm["d"]})
    assert [m.id for m in out] == ["v3", "d"]
    assert set(out[0].duplicates) == {"v1", "v2", "v1b"}
    assert out[0].final_score == max(m.final_score for m in scored)


def test_top_k_cut_ranks_and_chronological_order() -> None:
    scored = score([cand(str(i), 0.9, 6 - i / 2, dense=i + 1) for i in range(6)], NOW, NEUTRAL)
    best = order(scored, RecallParams(top_k=3))
    assert [m.id for m in best] == ["0", "1", "2"]
    assert [m.rank for m in best] == [1, 2, 3]
    chrono = order(scored, RecallParams(top_k=3, order="chronological"))
    assert [m.id for m in chrono] == ["0", "1", "2"]  # oldest first among the best three
    assert [m.rank for m in chrono] == [1, 2, 3]


def test_rerank_scores_the_best_fused_candidates_with_the_vectors_recall_holds() -> None:
    """``rerank_top_n`` candidates by fused score (ties by id) go to the reranker, with their vectors
    and the query vector; its order becomes ``rerank_rank``; the others are left alone."""
    from hindsight.recall.pipeline import _rerank  # noqa: PLC0415

    seen: dict[str, object] = {}

    class Reverse:
        name = "reverse"

        def score(self, query: str, passages: list[str], **vectors: np.ndarray) -> np.ndarray:
            seen.update(passages=list(passages), **vectors)
            return np.arange(len(passages), dtype=np.float32)  # last one best

    def c(mid: str, dense: int | None, lexical: int | None) -> Candidate:
        return Candidate(
            mid, {"content": mid}, 0.8, vector=np.array([1.0, 0.0]), dense_rank=dense, lexical_rank=lexical
        )

    found = {m.id: m for m in (c("both", 2, 1), c("d1", 1, None), c("l2", None, 2), c("d9", 9, None))}
    out = _rerank(found, "q", np.array([0.0, 1.0]), Reverse(), RecallParams(rerank_top_n=3))
    assert seen["passages"] == ["both", "d1", "l2"]
    assert seen["passage_vectors"].shape == (3, 2)
    np.testing.assert_array_equal(seen["query_vector"], [0.0, 1.0])
    assert [out[m].rerank_rank for m in ("l2", "d1", "both")] == [1, 2, 3]
    assert out["d9"].rerank_rank is None


def test_a_fact_answers_with_its_evidence_turn_at_the_better_of_their_scores() -> None:
    turn = cand("t1", 0.9, 1, dense=1, kind="turn", content="I moved to Siemens last month.")
    fact = cand(
        "f1", 0.85, 1, dense=3, kind="fact", provenance={"memory_ids": ["t1"]}, content="Works at Siemens."
    )
    other = cand("x", 0.88, 1, dense=2, kind="turn", content="I like my new team.")
    scored = score([turn, fact, other], NOW, NEUTRAL)
    assert [m.id for m in scored] == ["t1", "x", "f1"]
    folded = fold_evidence(scored)
    assert [m.id for m in folded] == ["f1", "x"]  # the fact takes the turn's place
    assert folded[0].final_score == scored[0].final_score
    assert [i for i, _ in folded[0].evidence] == ["t1"]
    assert fold_evidence(score([turn, other], NOW, NEUTRAL)) == score([turn, other], NOW, NEUTRAL)


def test_chatter_the_write_trigger_did_not_keep_never_outranks_a_kept_statement() -> None:
    chatter = cand("ok", 0.86, 1, dense=1, content="行", tags=["compressed"])
    fact = cand("fact", 0.81, 1, dense=3, content="我上个月跳槽去了腾讯。", tags=[])
    lone = cand("lone", 0.88, 1, dense=1, content="哈哈", tags=["compressed"])
    out = score([chatter, fact], NOW, NEUTRAL)
    assert [m.id for m in out] == ["fact", "ok"]
    assert out[1].final_score == pytest.approx(out[1].relevance - NEUTRAL.unkept_penalty)
    assert [m.id for m in score([lone], NOW, NEUTRAL)] == ["lone"]  # still found when alone
    off = RecallParams(frequency_weight=0.0, confidence_weight=0.0, unkept_penalty=0.0)
    assert [m.id for m in score([chatter, fact], NOW, off)] == ["ok", "fact"]


def test_the_newer_of_two_conflicting_memories_ranks_just_above_the_older() -> None:
    from hindsight.recall.rank import newest_first_in_versions  # noqa: PLC0415

    old = cand(
        "old", 0.9, 40, dense=1, lexical=1, content="My son is at Hillside Primary.", conflicts_with=["new"]
    )
    new = cand("new", 0.85, 1, dense=3, content="We moved our son to Oakwood School.", conflicts_with=["old"])
    other = cand("other", 0.86, 5, dense=2, content="My son plays football.")
    scored = fold_evidence(score([old, new, other], NOW, NEUTRAL))
    assert [m.id for m in scored] == ["old", "other", "new"]
    lifted = newest_first_in_versions(scored)
    assert [m.id for m in lifted] == ["new", "old", "other"]
    assert lifted[0].final_score == pytest.approx(lifted[1].final_score)
    plain = fold_evidence(score([cand("old", 0.9, 40, dense=1), other], NOW, NEUTRAL))
    assert newest_first_in_versions(plain) == plain  # no conflict: nothing moves


def test_a_conflict_on_a_facts_evidence_turn_counts_for_the_fact() -> None:
    from hindsight.recall.rank import newest_first_in_versions  # noqa: PLC0415

    fact = cand("f-old", 0.9, 40, dense=1, kind="fact", provenance={"memory_ids": ["t-old"]})
    turn = cand("t-old", 0.88, 40, dense=2, kind="turn", conflicts_with=["t-new"])
    newer = cand("t-new", 0.8, 1, dense=4, kind="turn", conflicts_with=["t-old"])
    scored = fold_evidence(score([fact, turn, newer], NOW, NEUTRAL))
    assert [m.id for m in scored] == ["f-old", "t-new"]
    assert [m.id for m in newest_first_in_versions(scored)] == ["t-new", "f-old"]


@pytest.mark.parametrize(
    "cosines", [(0.95, 0.90, 0.85), (0.85, 0.95, 0.90), (0.90, 0.85, 0.95), (0.95, 0.85, 0.9)]
)
def test_returned_versions_of_one_chain_come_newest_first_whatever_their_scores(
    cosines: tuple[float, float, float],
) -> None:
    """``include_superseded``: the old values' time weight or wording must not put them first."""
    from hindsight.recall.rank import newest_first_in_versions  # noqa: PLC0415

    c1, c2, c3 = cosines
    v1 = cand(
        "v1", c1, 60, dense=1, content="I use a Huawei Mate 40.", status="superseded", superseded_by="v2"
    )
    v2 = cand(
        "v2", c2, 30, dense=2, content="Switched to a Xiaomi 14.", status="superseded", superseded_by="v3"
    )
    v3 = cand("v3", c3, 1, dense=3, content="Got an iPhone 15 after the Xiaomi broke.")
    other = cand("other", 0.88, 5, dense=4, content="My phone plan is prepaid.")
    scored = fold_evidence(score([v1, v2, v3, other], NOW, NEUTRAL))
    versions = [m.id for m in newest_first_in_versions(scored) if m.id != "other"]
    assert versions == ["v3", "v2", "v1"]
    best = max(m.final_score for m in scored)
    assert newest_first_in_versions(scored)[0].final_score <= best + 3e-6  # lifted just above, no more


def test_a_superseded_memory_whose_successor_was_not_returned_keeps_its_place() -> None:
    from hindsight.recall.rank import newest_first_in_versions  # noqa: PLC0415

    old = cand("old", 0.95, 60, dense=1, status="superseded", superseded_by="gone")
    other = cand("other", 0.9, 5, dense=2)
    scored = fold_evidence(score([old, other], NOW, NEUTRAL))
    assert newest_first_in_versions(scored) == scored


def test_a_relevant_lesson_ranks_ahead_of_the_task_turns_it_was_learned_from() -> None:
    turn = cand("turn", 0.9, 30, dense=1, lexical=1, kind="turn", content="Please book me a flight to Paris.")
    lesson = cand("lesson", 0.86, 30, dense=3, lexical=2, kind="lesson", content="Never book middle seats.")
    out = score([turn, lesson], NOW, NEUTRAL)
    assert [m.id for m in out] == ["lesson", "turn"]
    assert out[0].final_score == pytest.approx(out[0].relevance + NEUTRAL.lesson_bonus)
    off = RecallParams(frequency_weight=0.0, confidence_weight=0.0, lesson_bonus=0.0)
    assert [m.id for m in score([turn, lesson], NOW, off)] == ["turn", "lesson"]
