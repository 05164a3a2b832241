"""SIGKILL while the ingest's writer queue is full (the store writer stalled mid-batch, the embedder blocked
on the queue): a re-run must end exactly where an uninterrupted run ends (stats, manifest, every paper and
chunk, searches), and a second re-run must have nothing left to do."""

from __future__ import annotations

import select
import subprocess
import sys
import time

import pytest

from tests.conftest import BUNDLED_CORPUS, PROJECT_ROOT
from tests.hardening.conftest import clean_env, cli, fake_cli_env, kill, snapshot

pytestmark = pytest.mark.slow


def wait_for(proc: subprocess.Popen, line: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if ready:
            got = proc.stdout.readline()
            if got.strip() == line:
                return
            if not got and proc.poll() is not None:
                break
    kill(proc)
    raise AssertionError(f"the ingest never printed {line!r}: {proc.stderr.read()[-2000:]}")


@pytest.mark.parametrize("stall_at", [2])
def test_ingest_killed_with_a_full_writer_queue_then_rerun_matches_a_clean_run(tmp_path, stall_at):
    killed_dir, clean_dir = tmp_path / "killed", tmp_path / "clean"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.rag.ingest_kill_driver", "ingest", str(BUNDLED_CORPUS)], cwd=PROJECT_ROOT,
        env=clean_env(PAPERCHAT_DATA_DIR=str(killed_dir), STALL_AT_WRITE=str(stall_at)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    try:
        wait_for(proc, "QUEUE FULL")
    finally:
        kill(proc)

    from store.chroma import ChromaStore

    store = ChromaStore(path=killed_dir / "chroma", collection="paperchat")
    papers, chunks = store.counts()
    assert 0 < papers < chunks < 76 and store.write_unfinished()  # some papers done, one batch's records missing
    del store

    with fake_cli_env(clean_dir):
        assert cli("ingest", str(BUNDLED_CORPUS))[0] == 0
    with fake_cli_env(killed_dir):
        code, out, err = cli("ingest", str(BUNDLED_CORPUS))
        assert code == 0 and "Traceback" not in err, err
        assert f"{76 - papers} added, 0 updated" in out
        code, out, err = cli("ingest", str(BUNDLED_CORPUS))
        assert code == 0 and "0 added, 0 updated, 76 unchanged" in out and "0 chunks written" in out
    assert snapshot(killed_dir) == snapshot(clean_dir)
