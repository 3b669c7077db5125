"""Pieces every benchmark uses: JSON line output, rounding, timing, percentiles, scratch directories."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from hindsight.eval.metrics import latency_summary, percentile

__all__ = [
    "DEFAULT_DATA",
    "REPO_ROOT",
    "SHARED_DATA",
    "Stopwatch",
    "arg_parser",
    "latency_summary",
    "loadavg",
    "percentile",
    "print_line",
    "rounded",
    "scratch_dir",
]

REPO_ROOT = Path(__file__).resolve().parents[1]
"""The checkout whose code the benchmarks run (service processes use it as working directory)."""
DEFAULT_DATA = Path("../shared/data/locomo_dev.json")
"""The LoCoMo dev file, relative to the working directory (the checkout, with ``../shared`` beside it)."""
SHARED_DATA = REPO_ROOT.parent / "shared" / "data" / "locomo_dev.json"
"""The same file found from the checkout instead of the working directory."""


class _DefaultsHelp(argparse.ArgumentDefaultsHelpFormatter):
    """Shows ``(default: ...)`` where there is a default to show (not for flags, ``None`` or ``[]``)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default == [] or isinstance(action.default, bool):
            return action.help
        return super()._get_help_string(action)


def arg_parser(prog: str, doc: str | None) -> argparse.ArgumentParser:
    """A bench command's parser: ``--help`` shows every option's default; the description is the first
    line of the module docstring ``doc`` without its leading ````command``:```` and issue reference."""
    first = (doc or "").strip().splitlines()[0] if doc and doc.strip() else None
    return argparse.ArgumentParser(
        prog=prog,
        description=re.sub(r"^``[^`]+``:\s*|\s*\(issues? [\d, ]+\)", "", first) if first else None,
        formatter_class=_DefaultsHelp,
    )


def rounded(line: Mapping[str, Any], digits: int = 2) -> dict[str, Any]:
    """``line`` with its top-level floats rounded to ``digits`` decimals (other values unchanged)."""
    return {k: (round(v, digits) if isinstance(v, float) else v) for k, v in line.items()}


def loadavg() -> list[float]:
    """The 1/5/15-minute load averages, 2 decimals (how busy the shared machine was)."""
    return [round(x, 2) for x in os.getloadavg()]


def print_line(line: Mapping[str, Any], *, compact: bool = False) -> None:
    """Print one JSON line to stdout and flush (``compact``: no spaces after separators)."""
    text = json.dumps(line, separators=(",", ":")) if compact else json.dumps(line)
    print(text, flush=True)


class Stopwatch:
    """Milliseconds since construction (``perf_counter``): ``sw = Stopwatch(); ...; sw.ms()``."""

    __slots__ = ("started",)

    def __init__(self) -> None:
        self.started = time.perf_counter()

    def ms(self) -> float:
        """Milliseconds elapsed since construction."""
        return (time.perf_counter() - self.started) * 1000.0


@contextlib.contextmanager
def scratch_dir(prefix: str, keep: Path | None = None) -> Iterator[Path]:
    """``keep`` when given (created, left in place), else a temporary directory removed at exit."""
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep
        return
    with tempfile.TemporaryDirectory(prefix=prefix, ignore_cleanup_errors=True) as tmp:
        yield Path(tmp)
