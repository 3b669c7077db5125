"""Ingest settings read from the environment."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from services.ingest.settings import IngestSettings

pytestmark = pytest.mark.unit


def test_stages_accept_the_plain_values_the_readme_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    # found by the issue-5 work: HINDSIGHT_INGEST_STAGES=trigger did not parse (JSON was required)
    monkeypatch.setenv("HINDSIGHT_INGEST_STAGES", "trigger")
    assert IngestSettings().stages == ("trigger",)
    monkeypatch.setenv("HINDSIGHT_INGEST_STAGES", "trigger, embed")
    assert IngestSettings().stages == ("trigger", "embed")
    monkeypatch.setenv("HINDSIGHT_INGEST_STAGES", '["embed"]')
    assert IngestSettings().stages == ("embed",)
    monkeypatch.setenv("HINDSIGHT_INGEST_STAGES", "embedd")
    with pytest.raises(ValidationError, match="stages"):
        IngestSettings()
