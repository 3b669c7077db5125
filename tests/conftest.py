"""Test configuration: loads every fixture plugin under tests/fixtures/."""

from __future__ import annotations

import pkgutil
from pathlib import Path

pytest_plugins = [
    f"tests.fixtures.{m.name}"
    for m in pkgutil.iter_modules([str(Path(__file__).parent / "fixtures")])
    if not m.name.startswith("_")
]
