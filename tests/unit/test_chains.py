"""Version chains (hindsight.chains): supersede by event time, merge, link, detach, walk both ways."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from hindsight.chains import ChainEditor, chain_of

pytestmark = pytest.mark.unit

Store = dict[str, dict[str, Any]]


def memory(ts: float, **extra: Any) -> dict[str, Any]:
    return {
        "created_ts": ts,
        "valid_from": f"2026-01-{int(ts):02d}T00:00:00+00:00",
        "status": "active",
        "version": 1,
        "parent_id": None,
        **extra,
    }


def editor(store: Store) -> ChainEditor:
    def load(ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        return {i: dict(store[i]) for i in ids if i in store}

    return ChainEditor(load)


def apply(store: Store, changes: dict[str, dict[str, Any]]) -> None:
    for memory_id, fields in changes.items():
        store[memory_id].update(fields)


def view(store: Store, *ids: str) -> list[tuple[str, str, int, str | None, str | None]]:
    """(id, status, version, parent_id, superseded_by) per id."""
    return [
        (i, store[i]["status"], store[i]["version"], store[i]["parent_id"], store[i].get("superseded_by"))
        for i in ids
    ]


def supersede(store: Store, older: str, newer: str, *, late: bool = False) -> bool:
    ed = editor(store)
    done = ed.supersede(older, newer, late=late)
    apply(store, ed.changes())
    return done


def test_newer_statement_supersedes_the_older_one() -> None:
    store = {"a": memory(1), "b": memory(5)}
    assert supersede(store, "a", "b")
    assert view(store, "a", "b") == [("a", "superseded", 1, None, "b"), ("b", "active", 2, "a", None)]
    assert store["a"]["valid_to"] == store["b"]["valid_from"]
    assert store["b"]["supersedes"] == ["a"]


def test_a_late_statement_is_inserted_at_its_event_time_and_never_supersedes_the_newer() -> None:
    store = {"a": memory(1), "c": memory(9)}
    supersede(store, "a", "c")
    store["m"] = memory(5)  # arrives last, happened in between
    assert supersede(store, "m", "c", late=True)
    assert view(store, "a", "m", "c") == [
        ("a", "superseded", 1, None, "m"),
        ("m", "superseded", 2, "a", "c"),
        ("c", "active", 3, "m", None),
    ]
    assert store["a"]["valid_to"] == store["m"]["valid_from"]
    assert store["m"]["valid_to"] == store["c"]["valid_from"]


def test_a_late_oldest_statement_walks_back_to_the_start_of_the_chain() -> None:
    store = {"b": memory(4), "c": memory(9)}
    supersede(store, "b", "c")
    store["m"] = memory(1)
    assert supersede(store, "m", "c", late=True)
    assert view(store, "m", "b", "c") == [
        ("m", "superseded", 1, None, "b"),
        ("b", "superseded", 2, "m", "c"),
        ("c", "active", 3, "b", None),
    ]


def test_repeating_a_supersede_changes_nothing() -> None:
    store = {"a": memory(1), "b": memory(2), "c": memory(3)}
    supersede(store, "a", "b")
    supersede(store, "b", "c")
    snapshot = {k: dict(v) for k, v in store.items()}
    for older, newer in (("a", "b"), ("b", "c"), ("a", "c")):
        ed = editor(store)
        assert ed.supersede(older, newer)
        assert ed.changes() == {}
    assert store == snapshot


def test_an_already_superseded_memory_is_not_relinked_to_another_chain() -> None:
    store = {"a": memory(1), "b": memory(2), "x": memory(3)}
    supersede(store, "a", "b")
    assert not supersede(store, "a", "x")
    assert store["a"]["superseded_by"] == "b"
    assert store["x"]["status"] == "active"


def test_one_statement_revising_two_heads_keeps_the_newest_as_parent() -> None:
    store = {"j1": memory(1), "j2": memory(2), "job": memory(3), "city": memory(4), "new": memory(7)}
    supersede(store, "j1", "j2")
    supersede(store, "j2", "job")
    assert store["job"]["version"] == 3
    supersede(store, "job", "new")
    supersede(store, "city", "new")
    assert store["new"]["supersedes"] == ["city", "job"]
    assert store["new"]["parent_id"] == "city"  # the newer of the two by event time
    assert store["new"]["version"] == 4  # one above the highest version replaced
    assert {store[i]["superseded_by"] for i in ("job", "city")} == {"new"}


def test_merge_marks_the_duplicate_and_records_its_provenance_once() -> None:
    store = {
        "kept": memory(1, merged_ids=[], provenance={"event_ids": ["e1"]}),
        "dup": memory(2, provenance={"event_ids": ["e2"], "external_refs": ["D2:1"]}),
    }
    for _ in range(2):
        ed = editor(store)
        assert ed.merge("dup", "kept")
        apply(store, ed.changes())
    assert store["dup"]["status"] == "merged"
    assert store["dup"]["merged_into"] == "kept"
    assert store["kept"]["merged_ids"] == ["dup"]
    assert store["kept"]["merged_event_ids"] == ["e2"]
    assert store["kept"]["merged_refs"] == ["D2:1"]
    assert store["kept"]["status"] == "active"


def test_links_are_symmetric_and_statuses_stay_active() -> None:
    store = {"a": memory(1), "b": memory(2)}
    ed = editor(store)
    ed.link("a", "b", "conflicts_with")
    apply(store, ed.changes())
    assert store["a"]["conflicts_with"] == ["b"]
    assert store["b"]["conflicts_with"] == ["a"]
    assert {store["a"]["status"], store["b"]["status"]} == {"active"}


def test_detaching_the_newest_version_restores_the_one_it_replaced() -> None:
    store = {"a": memory(1), "b": memory(2)}
    supersede(store, "a", "b")
    ed = editor(store)
    assert ed.detach("b") == []
    apply(store, ed.changes())
    assert view(store, "a") == [("a", "active", 1, None, None)]
    assert store["a"]["valid_to"] is None
    assert store["b"]["supersedes"] == []


def test_detaching_a_middle_version_relinks_its_neighbours_and_renumbers() -> None:
    store = {"a": memory(1), "b": memory(2), "c": memory(3)}
    supersede(store, "a", "b")
    supersede(store, "b", "c")
    ed = editor(store)
    ed.detach("b")
    apply(store, ed.changes())
    assert view(store, "a", "c") == [("a", "superseded", 1, None, "c"), ("c", "active", 2, "a", None)]
    assert store["a"]["valid_to"] == store["c"]["valid_from"]
    assert chain_of("c", editor_load(store)) == ["a", "c"]


def test_detach_drops_links_and_returns_merged_duplicates() -> None:
    store = {"a": memory(1), "b": memory(2), "d": memory(3)}
    ed = editor(store)
    ed.link("a", "b", "related_ids")
    ed.merge("d", "a")
    apply(store, ed.changes())
    ed = editor(store)
    assert ed.detach("a") == ["d"]
    apply(store, ed.changes())
    assert store["b"]["related_ids"] == []


def test_chain_operations_never_revive_an_expired_or_merged_memory() -> None:
    store = {"a": memory(1), "b": memory(2)}
    supersede(store, "a", "b")
    store["a"]["status"] = "expired"
    ed = editor(store)
    ed.detach("b")
    apply(store, ed.changes())
    assert store["a"]["status"] == "expired"


def editor_load(store: Store) -> Any:
    return lambda ids: {i: store[i] for i in ids if i in store}


def test_chain_is_walked_both_ways_from_any_version() -> None:
    store = {"a": memory(1), "b": memory(2), "c": memory(3), "other": memory(4)}
    supersede(store, "a", "b")
    supersede(store, "b", "c")
    load = editor_load(store)
    assert chain_of("a", load) == ["a", "b", "c"]
    assert chain_of("b", load) == ["a", "b", "c"]
    assert chain_of("c", load) == ["a", "b", "c"]
    assert chain_of("other", load) == ["other"]
    assert chain_of("gone", load) == []
