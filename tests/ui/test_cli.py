"""The CLI as a user runs it: real subprocesses, real model, real Chroma; output and exit codes checked."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import BUNDLED_CORPUS, PROJECT_ROOT

pytestmark = pytest.mark.slow


def run(args, data_dir: Path, *, env_extra=None, timeout=300, stdin=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAPERCHAT_") and not k.startswith("OPENAI_")}
    env.update({"PAPERCHAT_DATA_DIR": str(data_dir), "PYTHONUNBUFFERED": "1", **(env_extra or {})})
    return subprocess.run(
        [sys.executable, "-m", "ui.cli", *args],
        cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=timeout, input=stdin,
    )


def assert_clean_failure(result, fragment: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    assert fragment in result.stderr, result.stderr


@pytest.fixture(scope="module")
def built_index(bundled_index):
    """The bundled corpus as `paperchat ingest` indexed it (tests/conftest.py checks that ingest's report)."""
    return bundled_index


def test_search_json_ranks_fedssm_first(built_index):
    result = run(["search", "state space models for choosing clients in federated learning", "--json"], built_index)
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["query"].startswith("state space models")
    top = payload["hits"][0]
    assert (top["source"], top["ordinal"], top["title"]) == ("000_dcbf1b5d2daaeff5.txt", 1, "FedSSM")
    assert set(top) == {"rank", "paper_id", "title", "score", "source", "ordinal", "text", "label", "authors", "year",
                        "venue", "url"}
    assert (top["label"], top["venue"], top["year"], top["authors"]) == ("ICML 2026 · #1 of file 000", "ICML 2026",
                                                                          2026, [])


def test_reingest_unchanged_writes_nothing(built_index):
    result = run(["ingest"], built_index)
    assert result.returncode == 0, result.stderr
    assert "0 added, 0 updated, 76 unchanged" in result.stdout and "0 chunks written" in result.stdout


def test_batch_search_keeps_order(built_index, tmp_path):
    questions = ["heart sound synthesis from ECG", "client selection in federated learning", "retrieval agents"]
    batch = tmp_path / "q.jsonl"
    batch.write_text("".join(json.dumps({"question": q}) + "\n" for q in questions))
    result = run(["search", "--batch", str(batch), "--k", "3", "--json"], built_index)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["query"] for line in lines] == questions
    assert all(len(line["hits"]) == 3 for line in lines)


def test_batch_search_takes_beir_queries_and_returns_their_ids(built_index, tmp_path):
    batch = tmp_path / "queries.jsonl"
    rows = [{"_id": "7", "text": "state space models for choosing clients in federated learning"},
            {"id": "q-2", "question": "what did the MA-RAG authors evaluate on?"}, {"query": "diffusion"}]
    batch.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = run(["search", "--batch", str(batch), "--k", "2", "--json"], built_index)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line.get("id") for line in lines] == ["7", "q-2", None]
    assert lines[0]["query"] == rows[0]["text"] and lines[0]["hits"][0]["title"] == "FedSSM"
    assert lines[2]["query"] == "diffusion" and len(lines[2]["hits"]) == 2


def test_stats_and_eval(built_index):
    stats = json.loads(run(["stats", "--json"], built_index).stdout)
    assert stats["papers"] == 76 and stats["chunks"] >= 76
    # A new index of the bundled model is built with its int8 ONNX export (the default backend).
    assert stats["embedding_model"] == "all-MiniLM-L6-v2-int8" and str(built_index) in stats["store"]
    result = run(["eval", str(PROJECT_ROOT / "data" / "eval" / "dev.jsonl"), "--json"], built_index)
    assert result.returncode == 0, result.stderr
    metrics = json.loads(result.stdout)
    assert metrics["recall@1"] >= 0.96 and metrics["mrr"] >= 0.98


def test_user_errors_are_one_line_without_traceback(built_index, tmp_path):
    # A bad question is said first and alone: no notice about the answer writer, no index built for it.
    empty = run(["ask", ""], tmp_path / "never-built")
    assert_clean_failure(empty, "empty")
    assert empty.stderr.strip().count("\n") == 0 and not (tmp_path / "never-built").exists()
    typo = run(["search", "q"], built_index, env_extra={"PAPERCHAT_COLLECTION": "paperchatt"})
    assert_clean_failure(typo, "no collection named 'paperchatt'")
    assert "existing: paperchat" in typo.stderr
    assert_clean_failure(run(["search", "x" * 100_000], built_index), "limit is 4,000")
    # Longer than one command-line argument may be: through stdin.
    assert_clean_failure(run(["search", "-"], built_index, stdin="y" * 200_000), "limit is 4,000")
    assert_clean_failure(run(["search", "q"], built_index, env_extra={"PAPERCHAT_TOP_K": "many"}), "PAPERCHAT_TOP_K")
    assert_clean_failure(
        run(["search", "q"], built_index, env_extra={"PAPERCHAT_CHUNK_MAX_TOKENS": "128"}), "ingest --rebuild"
    )
    assert_clean_failure(
        run(["search", "q"], built_index, env_extra={"PAPERCHAT_EMBEDDING_MODEL": str(tmp_path / "nope")}),
        "does not exist",
    )
    assert_clean_failure(
        run(["search", "q"], built_index, env_extra={"PAPERCHAT_EMBEDDING_BACKEND": "fast"}),
        "PAPERCHAT_EMBEDDING_BACKEND",
    )
    # The index holds int8 vectors: searching it with the torch model's would be silently off.
    assert_clean_failure(
        run(["search", "q"], built_index, env_extra={"PAPERCHAT_EMBEDDING_BACKEND": "torch"}), "ingest --rebuild"
    )
    assert_clean_failure(
        run(["search", "q"], built_index, env_extra={"PAPERCHAT_RERANKER_MODEL": str(tmp_path / "no-reranker")}),
        "PAPERCHAT_RERANKER_MODEL",
    )
    assert_clean_failure(run(["ingest", str(tmp_path / "missing")], built_index), "missing")
    bad_batch = tmp_path / "bad.jsonl"
    bad_batch.write_text('{"question": "ok"}\n{not json\n')
    assert_clean_failure(run(["search", "--batch", str(bad_batch), "--json"], built_index), "line 2")


def test_search_on_empty_index_builds_it_first(tmp_path):
    result = run(["search", "heart sounds from electrocardiograms", "--k", "2"], tmp_path / "fresh")
    assert result.returncode == 0, result.stderr
    assert "index is empty" in result.stderr and "building it" in result.stderr
    assert result.stdout.startswith("1. ")


def test_broken_folder_keeps_valid_records_and_names_every_bad_one(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    shutil.copy(BUNDLED_CORPUS / "000_dcbf1b5d2daaeff5.txt", folder / "good.txt")
    (folder / "binary.txt").write_bytes(b"\x00\x01\x02PNG\x00" * 50)
    (folder / "latin1.txt").write_bytes("Caf\xe9 abstracts about caf\xe9s.".encode("latin-1"))
    (folder / "empty.txt").write_text("")
    (folder / "mixed.jsonl").write_text(
        json.dumps({"id": "j1", "title": "Good JSON", "abstract": "A valid abstract about graphs."}) + "\n"
        + "{broken json\n"
        + json.dumps({"id": "j3", "title": "No text"}) + "\n"
    )
    (folder / "notext.csv").write_text("id,title\n1,Only a title\n")
    result = run(["ingest", str(folder)], tmp_path / "idx")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    for name in ("binary.txt", "latin1.txt", "empty.txt", "mixed.jsonl", "notext.csv"):
        assert name in result.stderr, name
    assert "line 2" in result.stderr and "line 3" in result.stderr
    stats = json.loads(run(["stats", "--json"], tmp_path / "idx").stdout)
    assert stats["papers"] == 19 + 1  # the 19 seed abstracts and the one valid JSON record


def test_sigkill_during_ingest_then_rerun_matches_clean_run(built_index, tmp_path):
    clean = json.loads(run(["stats", "--json"], built_index).stdout)
    data_dir = tmp_path / "killed"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAPERCHAT_")}
    env["PAPERCHAT_DATA_DIR"] = str(data_dir)
    chroma_file = data_dir / "chroma" / "chroma.sqlite3"
    for kill_after in (0.5, 1.5, 3.0):
        proc = subprocess.Popen([sys.executable, "-m", "ui.cli", "ingest"], cwd=PROJECT_ROOT, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # Wait until the store exists and writing has begun, then kill at different depths into the write.
        deadline = time.monotonic() + 120
        while not chroma_file.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        time.sleep(kill_after)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    result = run(["ingest"], data_dir)
    assert result.returncode == 0, result.stderr
    after = json.loads(run(["stats", "--json"], data_dir).stdout)
    assert (after["papers"], after["chunks"]) == (clean["papers"], clean["chunks"])
    again = run(["ingest"], data_dir)
    assert "76 unchanged" in again.stdout and "0 chunks written" in again.stdout

