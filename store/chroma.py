"""The Chroma-backed index: one collection of chunks and one of papers. ``ChromaStore`` adds the manifest
and the writes to the reads (store.chroma_reads) and the connection (store.chroma_client).

The papers collection holds one record per paper: its metadata and abstract, its content hash, its
chunks' spans in the abstract and its profile vector. The chunks collection holds each chunk's vector, not
its text: a chunk's text is read back from its paper's record (store.paper_records). A paper record is written only
after all of its chunks, so it doubles as the commit marker that makes ingest resumable: a paper whose
record is missing or has an old hash is simply written again, over the same deterministic chunk ids.

The chunks collection's metadata is the index manifest: which embedding model and chunking settings
built it, and a ``generation`` counter bumped by every write, which lets lexical indexes (one per
process or machine) notice that they are stale. Beside it, ``sources`` records the files the papers came
from (each file's label, the prefix of its papers' ids, and its resolved path): a file given again keeps its
ids, and a rebuild knows what to read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rag.errors import IndexMismatch
from rag.types import Chunk, Paper
from store.chroma_client import _is_missing
from store.chroma_reads import ChromaReader
from store.layout import papers_collection
from store.paper_records import record_metadata

_WRITE_BATCH = 5000  # rows per upsert at most (Chroma's own limit may be lower)
_DELETE_BATCH = 500  # paper ids per delete filter

_MANIFEST_KEYS = (
    "embedding_model", "embedding_dimension", "chunk_max_tokens", "chunk_overlap_sentences", "chunker", "index_format",
)
# Beside the manifest: the index's source files, JSON {file label: the file's resolved path} (rag.ingest).
_SOURCES_KEY = "sources"
# While an ingest writes (``writing`` is true): JSON [the paths it reads], so that the user can be told what to re-run.
_WRITING_PATHS_KEY = "writing_paths"


@dataclass(frozen=True)
class PaperWrite:
    """One paper to store: its chunks and their vectors (row i is chunk i), and its profile
    (rag.ingest.PaperVectors; None: the unit mean of the chunk vectors). ``replace``: the paper may have
    chunks from an earlier version (it was stored, or an earlier ingest stopped) to delete beyond the new count.
    """

    paper: Paper
    chunks: Sequence[Chunk]
    vectors: np.ndarray
    profile: Any = None
    replace: bool = True


class ChromaStore(ChromaReader):
    """Chunks and papers of one corpus in Chroma, embedded (a folder) or on a server (host:port)."""

    _max_rows: int | None = None

    def __repr__(self) -> str:
        return f"ChromaStore({self.location})"

    def manifest(self) -> dict[str, Any] | None:
        if not self._open(create=False):
            return None
        meta = dict(self._chunks.metadata or {})
        return {key: meta.get(key) for key in (*_MANIFEST_KEYS, "generation")}

    def check_manifest(self, expected: dict[str, Any]) -> None:
        """Raise IndexMismatch when the index was built with other settings than ``expected``."""
        found = self.manifest()
        if found is None or found.get("embedding_model") is None:
            return
        differences = [
            f"{key}: index has {found.get(key)!r}, settings say {expected[key]!r}"
            for key in _MANIFEST_KEYS
            if key in expected and found.get(key) != expected[key]
        ]
        if differences:
            raise IndexMismatch(
                f"the index at {self.location} was built differently ({'; '.join(differences)}): "
                "run `paperchat ingest --rebuild` to rebuild it, or restore the settings it was built with"
            )

    def open_for_writing(self, manifest: dict[str, Any]) -> None:
        self.check_manifest(manifest)
        self._open(create=True, manifest=manifest)
        current = dict(self._chunks.metadata or {})
        if current.get("embedding_model") is None:
            self._call("record the index settings", self._chunks.modify, metadata={**current, **manifest})

    def sources(self) -> dict[str, str] | None:
        """The files the index was built from, as the ingests that read them recorded them: file label (the
        prefix of its papers' ids) -> the file's resolved path. None: no ingest recorded any (an index written
        before they were recorded, or no index)."""
        if not self._open(create=False):
            return None
        raw = (self._chunks.metadata or {}).get(_SOURCES_KEY)
        if not isinstance(raw, str):
            return None
        try:
            recorded = json.loads(raw)
        except ValueError:
            return None
        return {str(k): str(v) for k, v in recorded.items()} if isinstance(recorded, dict) else None

    def record_sources(self, sources: Mapping[str, str]) -> None:
        """Add ``sources`` (file label -> resolved path) to the index's record of its files; a label already
        recorded now points to the path given. Written only when the record changes."""
        current = self.sources()
        merged = {**(current or {}), **sources}
        if merged != current:
            meta = dict(self._chunks.metadata or {})
            meta[_SOURCES_KEY] = json.dumps(dict(sorted(merged.items())), ensure_ascii=False)
            self._call("update the index", self._chunks.modify, metadata=meta)

    def write_unfinished(self) -> bool:
        """Did an earlier ingest stop between its first write and ``bump_generation`` (killed, disk full...)?"""
        if not self._open(create=False):
            return False
        return bool((self._chunks.metadata or {}).get("writing"))

    def begin_write(self, paths: Sequence[str] = ()) -> None:
        """Mark the index as being written until ``bump_generation``, so that a re-run knows to finish the job;
        ``paths``: what the ingest reads, added to those of an earlier unfinished one (``unfinished_paths``)."""
        meta = dict(self._chunks.metadata or {})
        earlier = self.unfinished_paths()
        waiting = list(dict.fromkeys([*earlier, *paths]))
        if not meta.get("writing") or waiting != earlier:
            meta["writing"] = True
            meta[_WRITING_PATHS_KEY] = json.dumps(waiting, ensure_ascii=False)
            self._call("update the index", self._chunks.modify, metadata=meta)

    def unfinished_paths(self) -> list[str]:
        """The paths the ingests that did not finish were reading (``begin_write``), oldest first."""
        if not self.write_unfinished():
            return []
        try:
            paths = json.loads((self._chunks.metadata or {}).get(_WRITING_PATHS_KEY) or "[]")
        except ValueError:
            return []
        return [str(p) for p in paths] if isinstance(paths, list) else []

    def delete_orphan_chunks(self) -> int:
        """Delete the chunks of papers that have no record (left by a stopped ingest); returns how many papers."""
        papers = set(self.paper_hashes())
        orphans = {str(meta["paper_id"]) for _ids, _docs, metas in self._pages(self._chunks, include=["metadatas"])
                   for meta in metas if str(meta["paper_id"]) not in papers}
        for paper_id in sorted(orphans):
            self._delete_chunks(paper_id)
        return len(orphans)

    def bump_generation(self) -> int:
        meta = dict(self._chunks.metadata or {})
        meta["generation"] = int(meta.get("generation", 0)) + 1
        meta["writing"] = False
        meta.pop(_WRITING_PATHS_KEY, None)
        self._call("update the index", self._chunks.modify, metadata=meta)
        return meta["generation"]

    def generation(self) -> int:
        manifest = self.manifest()
        return int(manifest.get("generation") or 0) if manifest else 0

    # --- writes --------------------------------------------------------------------------------

    def write_papers(self, writes: Sequence[PaperWrite]) -> None:
        """Store several papers in a few Chroma calls: every chunk (its vector) first, then the
        chunks their earlier versions had beyond the new count are deleted, then the paper records (metadata and
        abstract) that mark the papers as done.

        A write stopped anywhere leaves papers whose records are missing or carry their old hash: the next
        ingest writes them again over the same chunk ids. Batching matters: each Chroma call costs tens of
        milliseconds whatever its size (a transaction and its log), a row a few (bench/results/report.md).
        """
        if not writes:
            return
        step = self._write_batch()
        rows = [(c, vector) for w in writes for c, vector in zip(w.chunks, w.vectors, strict=True)]
        for start in range(0, len(rows), step):
            part = rows[start : start + step]
            self._call(
                "write chunks",
                self._chunks.upsert,
                ids=[c.chunk_id for c, _ in part],
                embeddings=np.asarray([v for _, v in part], dtype=np.float32),
                metadatas=[{"paper_id": c.paper_id, "chunk": c.index} for c, _ in part],
            )
        self._delete_chunks_beyond([w for w in writes if w.replace])
        for start in range(0, len(writes), step):
            part = writes[start : start + step]
            records = [self._record_vector(w) for w in part]
            self._call(
                "write papers",
                self._papers.upsert,
                ids=[w.paper.paper_id for w in part],
                embeddings=np.vstack([unit for unit, _, _ in records]),
                metadatas=[record_metadata(w.paper, w.chunks, profile_norm=length, chunk_weight=weight)
                           for w, (_, length, weight) in zip(part, records, strict=True)],
            )

    def write_paper(self, paper: Paper, chunks: Sequence[Chunk], vectors: np.ndarray, profile=None) -> None:
        """One paper (``write_papers`` of one)."""
        self.write_papers([PaperWrite(paper, list(chunks), vectors, profile)])

    def _record_vector(self, write: PaperWrite) -> tuple[np.ndarray, float, float]:
        """(unit vector, its length before normalising, weight of the best chunk) of a paper record: the
        profile's (rag.ingest.PaperVectors), or without one the unit mean of the chunk vectors."""
        if write.profile is not None:
            p = write.profile
            return np.asarray(p.unit, dtype=np.float32).reshape(1, -1), float(p.norm), float(p.chunk_weight)
        vectors = write.vectors
        centroid = vectors.mean(axis=0) if len(vectors) else np.zeros(self._dimension(), dtype=np.float32)
        norm = float(np.linalg.norm(centroid))
        unit = centroid / norm if norm > 0 else centroid
        return np.asarray(unit, dtype=np.float32).reshape(1, -1), 0.5, 0.5

    def _write_batch(self) -> int:
        """Rows per Chroma call: its own limit (SQLite's variables), at most ``_WRITE_BATCH``."""
        if self._max_rows is None:
            self._max_rows = max(1, min(_WRITE_BATCH, int(self._call("write chunks", self.client.get_max_batch_size))))
        return self._max_rows

    def _delete_chunks_beyond(self, writes: Sequence[PaperWrite]) -> None:
        """Delete each paper's chunks numbered from its new chunk count on: one call per distinct count."""
        by_count: dict[int, list[str]] = {}
        for w in writes:
            by_count.setdefault(len(w.chunks), []).append(w.paper.paper_id)
        for keep, paper_ids in sorted(by_count.items()):
            for start in range(0, len(paper_ids), _DELETE_BATCH):
                ids = paper_ids[start : start + _DELETE_BATCH]
                where: dict[str, Any] = {"paper_id": {"$in": ids}}
                if keep:
                    where = {"$and": [where, {"chunk": {"$gte": keep}}]}
                self._call("delete old chunks", self._chunks.delete, where=where)

    def _dimension(self) -> int:
        return int((self._chunks.metadata or {}).get("embedding_dimension") or 1)

    def _delete_chunks(self, paper_id: str, keep: int = 0) -> None:
        where: dict[str, Any] = {"paper_id": paper_id}
        if keep:
            where = {"$and": [{"paper_id": paper_id}, {"chunk": {"$gte": keep}}]}
        self._call("delete old chunks", self._chunks.delete, where=where)

    def delete_papers(self, paper_ids: Sequence[str]) -> None:
        # The paper record goes first: a half-deleted paper is then re-checked by the next ingest.
        for paper_id in paper_ids:
            self._call("delete a paper", self._papers.delete, ids=[paper_id])
            self._delete_chunks(paper_id)

    def reset(self) -> None:
        """Drop both collections (``ingest --rebuild``)."""
        for name in (self.name, papers_collection(self.name)):
            try:
                self.client.delete_collection(name)
            except Exception as e:
                if not _is_missing(e):
                    raise self._translate(e, "drop the index") from e
        self._chunks = self._papers = None

