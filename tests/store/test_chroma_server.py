"""Server mode for real: `chroma run` on 127.0.0.1, ingest and search through it, then stop it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from rag.errors import StoreUnavailable
from rag.ingest import Ingestor, make_chunker
from rag.retrieval.hybrid import HybridRetriever
from store.bm25 import LexicalIndex
from store.chroma import ChromaStore
from tests.processes import free_port

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def chroma_process(tmp_path_factory):
    """(port, process) of a `chroma run` started for this module."""
    port = free_port()
    chroma = Path(sys.executable).with_name("chroma")
    proc = subprocess.Popen(
        [str(chroma), "run", "--path", str(tmp_path_factory.mktemp("chroma-server")), "--host", "127.0.0.1",
         "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("chroma run did not start within 60 s")
    yield port, proc
    proc.terminate()
    proc.wait(timeout=20)


@pytest.fixture(scope="module")
def chroma_server(chroma_process):
    return chroma_process[0]


def test_ingest_and_search_through_server(chroma_server, fake_embedder, bundled_papers, tmp_path):
    store = ChromaStore(host="127.0.0.1", port=chroma_server, collection="server-test")
    report = Ingestor(store, fake_embedder, make_chunker(fake_embedder, 256, 1)).ingest(bundled_papers)
    assert report.added == 76 and store.counts()[0] == 76
    again = Ingestor(store, fake_embedder, make_chunker(fake_embedder, 256, 1)).ingest(bundled_papers)
    assert again.unchanged == 76 and again.chunks_written == 0

    # Two app instances with their own lexical folders share the one server.
    for folder in ("instance-a", "instance-b"):
        client = ChromaStore(host="127.0.0.1", port=chroma_server, collection="server-test")
        retriever = HybridRetriever(client, fake_embedder, LexicalIndex(tmp_path / folder))
        hits = retriever.search("state space models for choosing clients in federated learning", 3)
        assert hits[0].title == "FedSSM"
        assert (tmp_path / folder / "state.json").exists()  # lexical index rebuilt from the server's chunks


def test_unreachable_server_is_a_clear_error():
    store = ChromaStore(host="127.0.0.1", port=free_port(), collection="nowhere")
    with pytest.raises(StoreUnavailable, match="chroma run"):
        store.counts()


def test_a_stopped_server_fails_within_the_timeout(chroma_process, fake_embedder, bundled_papers):
    """`kill -STOP` on `chroma run`: searches used to hang forever (chromadb's HTTP session has no timeout)."""
    import os
    import signal
    import threading

    port, process = chroma_process
    store = ChromaStore(host="127.0.0.1", port=port, collection="stall-test", timeout=2)
    Ingestor(store, fake_embedder, make_chunker(fake_embedder, 256, 1)).ingest(bundled_papers[:3])
    pid = process.pid
    outcome: dict = {}

    def count() -> None:
        try:
            outcome["value"] = store.counts()
        except Exception as error:  # noqa: BLE001 - handed back to the test
            outcome["error"] = error

    os.kill(pid, signal.SIGSTOP)
    try:
        worker = threading.Thread(target=count, daemon=True)
        started = time.monotonic()
        worker.start()
        worker.join(30)
        elapsed = time.monotonic() - started
    finally:
        os.kill(pid, signal.SIGCONT)
    assert not worker.is_alive(), "still waiting for the stopped server after 30 s"
    assert isinstance(outcome.get("error"), StoreUnavailable), outcome
    assert "did not answer within 2 s" in str(outcome["error"]) and elapsed < 10

