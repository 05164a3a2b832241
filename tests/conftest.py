"""Shared fixtures. Fast unit tests by default; tests marked ``slow`` load real models or servers."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import numpy as np
import pytest

# No test may reach a model hub, whatever the developer's environment says.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

PROJECT_ROOT = Path(__file__).resolve().parents[1]
BUNDLED_CORPUS = PROJECT_ROOT / "data" / "icml2026"
DEV_QUESTIONS = PROJECT_ROOT / "data" / "eval" / "dev.jsonl"


class FakeEmbedder:
    """A deterministic bag-of-words embedder: fast, no model, similar texts get similar vectors."""

    name = "fake-bow"
    dimension = 64
    max_tokens = 256

    def __init__(self) -> None:
        self.calls = 0
        self.texts_embedded = 0

    def count_tokens(self, text: str) -> int:
        return len(text.split()) + 2

    def embed(self, texts):
        self.calls += 1
        self.texts_embedded += len(texts)
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                slot = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "little")
                out[row, slot % self.dimension] += 1.0
            out[row, 0] += 1e-3  # never a zero vector
        return out / np.linalg.norm(out, axis=1, keepdims=True)


@pytest.fixture
def fake_embedder() -> FakeEmbedder:
    return FakeEmbedder()


@pytest.fixture(scope="session")
def real_embedder():
    """The bundled all-MiniLM-L6-v2, loaded once per test session."""
    from rag.embedding.models import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder()


@pytest.fixture(scope="session")
def tokenizer_counter():
    from rag.embedding.models import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder().count_tokens


@pytest.fixture(scope="session")
def bundled_papers():
    from rag.corpus.load import load_corpus

    result = load_corpus([BUNDLED_CORPUS])
    assert not result.problems
    return result.papers


@pytest.fixture
def settings_factory(tmp_path, monkeypatch):
    """Settings isolated from the developer's environment, with the index under tmp_path."""
    for key in list(os.environ):
        if key.startswith("PAPERCHAT_") or key in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
            monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("PAPERCHAT_DATA_DIR", str(tmp_path / "index"))

    def make(**overrides):
        from rag.settings import load_settings

        return load_settings(**overrides)

    return make


# --- scripted OpenAI-compatible LLM server (tests/fake_llm.py) -----------------------------------


@pytest.fixture
def llm_server():
    """A started ScriptedLLMServer on 127.0.0.1 (``llm_server.base_url`` ends in /v1), closed afterwards."""
    from tests.fake_llm import ScriptedLLMServer

    with ScriptedLLMServer() as server:
        yield server


@pytest.fixture(scope="session")
def fake_index(tmp_path_factory, bundled_papers):
    """The bundled corpus indexed with the fake embedder: a real Chroma store and BM25, built in ~2 s."""
    from rag.ingest import Ingestor, make_chunker
    from rag.retrieval.hybrid import HybridRetriever
    from store.bm25 import LexicalIndex
    from store.chroma import ChromaStore

    folder = tmp_path_factory.mktemp("fake-index")
    embedder = FakeEmbedder()
    store = ChromaStore(path=folder / "chroma", collection="paperchat")
    Ingestor(store, embedder, make_chunker(embedder, 256, 1)).ingest(bundled_papers)
    retriever = HybridRetriever(store, embedder, LexicalIndex(folder / "lexical"))
    return retriever
