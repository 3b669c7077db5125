"""An exclusive OS lock on a directory, taken before anything in it is opened.

Embedded stores (qdrant-edge, chDB, the embedded broker's log, Valkey's AOF) allow one process per
directory, and some of them touch files while they find out that another process owns them:
qdrant-edge's ``EdgeShard.load`` truncates the running instance's tracker journals before it meets
the write-ahead-log lock (issue 13, defect 1). A second process must therefore be refused before it
opens anything: :class:`DirectoryLock` takes ``flock(LOCK_EX | LOCK_NB)`` on a lock file first.

``flock`` locks belong to the open file description: the kernel releases them when the process
exits however it exits (SIGKILL included), so a crashed owner never leaves a stale lock behind,
and a second handle in the same process conflicts as well. The lock file holds the owner's pid and
command line for the error message; its content is advisory, the lock is the ``flock``.
"""

from __future__ import annotations

import fcntl
import os
import sys
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from hindsight.errors import StoreUnavailableError


class DirectoryLock:
    """An exclusive, non-blocking ``flock`` on ``lock_file``, held until :meth:`release` (or until
    this object is garbage-collected, which closes the file: keep a reference while you need it).

    Args:
        lock_file: the lock file (created with its parent directories if missing; never deleted,
            so every process locks the same inode).
        what: what the lock protects, for the error message (e.g. ``"data directory var"``).
        hint: the remedy appended to the error message.
    """

    def __init__(self, lock_file: Path, what: str, hint: str) -> None:
        self.lock_file = Path(lock_file)
        self.what = what
        self.hint = hint
        self._handle: IO[str] | None = None

    @property
    def held(self) -> bool:
        """True while this object holds the lock."""
        return self._handle is not None

    def acquire(self) -> Self:
        """Take the lock or refuse at once; touches nothing but the lock file.

        Raises:
            StoreUnavailableError: another process (or another handle in this one) holds it; the
                message names the holder's pid and command line when it recorded them.
        """
        if self._handle is not None:
            return self
        self.lock_file.parent.mkdir(parents=True, exist_ok=True)
        handle = self.lock_file.open("a+", encoding="utf-8")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            handle.seek(0)
            owner = handle.read().strip()
            handle.close()
            holder = f" ({owner})" if owner else ""
            raise StoreUnavailableError(f"{self.what} is open elsewhere{holder}: {self.hint}") from exc
        except OSError:
            handle.close()
            raise
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}: {' '.join(sys.argv)[:300]}\n")
        handle.flush()
        self._handle = handle
        return self

    def release(self) -> None:
        """Release the lock (closing the file releases the ``flock``); idempotent."""
        if self._handle is None:
            return
        handle, self._handle = self._handle, None
        handle.close()

    def __enter__(self) -> Self:
        """Acquire (see :meth:`acquire`)."""
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Release."""
        self.release()


def data_dir_lock(data_dir: Path) -> DirectoryLock:
    """The lock of a whole Hindsight data directory (``<data_dir>/.hindsight.lock``), held by the
    process that runs the embedded stores there (``hindsight up``, ``hindsight demo``)."""
    return DirectoryLock(
        Path(data_dir) / ".hindsight.lock",
        f"data directory {data_dir}",
        "stop the other 'hindsight up' (or point this one at another --data-dir / HINDSIGHT_DATA_DIR; "
        "an MCP client on stdio can use the running one: HINDSIGHT_GATEWAY_URL, see README)",
    )
