"""The vector table kept beside the BM25 index: exact, rebuilt when stale, never fatal when damaged."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

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


class _PagedStore:
    """Stands in for the store's ``iter_vectors``: pages of (ids, vectors, metadatas), chunks in any order."""

    def __init__(self, papers, chunks, page=3):
        self.papers, self.chunks, self.page = papers, chunks, page

    def iter_vectors(self, which):
        rows = self.papers if which == "papers" else self.chunks
        for start in range(0, len(rows), self.page):
            part = rows[start : start + self.page]
            yield ([r[0] for r in part], np.array([r[1] for r in part], dtype=np.float32).reshape(len(part), -1),
                   [r[2] for r in part])


def _paged_store(rng):
    papers = [(f"p{i}", rng.normal(size=4), {"profile_norm": 0.5 + i / 10, "chunk_weight": 0.25}) for i in range(5)]
    chunks = [(f"p{i}::{n}", rng.normal(size=4), {}) for i in range(5) for n in range(i % 3 + (i == 4) * 10)]
    chunks.append(("gone::0", rng.normal(size=4), {}))  # a paper without a record: an unfinished write
    order = rng.permutation(len(chunks))
    return _PagedStore(papers, [chunks[i] for i in order])


def test_a_built_table_groups_chunks_by_paper_in_number_order(tmp_path):
    store = _paged_store(np.random.default_rng(0))
    table = VectorTable(tmp_path / "vectors")
    table.build(store, generation=7)
    expected_ids = sorted((cid for cid, _v, _m in store.chunks if not cid.startswith("gone")),
                          key=lambda c: (int(c[1 : c.index(":")]), int(c.rpartition("::")[2])))
    assert table.chunk_ids == expected_ids  # p4's chunk 10 after its chunk 9: numbers, not text order
    vectors = {cid: v for cid, v, _m in store.chunks}
    np.testing.assert_array_equal(table.chunks, np.array([vectors[c] for c in expected_ids], dtype=np.float32))
    assert table.paper_ids == [p[0] for p in store.papers]
    np.testing.assert_array_equal(table.profiles, np.array([p[1] for p in store.papers], dtype=np.float32))
    assert table.norms.tolist() == pytest.approx([0.5, 0.6, 0.7, 0.8, 0.9])
    assert np.diff(table.starts).tolist() == [0, 1, 2, 0, 11]
    assert isinstance(np.load(tmp_path / "vectors" / "chunks.npy", mmap_mode="r"), np.memmap)
    assert not list((tmp_path / "vectors").glob("*.raw"))  # the raw files are gone
    again = VectorTable(tmp_path / "vectors")
    assert again.load(7) and again.chunk_ids == expected_ids


def test_a_table_that_cannot_be_saved_is_built_in_memory(tmp_path, monkeypatch):
    import store.vectors as vectors_module

    monkeypatch.setattr(vectors_module, "save_folder_atomically", lambda folder, fill, optional=False: None)
    store = _paged_store(np.random.default_rng(1))
    table = VectorTable(tmp_path / "read-only")
    table.build(store, generation=2)
    assert not (tmp_path / "read-only").exists()
    assert len(table.chunk_ids) == 14 and table.chunks.shape == (14, 4)
    assert not isinstance(table.chunks.base, np.memmap)  # loaded, not mapped from a folder that is gone
    vector = np.ones(4, dtype=np.float32)
    assert np.isfinite(table.score(["p1", "p4"], vector)).all()


def test_an_empty_store_gives_an_empty_table(tmp_path):
    table = VectorTable(tmp_path / "vectors")
    table.build(_PagedStore([], []), generation=1)
    assert table.chunk_count == 0 and table.paper_ids == []
    assert table.score(["p1"], np.ones(4, dtype=np.float32))[0] == -np.inf
