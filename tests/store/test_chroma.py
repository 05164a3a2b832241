from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rag.corpus.chunking import Chunker
from rag.errors import IndexLocked, IndexMismatch
from rag.ingest import Ingestor, index_manifest, ingest_lock
from rag.types import Paper
from store.chroma import ChromaStore


def make_papers(n: int = 6) -> list[Paper]:
    topics = ["federated learning clients", "heart sound synthesis", "tabular anomaly detection",
              "graph neural networks", "reinforcement learning robots", "retrieval augmented generation"]
    return [
        Paper(f"f.txt#{i + 1}", f"Title {i}", f"We study {topics[i % len(topics)]}. " * (1 + i % 3) + "It works.",
              "f.txt", i + 1)
        for i in range(n)
    ]


@pytest.fixture
def store(tmp_path):
    return ChromaStore(path=tmp_path / "chroma", collection="test-papers")


@pytest.fixture
def ingestor(store, fake_embedder):
    return Ingestor(store, fake_embedder, Chunker(fake_embedder.count_tokens, 12, 1))


def all_chunks(store):
    return sorted(store.iter_chunks())


def test_ingest_stores_papers_and_chunks(store, ingestor):
    report = ingestor.ingest(make_papers())
    assert report.added == 6 and report.unchanged == 0
    papers, chunks = store.counts()
    assert papers == 6 and chunks == report.chunks_written >= 6
    stored = store.get_papers(["f.txt#2"])["f.txt#2"]
    assert stored == make_papers()[1]  # round-trips every field


def test_reingest_unchanged_writes_nothing(store, ingestor, fake_embedder):
    ingestor.ingest(make_papers())
    before = all_chunks(store)
    generation = store.generation()
    calls = fake_embedder.calls
    report = ingestor.ingest(make_papers())
    assert report.unchanged == 6 and report.chunks_written == 0 and report.added == report.updated == 0
    assert fake_embedder.calls == calls  # nothing embedded
    assert store.generation() == generation  # nothing written
    assert all_chunks(store) == before


def test_changed_abstract_replaces_its_chunks(store, ingestor):
    papers = make_papers()
    ingestor.ingest(papers)
    long_before = [c for c in all_chunks(store) if c[1] == "f.txt#3"]
    assert len(long_before) > 1
    papers[2] = dataclasses.replace(papers[2], abstract="Now a short abstract.")
    report = ingestor.ingest(papers)
    assert report.updated == 1 and report.unchanged == 5
    after = [c for c in all_chunks(store) if c[1] == "f.txt#3"]
    assert [c[2] for c in after] == ["Now a short abstract."]  # old chunks gone, no duplicates
    assert store.counts()[0] == 6


def test_paper_removed_from_a_complete_source_is_deleted(store, ingestor):
    papers = make_papers()
    ingestor.ingest(papers)
    ingestor.ingest(papers[:4], complete_sources={"f.txt"})
    assert store.counts()[0] == 4
    assert not [c for c in all_chunks(store) if c[1] in ("f.txt#5", "f.txt#6")]


def test_incomplete_source_keeps_stored_papers(store, ingestor):
    papers = make_papers()
    ingestor.ingest(papers)
    ingestor.ingest(papers[:4], complete_sources=set())  # the file had a bad record: keep what is stored
    assert store.counts()[0] == 6


def test_other_model_is_a_clear_mismatch(store, ingestor, fake_embedder):
    ingestor.ingest(make_papers())
    manifest = index_manifest(fake_embedder, ingestor.chunker)
    with pytest.raises(IndexMismatch, match="paperchat ingest --rebuild"):
        store.check_manifest({**manifest, "embedding_model": "another-model"})
    with pytest.raises(IndexMismatch, match="chunk_max_tokens"):
        store.check_manifest({**manifest, "chunk_max_tokens": 128})


def test_interrupted_write_resumes_to_clean_state(tmp_path, fake_embedder):
    papers = make_papers()
    clean = ChromaStore(path=tmp_path / "clean", collection="test-papers")
    Ingestor(clean, fake_embedder, Chunker(fake_embedder.count_tokens, 12, 1)).ingest(papers)

    broken = ChromaStore(path=tmp_path / "broken", collection="test-papers")
    ingestor = Ingestor(broken, fake_embedder, Chunker(fake_embedder.count_tokens, 12, 1))
    real_write = broken.write_papers
    written = []

    def dying_write(writes):
        for write in writes:
            if len(written) == 3:
                # Chunks of the 4th paper land, its record does not: as if killed in between.
                chunks, vectors = write.chunks, write.vectors
                broken._chunks.upsert(ids=[c.chunk_id for c in chunks], embeddings=vectors,
                                      metadatas=[{"paper_id": c.paper_id, "chunk": c.index} for c in chunks])
                raise KeyboardInterrupt
            written.append(write.paper.paper_id)
            real_write([write])

    broken.write_papers = dying_write
    with pytest.raises(KeyboardInterrupt):
        ingestor.ingest(papers)
    broken.write_papers = real_write
    ingestor.ingest(papers)
    assert broken.counts() == clean.counts()
    assert all_chunks(broken) == all_chunks(clean)


def test_second_ingest_is_locked_out(tmp_path):
    with ingest_lock(tmp_path), pytest.raises(IndexLocked, match="another ingest"), ingest_lock(tmp_path):
        pass


# --- paper vectors (index format 2) -----------------------------------------------------------------------


def _stored(store, paper_id):
    unit, meta = store.paper_profiles([paper_id])[paper_id]
    chunks = store.chunk_vectors([f"{paper_id}::{i}" for i in range(meta["n_chunks"])])
    return unit, meta, chunks


def test_titled_papers_embed_their_title_with_every_chunk_and_store_a_profile(store, ingestor, fake_embedder):
    from rag.ingest import TITLED_WEIGHTS

    paper = dataclasses.replace(make_papers(3)[2], title="Graph neural networks for molecules", title_given=True)
    ingestor.ingest([paper])
    unit, meta, chunks = _stored(store, paper.paper_id)
    assert meta["n_chunks"] == len(chunks) >= 2 and meta["chunk_weight"] == TITLED_WEIGHTS["chunk"]
    texts = [text for cid, _pid, text in sorted(store.iter_chunks())]
    assert not any(text.startswith(paper.title) for text in texts)  # stored text stays the abstract's own
    expected = fake_embedder.embed([f"{paper.title}. {t}" for t in texts])
    assert np.allclose(np.vstack([chunks[f"{paper.paper_id}::{i}"] for i in range(len(texts))]), expected, atol=1e-6)
    centroid = expected.mean(axis=0)
    document, title = fake_embedder.embed([f"{paper.title} {paper.abstract}", paper.title])
    profile = (TITLED_WEIGHTS["centroid"] * centroid / np.linalg.norm(centroid)
               + TITLED_WEIGHTS["document"] * document + TITLED_WEIGHTS["title"] * title)
    assert meta["profile_norm"] == pytest.approx(float(np.linalg.norm(profile)), rel=1e-5)
    assert np.allclose(unit * meta["profile_norm"], profile, atol=1e-5)


def test_untitled_papers_keep_chunk_and_centroid_halves(store, ingestor, fake_embedder):
    paper = make_papers(3)[2]  # title_given False: a title derived from the abstract
    ingestor.ingest([paper])
    unit, meta, chunks = _stored(store, paper.paper_id)
    assert meta["chunk_weight"] == 0.5 and meta["profile_norm"] == pytest.approx(0.5)
    centroid = np.vstack(list(chunks.values())).mean(axis=0)
    assert np.allclose(unit, centroid / np.linalg.norm(centroid), atol=1e-5)


def test_an_index_of_the_previous_format_asks_for_a_rebuild(store, ingestor, fake_embedder):
    ingestor.ingest(make_papers(2))
    meta = dict(store._chunks.metadata)
    meta.pop("index_format")
    store._chunks.modify(metadata=meta)
    with pytest.raises(IndexMismatch, match="ingest --rebuild"):
        ingestor.ingest(make_papers(3))


def test_a_large_batch_with_many_candidates_stays_within_sqlite_limits(tmp_path, fake_embedder):
    """300 questions x 200 results per call would pass 32,766 SQL variables in one Chroma read."""
    from rag.retrieval.hybrid import FusionParams, HybridRetriever
    from store.bm25 import LexicalIndex

    store = ChromaStore(path=tmp_path / "chroma", collection="many")
    words = ["graph", "robot", "privacy", "protein", "speech", "vision", "policy", "kernel", "sparse", "causal"]
    papers = [Paper(f"m.txt#{i}", f"Paper {i}", f"We study {words[i % 10]} {words[(i // 10) % 10]} models {i}.",
                    "m.txt", i) for i in range(1, 251)]
    Ingestor(store, fake_embedder, Chunker(fake_embedder.count_tokens, 64, 0)).ingest(papers)
    retriever = HybridRetriever(store, fake_embedder, LexicalIndex(tmp_path / "lexical"),
                                params=FusionParams(candidates=200))
    questions = [f"{words[i % 10]} {words[(i * 7) % 10]} models" for i in range(300)]
    results = retriever.search_many(questions, 10)
    assert len(results) == 300 and all(len(hits) == 10 for hits in results)


def _awkward_papers() -> list[Paper]:
    """Abstracts whose chunks leave parts uncovered: surrounding whitespace, runs of spaces between chunks
    (no overlap), one of whitespace only (no chunks at all)."""
    sentences = " \n ".join(f"Sentence {i} is about {w} things." for i, w in enumerate("abcdefgh"))
    return [
        Paper("f.txt#1", "One", f"  \t{sentences}\n\n", "f.txt", 1),
        Paper("f.txt#2", "Two", "Short one.", "f.txt", 2),
        Paper("f.txt#3", "Three", "   ", "f.txt", 3),
        Paper("f.txt#4", "Four", "Ünïcode — ‘quotes’ and 中文 text.   Then more.  ", "f.txt", 4),
    ]


def expected_chunks(papers, chunker) -> list[tuple[str, str, str]]:
    return sorted((c.chunk_id, c.paper_id, c.text) for p in papers for c in chunker.chunk(p))


@pytest.mark.parametrize("overlap", [0, 1])
def test_each_text_is_stored_once_in_its_record_and_chunks_are_read_back_as_slices_of_it(store, fake_embedder,
                                                                                          overlap):
    papers = _awkward_papers()
    chunker = Chunker(fake_embedder.count_tokens, 12, overlap)
    Ingestor(store, fake_embedder, chunker).ingest(papers)
    assert store.get_papers([p.paper_id for p in papers]) == {p.paper_id: p for p in papers}
    assert sorted(store.iter_papers(), key=lambda p: p.paper_id) == papers
    assert all_chunks(store) == expected_chunks(papers, chunker)
    ids = [cid for cid, _, _ in expected_chunks(papers, chunker)]
    assert store.chunk_texts(ids) == {cid: text for cid, _, text in expected_chunks(papers, chunker)}
    assert store._chunks.get(include=["documents"])["documents"] == [None] * len(ids)
    assert store._papers.get(include=["documents"])["documents"] == [None] * len(papers)


def as_older_format(store, papers, chunker, kind: str) -> None:
    """Rewrite ``store`` as stores of an earlier format held it: chunks carried their texts as documents and
    their offsets, paper records their fields as flat keys and either their abstract as the document
    ("documents") or ``ABSTRACT_REST`` ("abstract_rest")."""
    from store.paper_records import ABSTRACT_REST, abstract_rest, paper_to_metadata, unpack

    by_id = {p.paper_id: p for p in papers}
    chunks = {c.chunk_id: c for p in papers for c in chunker.chunk(p)}
    rows = store._chunks.get(include=["embeddings"])
    store._chunks.delete(ids=rows["ids"])
    store._chunks.add(ids=rows["ids"], embeddings=rows["embeddings"], documents=[chunks[i].text for i in rows["ids"]],
                      metadatas=[{"paper_id": chunks[i].paper_id, "chunk": chunks[i].index, "start": chunks[i].start,
                                  "end": chunks[i].end} for i in rows["ids"]])
    old = store._papers.get(include=["metadatas", "embeddings"])
    store._papers.delete(ids=old["ids"])
    metas = [{**paper_to_metadata(by_id[i]), **{k: unpack(m)[k] for k in ("n_chunks", "profile_norm", "chunk_weight")}}
             for i, m in zip(old["ids"], old["metadatas"], strict=True)]
    if kind == "abstract_rest":
        metas = [{**m, ABSTRACT_REST: abstract_rest(by_id[i].abstract, chunker.chunk(by_id[i]))}
                 for i, m in zip(old["ids"], metas, strict=True)]
        store._papers.add(ids=old["ids"], embeddings=old["embeddings"], metadatas=metas)
    else:
        store._papers.add(ids=old["ids"], embeddings=old["embeddings"], metadatas=metas,
                          documents=[by_id[i].abstract for i in old["ids"]])


@pytest.mark.parametrize("kind", ["documents", "abstract_rest"])
def test_stores_of_older_formats_are_read_as_they_were_and_changed_papers_in_the_new_one(store, fake_embedder,
                                                                                          kind):
    papers = [dataclasses.replace(p, paper_id=f"g.txt#{p.ordinal}", source="g.txt") for p in _awkward_papers()[:2]]
    papers = make_papers() + papers
    chunker = Chunker(fake_embedder.count_tokens, 12, 1)
    ingestor = Ingestor(store, fake_embedder, chunker)
    ingestor.ingest(papers)
    as_older_format(store, papers, chunker, kind)
    by_id = {p.paper_id: p for p in papers}
    assert store.get_papers(list(by_id)) == by_id
    assert sorted(store.iter_papers(), key=lambda p: p.paper_id) == sorted(papers, key=lambda p: p.paper_id)
    assert all_chunks(store) == expected_chunks(papers, chunker)
    assert ingestor.ingest(papers).unchanged == len(papers)  # same hashes: nothing rewritten
    # A changed paper is written in the new format over rows that still carry the old texts as documents (an
    # upsert keeps them): what is read is the new text.
    changed = [dataclasses.replace(papers[2], abstract="A new abstract altogether. It is different.")]
    changed = papers[:2] + changed + papers[3:]
    assert ingestor.ingest(changed).updated == 1
    assert store.get_papers([changed[2].paper_id])[changed[2].paper_id] == changed[2]
    assert sorted(store.iter_papers(), key=lambda p: p.paper_id) == sorted(changed, key=lambda p: p.paper_id)
    assert all_chunks(store) == expected_chunks(changed, chunker)
    ids = [cid for cid, _, _ in expected_chunks(changed, chunker)]
    assert store.chunk_texts(ids) == {cid: text for cid, _, text in expected_chunks(changed, chunker)}
