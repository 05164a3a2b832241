"""The ingest pipeline: embedding overlapped with batched store writes must store exactly what writing paper
by paper stored (same vectors, same profiles, same records), embed each distinct text once, report
progress in papers, and stop cleanly (re-runnable) when the store fails."""

from __future__ import annotations

import dataclasses
import io
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag.corpus.chunking import Chunker
from rag.embedding.batching import BATCH_OVERHEAD_TOKENS, embed_distinct_by_length, length_batches
from rag.embedding.models import ProgressBar
from rag.errors import StoreError
from rag.ingest import Ingestor, chunk_embedding_text, has_real_title, make_chunker, paper_profile
from rag.types import Paper
from store.background_writer import BackgroundWriter
from store.chroma import ChromaStore
from tests.conftest import FakeEmbedder
from tests.metadata_corpus import metadata_papers


def mixed_papers(bundled_papers) -> list[Paper]:
    """Untitled abstracts (the bundled .txt files), titled ones (JSONL with metadata), two papers sharing a
    title, and papers long enough for several chunks."""
    titled = metadata_papers()
    twin = dataclasses.replace(titled[0], paper_id="twin#1", abstract=titled[1].abstract)
    return [*bundled_papers[:20], *titled, twin]


def reference_vectors(papers, embedder, chunker):
    """What writing paper by paper stored: each paper's texts embedded on their own, its profile from them."""
    chunks, profiles = {}, {}
    for paper in papers:
        pieces = chunker.chunk(paper)
        texts = [chunk_embedding_text(paper, c.text) for c in pieces]
        titled = bool(pieces) and has_real_title(paper)
        if titled:
            texts += [f"{paper.title.strip()} {paper.abstract}", paper.title.strip()]
        vectors = embedder.embed(texts)
        chunk_vectors = vectors[: len(pieces)]
        document, title = (vectors[len(pieces)], vectors[len(pieces) + 1]) if titled else (None, None)
        profiles[paper.paper_id] = paper_profile(paper, chunk_vectors, document, title)
        chunks.update({c.chunk_id: v for c, v in zip(pieces, chunk_vectors, strict=True)})
    return chunks, profiles


def assert_store_holds(store, papers, embedder, chunker, atol=1e-6) -> None:
    chunks, profiles = reference_vectors(papers, embedder, chunker)
    stored_chunks = store.chunk_vectors(list(chunks))
    assert set(stored_chunks) == set(chunks)
    for chunk_id, vector in chunks.items():
        np.testing.assert_allclose(stored_chunks[chunk_id], vector, atol=atol, err_msg=chunk_id)
    stored = store.paper_profiles([p.paper_id for p in papers])
    assert set(stored) == {p.paper_id for p in papers}
    for paper in papers:
        unit, meta = stored[paper.paper_id]
        expected = profiles[paper.paper_id]
        np.testing.assert_allclose(unit, expected.unit, atol=atol, err_msg=paper.paper_id)
        assert meta["profile_norm"] == pytest.approx(expected.norm, abs=atol)
        assert meta["chunk_weight"] == pytest.approx(expected.chunk_weight)
        assert meta["n_chunks"] == len(chunker.chunk(paper))
        assert meta["content_hash"] == paper.content_hash


@pytest.mark.parametrize("window_texts", [1, 7, 512])
def test_stored_vectors_are_those_of_writing_paper_by_paper(tmp_path, bundled_papers, window_texts):
    papers = mixed_papers(bundled_papers)
    embedder = FakeEmbedder()
    chunker = Chunker(embedder.count_tokens, 40, 1)  # several chunks for most abstracts
    assert max(len(chunker.chunk(p)) for p in papers) >= 3
    store = ChromaStore(path=tmp_path / "chroma", collection="pipeline")
    report = Ingestor(store, embedder, chunker, window_texts=window_texts).ingest(papers)
    assert report.added == len(papers) and report.written_ids == [p.paper_id for p in papers]
    assert report.chunks_written == sum(len(chunker.chunk(p)) for p in papers) == store.counts()[1]
    assert_store_holds(store, papers, embedder, chunker)


@pytest.mark.slow
def test_stored_vectors_match_with_the_real_model(tmp_path, bundled_papers, real_embedder):
    """Batching changes only padding: the real model's vectors agree within float tolerance."""
    papers = mixed_papers(bundled_papers)[14:]  # a few untitled, every titled one
    chunker = make_chunker(real_embedder, 128, 1)
    store = ChromaStore(path=tmp_path / "chroma", collection="pipeline")
    Ingestor(store, real_embedder, chunker).ingest(papers)
    assert_store_holds(store, papers, real_embedder, chunker, atol=2e-5)


def test_each_distinct_text_of_a_window_is_embedded_once(tmp_path, bundled_papers):
    b0, b1 = bundled_papers[:2]
    copy = dataclasses.replace(b1, paper_id="copy.txt#1", source="copy.txt")  # the same abstract again
    papers = [b0, b1, copy, *metadata_papers()]  # windows: [b0], then [b1, copy] (two texts), ...
    embedder = FakeEmbedder()
    chunker = Chunker(embedder.count_tokens, 10_000, 1)  # one chunk per abstract
    ingestor = Ingestor(store := ChromaStore(path=tmp_path / "chroma", collection="pipeline"), embedder, chunker)
    ingestor.ingest(papers)
    texts = []
    for paper in papers:
        pieces = chunker.chunk(paper)
        texts += [chunk_embedding_text(paper, c.text) for c in pieces]
        if pieces and has_real_title(paper):
            texts += [f"{paper.title.strip()} {paper.abstract}", paper.title.strip()]
    assert embedder.texts_embedded == ingestor.texts_embedded == len(texts) - 1 == len(set(texts))
    assert_store_holds(store, papers, FakeEmbedder(), chunker)


def test_embed_distinct_by_length_embeds_longest_first_and_keeps_the_order():
    seen = []

    class Recording(FakeEmbedder):
        def embed(self, texts):
            seen.extend(texts)
            return super().embed(texts)

    texts = ["bb bb", "a", "ccc ccc ccc", "a", "bb bb", "dddd"]
    vectors, distinct = embed_distinct_by_length(Recording(), texts)
    assert distinct == 4 and seen == ["ccc ccc ccc", "bb bb", "dddd", "a"]
    np.testing.assert_array_equal(vectors, FakeEmbedder().embed(texts))
    empty, none = embed_distinct_by_length(FakeEmbedder(), [])
    assert empty.shape[0] == 0 and none == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 256), max_size=120), st.integers(1, 40))
def test_length_batches_cover_the_texts_in_order_and_pad_no_more_than_fixed_batches(lengths, max_rows):
    lengths = sorted(lengths, reverse=True)
    batches = length_batches(lengths, max_rows)
    assert [i for start, end in batches for i in range(start, end)] == list(range(len(lengths)))
    assert all(0 < end - start <= max_rows for start, end in batches)

    def cost(cuts):
        return sum(lengths[start] * (end - start) + BATCH_OVERHEAD_TOKENS for start, end in cuts)

    fixed = [(s, min(s + max_rows, len(lengths))) for s in range(0, len(lengths), max_rows)]
    assert cost(batches) <= cost(fixed)
    if len(set(lengths)) == 1:
        assert len(batches) == len(fixed)  # nothing to gain from cutting more often


def test_mixed_lengths_are_cut_where_the_padding_would_cost_more_than_a_batch():
    lengths = [256] * 10 + [20] * 10
    assert length_batches(lengths, 32) == [(0, 10), (10, 20)]
    assert length_batches([256, 250], 32) == [(0, 2)]


def test_progress_counts_papers_stored(tmp_path, bundled_papers):
    calls = []
    embedder = FakeEmbedder()
    store = ChromaStore(path=tmp_path / "chroma", collection="pipeline")
    Ingestor(store, embedder, make_chunker(embedder, 256, 1),
             progress=lambda done, total: calls.append((done, total))).ingest(bundled_papers)
    n = len(bundled_papers)
    assert calls[-1] == (n, n) and all(total == n for _, total in calls)
    assert [done for done, _ in calls] == sorted({done for done, _ in calls})
    assert calls[0] == (1, n)  # the first paper is written alone


def test_progress_bar_shows_papers_per_second_and_eta_only_when_enabled():
    stream = io.StringIO()
    bar = ProgressBar("ingest", unit="papers", stream=stream, enabled=True)
    bar(3, 10)
    bar(10, 10)
    assert "10/10 papers" in stream.getvalue() and "papers/s ETA" in stream.getvalue()
    quiet = io.StringIO()
    ProgressBar("ingest", unit="papers", stream=quiet, enabled=False)(10, 10)
    assert quiet.getvalue() == ""


def test_json_mode_turns_ingest_progress_off(tmp_path, monkeypatch):
    import argparse

    from ui.shared.commands import components_from_args

    monkeypatch.setenv("PAPERCHAT_DATA_DIR", str(tmp_path))
    quiet = components_from_args(argparse.Namespace(json=True, parts={"embedder": FakeEmbedder()}))
    assert quiet.ingestor().progress.enabled is False
    default = components_from_args(argparse.Namespace(parts={"embedder": FakeEmbedder()}))
    assert default.show_progress is None  # on when stderr is a terminal


def test_a_store_error_stops_the_ingest_and_a_rerun_completes_it(tmp_path, bundled_papers):
    embedder = FakeEmbedder()
    chunker = make_chunker(embedder, 256, 1)
    clean = ChromaStore(path=tmp_path / "clean", collection="pipeline")
    Ingestor(clean, embedder, chunker).ingest(bundled_papers)

    broken = ChromaStore(path=tmp_path / "broken", collection="pipeline")
    real_write = broken.write_papers
    calls = []

    def failing(writes):
        calls.append(len(writes))
        if len(calls) == 3:
            raise StoreError("cannot write chunks: the disk is full")
        real_write(writes)

    broken.write_papers = failing
    with pytest.raises(StoreError, match="disk is full"):
        Ingestor(broken, embedder, chunker, window_texts=4).ingest(bundled_papers)
    assert len(calls) == 3  # nothing written after the error
    assert broken.counts()[0] == sum(calls[:2]) < len(bundled_papers)
    del broken.write_papers
    report = Ingestor(broken, embedder, chunker).ingest(bundled_papers)
    assert report.added == len(bundled_papers) - sum(calls[:2])
    assert broken.counts() == clean.counts()
    assert sorted(broken.iter_chunks()) == sorted(clean.iter_chunks())


def test_an_interrupted_embedder_stops_the_writer_and_a_rerun_completes_it(tmp_path, bundled_papers):
    class Interrupted(FakeEmbedder):
        def embed(self, texts):
            if self.calls == 5:
                raise KeyboardInterrupt
            return super().embed(texts)

    embedder = Interrupted()
    chunker = make_chunker(embedder, 256, 1)
    store = ChromaStore(path=tmp_path / "chroma", collection="pipeline")
    with pytest.raises(KeyboardInterrupt):
        Ingestor(store, embedder, chunker, window_texts=4).ingest(bundled_papers)
    assert store.counts()[0] < len(bundled_papers) and store.write_unfinished()
    assert not [t for t in threading.enumerate() if t.name == "paperchat-store-writer"]
    Ingestor(store, FakeEmbedder(), chunker).ingest(bundled_papers)
    assert store.counts() == (len(bundled_papers), len(bundled_papers)) and not store.write_unfinished()


# --- the writer thread ---------------------------------------------------------------------------------------------


def test_background_writer_overlaps_bounds_and_coalesces():
    written: list[list[int]] = []
    gate = threading.Event()

    def write(batches):
        gate.wait(5)
        written.append(batches)

    writer = BackgroundWriter(write, depth=2, max_rows=3)
    writer.submit(1)  # taken by the writer, which waits at the gate
    deadline = time.monotonic() + 5
    while not writer.queue.empty() and time.monotonic() < deadline:
        time.sleep(0.01)
    writer.submit(2)
    writer.submit(3)
    assert writer.queue.full()
    blocked = threading.Thread(target=writer.submit, args=(4,))
    blocked.start()
    time.sleep(0.2)
    assert blocked.is_alive()  # a full queue holds the producer back
    gate.set()
    blocked.join(5)
    writer.submit(5)
    writer.close()
    assert [b for batches in written for b in batches] == [1, 2, 3, 4, 5]  # in order, each once
    assert max(len(batches) for batches in written) > 1  # what waited was written together
    assert all(len(batches) <= 3 for batches in written)


def test_background_writer_hands_its_error_to_the_producer():
    def write(batches):
        raise OSError(28, "No space left on device")

    writer = BackgroundWriter(write, depth=1)
    writer.submit(1)
    with pytest.raises(OSError, match="No space"):
        for i in range(100):  # the producer is told at its next submit, or at close
            writer.submit(i)
            time.sleep(0.01)
        writer.close()
    with pytest.raises(OSError):
        writer.close()


def test_onnx_threads_are_the_physical_cores_hyperthread_siblings_once():
    import os

    from rag.embedding.onnx_embedder import physical_cores

    allowed = sorted(os.sched_getaffinity(0))
    # Every allowed CPU, two hyperthreads per core: half as many cores (rounded up).
    siblings = "".join(f"processor\t: {cpu}\nphysical id\t: 0\ncore id\t: {i // 2}\n\n"
                       for i, cpu in enumerate(allowed))
    assert physical_cores(siblings) == (len(allowed) + 1) // 2
    separate = "".join(f"processor\t: {cpu}\nphysical id\t: 0\ncore id\t: {i}\n\n" for i, cpu in enumerate(allowed))
    assert physical_cores(separate) == len(allowed)
    assert physical_cores("") == len(allowed)  # nothing usable in /proc/cpuinfo: every CPU counts


def test_windows_computed_ahead_come_in_order_and_a_failure_is_raised_to_the_consumer():
    from rag.ingest import _ahead

    assert list(_ahead(iter(range(50)), depth=2)) == list(range(50))

    def failing():
        yield 1
        raise ValueError("chunking failed")

    items = _ahead(failing())
    assert next(items) == 1
    with pytest.raises(ValueError, match="chunking failed"):
        next(items)

    produced = []

    def endless():
        while True:
            produced.append(len(produced))
            yield produced[-1]

    items = _ahead(endless(), depth=2)
    assert next(items) == 0
    items.close()  # the producer stops instead of running on
    time.sleep(0.3)
    seen = len(produced)
    time.sleep(0.3)
    assert len(produced) == seen <= 5
