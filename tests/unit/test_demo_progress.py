"""The demo's progress bars: a log line written while a bar is shown starts on its own line."""

from __future__ import annotations

import logging
import re
import sys

import pytest

from services.cli.demo import progress


def test_a_log_line_during_a_bar_is_not_glued_to_it(capsys: pytest.CaptureFixture[str]) -> None:
    handler = logging.StreamHandler(sys.stderr)  # the console handler hindsight's logging installs
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with progress(3, "recall", "q") as bar:
            bar.update(1)
            logging.getLogger("hindsight.test").warning("consumer group settled")
            bar.update(2)
    finally:
        root.removeHandler(handler)
    err = capsys.readouterr().err
    assert "recall" in err  # the bar was drawn
    assert re.search(r"(?:^|[\r\n])consumer group settled\n", err), repr(err)
    assert root.handlers.count(handler) == 0  # the redirect put the original handlers back
