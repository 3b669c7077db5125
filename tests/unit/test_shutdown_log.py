from __future__ import annotations

import asyncio
import logging
import sys

from hindsight.runtime import ShutdownCancellation


def _record(exc: BaseException) -> logging.LogRecord:
    try:
        raise exc
    except BaseException:  # noqa: BLE001 (the record needs a live exc_info)
        info = sys.exc_info()
    return logging.LogRecord("hindsight.faststream", logging.ERROR, __file__, 1, "boom", None, info)


def test_a_cancelled_handler_is_one_info_line_without_traceback() -> None:
    logger = logging.getLogger("hindsight.faststream")
    before = logger.level
    logger.setLevel(logging.INFO)  # HINDSIGHT_LOG_LEVEL=INFO: the line is shown
    try:
        record = _record(asyncio.CancelledError())
        assert ShutdownCancellation().filter(record)
    finally:
        logger.setLevel(before)
    assert (record.levelno, record.levelname, record.exc_info) == (logging.INFO, "INFO", None)


def test_other_errors_stay_errors_with_their_traceback() -> None:
    record = _record(ValueError("bad"))
    assert ShutdownCancellation().filter(record)
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None


def test_a_cancellation_is_dropped_when_its_logger_is_quieter_than_info() -> None:
    logger = logging.getLogger("hindsight.faststream")
    before = logger.level
    logger.setLevel(logging.WARNING)
    try:
        assert not ShutdownCancellation().filter(_record(asyncio.CancelledError()))
        assert ShutdownCancellation().filter(_record(ValueError("bad")))
    finally:
        logger.setLevel(before)
