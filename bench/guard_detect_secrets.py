"""detect-secrets against the guard's own secret detection on the labelled lines (issue 10 item 1:
"an earlier probe found detect-secrets strong on code, weak on prose: measure").

Yelp's ``detect-secrets`` (1.5, its default plugins and filters, the way ``detect-secrets scan``
runs them: each line written to a file and scanned with :class:`SecretsCollection`) and
:func:`hindsight.pii.detect` (the secret types) see the same lines. A labelled secret counts as
found when a reported value covers it (or covers at least 80 % of it). Lines are ``code`` when they
look like code, configs, shells or logs (a newline, ``=``, ``$ ``, ``://``, ``Authorization:``),
else ``prose``. detect-secrets is not a dependency: run with
``uv run --with detect-secrets==1.5.0 hindsight bench guard --detect-secrets``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hindsight.pii import SECRET_TYPES, detect
from services.guard.dataset import Example

_CODE_MARKS = ("\n", "=", "$ ", "://", "Authorization:")


def is_code(text: str) -> bool:
    """Whether a line looks like code, a config, a shell or a log rather than prose."""
    return any(mark in text for mark in _CODE_MARKS)


def _covered(label: str, found: Sequence[str]) -> bool:
    return any(label in value or (value in label and len(value) >= 0.8 * len(label)) for value in found)


def _detect_secrets_values(texts: Sequence[str]) -> list[list[str]]:
    from detect_secrets import SecretsCollection  # type: ignore[import-not-found]  # noqa: PLC0415
    from detect_secrets.settings import default_settings  # type: ignore[import-not-found]  # noqa: PLC0415

    out: list[list[str]] = []
    with tempfile.TemporaryDirectory(prefix="bench-detect-secrets-") as tmp, default_settings():
        for i, text in enumerate(texts):
            path = Path(tmp) / f"line{i}.txt"
            path.write_text(text + "\n", encoding="utf-8")
            collection = SecretsCollection()
            collection.scan_file(str(path))
            out.append([str(s.secret_value) for name in collection.files for s in collection[name]])
    return out


def _ours(texts: Sequence[str]) -> list[list[str]]:
    return [[f.text for f in detect(text) if f.type in SECRET_TYPES] for text in texts]


def measure(examples: Sequence[Example], split: str) -> list[dict[str, Any]]:
    """One JSON line per system (``detect-secrets``, ``hindsight``) for ``examples``.

    Raises:
        ModuleNotFoundError: detect-secrets is not installed (see the module docstring).
    """
    texts = [e.text for e in examples]
    lines = []
    for name, found in (("detect-secrets", _detect_secrets_values(texts)), ("hindsight", _ours(texts))):
        hits = {"prose": [0, 0], "code": [0, 0]}
        flagged_clean = clean = 0
        for ex, values in zip(examples, found, strict=True):
            labels = [ex.text[s.start : s.end] for s in ex.spans if s.type in SECRET_TYPES]
            if not labels:
                clean += 1
                flagged_clean += bool(values)
                continue
            cell = hits["code" if is_code(ex.text) else "prose"]
            for label in labels:
                cell[0] += _covered(label, values)
                cell[1] += 1
        total = hits["prose"][1] + hits["code"][1]
        lines.append(
            {
                "bench": "guard",
                "system": name,
                "split": split,
                "what": "secret detection",
                "secret_spans": total,
                "recall": round((hits["prose"][0] + hits["code"][0]) / total, 4) if total else None,
                "recall_prose": round(hits["prose"][0] / hits["prose"][1], 4) if hits["prose"][1] else None,
                "prose_spans": hits["prose"][1],
                "recall_code": round(hits["code"][0] / hits["code"][1], 4) if hits["code"][1] else None,
                "code_spans": hits["code"][1],
                "lines_without_secrets_flagged": round(flagged_clean / clean, 4) if clean else None,
                "lines_without_secrets": clean,
            }
        )
    return lines
