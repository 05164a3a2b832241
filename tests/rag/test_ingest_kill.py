"""SIGKILL while the ingest's writer queue is full (the store writer blocked between a batch's chunks and its
paper records, the embedder blocked on the full queue): a re-run must end exactly where an uninterrupted run
ends (stats, manifest, every paper and chunk, searches), and a second re-run must have nothing left to do.

The driver (tests/rag/ingest_kill_driver.py) says when that state is reached by creating a marker file; the
kill waits for it, so the test does not depend on timing (the earlier version did, and was removed)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import BUNDLED_CORPUS, PROJECT_ROOT
from tests.hardening.conftest import clean_env, cli, fake_cli_env, kill, snapshot

pytestmark = pytest.mark.slow

CORPUS_PAPERS = 76


def wait_for_file(proc: subprocess.Popen, marker: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if marker.exists():
            return
        time.sleep(0.02)
    kill(proc)
    raise AssertionError(f"the ingest never reported a full writer queue (exit code {proc.returncode}): "
                         f"{proc.stderr.read()[-2000:]}")


def test_ingest_killed_with_a_full_writer_queue_then_rerun_matches_a_clean_run(tmp_path):
    killed_dir, clean_dir, marker = tmp_path / "killed", tmp_path / "clean", tmp_path / "queue-full"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.rag.ingest_kill_driver", "ingest", str(BUNDLED_CORPUS)], cwd=PROJECT_ROOT,
        env=clean_env(PAPERCHAT_DATA_DIR=str(killed_dir), INGEST_KILL_MARKER=str(marker)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    try:
        wait_for_file(proc, marker)
    finally:
        kill(proc)

    from store.chroma import ChromaStore

    store = ChromaStore(path=killed_dir / "chroma", collection="paperchat")
    papers, chunks = store.counts()
    # The first write (the first paper alone) committed; the second wrote chunks and no records.
    assert papers == 1 and chunks > papers and store.write_unfinished(), (papers, chunks)
    del store

    with fake_cli_env(clean_dir):
        assert cli("ingest", str(BUNDLED_CORPUS))[0] == 0
    with fake_cli_env(killed_dir):
        code, out, err = cli("ingest", str(BUNDLED_CORPUS))
        assert code == 0 and "Traceback" not in err, err
        assert f"{CORPUS_PAPERS - papers} added, 0 updated" in out
        code, out, err = cli("ingest", str(BUNDLED_CORPUS))
        assert code == 0 and f"0 added, 0 updated, {CORPUS_PAPERS} unchanged" in out and "0 chunks written" in out
    assert snapshot(killed_dir) == snapshot(clean_dir)
