"""Child processes of the embedded default (broker, Valkey) that must not outlive their owner.

``hindsight up`` runs a Kafka-protocol broker and a Valkey server as child processes. When ``up``
is killed with SIGKILL (or the OOM killer), nothing runs its shutdown code; a child left running
would keep the data directory's files open and its port bound, and the next ``up`` on the same
directory would start a second server over the same files. Two mechanisms prevent that:

- :func:`die_with_parent_argv` prefixes a command with ``setpriv --pdeathsig KILL --`` (util-linux,
  part of every Debian/Ubuntu base system): the kernel sends the child SIGKILL when the thread that
  started it exits. Launch such children from a thread that lives as long as the owner (the main
  thread, or the event loop's thread), never from a short-lived worker thread. The signal is armed
  when ``setpriv`` runs, a few milliseconds after the spawn: an owner killed inside that window
  leaves the child running, and :func:`reap_orphan` at the next start stops it;
- :func:`reap_orphan` stops a process recorded in a pid file by an earlier owner, for children that
  cannot be wrapped, or when ``setpriv`` is missing. Call it only while holding the data
  directory's lock (:mod:`hindsight.stores.dirlock`): then nobody legitimate uses that process.

SIGKILL of the children loses nothing they acknowledged: the broker and Valkey have written every
acknowledged record to the kernel (page cache) before answering, and the kernel keeps it.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
import time
from pathlib import Path

log = logging.getLogger("hindsight.childproc")


def die_with_parent_argv() -> list[str]:
    """``["setpriv", "--pdeathsig", "KILL", "--"]`` on Linux when ``setpriv`` is on PATH, else ``[]``
    (the child then outlives a SIGKILLed owner until :func:`reap_orphan` finds it)."""
    if not sys.platform.startswith("linux"):
        return []
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []


def _cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap_orphan(pid_file: Path, marker: str, *, timeout_s: float = 10.0) -> int | None:
    """Stop the process whose pid ``pid_file`` holds if it still runs and its command line contains
    ``marker`` (guards against a recycled pid); SIGTERM, then SIGKILL after ``timeout_s`` seconds.

    Returns:
        The pid that was stopped, or None when there was nothing to stop.
    """
    try:
        pid = int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    if pid <= 1 or pid == os.getpid() or not _alive(pid) or marker not in _cmdline(pid):
        return None
    log.warning(
        "stopping a server left running by an earlier owner of this data directory",
        extra={"pid": pid, "pid_file": str(pid_file)},
    )
    for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return pid
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if not _alive(pid) or marker not in _cmdline(pid):  # gone (or a zombie of another parent)
                return pid
            time.sleep(0.05)
    return pid
