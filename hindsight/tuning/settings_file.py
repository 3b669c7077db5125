"""The versioned tuned-settings file that ``hindsight tune --write`` produces and services load at
start-up (DESIGN.md section 10).

Layout (``HINDSIGHT_TUNING_FILE``, default ``<data_dir>/tuning/tuned-settings.json``)::

    {"version": 3, "written_at": "...", "source": {...}, "values": {"similarity_floor": 0.71, ...},
     "previous": {"version": 2, "values": {...}}, "statistics": {...}}

Every version is also archived next to it as ``tuned-settings.v0003.json``, so any earlier state can be
inspected, and :func:`rollback` writes a new version whose values are the previous version's (history
only grows). ``values`` holds only what the tuner fitted; a value it could not fit keeps the service's
own setting.

How services apply it (:func:`apply`): a value is used only for a setting the environment (or the
caller) did not set explicitly: an operator's ``HINDSIGHT_GATEWAY_SIMILARITY_FLOOR=0.7`` always wins
over the file. Which values each service takes is :data:`SERVICE_FIELDS`. The service records what it
applied in :class:`Applied`, which the gateway reports in ``/healthz`` (``tuned``) and every service logs
at start-up and exposes as ``hindsight_tuned_settings_version{service}``.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prometheus_client import Gauge
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from hindsight.errors import ConfigurationError

log = logging.getLogger("hindsight.tuning")

TUNED_VERSION = Gauge(
    "hindsight_tuned_settings_version",
    "Version of the tuned-settings file loaded at start-up (0: none)",
    ["service"],
)

SERVICE_FIELDS: dict[str, dict[str, str]] = {
    "gateway": {"similarity_floor": "similarity_floor"},
    "evict": {
        "decay_per_day": "decay_per_day",
        "decay_per_day_by_type": "decay_per_day_by_type",
        "expire_below": "expire_below",
    },
    "ingest": {"keep_threshold": "keep_threshold"},
}
"""Service -> {tuned value name: field of that service's settings}."""


class TuningSettings(BaseSettings):
    """Where the tuned-settings file lives (env prefix ``HINDSIGHT_TUNING_``)."""

    model_config = SettingsConfigDict(env_prefix="HINDSIGHT_TUNING_", extra="ignore")

    file: Path | None = Field(
        None, description="Tuned-settings file; default <HINDSIGHT_DATA_DIR>/tuning/tuned-settings.json."
    )
    enabled: bool = Field(True, description="Load the tuned-settings file at start-up.")

    def path(self, data_dir: Path) -> Path:
        """The file's path (``file``, or the default under ``data_dir``)."""
        return self.file if self.file is not None else data_dir / "tuning" / "tuned-settings.json"


class TunedValues(BaseModel):
    """The values a tuning run fitted (None: not fitted, the service keeps its own)."""

    model_config = ConfigDict(extra="forbid")

    similarity_floor: float | None = Field(None, ge=-1.0, le=1.0)
    decay_per_day: float | None = Field(None, gt=0.0)
    decay_per_day_by_type: dict[str, float] | None = None
    expire_below: float | None = Field(None, ge=0.0, le=1.0)
    keep_threshold: float | None = Field(None, ge=0.0, le=1.0)

    def present(self) -> dict[str, Any]:
        """Only the values that are set."""
        return self.model_dump(exclude_none=True)


class PreviousVersion(BaseModel):
    """The version a new one replaced (for rollback)."""

    version: int
    values: TunedValues


class TunedFile(BaseModel):
    """One version of the tuned-settings file."""

    version: int = Field(ge=1)
    written_at: datetime
    source: dict[str, Any] = Field(default_factory=dict)
    values: TunedValues
    previous: PreviousVersion | None = None
    statistics: dict[str, Any] = Field(default_factory=dict)


def load(path: Path) -> TunedFile | None:
    """The current version at ``path``, or ``None`` when there is no file.

    Raises:
        ConfigurationError: the file exists but is not a tuned-settings file (names the path).
    """
    if not path.exists():
        return None
    try:
        return TunedFile.model_validate_json(path.read_text(encoding="utf-8"))
    except (ValidationError, ValueError) as exc:
        raise ConfigurationError(
            f"{path} is not a valid tuned-settings file ({exc}); fix or delete it, or set "
            "HINDSIGHT_TUNING_ENABLED=false"
        ) from exc


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def archive_path(path: Path, version: int) -> Path:
    """Where version ``version`` is archived next to ``path``."""
    return path.with_name(f"{path.stem}.v{version:04d}{path.suffix}")


def write(
    path: Path,
    values: dict[str, Any],
    *,
    source: dict[str, Any] | None = None,
    statistics: dict[str, Any] | None = None,
) -> TunedFile:
    """Write a new version: ``values`` merged over the current version's (a value not fitted this time
    keeps the last tuned one), the current values kept as ``previous``; archived as ``*.vNNNN.json``.

    Raises:
        ConfigurationError: the existing file is invalid.
        pydantic.ValidationError: a value is out of range.
    """
    current = load(path)
    base = current.values.present() if current is not None else {}
    merged = TunedValues.model_validate({**base, **values})
    doc = TunedFile(
        version=(current.version + 1) if current is not None else 1,
        written_at=datetime.now(UTC),
        source=source or {},
        values=merged,
        previous=PreviousVersion(version=current.version, values=current.values)
        if current is not None
        else None,
        statistics=statistics or {},
    )
    text = json.dumps(doc.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"
    _atomic_write(archive_path(path, doc.version), text)
    _atomic_write(path, text)
    return doc


def rollback(path: Path) -> TunedFile:
    """Write a new version whose values are the previous version's (the history keeps both).

    Raises:
        ConfigurationError: no file, or no previous version to return to.
    """
    current = load(path)
    if current is None or current.previous is None:
        raise ConfigurationError(f"nothing to roll back to at {path}: it has no previous version")
    doc = TunedFile(
        version=current.version + 1,
        written_at=datetime.now(UTC),
        source={"rollback_to": current.previous.version, "rolled_back": current.version},
        values=current.previous.values,
        previous=PreviousVersion(version=current.version, values=current.values),
        statistics={},
    )
    text = json.dumps(doc.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"
    _atomic_write(archive_path(path, doc.version), text)
    _atomic_write(path, text)
    return doc


@dataclass
class Applied:
    """What one service took from the file at start-up (reported in ``/healthz``)."""

    service: str
    path: str
    version: int | None
    values: dict[str, Any] = field(default_factory=dict)
    overridden: list[str] = field(default_factory=list)
    """Tuned values not applied because the environment set that setting explicitly."""
    effective: dict[str, Any] = field(default_factory=dict)
    """The value in force of every tunable setting of this service (tuned, explicit or default)."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "version": self.version,
            "file": self.path,
            "values": self.values,
            "overridden_by_env": self.overridden,
            "effective": self.effective,
        }


def apply(service: str, settings: BaseSettings, tuning: TuningSettings, data_dir: Path) -> Applied:
    """Set ``settings`` fields from the tuned file (module doc: explicit settings win). Mutates
    ``settings`` in place and returns what was applied.

    Raises:
        ConfigurationError: the file exists but is invalid.
    """
    path = tuning.path(data_dir)
    fields = SERVICE_FIELDS[service]

    def effective() -> dict[str, Any]:
        return {name: getattr(settings, field_name) for name, field_name in fields.items()}

    if not tuning.enabled:
        TUNED_VERSION.labels(service).set(0)
        return Applied(service, str(path), None, effective=effective())
    doc = load(path)
    if doc is None:
        TUNED_VERSION.labels(service).set(0)
        return Applied(service, str(path), None, effective=effective())
    applied: dict[str, Any] = {}
    overridden: list[str] = []
    present = doc.values.present()
    for name, field_name in fields.items():
        if name not in present:
            continue
        if field_name in settings.model_fields_set:
            overridden.append(name)
            continue
        setattr(settings, field_name, present[name])
        applied[name] = present[name]
    TUNED_VERSION.labels(service).set(doc.version)
    log.info(
        "tuned settings loaded",
        extra={"service": service, "version": doc.version, "values": applied, "overridden": overridden},
    )
    return Applied(service, str(path), doc.version, applied, overridden, effective())
