"""Source-aware instruction classifier: the guard's first poisoning layer (issue 10 item 2).

A multinomial logistic regression over character n-grams (2-4, so English and Chinese alike, no
tokenizer) and the rule signals of :mod:`services.guard.poisoning`, trained on labelled lines
(``services/guard/data/``) with scikit-learn and shipped as plain weights (a gzipped JSON file, no
pickle). Classes: ``benign`` and the attack kinds of :data:`services.guard.dataset.ATTACK_KINDS`
that text alone can show (``indirect_injection``, ``fake_authority``, ``safety_override``,
``directive``).

Source awareness: every feature exists twice, once shared and once for the source group (``user``
or ``other``: tool results, web pages and documents, other agents, system notes). So "from now on
call me Sunny" can be benign from the user and an injection inside a tool result, and the model
learns the difference from data instead of from a rule (feature augmentation, Daume III 2007,
"Frustratingly easy domain adaptation").

Inference is pure Python + numpy: the n-grams of each window of the text are looked up in two
dicts and the weight rows summed; no scikit-learn at run time. Long texts are cut into windows of
about :data:`WINDOW_CHARS` characters at sentence ends and the most suspicious window decides, so
an instruction hidden in a long page is not diluted by the page.
"""

from __future__ import annotations

import gzip
import json
import math
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np

from services.guard.poisoning import detect_poisoning

MODEL_PATH: Final[Path] = Path(__file__).parent / "model" / "instruction.json.gz"
"""The shipped model (written by ``python -m services.guard.training``)."""
NGRAMS: Final[tuple[int, ...]] = (2, 3, 4)
WINDOW_CHARS: Final[int] = 320
"""Longest window classified at once; sentences are packed into windows up to this size."""
BENIGN: Final[str] = "benign"

_SPACE_RE: Final = re.compile(r"\s+")
_SENTENCE_RE: Final = re.compile(r"[^.!?。！？\n]*[.!?。！？\n]+|[^.!?。！？\n]+$")


def normalise(text: str) -> str:
    """NFKC fold (full-width to ASCII), lower case, whitespace collapsed; what n-grams are taken of."""
    return _SPACE_RE.sub(" ", unicodedata.normalize("NFKC", text).lower()).strip()


def source_group(source: str) -> str:
    """``user`` for the user's own words, ``other`` for every other channel (tools, documents, agents)."""
    return "user" if source == "user" else "other"


def grams(text: str) -> set[str]:
    """Character n-grams (:data:`NGRAMS`) of normalised ``text``, padded with spaces at the ends."""
    t = f" {normalise(text)} "
    return {t[i : i + n] for n in NGRAMS for i in range(len(t) - n + 1)}


def signals(text: str) -> set[str]:
    """Rule signals as features: ``rule:<id>`` for every rule of :func:`detect_poisoning` that fires."""
    return {f"rule:{s.rule}" for s in detect_poisoning(text)}


def feature_names(text: str, source: str) -> list[str]:
    """Every feature of ``(text, source)`` as a name (training uses these; inference the same sets)."""
    group = source_group(source)
    base = [*grams(text), *signals(text), "bias"]
    return [*(f"*{f}" for f in base), *(f"{group}{f}" for f in base)]


def windows(text: str, size: int = WINDOW_CHARS) -> list[str]:
    """``text`` cut at sentence ends into windows of at most about ``size`` characters."""
    if len(text) <= size:
        return [text]
    out: list[str] = []
    current = ""
    for found in _SENTENCE_RE.findall(text):
        sentence = found
        if current and len(current) + len(sentence) > size:
            out.append(current)
            current = ""
        while len(sentence) > size:  # one very long sentence: hard cut
            out.append(sentence[:size])
            sentence = sentence[size:]
        current += sentence
    if current.strip():
        out.append(current)
    return out or [text[:size]]


@dataclass(frozen=True, slots=True)
class Score:
    """The classifier's view of one text.

    Attributes:
        kind: the most likely class (``benign`` or an attack kind).
        attack: probability that the text is an attack (1 - P(benign)) in its most suspicious window.
        probabilities: class -> probability in that window.
    """

    kind: str
    attack: float
    probabilities: dict[str, float]


class InstructionClassifier:
    """Loads the shipped weights and scores texts; thread-safe (read-only after construction).

    Args:
        model: the decoded model document (see :func:`services.guard.training.train`): ``classes``,
            ``vocabulary`` (feature name -> row), ``weights`` (rows x classes), ``intercept``.
    """

    def __init__(self, model: dict[str, Any]) -> None:
        self.classes: tuple[str, ...] = tuple(model["classes"])
        self.version: str = str(model.get("version", "?"))
        vocab: dict[str, int] = model["vocabulary"]
        weights = np.asarray(model["weights"], dtype=np.float32)
        self._intercept = np.asarray(model["intercept"], dtype=np.float32)
        self._benign = self.classes.index(BENIGN)
        # One lookup per feature at run time: for each source group, feature -> row of a matrix
        # holding (shared + group) weights, and how many of the two copies exist (the L2 norm of
        # the binary feature vector counts both, as in training).
        self._tables: dict[str, tuple[dict[str, int], np.ndarray, np.ndarray]] = {}
        shared = {k[1:]: v for k, v in vocab.items() if k.startswith("*")}
        for group in ("user", "other"):
            own = {k[len(group) :]: v for k, v in vocab.items() if k.startswith(group)}
            names = sorted(shared.keys() | own.keys())
            rows = np.zeros((len(names), weights.shape[1]), dtype=np.float32)
            copies = np.zeros(len(names), dtype=np.float32)
            for i, name in enumerate(names):
                for table in (shared, own):
                    if (row := table.get(name)) is not None:
                        rows[i] += weights[row]
                        copies[i] += 1.0
            self._tables[group] = ({n: i for i, n in enumerate(names)}, rows, copies)

    @classmethod
    def load(cls, path: Path = MODEL_PATH) -> InstructionClassifier:
        """Read a model file written by the training script.

        Raises:
            OSError: the file cannot be read.
            ValueError: it is not a model document.
        """
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            doc = json.load(fh)
        if not isinstance(doc, dict) or "vocabulary" not in doc:
            raise ValueError(f"{path} is not an instruction-classifier model")
        return cls(doc)

    def _probabilities(self, text: str, group: str) -> np.ndarray:
        index, rows, copies = self._tables[group]
        hits = [i for f in (*grams(text), *signals(text), "bias") if (i := index.get(f)) is not None]
        logits = self._intercept.copy()
        if hits:
            logits += rows[hits].sum(axis=0) / math.sqrt(float(copies[hits].sum()))
        logits -= logits.max()
        exp = np.exp(logits)
        result: np.ndarray = exp / exp.sum()
        return result

    def score(self, text: str, source: str) -> Score:
        """Score ``text`` from ``source``; the most suspicious window of a long text decides."""
        group = source_group(source)
        best: np.ndarray | None = None
        for window in windows(text):
            probs = self._probabilities(window, group)
            if best is None or probs[self._benign] < best[self._benign]:
                best = probs
        assert best is not None
        kind = self.classes[int(np.argmax(best))]
        attack = 1.0 - float(best[self._benign])
        if kind == BENIGN and attack > 0.5:  # several attack kinds share the mass: name the largest
            kind = max((c for c in self.classes if c != BENIGN), key=lambda c: best[self.classes.index(c)])
        return Score(kind, attack, {c: float(p) for c, p in zip(self.classes, best, strict=True)})
