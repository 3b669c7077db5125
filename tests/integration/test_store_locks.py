"""A second process is refused before it touches a running store, and /healthz sees a store that
cannot write (issue 13, defect 1).

Before the fix, a second ``EdgeVectorStore`` open on a directory held by another process was refused
only after qdrant-edge's ``load`` had deleted the running handle's tracker journals: every later
write of the running process failed ("tracker journal ... shorter than expected") while ``/healthz``
(a count, a read) still said ok.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import httpx
import numpy as np
import pytest
from faststream.kafka import KafkaBroker

from hindsight.errors import StoreUnavailableError
from hindsight.runtime import make_broker, open_resources
from hindsight.settings import AllSettings, KafkaSettings, RuntimeSettings
from hindsight.stores.dirlock import DirectoryLock, data_dir_lock
from hindsight.stores.vector import VectorRecord
from hindsight.stores.vector_edge import EdgeVectorStore
from services.gateway.app import build_asgi
from services.gateway.settings import GatewaySettings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

REPO_ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
DIM = 8


def _files(root: Path) -> dict[str, tuple[int, str]]:
    """Every file under ``root`` (the lock file excepted) -> (size, sha256)."""
    return {
        str(path.relative_to(root)): (path.stat().st_size, hashlib.sha256(path.read_bytes()).hexdigest())
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


HOLDER = textwrap.dedent(
    """
    import sys, uuid
    from pathlib import Path
    import numpy as np
    from hindsight.stores.vector import VectorRecord
    from hindsight.stores.vector_edge import EdgeVectorStore

    store = EdgeVectorStore(Path(sys.argv[1]), 8)
    ids = [str(uuid.UUID(int=k + 1)) for k in range(20)]
    store.upsert([VectorRecord(i, np.eye(8, dtype=np.float32)[k % 8], {"tenant_id": "t"})
                  for k, i in enumerate(ids)])
    print("ready", flush=True)
    sys.stdin.readline()  # the test opens the store from another process meanwhile
    store.upsert([VectorRecord(str(uuid.UUID(int=999)), np.ones(8, dtype=np.float32), {"tenant_id": "t"})])
    store.set_payload(ids[:3], {"status": "expired"})
    store.delete(ids[3:5])
    assert store.count() == 19, store.count()
    store.close()
    print("wrote and closed", flush=True)
    """
)


def test_a_refused_second_process_leaves_the_running_vector_store_untouched(tmp_path: Path) -> None:
    path = tmp_path / "qdrant" / "memories"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdin is not None
        assert holder.stdout.readline().strip() == "ready"
        before = _files(path)
        with pytest.raises(StoreUnavailableError, match=rf"open elsewhere \(pid {holder.pid}: .*--data-dir"):
            EdgeVectorStore(path, DIM)
        assert _files(path) == before  # refused before anything in the shard was opened
        holder.stdin.write("go\n")
        holder.stdin.flush()
        out, err = holder.communicate(timeout=120)
    finally:
        if holder.poll() is None:
            holder.kill()
    assert holder.returncode == 0, err[-3000:]
    assert "wrote and closed" in out
    reopened = EdgeVectorStore(path, DIM)  # the holder released its lock when it closed
    try:
        assert reopened.count() == 19
    finally:
        reopened.close()


def test_the_lock_of_a_killed_owner_is_free_at_once_and_names_a_live_owner(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import sys, time
        from pathlib import Path
        from hindsight.stores.dirlock import data_dir_lock
        lock = data_dir_lock(Path(sys.argv[1])).acquire()  # held while referenced
        print("locked", flush=True)
        time.sleep(600)
        """
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, text=True, env=ENV
    )
    try:
        assert owner.stdout is not None
        assert owner.stdout.readline().strip() == "locked"
        with pytest.raises(
            StoreUnavailableError, match=rf"data directory .* open elsewhere \(pid {owner.pid}"
        ):
            data_dir_lock(tmp_path).acquire()
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=30)
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait(timeout=30)
        if owner.stdout is not None:
            owner.stdout.close()
    with data_dir_lock(tmp_path) as lock:  # no stale lock: the kernel released it with the process
        assert lock.held
        with pytest.raises(StoreUnavailableError):  # a second handle in this process is refused too
            DirectoryLock(tmp_path / ".hindsight.lock", "it", "fix").acquire()
    assert not lock.held


async def test_healthz_reports_a_vector_store_that_answers_reads_but_cannot_write(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = AllSettings(
        runtime=RuntimeSettings(mode="local", data_dir=tmp_path, log_level="WARNING"),
        kafka=KafkaSettings(bootstrap=kafka_bootstrap),
    )
    settings.embedder.dim = DIM
    broker = make_broker(settings.kafka)
    # the damaged store also fails its final flush when the resources close: expected here
    with contextlib.suppress(StoreUnavailableError):
        await _healthz_before_and_after_damage(settings, broker, tmp_path)


async def _healthz_before_and_after_damage(
    settings: AllSettings, broker: KafkaBroker, tmp_path: Path
) -> None:
    async with open_resources(settings, broker) as resources:
        await broker.connect()
        try:
            store = resources.vector_store()
            store.upsert([VectorRecord(str(uuid.uuid4()), np.ones(DIM, np.float32), {"tenant_id": "t"})])
            app = build_asgi(resources, GatewaySettings(api_keys={"k": "t"}))
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
                healthy = await http.get("/healthz")
                assert healthy.status_code == 200, healthy.text
                assert healthy.json()["checks"] == {"kafka": "ok", "vector_store": "ok"}
                # What the refused second process used to do to the running store:
                journals = list((tmp_path / "qdrant").rglob("tracker_journal.dat"))
                assert journals
                for journal in journals:
                    journal.unlink()
                assert store.count() == 1  # reads still work ...
                broken = await http.get("/healthz")
            assert broken.status_code == 503  # ... but the store cannot write, and health says so
            body = broken.json()
            assert body["status"] == "unavailable"
            assert body["checks"]["kafka"] == "ok"
            assert "vector store failed" in body["checks"]["vector_store"]
            assert "ournal" in body["checks"]["vector_store"]
        finally:
            await broker.stop()
