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
from rag.lexical import LexicalIndex
from rag.retrieval import HybridRetriever
from store.chroma import ChromaStore
from tests.processes import free_port

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory):
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
    yield port
    proc.terminate()
    proc.wait(timeout=20)


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
