"""Evict service app: ``faststream run services.evict.app:create_app --factory``.

Runs the eviction job every ``HINDSIGHT_EVICT_INTERVAL_S`` seconds (DESIGN.md section 4).
"""

from __future__ import annotations

import functools

from faststream import FastStream

from hindsight.runtime import Resources, service_app
from services.evict.job import EvictionJob, run_forever
from services.evict.settings import EvictSettings


def register(resources: Resources, settings: EvictSettings | None = None) -> EvictionJob:
    """Schedule the eviction job as a background task; returns the job (for on-demand runs).

    Tuned values (decay per day, per memory type, expiry threshold) are applied from the tuned-settings
    file where the environment does not set them (:mod:`hindsight.tuning.settings_file`).
    """
    cfg = settings or EvictSettings()
    resources.apply_tuned("evict", cfg)
    job = EvictionJob(resources.vector_store(), resources.access_log(), cfg)
    resources.background.append(functools.partial(run_forever, job, cfg.interval_s))
    return job


def create_app() -> FastStream:
    """App factory: settings are read here, clients opened in the lifespan."""
    return service_app(register)
