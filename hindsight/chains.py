"""Version chains of memories (DESIGN.md section 2): supersede, merge, link, detach. Pure logic.

A chain is a sequence of versions of one thing ("works at: Airbus" -> "works at: Siemens") ordered
by **event time** (``created_ts``, the statement's ``occurred_at``; ties by id), never by arrival.
Its fields live in each memory's payload (:class:`~schemas.Memory`):

- ``supersedes``: every memory this version replaced; ``parent_id`` is the newest of them (the
  previous version) and ``version`` is one more than the highest version among them;
- ``superseded_by``: the next version; a memory with one has ``status="superseded"`` and
  ``valid_to`` = the next version's ``valid_from``;
- ``merged_into`` / ``merged_ids``: a duplicate (``status="merged"``) and the memory kept;
- ``related_ids`` (refinements) and ``conflicts_with`` (the judge could not tell): symmetric links,
  both memories stay active.

:class:`ChainEditor` applies these operations to working copies of payloads fetched through a
``load`` callback and returns the field changes per memory id; the caller writes them (set_payload)
and stays idempotent because applying the same changes twice is a no-op. Invariants it keeps:
``a.superseded_by == b`` iff ``a in b.supersedes``; ``parent_id``, ``version``, ``status`` and
``valid_to`` follow from those two fields.

**Insertion by event time.** ``supersede(older, newer, late=True)`` walks back from ``newer`` along
``parent_id`` past every version that is itself newer than ``older`` and inserts ``older`` there: a
statement that arrives late becomes the older version it is and never supersedes a newer one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

Payload = dict[str, Any]
Loader = Callable[[Sequence[str]], dict[str, Payload]]
"""``load(ids) -> {id: payload}`` (missing ids absent): the store's current payloads."""

MAX_WALK = 100
"""Longest chain walked (a guard against a cycle written by hand)."""
CHAIN_FIELDS = ("parent_id", "version", "superseded_by", "supersedes", "status", "valid_to")
"""Fields :meth:`ChainEditor.supersede` and :meth:`ChainEditor.detach` may change."""
_LIVE = ("active", "superseded")
"""Statuses a chain operation may set or clear; merged, expired and quarantined memories keep theirs."""


def event_key(payload: Payload, memory_id: str) -> tuple[float, str]:
    """Event-time order of a memory: ``(created_ts, id)`` (``created_ts`` = ``occurred_at``, epoch s)."""
    return float(payload.get("created_ts", 0.0)), memory_id


def _valid_from(payload: Payload) -> Any:
    return payload.get("valid_from") or payload.get("created_at")


class ChainEditor:
    """Working copies of the payloads a reconcile decision or a forget touches, and their changes.

    Args:
        load: fetches payloads by id (called for ids not seen yet; unknown ids are treated as gone).
    """

    def __init__(self, load: Loader) -> None:
        self._load = load
        self._nodes: dict[str, Payload] = {}
        self._missing: set[str] = set()
        self._changes: dict[str, Payload] = {}

    # -- access ------------------------------------------------------------------------------------

    def preload(self, payloads: dict[str, Payload]) -> None:
        """Seed working copies (e.g. records the caller already fetched); existing copies win."""
        for memory_id, payload in payloads.items():
            self._nodes.setdefault(memory_id, dict(payload))

    def node(self, memory_id: str) -> Payload | None:
        """The working copy of ``memory_id``'s payload, loading it if needed (``None`` when gone)."""
        if memory_id in self._nodes:
            return self._nodes[memory_id]
        if memory_id in self._missing:
            return None
        found = self._load([memory_id]).get(memory_id)
        if found is None:
            self._missing.add(memory_id)
            return None
        self._nodes[memory_id] = dict(found)
        return self._nodes[memory_id]

    def _need(self, memory_id: str) -> Payload:
        found = self.node(memory_id)
        if found is None:
            raise KeyError(f"memory {memory_id} is not in the store")
        return found

    def put(self, memory_id: str, field: str, value: Any) -> None:
        """Set one payload field (lists for sequences); recorded only when it changes."""
        if isinstance(value, tuple | set | frozenset):
            value = sorted(value) if isinstance(value, set | frozenset) else list(value)
        payload = self._need(memory_id)
        if payload.get(field) == value and field in payload:
            return
        payload[field] = value
        self._changes.setdefault(memory_id, {})[field] = value

    def changes(self) -> dict[str, Payload]:
        """``{memory_id: {field: new value}}`` for every memory whose payload changed."""
        return {k: dict(v) for k, v in self._changes.items() if v}

    def _key(self, memory_id: str) -> tuple[float, str]:
        return event_key(self._need(memory_id), memory_id)

    def _supersedes(self, memory_id: str) -> set[str]:
        return {str(s) for s in self._need(memory_id).get("supersedes") or ()}

    # -- derived fields ------------------------------------------------------------------------------

    def _refresh_head(self, memory_id: str) -> None:
        """``parent_id`` and ``version`` of ``memory_id`` from its ``supersedes``, then down the chain."""
        seen: set[str] = set()
        current: str | None = memory_id
        while current is not None and current not in seen and len(seen) < MAX_WALK:
            seen.add(current)
            preds = [p for p in self._supersedes(current) if self.node(p) is not None]
            if preds:
                newest = max(preds, key=self._key)
                self.put(current, "parent_id", newest)
                self.put(current, "version", 1 + max(int(self._need(p).get("version", 1)) for p in preds))
            else:
                self.put(current, "parent_id", None)
                self.put(current, "version", 1)
            nxt = self._need(current).get("superseded_by")
            current = str(nxt) if nxt and self.node(str(nxt)) is not None else None

    def _mark_superseded(self, memory_id: str, by: str) -> None:
        self.put(memory_id, "superseded_by", by)
        if self._need(memory_id).get("status", "active") in _LIVE:
            self.put(memory_id, "status", "superseded")
        self.put(memory_id, "valid_to", _valid_from(self._need(by)))

    def _mark_head(self, memory_id: str) -> None:
        self.put(memory_id, "superseded_by", None)
        if self._need(memory_id).get("status", "active") in _LIVE:
            self.put(memory_id, "status", "active")
            self.put(memory_id, "valid_to", None)

    # -- operations -----------------------------------------------------------------------------------

    def supersede(self, older: str, newer: str, *, late: bool = False) -> bool:
        """``newer`` replaces ``older`` (``older`` has the earlier event time, checked by the caller).

        ``late=False`` (the memory being reconciled is ``newer``): ``newer`` becomes the next version
        of ``older``; ``newer`` may replace several heads at once (one statement revising two things).
        ``late=True`` (the memory being reconciled is ``older``, a statement that arrived after newer
        ones): ``older`` is inserted into ``newer``'s chain at its event-time position (module doc).
        Returns False (and changes nothing) when ``older`` is already superseded by a memory outside
        ``newer``'s chain, is ``newer``, or either memory is gone.
        """
        if older == newer or self.node(older) is None or self.node(newer) is None:
            return False
        current = self._need(older).get("superseded_by")
        if current:
            return str(current) == newer or self._chain_contains(newer, older)
        position, moved = newer, set()
        if late:
            older_key = self._key(older)
            for _ in range(MAX_WALK):  # walk back past versions newer than `older`
                parent = self._need(position).get("parent_id")
                if not parent or self.node(str(parent)) is None:
                    break
                if self._key(str(parent)) < older_key:
                    moved = {str(parent)}
                    break
                position = str(parent)
        self.put(position, "supersedes", (self._supersedes(position) - moved) | {older})
        self.put(older, "supersedes", self._supersedes(older) | moved)
        for pred in moved:
            self._mark_superseded(pred, older)
        self._mark_superseded(older, position)
        self._refresh_head(older)
        return True

    def _chain_contains(self, head: str, member: str) -> bool:
        seen: set[str] = set()
        stack = [head]
        while stack and len(seen) < MAX_WALK:
            current = stack.pop()
            if current == member:
                return True
            if current in seen or self.node(current) is None:
                continue
            seen.add(current)
            stack.extend(self._supersedes(current))
        return False

    def merge(self, duplicate: str, kept: str, *, provenance: Payload | None = None) -> bool:
        """``duplicate`` holds the same information as ``kept``: it becomes ``status="merged"`` with
        ``merged_into=kept``; ``kept`` lists it in ``merged_ids`` (once) and gains its provenance in
        ``merged_event_ids`` / ``merged_refs``. Returns False when ``duplicate`` is already merged
        elsewhere or either memory is gone."""
        dup, keep = self.node(duplicate), self.node(kept)
        if dup is None or keep is None or duplicate == kept:
            return False
        if dup.get("merged_into") not in (None, kept):
            return False
        self.put(duplicate, "merged_into", kept)
        if dup.get("status", "active") in _LIVE:
            self.put(duplicate, "status", "merged")
        merged = [str(m) for m in keep.get("merged_ids") or ()]
        if duplicate not in merged:
            prov = provenance if provenance is not None else dup.get("provenance") or {}
            self.put(kept, "merged_ids", [*merged, duplicate])
            events = list(keep.get("merged_event_ids") or ())
            refs = list(keep.get("merged_refs") or ())
            self.put(kept, "merged_event_ids", [*events, *prov.get("event_ids", ())])
            self.put(kept, "merged_refs", [*refs, *prov.get("external_refs", ())])
        return True

    def link(self, a: str, b: str, field: str) -> bool:
        """Add ``a`` and ``b`` to each other's ``field`` (``related_ids`` or ``conflicts_with``)."""
        if a == b or self.node(a) is None or self.node(b) is None:
            return False
        for one, other in ((a, b), (b, a)):
            current = {str(x) for x in self._need(one).get(field) or ()}
            self.put(one, field, current | {other})
        return True

    def detach(self, memory_id: str) -> list[str]:
        """Take ``memory_id`` out of every chain and link (forget): its successor inherits what it
        superseded; if it was the newest version, the versions it superseded become active again (the
        statement that replaced them is gone); partners of its links drop it. Its own chain fields are
        cleared (the caller sets its status). Returns the ids of duplicates merged into it (the caller
        forgets them too: they hold the same information).
        """
        node = self._need(memory_id)
        preds = self._supersedes(memory_id)
        succ = node.get("superseded_by")
        successor = str(succ) if succ and self.node(str(succ)) is not None else None
        if successor is not None:
            self.put(successor, "supersedes", (self._supersedes(successor) - {memory_id}) | preds)
            for pred in preds:
                if self.node(pred) is not None:
                    self._mark_superseded(pred, successor)
            self._refresh_head(successor)
        else:
            for pred in preds:
                if self.node(pred) is not None:
                    self._mark_head(pred)
                    self._refresh_head(pred)
        for field in ("related_ids", "conflicts_with"):
            for partner in [str(x) for x in node.get(field) or ()]:
                other = self.node(partner)
                if other is not None:
                    self.put(partner, field, {str(x) for x in other.get(field) or ()} - {memory_id})
            self.put(memory_id, field, [])
        self.put(memory_id, "supersedes", [])
        self.put(memory_id, "superseded_by", None)
        self.put(memory_id, "parent_id", None)
        self.put(memory_id, "version", 1)
        return [str(m) for m in node.get("merged_ids") or ()]


def walk_chain(memory_id: str, load: Loader, *, limit: int = MAX_WALK) -> list[tuple[str, Payload]]:
    """``memory_id``'s version chain as ``(id, payload)``, oldest first: back along ``parent_id`` to
    the first version, then forward along ``superseded_by`` to the newest (both ways from any
    version). Unknown ids (or ids ``load`` refuses) end the walk; at most ``limit`` versions."""
    nodes: dict[str, Payload] = {}

    def get(ident: str) -> Payload | None:
        if ident not in nodes:
            found = load([ident]).get(ident)
            if found is None:
                return None
            nodes[ident] = found
        return nodes[ident]

    if get(memory_id) is None:
        return []
    back: list[str] = []
    current: str | None = memory_id
    while current is not None and current not in back and len(back) < limit:
        payload = get(current)
        if payload is None:
            break
        back.append(current)
        parent = payload.get("parent_id")
        current = str(parent) if parent else None
    chain = list(reversed(back))
    current = nodes[memory_id].get("superseded_by")
    while current and str(current) not in chain and len(chain) < limit:
        payload = get(str(current))
        if payload is None:
            break
        chain.append(str(current))
        current = payload.get("superseded_by")
    return [(ident, nodes[ident]) for ident in chain]


def chain_of(memory_id: str, load: Loader, *, limit: int = MAX_WALK) -> list[str]:
    """Ids of :func:`walk_chain`, oldest first."""
    return [ident for ident, _ in walk_chain(memory_id, load, limit=limit)]


def ids_of(values: Iterable[Any] | None) -> tuple[str, ...]:
    """Payload list of ids as a tuple of str (``None`` -> empty)."""
    return tuple(str(v) for v in values or ())
