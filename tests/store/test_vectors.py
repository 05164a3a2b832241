"""The vector table kept beside the BM25 index: exact, rebuilt when stale, never fatal when damaged."""

from __future__ import annotations

import shutil

import numpy as np

from store.vectors import VectorTable


def _table(fake_index, tmp_path):
    fake_index.refresh()
    folder = tmp_path / "vectors"
    shutil.copytree(fake_index.vectors.folder, folder)
    return folder


def test_scores_match_the_stored_vectors(fake_index, tmp_path):
    store = fake_index.store
    table = VectorTable(_table(fake_index, tmp_path))
    assert table.load(store.generation())
    vector = fake_index.embedder.embed(["reward hacking in language models"])[0]
    paper_ids = sorted(table.paper_rows)[:30] + ["no-such-paper"]
    scores = table.score(paper_ids, vector)
    assert scores[-1] == -np.inf
    profiles = store.paper_profiles(paper_ids[:-1])
    for pid, score in zip(paper_ids[:-1], scores[:-1], strict=True):
        unit, meta = profiles[pid]
        chunks = store.chunk_vectors([f"{pid}::{i}" for i in range(meta["n_chunks"])])
        sims = {cid: float(v @ vector) for cid, v in chunks.items()}
        expected = meta["chunk_weight"] * max(sims.values()) + meta["profile_norm"] * float(unit @ vector)
        assert abs(score - expected) < 1e-5
        assert table.best_chunk(pid, vector) == max(sims, key=sims.get)


def test_a_stale_or_damaged_table_is_not_loaded(fake_index, tmp_path):
    folder = _table(fake_index, tmp_path)
    generation = fake_index.store.generation()
    assert not VectorTable(folder).load(generation + 1)
    (folder / "chunks.npy").write_bytes(b"not numpy")
    assert not VectorTable(folder).load(generation)
    shutil.rmtree(folder)
    assert not VectorTable(folder).load(generation)


def test_the_retriever_rebuilds_a_damaged_table(fake_index, tmp_path):
    from rag.retrieval.hybrid import HybridRetriever
    from store.bm25 import LexicalIndex

    fake_index.refresh()
    lexical = tmp_path / "lexical"
    shutil.copytree(fake_index.lexical.folder, lexical)
    retriever = HybridRetriever(fake_index.store, fake_index.embedder, LexicalIndex(lexical))
    retriever.vectors.folder.mkdir(parents=True)
    (retriever.vectors.folder / "state.json").write_text("{broken")
    hits = retriever.search("what did the MA-RAG authors evaluate on?", 3)
    assert hits[0].title == "MA-RAG"
    assert VectorTable(retriever.vectors.folder).load(fake_index.store.generation())


def test_brute_force_and_chroma_find_the_same_papers(fake_index):
    """Exact nearest neighbours from the table agree with Chroma's index on a small corpus."""
    from rag.retrieval.hybrid import FusionParams, HybridRetriever

    fake_index.refresh()
    questions = ["federated learning clients", "robot policies from video", "heart sound synthesis"]
    vectors = fake_index.embedder.embed(questions)
    nearest = fake_index.vectors.nearest(vectors, 10)
    chunk_rows = fake_index.store.query_chunks_many(vectors, 10)
    paper_rows = fake_index.store.query_papers_many(vectors, 10)
    for found, chunks, papers in zip(nearest, chunk_rows, paper_rows, strict=True):
        assert found == {pid for _cid, pid, _s in chunks} | set(papers)
    via_chroma = HybridRetriever(fake_index.store, fake_index.embedder, fake_index.lexical,
                                 params=FusionParams(exact_search_max_chunks=0))
    assert [[h.paper_id for h in hits] for hits in via_chroma.search_many(questions, 5)] == [
        [h.paper_id for h in hits] for hits in fake_index.search_many(questions, 5)
    ]
