"""Test configuration: loads every fixture plugin under tests/fixtures/.

Warnings are errors (``filterwarnings = ["error"]``), so a socket or transport a test leaks fails
that test. One exception, :func:`pytest_sessionfinish`: what is still garbage after the last
session fixture has closed (the session's event loop, broker and stack) is collected here and
reported on stderr instead of failing the whole run at exit. A CI run failed that way once: an
aiokafka consumer of the session stack lost its group coordinator while the stack stopped, and a
socket that library left unclosed surfaced only in pytest's final garbage collection, after every
test had passed."""

from __future__ import annotations

import gc
import pkgutil
import sys
import warnings
from pathlib import Path

import pytest

pytest_plugins = [
    f"tests.fixtures.{m.name}"
    for m in pkgutil.iter_modules([str(Path(__file__).parent / "fixtures")])
    if not m.name.startswith("_")
]


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Collect the session's leftover garbage with ResourceWarnings recorded, and print them."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        gc.collect()
    for leftover in caught:
        print(f"left unclosed after the session: {leftover.message}", file=sys.stderr)
