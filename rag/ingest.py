"""Ingest: papers -> chunks -> vectors -> store, idempotent and resumable.

* Idempotent: each paper's content hash is stored with it; an unchanged paper writes nothing, a
  changed one replaces its chunks (chunk ids are ``paper_id::n``, so nothing is ever duplicated).
* Resumable: a paper's record is written after its chunks and is the marker that the paper is done,
  so an ingest killed at any point and run again ends exactly as a clean run would.
* Serialised: an exclusive lock file in the data folder; a second ingest fails at once with a clear
  message instead of interleaving writes.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from rag.chunking import CHUNKER_VERSION, Chunker
from rag.embedding import Embedder
from rag.errors import IndexLocked, StoreError
from rag.types import Paper
from store.chroma import ChromaStore


@dataclass
class IngestReport:
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    chunks_written: int = 0
    papers_in_index: int = 0
    chunks_in_index: int = 0
    written_ids: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"{self.added} added, {self.updated} updated, {self.unchanged} unchanged, {self.removed} removed; "
            f"{self.chunks_written} chunks written; index: {self.papers_in_index} papers, "
            f"{self.chunks_in_index} chunks"
        )


def index_manifest(embedder: Embedder, chunker: Chunker) -> dict:
    return {
        "embedding_model": embedder.name,
        "embedding_dimension": embedder.dimension,
        "chunk_max_tokens": chunker.max_tokens,
        "chunk_overlap_sentences": chunker.overlap_sentences,
        "chunker": CHUNKER_VERSION,
    }


def make_chunker(embedder: Embedder, max_tokens: int, overlap_sentences: int) -> Chunker:
    # Never exceed the model's window, whatever is configured: longer text would be truncated silently.
    return Chunker(embedder.count_tokens, min(max_tokens, embedder.max_tokens), overlap_sentences)


@contextmanager
def ingest_lock(folder: Path) -> Iterator[None]:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle = open(folder / "ingest.lock", "a+")  # noqa: SIM115 - held for the whole block
    except OSError as e:
        raise StoreError(
            f"cannot write to the data folder {folder} ({e.strerror}): make it writable or set PAPERCHAT_DATA_DIR"
        ) from e
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as e:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise IndexLocked(
                f"another ingest ({holder}) is writing to {folder}; wait for it to finish, then run this one again"
            ) from e
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}")
        handle.flush()
        yield
    finally:
        handle.close()


class Ingestor:
    """Writes papers into the store; receives its parts, builds none of them."""

    def __init__(
        self,
        store: ChromaStore,
        embedder: Embedder,
        chunker: Chunker,
        *,
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.chunker = chunker
        self.progress = progress

    def ingest(self, papers: Sequence[Paper], *, complete_sources: set[str] | None = None) -> IngestReport:
        """Store ``papers``. For each source in ``complete_sources`` (a file that loaded without
        problems), papers of that source that are no longer in it are removed."""
        report = IngestReport()
        self.store.open_for_writing(index_manifest(self.embedder, self.chunker))
        stored = self.store.paper_hashes()
        todo = []
        for paper in papers:
            previous = stored.get(paper.paper_id)
            if previous is not None and previous[0] == paper.content_hash:
                report.unchanged += 1
            else:
                todo.append((paper, previous is not None))

        wanted = {p.paper_id for p in papers}
        stale = [
            pid for pid, (_hash, source) in stored.items()
            if complete_sources and source in complete_sources and pid not in wanted
        ]
        unfinished = self.store.write_unfinished()  # an earlier ingest stopped mid-write: finish its job
        if todo or stale or unfinished:
            self.store.begin_write()
            self._write(todo, report)
            if stale:
                self.store.delete_papers(stale)
                report.removed = len(stale)
            if unfinished:
                self.store.delete_orphan_chunks()
            self.store.bump_generation()
        report.papers_in_index, report.chunks_in_index = self.store.counts()
        return report

    def _write(self, todo: list[tuple[Paper, bool]], report: IngestReport) -> None:
        chunked = [(paper, existed, self.chunker.chunk(paper)) for paper, existed in todo]
        total = sum(len(chunks) for _, _, chunks in chunked)
        done = 0
        # Embed across papers in batches, but write paper by paper so each paper is atomic.
        batch: list[tuple[Paper, bool, list]] = []
        batch_chunks = 0
        for item in chunked:
            batch.append(item)
            batch_chunks += len(item[2])
            if batch_chunks >= 64:
                done = self._flush(batch, report, done, total)
                batch, batch_chunks = [], 0
        if batch:
            self._flush(batch, report, done, total)

    def _flush(self, batch, report: IngestReport, done: int, total: int) -> int:
        texts = [c.text for _, _, chunks in batch for c in chunks]
        vectors = self.embedder.embed(texts)
        offset = 0
        for paper, existed, chunks in batch:
            self.store.write_paper(paper, chunks, vectors[offset : offset + len(chunks)])
            offset += len(chunks)
            report.chunks_written += len(chunks)
            report.written_ids.append(paper.paper_id)
            if existed:
                report.updated += 1
            else:
                report.added += 1
        done += len(texts)
        if self.progress is not None:
            self.progress(done, total)
        return done
