"""LoCoMo conversion and the evidence recall metric (../shared/data/README.md)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from hindsight.eval import locomo
from schemas import InteractionEvent, SessionClosedEvent

pytestmark = pytest.mark.unit

SAMPLE = {
    "sample_id": "conv-x",
    "conversation": {
        "speaker_a": "A",
        "speaker_b": "B",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "A", "dia_id": "D1:1", "text": "Hi B!"},
            {"speaker": "B", "dia_id": "D1:2", "text": "Look at this", "blip_caption": "a photo of a cat"},
        ],
        "session_2_date_time": "9:00 am on 1 June, 2023",
        "session_3_date_time": "9:00 am on 2 June, 2023",
        "session_3": [{"speaker": "A", "dia_id": "D3:1", "text": "Back again"}],
    },
    "qa": [
        {"question": "q1", "answer": "x", "evidence": ["D1:2"], "category": 4},
        {"question": "q2", "answer": 2022, "evidence": ["D1:1; D3:1", "D"], "category": 1},
        {"question": "q3", "adversarial_answer": "n", "evidence": ["D1:1"], "category": 5},
        {"question": "q4", "answer": "y", "evidence": [], "category": 2},
    ],
}


def test_session_time_is_parsed_as_utc() -> None:
    assert locomo.parse_session_time("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    with pytest.raises(locomo.DatasetError):
        locomo.parse_session_time("yesterday")


def test_conversation_events_keep_dates_refs_and_close_each_session() -> None:
    conv = locomo.conversation(SAMPLE)
    kinds = [type(e).__name__ for e in conv.events]
    assert kinds == [
        "InteractionEvent",
        "InteractionEvent",
        "SessionClosedEvent",
        "InteractionEvent",
        "SessionClosedEvent",
    ]
    first, second = conv.events[0], conv.events[1]
    assert isinstance(first, InteractionEvent)
    assert isinstance(second, InteractionEvent)
    assert first.external_ref == "D1:1"
    assert first.occurred_at == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert second.content == "Look at this [shared an image: a photo of a cat]"
    close = conv.events[2]
    assert isinstance(close, SessionClosedEvent)
    assert close.event_count == 2
    assert close.session_id == "conv-x:session_1"


def test_questions_skip_category_5_and_clean_malformed_evidence() -> None:
    qs = locomo.conversation(SAMPLE).questions
    assert [q.question for q in qs] == ["q1", "q2"]
    assert qs[1].evidence == ("D1:1", "D3:1")


def test_evidence_recall_ignores_memories_with_wide_provenance() -> None:
    refs = [["D1:1", "D1:2", "D1:3", "D1:4"], ["D1:2"], ["D5:1"]]
    assert locomo.evidence_recall(["D1:1", "D1:2"], refs, 10) == 0.5
    assert locomo.evidence_recall(["D1:2"], refs, 1) == 0.0
    assert locomo.evidence_recall(["D1:2"], refs, 2) == 1.0


def test_missing_file_names_the_official_source(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(locomo.DatasetError, match="snap-research/LoCoMo"):
        locomo.load(tmp_path / "nope.json")


def test_unknown_conversation_lists_known_ones() -> None:
    with pytest.raises(locomo.DatasetError, match="conv-x"):
        locomo.select([SAMPLE], ["conv-404"])
