"""The small JSONL corpus with authors, year, venue and URL (tests/data/metadata_papers.jsonl), loaded and
indexed with the fake embedder: a real Chroma store and BM25 under a given folder."""

from __future__ import annotations

from pathlib import Path

METADATA_CORPUS = Path(__file__).resolve().parent / "data" / "metadata_papers.jsonl"
COLLECTION = "my-papers"


def metadata_papers():
    from rag.corpus.load import load_corpus

    result = load_corpus([METADATA_CORPUS])
    assert not [p for p in result.problems if not p.kept], result.problems
    return result.papers


def metadata_retriever(folder: Path):
    """A ``HybridRetriever`` over the metadata corpus in collection ``my-papers``."""
    from rag.ingest import Ingestor, make_chunker
    from rag.retrieval.hybrid import HybridRetriever
    from store.bm25 import LexicalIndex
    from store.chroma import ChromaStore
    from tests.conftest import FakeEmbedder

    embedder = FakeEmbedder()
    store = ChromaStore(path=folder / "chroma", collection=COLLECTION)
    Ingestor(store, embedder, make_chunker(embedder, 256, 1)).ingest(metadata_papers())
    return HybridRetriever(store, embedder, LexicalIndex(folder / "lexical"))
