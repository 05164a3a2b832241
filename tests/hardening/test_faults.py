"""Faults while serving and ingesting: the LLM endpoint dies mid-answer, the Chroma server goes away and
comes back, the index folder turns read-only or the disk fills up during an ingest. Each fault gives one
clear message, leaves the index as it was, and the next request works once the fault is gone."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from rag.answers.pipeline import AnswerPipeline, FinalEvent, TextEvent
from rag.errors import StoreUnavailable
from rag.llm.client import OpenAIChatModel
from tests.conftest import BUNDLED_CORPUS, PROJECT_ROOT, FakeEmbedder
from tests.hardening.conftest import (
    clean_env,
    cli,
    fake_cli_env,
    kill,
    run_driver,
    snapshot,
)
from tests.processes import free_port, stop_process

QUESTION = "state space models for choosing clients in federated learning"
REPLY = "FedSSM selects clients with state space models, predicting training dynamics ahead of time [1]."


# --- the LLM endpoint dies mid-answer ---------------------------------------------------------------------------------


def test_cut_mid_stream_keeps_the_partial_answer_marked_and_the_next_question_works(fake_index, llm_server):
    llm_server.reply = REPLY
    llm_server.mode = "cut"
    llm_server.cut_after = 3  # 3 chunks of 8 characters, then the connection drops
    model = OpenAIChatModel(llm_server.base_url, model="scripted-model", retries=2, backoff=0.01, timeout=5)
    pipeline = AnswerPipeline(fake_index, fake_index.embedder, model)

    events = list(pipeline.stream(QUESTION))
    shown = "".join(e.content for e in events if isinstance(e, TextEvent))
    final = events[-1].answer
    assert isinstance(events[-1], FinalEvent)
    assert final.interrupted and final.answer == REPLY[:24].strip() == shown.strip()
    assert len(llm_server.chat_requests) == 1  # part of the answer was shown: never retried behind the user's back

    llm_server.mode = "stream"
    again = pipeline.answer(QUESTION)
    assert not again.interrupted and again.answer == REPLY
    assert [c.title for c in again.citations] == ["FedSSM"]


@pytest.fixture(scope="module")
def ui_index(tmp_path_factory):
    """A data folder with one bundled file (FedSSM and 18 more) indexed by the fake embedder."""
    data_dir = tmp_path_factory.mktemp("ui-index")
    with fake_cli_env(data_dir):
        code, _, err = cli("ingest", str(BUNDLED_CORPUS / "000_dcbf1b5d2daaeff5.txt"))
    assert code == 0, err
    return data_dir


@contextlib.contextmanager
def ui_components(data_dir: Path, **settings):
    """``Components`` as the app builds them, over ``data_dir``, with the fake embedder."""
    from rag.components import Components
    from rag.settings import load_settings

    with fake_cli_env(data_dir):
        components = Components(load_settings(**settings), embedder=FakeEmbedder())
        try:
            yield components
        finally:
            components.close()


def start_llm_process(port: int, *args: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fake_llm", "--port", str(port), "--reply", REPLY, *args],
        cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=clean_env(),
    )
    assert proc.stdout.readline().strip() == f"http://127.0.0.1:{port}/v1"
    return proc


@pytest.mark.slow
def test_llm_process_killed_mid_answer_then_restarted_in_a_ui_session(ui_index):
    from ui.web import callbacks
    from ui.web.callbacks import ChatSession

    port = free_port()
    llm = start_llm_process(port, "--delay", "0.2", "--chunk-size", "4")  # ~5 s to write it all: time to kill it
    try:
        with ui_components(ui_index, llm_base_url=f"http://127.0.0.1:{port}/v1", llm_retries=0,
                         llm_timeout=5) as components:
            session = ChatSession()
            updates = callbacks.respond(components, QUESTION, session, components.session_defaults())
            for state in updates:
                if state.messages[-1]["content"].startswith("FedS"):
                    kill(llm)  # the endpoint's process dies while it writes the answer
                    break
            else:
                pytest.fail("the answer never started streaming")
            last = list(updates)[-1]
            message = last.messages[-1]["content"]
            partial = message.split("\n\n")[0]
            assert partial and REPLY.startswith(partial) and len(partial) < len(REPLY) and "Interrupted" in message
            assert not message.startswith("⚠ **Could not answer")
            assert last.pending is None
            assert last.history[-1].role == "assistant" and REPLY.startswith(last.history[-1].content)

            llm = start_llm_process(port)  # back on the same port
            final = list(callbacks.respond(components, "which method predicts training dynamics?", last,
                                           components.session_defaults()))[-1]
            answer = final.messages[-1]["content"].replace("[[1]](#pc-source-1)", "[1]")  # markers link to cards
            assert answer.startswith(REPLY) and "Interrupted" not in answer
            assert "[1] FedSSM" in answer
            assert [m["role"] for m in final.messages] == ["user", "assistant"] * 2
    finally:
        kill(llm)


# --- the Chroma server goes away and comes back -----------------------------------------------------------------------


class ChromaServer:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 90.0) -> None:
        chroma = Path(sys.executable).with_name("chroma")
        self.proc = subprocess.Popen(
            [str(chroma), "run", "--path", str(self.path), "--host", "127.0.0.1", "--port", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=clean_env(), start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"chroma run exited with {self.proc.returncode}")
            try:
                url = f"http://127.0.0.1:{self.port}/api/v2/heartbeat"
                if httpx.get(url, timeout=1, trust_env=False).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        self.crash()
        pytest.fail(f"chroma run did not start within {timeout:.0f} s")

    def crash(self) -> None:
        if self.proc is not None:
            kill(self.proc)


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory):
    server = ChromaServer(tmp_path_factory.mktemp("chroma-server"))
    server.start()
    yield server
    if server.proc is not None:
        stop_process(server.proc)


@pytest.mark.slow
def test_chroma_server_unreachable_then_back_on_the_same_port(chroma_server, bundled_papers, tmp_path):
    from rag.ingest import Ingestor, make_chunker
    from rag.retrieval.hybrid import HybridRetriever
    from store.bm25 import LexicalIndex
    from store.chroma import ChromaStore
    from ui.web import callbacks
    from ui.web.callbacks import ChatSession

    embedder = FakeEmbedder()
    store = ChromaStore(host="127.0.0.1", port=chroma_server.port, collection="faults")
    Ingestor(store, embedder, make_chunker(embedder, 256, 1)).ingest(bundled_papers)
    retriever = HybridRetriever(store, embedder, LexicalIndex(tmp_path / "lexical"))
    before = [(h.paper_id, round(h.score, 6)) for h in retriever.search(QUESTION, 5)]
    assert before[0][0] == "000_dcbf1b5d2daaeff5.txt#1"

    settings = {"chroma_host": "127.0.0.1", "chroma_port": chroma_server.port, "collection": "faults",
                "llm": "extractive"}
    with ui_components(tmp_path / "ui", **settings) as components:
        assert "[1] FedSSM" in callbacks.api_chat(components, QUESTION)

        chroma_server.crash()
        started = time.monotonic()
        with pytest.raises(StoreUnavailable) as caught:
            retriever.search(QUESTION, 5)
        assert time.monotonic() - started < 10
        message = str(caught.value)
        assert message.startswith(f"cannot reach the Chroma server at http://127.0.0.1:{chroma_server.port} to ")
        assert f"chroma run --path DIR --host 127.0.0.1 --port {chroma_server.port}" in message
        assert "\n" not in message and "Traceback" not in message

        # The web UI says so in the chat, the status line and the papers tab, and keeps working.
        state = list(callbacks.respond(components, QUESTION, ChatSession(), components.session_defaults()))[-1]
        assert state.messages[-1]["content"].startswith("⚠ **Could not answer.** Cannot reach the Chroma server")
        assert "PAPERCHAT_" not in state.messages[-1]["content"]  # what to do is the operator's, not the user's
        assert "cannot reach the Chroma server" in callbacks.status(components, components.session_defaults())
        assert "cannot reach the Chroma server" in callbacks.search_papers(components, "")
        # With filters too (checking them reads the papers): the same message in the chat, no crash.
        filtered = list(callbacks.respond(components, QUESTION, ChatSession(), components.session_defaults(),
                                          "year>=2024"))[-1]
        assert filtered.messages[-1]["content"].startswith("⚠ **Could not answer.** Cannot reach the Chroma server")

        chroma_server.start()  # same path, same port
        after = [(h.paper_id, round(h.score, 6)) for h in retriever.search(QUESTION, 5)]
        assert after == before
        state = list(callbacks.respond(components, QUESTION, state, components.session_defaults()))[-1]
        assert "FedSSM" in state.messages[-1]["content"] and "Could not answer" not in state.messages[-1]["content"]


# --- the index folder turns read-only, or the disk fills up, during an ingest -----------------------------------------


@pytest.fixture(scope="module")
def small_corpora(tmp_path_factory):
    """v1: two bundled files (38 abstracts); v2: the same with four abstracts changed; and an index of v1
    built by a finished process, to copy (a folder no process has open)."""
    root = tmp_path_factory.mktemp("write-faults")
    v1, v2 = root / "v1", root / "v2"
    v1.mkdir()
    v2.mkdir()
    for name in sorted(p.name for p in BUNDLED_CORPUS.glob("*.txt"))[:2]:
        shutil.copy(BUNDLED_CORPUS / name, v1 / name)
        paragraphs = (BUNDLED_CORPUS / name).read_text(encoding="utf-8").split("\n\n")
        for i in (2, 5, 8):
            if i < len(paragraphs) and (name.startswith("000") or i == 2):
                paragraphs[i] = paragraphs[i].rstrip("\n") + " Quokka zebrafish ablations confirm the gains."
        (v2 / name).write_text("\n\n".join(paragraphs), encoding="utf-8")
    built = root / "built"
    result = run_driver(["ingest", str(v1)], built)
    assert result.returncode == 0, result.stderr
    clean_v2 = root / "clean-v2"
    shutil.copytree(built, clean_v2)
    with fake_cli_env(clean_v2):
        code, out, err = cli("ingest", str(v2))
    assert code == 0 and "4 updated" in out, (out, err)
    return {"v1": v1, "v2": v2, "built": built, "clean-v2": clean_v2}


def copy_index(corpora, dest: Path) -> Path:
    shutil.copytree(corpora["built"], dest)
    return dest


def failing_upserts(monkeypatch, error: Exception, *, from_call: int) -> list[int]:
    """Every Chroma upsert from the ``from_call``-th on raises ``error``; returns the call counter."""
    from chromadb.api.models.Collection import Collection

    real = Collection.upsert
    calls = [0]

    def upsert(self, *args, **kwargs):
        calls[0] += 1
        if calls[0] >= from_call:
            raise error
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Collection, "upsert", upsert)
    return calls


def assert_one_error_line(err: str, *fragments: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("paperchat: error: "), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


def test_read_only_database_during_ingest_is_one_error_and_the_index_is_untouched(small_corpora, tmp_path):
    data_dir = copy_index(small_corpora, tmp_path / "data")
    before = snapshot(data_dir)
    with fake_cli_env(data_dir) as mp:
        failing_upserts(mp, sqlite3.OperationalError("attempt to write a readonly database"), from_call=1)
        code, out, err = cli("ingest", str(small_corpora["v2"]))
    assert code == 1 and out == ""
    assert_one_error_line(err, f"cannot write chunks at {data_dir / 'chroma'}", "the folder is read-only",
                          "make it writable or set PAPERCHAT_DATA_DIR")
    assert snapshot(data_dir) == before


def test_disk_full_midway_through_an_ingest_then_a_rerun_completes_it(small_corpora, tmp_path):
    data_dir = copy_index(small_corpora, tmp_path / "data")
    before = snapshot(data_dir)
    with fake_cli_env(data_dir) as mp:
        calls = failing_upserts(mp, OSError(28, "No space left on device"), from_call=3)  # after one whole paper
        code, out, err = cli("ingest", str(small_corpora["v2"]))
    assert code == 1 and out == "" and calls[0] == 3
    assert_one_error_line(err, "cannot write chunks at", "the disk is full; free space and run the ingest again")
    after = snapshot(data_dir)
    assert after["stats"] == before["stats"]  # every paper is still there, old or new, never half-written
    assert after["search"][QUESTION] == before["search"][QUESTION]
    changed = [pid for pid, (digest, _) in after["papers"].items() if before["papers"][pid][0] != digest]
    assert changed == ["000_dcbf1b5d2daaeff5.txt#2"]  # the one paper written before the disk filled up

    with fake_cli_env(data_dir):
        code, out, err = cli("ingest", str(small_corpora["v2"]))
    assert code == 0 and "3 updated, 35 unchanged" in out, err
    assert snapshot(data_dir) == snapshot(small_corpora["clean-v2"])


def _chattr(flag: str, path: Path) -> bool:
    if shutil.which("chattr") is None:
        return False
    return subprocess.run(["chattr", "-R", flag, str(path)], capture_output=True).returncode == 0


@pytest.mark.slow
def test_really_read_only_index_folder(small_corpora, tmp_path):
    """A real read-only index: chmod where that binds (not root), else the immutable flag (root, ext4)."""
    import os

    data_dir = copy_index(small_corpora, tmp_path / "data")
    before = snapshot(data_dir)
    chroma = data_dir / "chroma"
    as_root = os.geteuid() == 0
    if as_root:
        if not _chattr("+i", chroma):
            pytest.skip("running as root on a file system without the immutable flag: nothing makes it read-only")
    else:
        for path in [chroma, *chroma.rglob("*")]:
            path.chmod(path.stat().st_mode & ~0o222)
    try:
        result = run_driver(["ingest", str(small_corpora["v2"])], data_dir)
    finally:
        if as_root:
            _chattr("-i", chroma)
        else:
            for path in [chroma, *chroma.rglob("*")]:
                path.chmod(path.stat().st_mode | 0o200)
    assert result.returncode == 1 and result.stdout == ""
    assert_one_error_line(result.stderr, f"at {chroma} (collection paperchat)", "read-only",
                          "make it writable or set PAPERCHAT_DATA_DIR")
    assert snapshot(data_dir) == before


@pytest.mark.slow
def test_file_size_limit_hit_during_a_real_ingest(small_corpora, tmp_path):
    """A real write failure in a real process: RLIMIT_FSIZE stops every write past 64 KiB (as a full disk would)."""
    import resource
    import signal

    data_dir = copy_index(small_corpora, tmp_path / "data")
    before = snapshot(data_dir)

    def limit_file_size():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a failed write (EFBIG), not a dead process
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))

    result = run_driver(["ingest", str(small_corpora["v2"])], data_dir, preexec_fn=limit_file_size)
    assert result.returncode == 1 and result.stdout == ""
    assert_one_error_line(result.stderr, f"cannot write chunks at {data_dir / 'chroma'}")
    assert snapshot(data_dir) == before

    with fake_cli_env(data_dir):
        code, out, err = cli("ingest", str(small_corpora["v2"]))
    assert code == 0 and "4 updated" in out, err
    assert snapshot(data_dir) == snapshot(small_corpora["clean-v2"])
