"""The guard's labelled line format (benchmark set and classifier training data).

One example per line, ``KIND|SOURCE|TEXT``; ``#`` starts a comment line. Spans that must be
redacted are marked inline as ``[[type:value]]`` (types of :mod:`hindsight.pii`); the marks are
removed from the text and kept as :class:`Span` offsets. A literal ``\\n`` in TEXT is a newline.
KIND is ``pii``, ``lookalike``, ``secret``, ``benign`` or an attack kind (:data:`ATTACK_KINDS`).
SOURCE is an event source, optionally with a tool name: ``tool:web_fetch`` (the benchmark then
sends TEXT as the event's ``tool_result``, the way an agent reports a tool call). ``agent:NAME`` is
another agent's message: events have no ``agent`` source, and an agent hears another agent the way it
hears a tool (a delegated call and its result), so it is read as ``tool`` with tool name ``agent:NAME``.

Split: an example is ``heldout`` when ``crc32(text) % 3 == 0``, else ``dev`` (deterministic, about a
third held out, independent of line order). A file whose first lines contain ``#! split: NAME``
puts every example in split ``NAME`` (a whole file held out, e.g. ``fresh``).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final, Literal, get_args

from schemas.v1 import Source

AttackKind = Literal["indirect_injection", "fake_authority", "safety_override", "repetition", "directive"]
ATTACK_KINDS: Final[tuple[str, ...]] = get_args(AttackKind)
"""Poisoning kinds of issue 10: instructions hidden in tool results/documents, fake administrator
notices, tool output overturning safety-critical facts, one claim repeated, manipulative directives."""
KINDS: Final[frozenset[str]] = frozenset({"pii", "lookalike", "secret", "benign", *ATTACK_KINDS})
SOURCES: Final[frozenset[str]] = frozenset(get_args(Source))

_MARK_RE: Final = re.compile(r"\[\[([a-z_]+):(.+?)\]\]", re.DOTALL)
_SPLIT_RE: Final = re.compile(r"^#!\s*split:\s*([a-z0-9_]+)\s*$")


@dataclass(frozen=True, slots=True)
class Span:
    """A labelled span ``text[start:end]`` of PII/secret type ``type``."""

    type: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Example:
    """One labelled line."""

    kind: str
    source: str
    text: str
    spans: tuple[Span, ...]
    line: int
    tool_name: str | None = None
    fixed_split: str | None = None

    @property
    def attack(self) -> bool:
        """True for a poisoning attempt (any attack kind)."""
        return self.kind in ATTACK_KINDS

    @property
    def split(self) -> str:
        """The file's fixed split if it names one, else ``heldout`` for about a third of the
        examples (crc32 of the text) and ``dev`` for the rest."""
        if self.fixed_split is not None:
            return self.fixed_split
        return "heldout" if zlib.crc32(self.text.encode("utf-8")) % 3 == 0 else "dev"


def parse_line(raw: str, line: int = 0) -> Example | None:
    """One example from one line; ``None`` for blank and comment lines.

    Raises:
        ValueError: malformed line (names the line number, the field and the fix).
    """
    stripped = raw.rstrip("\n")
    if not stripped.strip() or stripped.lstrip().startswith("#"):
        return None
    parts = stripped.split("|", 2)
    if len(parts) != 3:
        raise ValueError(f"line {line}: expected KIND|SOURCE|TEXT, got {stripped[:60]!r}")
    kind, marked = parts[0].strip(), parts[2].replace("\\n", "\n")
    source, _, tool = parts[1].strip().partition(":")
    if source == "agent" and tool:
        source, tool = "tool", f"agent:{tool}"
    if kind not in KINDS:
        raise ValueError(f"line {line}: unknown kind {kind!r}; use one of {sorted(KINDS)}")
    if source not in SOURCES:
        raise ValueError(f"line {line}: unknown source {source!r}; use one of {sorted(SOURCES)}")
    text: list[str] = []
    spans: list[Span] = []
    pos = 0
    length = 0
    for m in _MARK_RE.finditer(marked):
        before = marked[pos : m.start()]
        text.append(before)
        length += len(before)
        value = m.group(2)
        spans.append(Span(m.group(1), length, length + len(value)))
        text.append(value)
        length += len(value)
        pos = m.end()
    text.append(marked[pos:])
    return Example(kind, source, "".join(text), tuple(spans), line, tool or None)


def parse(lines: Iterable[str]) -> Iterator[Example]:
    """Every example of ``lines`` (see :func:`parse_line`); a ``#! split: NAME`` line fixes the
    split of every example after it."""
    fixed: str | None = None
    for i, raw in enumerate(lines, start=1):
        directive = _SPLIT_RE.match(raw.strip())
        if directive is not None:
            fixed = directive.group(1)
            continue
        example = parse_line(raw, i)
        if example is not None:
            yield example if fixed is None else replace(example, fixed_split=fixed)


def load(path: Path) -> list[Example]:
    """Every example in the file at ``path`` (UTF-8).

    Raises:
        ValueError: a malformed line.
        OSError: the file cannot be read.
    """
    with path.open(encoding="utf-8") as fh:
        return list(parse(fh))
