"""Shared fixtures. Fast unit tests by default; tests marked ``slow`` load real models or servers.

In-process fakes for the answer pipeline's seams: ``FakeEmbedder`` (rag.embedding.models.Embedder),
``FakeChatModel`` (rag.llm.client.ChatModel) and ``FakeRetriever`` (rag.retrieval.retriever.Retriever),
so pipeline tests need neither HTTP nor Chroma. Real servers stay where they prove the real thing
(``llm_server``: tests/fake_llm.py over HTTP; ``fake_index``: a real Chroma store and BM25).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import numpy as np
import pytest

from rag.types import Hit, Paper

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



class FakeChatModel:
    """An in-process ``ChatModel``: streams a scripted reply as deltas and records every request.

    ``reply`` is the answer text (sent in ``chunk_size`` pieces), a list of pieces, or a callable
    ``(messages) -> text``. ``reasoning`` is streamed first, as reasoning deltas. ``cut_after``: pieces sent
    before the stream breaks off with ``LLMInterrupted``, as a dropped connection does. ``error``: raised
    instead of answering. ``requests`` holds each request's messages, max_tokens and temperature.
    """

    def __init__(self, reply="Scripted answer about the abstracts [1].", *, reasoning: str = "",
                 chunk_size: int = 8, cut_after: int | None = None, error: Exception | None = None,
                 label: str = "fake: scripted") -> None:
        self.reply, self.reasoning, self.chunk_size = reply, reasoning, chunk_size
        self.cut_after, self.error, self.label = cut_after, error, label
        self.requests: list[dict] = []

    @property
    def messages(self) -> list[dict]:
        """The messages of the last request."""
        return self.requests[-1]["messages"]

    def stream(self, messages, *, max_tokens=None, temperature=None):
        from rag.errors import LLMInterrupted
        from rag.llm.client import Delta

        self.requests.append({"messages": [dict(m) for m in messages], "max_tokens": max_tokens,
                              "temperature": temperature})
        if self.error is not None:
            raise self.error
        for start in range(0, len(self.reasoning), self.chunk_size):
            yield Delta(reasoning=self.reasoning[start : start + self.chunk_size])
        reply = self.reply(messages) if callable(self.reply) else self.reply
        pieces = ([reply[i : i + self.chunk_size] for i in range(0, len(reply), self.chunk_size)]
                  if isinstance(reply, str) else list(reply))
        sent = []
        for number, piece in enumerate(pieces):
            if self.cut_after is not None and number >= self.cut_after:
                raise LLMInterrupted("the scripted stream broke off", partial="".join(sent))
            sent.append(piece)
            yield Delta(content=piece)


class FakeRetriever:
    """An in-memory ``Retriever`` over a handful of papers: ranked by the embedder's cosine similarity.

    Hits look like ``HybridRetriever``'s: ``score`` and ``dense_score`` are the cosine, ``text`` is the
    abstract's start. ``searches`` records each (question, k).
    """

    max_question_chars = 4000

    def __init__(self, papers, embedder=None, *, top_k: int = 5) -> None:
        from store.bm25 import Analyzer, LexicalParams

        self.papers = list(papers)
        self.embedder = embedder or FakeEmbedder()
        self.top_k = top_k
        self.searches: list[tuple[str, int]] = []
        self._vectors = self.embedder.embed([f"{p.title}. {p.abstract}" for p in self.papers])
        analyze = Analyzer(LexicalParams())
        self._terms = [set(analyze(f"{p.title} {p.abstract}")) for p in self.papers]

    def _hit(self, rank: int, paper: Paper, score: float) -> Hit:
        return Hit(rank=rank, paper_id=paper.paper_id, title=paper.title, score=score, source=paper.source,
                   ordinal=paper.ordinal, text=paper.abstract[:1000], abstract=paper.abstract, dense_score=score)

    def search(self, question: str, k: int | None = None):
        from rag.retrieval.retriever import validate_question

        question = validate_question(question, self.max_question_chars)
        k = k or self.top_k
        self.searches.append((question, k))
        scores = self._vectors @ self.embedder.embed([question])[0]
        order = sorted(range(len(self.papers)), key=lambda i: (-float(scores[i]), self.papers[i].paper_id))[:k]
        return [self._hit(rank, self.papers[i], float(scores[i])) for rank, i in enumerate(order, start=1)]

    def hits_for(self, paper_ids):
        by_id = {p.paper_id: p for p in self.papers}
        known = [by_id[pid] for pid in paper_ids if pid in by_id]
        return [self._hit(rank, paper, 1.0) for rank, paper in enumerate(known, start=1)]

    def titles_in(self, text: str) -> list[str]:
        found = []
        for paper in self.papers:  # short, name-like titles only, as a whole word ("FedSSM", not "Diffusion")
            pattern = rf"(?<![\w-]){re.escape(paper.title)}(?![\w-])"
            if len(paper.title.split()) <= 2 and (match := re.search(pattern, text, re.IGNORECASE)):
                found.append((match.start(), paper.paper_id))
        return [pid for _, pid in sorted(found)]

    def idf(self, term: str) -> float:
        df = sum(term in terms for terms in self._terms)
        n = len(self.papers)
        return float(np.log(1 + (n - df + 0.5) / (df + 0.5)))


# Papers of the bundled corpus the in-memory retriever holds: three about federated learning, others not;
# SPARe's abstract mentions GPUs, so "GPU" is a word the corpus knows (idf) that FedSSM's never uses.
FAKE_RETRIEVER_TITLES = ("FedSSM", "Fed-Kalter", "FedVPA-GP", "MA-RAG", "NRDE", "CogRouter", "MedSIGHT", "T2PO",
                         "SPARe")


@pytest.fixture
def fake_retriever(bundled_papers) -> FakeRetriever:
    """A ``FakeRetriever`` (fake embedder) over a handful of bundled papers (FAKE_RETRIEVER_TITLES)."""
    papers = [p for p in bundled_papers if p.title in FAKE_RETRIEVER_TITLES]
    assert len(papers) == len(FAKE_RETRIEVER_TITLES)
    return FakeRetriever(papers)


# Two short abstracts for claim checks and attribution (tests/rag/test_citations.py, test_attribution.py).
FEDSSM = Paper(
    "fedssm",
    "FedSSM",
    "Multimodal federated learning needs careful client selection. "
    "We propose FedSSM, which predicts training dynamics with state space models. "
    "The prediction error yields a surprise signal that sets participation budgets. "
    "Experiments show accuracy gains and fewer communication rounds.",
    "000.txt",
    1,
)
NRDE = Paper(
    "nrde",
    "NRDE",
    "Density-based anomaly detection degrades under noisy data. "
    "NRDE learns a normalizing flow that separates pure data from noise sources. "
    "It is compared with 17 baselines on 47 datasets.",
    "002.txt",
    3,
)


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


# --- the bundled corpus, ingested once ----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def bundled_index_built(tmp_path_factory) -> Path:
    """A data folder holding the bundled corpus, ingested once per test session by the CLI with default
    settings (what `make demo` builds). Tests never use it directly: they take a copy (``bundled_index``)."""
    import subprocess
    import sys

    from tests.processes import child_env

    data_dir = tmp_path_factory.mktemp("bundled-index-built")
    result = subprocess.run([sys.executable, "-m", "ui.cli", "ingest"], cwd=PROJECT_ROOT, capture_output=True,
                            text=True, timeout=900, env=child_env(PAPERCHAT_DATA_DIR=str(data_dir)))
    assert result.returncode == 0, result.stderr
    assert "76 added" in result.stdout, result.stdout
    return data_dir


@pytest.fixture(scope="module")
def bundled_index(bundled_index_built, tmp_path_factory) -> Path:
    """A module's own copy of the ingested bundled corpus (a data folder for ``PAPERCHAT_DATA_DIR``): copying
    takes a fraction of a second where ingesting takes tens, and a module may change its copy freely."""
    import shutil

    copy = tmp_path_factory.mktemp("bundled-index") / "data"
    shutil.copytree(bundled_index_built, copy)
    return copy
