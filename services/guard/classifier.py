"""Source-aware instruction classifier: the guard's first poisoning layer (issue 10 item 2).

A multinomial logistic regression over hashed character n-grams (2-4, so English and Chinese alike,
no tokenizer), the rule signals of :mod:`services.guard.poisoning` and the concept cues of
:mod:`services.guard.cues`, trained on labelled lines (``services/guard/data/``) with scikit-learn
and shipped as plain weights (a NumPy ``.npz`` read with ``allow_pickle=False``). Classes:
``benign`` and the attack kinds of :data:`services.guard.dataset.ATTACK_KINDS` that text alone can
show (``indirect_injection``, ``fake_authority``, ``safety_override``, ``directive``).

Features (:func:`features`): every character 2-, 3- and 4-gram of the normalised text is hashed
into one of :data:`BUCKETS` slots (the hashing trick, Weinberger et al. 2009, "Feature hashing for
large scale multitask learning"): a polynomial rolling hash over the code points computed for the
whole text at once with NumPy, then Fibonacci multiplicative mixing (Knuth, TAOCP vol. 3, 6.4) to
take the top :data:`HASH_BITS` bits. No n-gram string is ever built, so featurising costs a few
NumPy calls instead of one Python object per n-gram. Rule signals, cues and a bias take the slots
after the buckets. Features are binary and the vector is L2-normalised.

Source awareness: every feature exists three times, once shared and once for each source group
(``user``; ``other``: tool results, web pages and documents, other agents, system notes), and a
line activates the shared copy and its group's copy. So "from now on call me Sunny" can be benign
from the user and an injection inside a tool result, and the model learns the difference from
data instead of from a rule (feature augmentation, Daume III 2007, "Frustratingly easy domain
adaptation"). At load time the shared and group weights are summed into one dense table per group,
so scoring is one gather and one sum.

Long texts are cut into windows of about :data:`WINDOW_CHARS` characters at sentence ends and the
most suspicious window decides, so an instruction hidden in a long page is not diluted by the page.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np

from hindsight.folding import fold, simplified
from services.guard.cues import CUES, cues
from services.guard.poisoning import RULE_REASONS, detect_poisoning

MODEL_PATH: Final[Path] = Path(__file__).parent / "model" / "instruction.npz"
"""The shipped model (written by ``python -m services.guard.training``)."""
NGRAMS: Final[tuple[int, ...]] = (2, 3, 4)
HASH_BITS: Final[int] = 18
"""2**18 = 262,144 n-gram slots: the training lines hold ~120k distinct n-grams, so most land alone."""
BUCKETS: Final[int] = 1 << HASH_BITS
RULES: Final[tuple[str, ...]] = tuple(RULE_REASONS)
"""Rule ids of :func:`services.guard.poisoning.detect_poisoning`, each one feature slot."""
CUE_NAMES: Final[tuple[str, ...]] = tuple(CUES)
N_FEATURES: Final[int] = BUCKETS + len(RULES) + len(CUE_NAMES) + 1
"""Slots per copy: n-gram buckets, rule signals, cues, bias (the last slot)."""
GROUPS: Final[tuple[str, ...]] = ("user", "other")
"""Source groups; copy 0 is shared, copy ``1 + GROUPS.index(g)`` belongs to group ``g``."""
WINDOW_CHARS: Final[int] = 320
"""Longest window classified at once; sentences are packed into windows up to this size."""
BENIGN: Final[str] = "benign"

_RULE_SLOT: Final[dict[str, int]] = {r: BUCKETS + i for i, r in enumerate(RULES)}
_CUE_SLOT: Final[dict[str, int]] = {c: BUCKETS + len(RULES) + i for i, c in enumerate(CUE_NAMES)}
_BIAS_SLOT: Final[int] = N_FEATURES - 1
_PRIME: Final = np.uint64(0x100000001B3)  # FNV-1a 64-bit prime: the rolling-hash base
_MIX: Final = np.uint64(0x9E3779B97F4A7C15)  # 2**64 / golden ratio (Fibonacci hashing)
_SHIFT: Final = np.uint64(64 - HASH_BITS)
_SPACE_RE: Final = re.compile(r"\s+")
_SENTENCE_RE: Final = re.compile(r"[^.!?。！？\n]*[.!?。！？\n]+|[^.!?。！？\n]+$")


def normalise(text: str) -> str:
    """NFKC fold (full-width to ASCII), lower case, scripts folded (Traditional Chinese to Simplified,
    Greek accents dropped: :func:`hindsight.folding.fold`), whitespace collapsed; what n-grams and
    cues are taken of."""
    return _SPACE_RE.sub(" ", fold(unicodedata.normalize("NFKC", text).lower())).strip()


def source_group(source: str) -> str:
    """``user`` for the user's own words, ``other`` for every other channel (tools, documents, agents)."""
    return "user" if source == "user" else "other"


def gram_buckets(normalised: str) -> np.ndarray:
    """Sorted unique bucket ids (int64) of the character n-grams of ``normalised`` text (see
    :func:`normalise`) padded with a space at each end.

    The hash of ``padded[i : i + n]`` is the polynomial ``sum(code[i + k] * P**(n - 1 - k))`` mod 2**64
    (grams of different lengths are different polynomials), mixed by one multiplication; NumPy does
    not check integer overflow on arrays, so the wrap-around is the intended modulus.
    """
    codes = np.frombuffer(f" {normalised} ".encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    parts = []
    rolling = codes
    for n in range(2, max(NGRAMS) + 1):
        if len(rolling) < 2:
            break
        rolling = rolling[:-1] * _PRIME + codes[n - 1 :]
        if n in NGRAMS:
            parts.append(rolling)
    if not parts:
        return np.zeros(0, dtype=np.int64)
    buckets = np.sort(((np.concatenate(parts) * _MIX) >> _SHIFT).astype(np.int64))
    keep = np.empty(len(buckets), dtype=bool)
    keep[0] = True
    np.not_equal(buckets[1:], buckets[:-1], out=keep[1:])
    return buckets[keep]


def features(text: str) -> np.ndarray:
    """Feature slots of ``text`` (before source copies): n-gram buckets, fired rules, cues, bias."""
    normalised = normalise(text)
    extra = [_RULE_SLOT[s.rule] for s in detect_poisoning(simplified(text))]
    extra.extend(_CUE_SLOT[c] for c in cues(normalised))
    extra.append(_BIAS_SLOT)
    return np.concatenate([gram_buckets(normalised), np.asarray(extra, dtype=np.int64)])


def columns(text: str, source: str) -> np.ndarray:
    """Model columns of ``(text, source)``: each feature's shared copy and its source group's copy
    (training builds its matrix from exactly these; value ``1/sqrt(len)`` each)."""
    feats = features(text)
    copy = 1 + GROUPS.index(source_group(source))
    return np.concatenate([feats, feats + copy * N_FEATURES])


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
    """Scores texts with shipped weights; thread-safe (read-only after construction).

    Args:
        classes: class names, in weight-column order.
        weights: ``(3 * N_FEATURES, len(classes))`` coefficients (shared copy, then one per group).
        intercept: ``(len(classes),)``.
        version: a label of the training run.

    Raises:
        ValueError: the shapes do not match this module's feature layout.
    """

    def __init__(
        self, classes: tuple[str, ...], weights: np.ndarray, intercept: np.ndarray, version: str
    ) -> None:
        if weights.shape != (3 * N_FEATURES, len(classes)) or intercept.shape != (len(classes),):
            raise ValueError(
                f"model shape {weights.shape} does not fit {3 * N_FEATURES} features x "
                f"{len(classes)} classes: "
                "retrain with `uv run python -m services.guard.training`"
            )
        if BENIGN not in classes:
            raise ValueError(f"model classes {classes} lack {BENIGN!r}")
        self.classes = classes
        self.version = version
        self._benign = classes.index(BENIGN)
        self._bias: list[float] = [float(b) for b in intercept]
        shared = weights[:N_FEATURES]
        self._tables = {
            g: np.ascontiguousarray(
                shared + weights[(1 + i) * N_FEATURES : (2 + i) * N_FEATURES], dtype=np.float32
            )
            for i, g in enumerate(GROUPS)
        }

    @classmethod
    def load(cls, path: Path = MODEL_PATH) -> InstructionClassifier:
        """Read a model file written by the training script (``.npz``, no pickle).

        Raises:
            OSError: the file cannot be read.
            ValueError: it is not a model of this feature layout.
        """
        with np.load(path, allow_pickle=False) as doc:
            try:
                meta = json.loads(str(doc["meta"]))
                rows, values = doc["rows"], doc["values"]
                classes = tuple(str(c) for c in doc["classes"])
                intercept = doc["intercept"]
            except KeyError as exc:
                raise ValueError(f"{path} is not an instruction-classifier model (missing {exc})") from exc
        layout = {
            "hash_bits": HASH_BITS,
            "ngrams": list(NGRAMS),
            "rules": list(RULES),
            "cues": list(CUE_NAMES),
        }
        if {k: meta.get(k) for k in layout} != layout:
            raise ValueError(f"{path} was trained with another feature layout: retrain the model")
        weights = np.zeros((3 * N_FEATURES, len(classes)), dtype=np.float32)
        weights[rows] = values
        return cls(classes, weights, intercept, str(meta.get("version", "?")))

    def probabilities(self, text: str, source: str) -> list[float]:
        """Class probabilities of one window ``text`` from ``source`` (softmax of the logits), in
        :attr:`classes` order. The five-number arithmetic runs in plain Python: on arrays this small
        each NumPy call costs more than the work."""
        feats = features(text)
        summed = self._tables[source_group(source)].take(feats, axis=0).sum(axis=0).tolist()
        scale = 1.0 / math.sqrt(2.0 * len(feats))
        logits = [b + w * scale for b, w in zip(self._bias, summed, strict=True)]
        top = max(logits)
        exp = [math.exp(v - top) for v in logits]
        total = sum(exp)
        return [e / total for e in exp]

    def score(self, text: str, source: str) -> Score:
        """Score ``text`` from ``source``; the most suspicious window of a long text decides."""
        best: list[float] | None = None
        for window in windows(text):
            probs = self.probabilities(window, source)
            if best is None or probs[self._benign] < best[self._benign]:
                best = probs
        assert best is not None
        attack = 1.0 - best[self._benign]
        kind = self.classes[max(range(len(best)), key=best.__getitem__)]
        if kind == BENIGN and attack > 0.5:  # several attack kinds share the mass: name the largest
            kind = max((c for c in self.classes if c != BENIGN), key=lambda c: best[self.classes.index(c)])
        return Score(kind, attack, dict(zip(self.classes, best, strict=True)))
