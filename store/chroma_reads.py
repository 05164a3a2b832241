"""Reading the Chroma store: counts, every record page by page (``_PAGE`` at a time), records by id, and
nearest-neighbour queries for one question or many (batched under SQLite's variable limit).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from rag.types import Paper
from store.chroma_client import ChromaConnection
from store.paper_records import (
    ABSTRACT,
    ABSTRACT_REST,
    SPANS,
    chunk_text,
    paper_from_record,
    rebuild_abstract,
    unpack,
)

_PAGE = 2000
_QUERY_BATCH = 256  # questions per Chroma query call, at most
_QUERY_ROWS = 16000  # questions x results per call, at most


@dataclass(frozen=True)
class ChunkMatch:
    chunk_id: str
    paper_id: str
    text: str
    similarity: float



class ChromaReader(ChromaConnection):
    """Reads of the store: counts, pages of records, records by id, and nearest-neighbour queries."""

    def counts(self) -> tuple[int, int]:
        """(papers, chunks)."""
        if not self._open(create=False):
            return 0, 0
        return self._call("count papers", self._papers.count), self._call("count chunks", self._chunks.count)

    def paper_hashes(self) -> dict[str, tuple[str, str]]:
        """paper_id -> (content_hash, source) for every paper in the index."""
        out: dict[str, tuple[str, str]] = {}
        if not self._open(create=False):
            return out
        for ids, _docs, metas in self._pages(self._papers, include=["metadatas"]):
            for paper_id, meta in zip(ids, metas, strict=True):
                out[paper_id] = (str(meta.get("content_hash", "")), str(meta.get("source", "")))
        return out

    def iter_chunks(self) -> Iterator[tuple[str, str, str]]:
        """(chunk_id, paper_id, text) for every chunk, in pages."""
        if not self._open(create=False):
            return
        for ids, docs, metas in self._pages(self._chunks, include=["documents", "metadatas"]):
            texts = self._chunk_texts_of(docs, metas)
            for chunk_id, text, meta in zip(ids, texts, metas, strict=True):
                yield chunk_id, str(meta["paper_id"]), text

    def _chunk_texts_of(self, docs: Sequence[str | None], metas: Sequence[dict | None]) -> list[str]:
        """The texts of chunk rows, each sliced from its paper's record (one read for the rows' papers). Stores
        written before kept the text as the chunk's document: their records have no spans. The record decides,
        not the row: a chunk rewritten by an upsert keeps its old document."""
        records = self._records({str(meta["paper_id"]) for meta in metas if meta and "paper_id" in meta})
        texts = []
        for doc, meta in zip(docs, metas, strict=True):
            meta = meta or {}
            text = chunk_text(records.get(str(meta.get("paper_id")), {}), int(meta.get("chunk", -1)))
            texts.append(doc or "" if text is None else text)
        return texts

    def _records(self, paper_ids: set[str]) -> dict[str, dict]:
        """paper_id -> unpacked record metadata, for those of ``paper_ids`` that are stored (one read)."""
        return {
            pid: meta
            for page in self._by_ids("papers", sorted(paper_ids), ["metadatas"], "read chunks")
            for pid, meta in zip(page["ids"], page["metadatas"], strict=True)
        }

    def iter_papers(self) -> Iterator[Paper]:
        if not self._open(create=False):
            return
        for ids, docs, metas in self._pages(self._papers, include=["documents", "metadatas"]):
            yield from self._papers_of(ids, docs, metas).values()

    def _papers_of(self, ids: Sequence[str], docs: Sequence[str | None], metas: Sequence[dict]) -> dict[str, Paper]:
        """paper_id -> Paper for a page of paper records. Records of older stores: abstracts rebuilt from the
        chunks of those that carry ``ABSTRACT_REST`` (one read for the page), the others' from their document."""
        rebuilt = [(pid, meta) for pid, meta in zip(ids, metas, strict=True)
                   if meta and ABSTRACT_REST in meta and ABSTRACT not in meta]
        pieces: dict[str, list[tuple[int, str]]] = {pid: [] for pid, _ in rebuilt}
        chunk_ids = [f"{pid}::{i}" for pid, meta in rebuilt for i in range(int(meta.get("n_chunks") or 0))]
        for page in self._by_ids("chunks", chunk_ids, ["documents", "metadatas"], "read papers"):
            for doc, meta in zip(page["documents"], page["metadatas"], strict=True):
                if meta and str(meta.get("paper_id")) in pieces:
                    pieces[str(meta["paper_id"])].append((int(meta.get("start", 0)), doc or ""))
        return {
            pid: paper_from_record(doc, meta, rebuild_abstract(meta[ABSTRACT_REST], pieces[pid]) if pid in pieces
                                   else None)
            for pid, doc, meta in zip(ids, docs, metas, strict=True)
        }

    def iter_vectors(self, which: str) -> Iterator[tuple[list[str], np.ndarray, list[dict]]]:
        """Pages of (ids, vectors, metadatas) of the ``"chunks"`` or ``"papers"`` collection."""
        if not self._open(create=False):
            return
        collection = self._chunks if which == "chunks" else self._papers
        include = ["embeddings"] if which == "chunks" else ["embeddings", "metadatas"]
        for page in self._raw_pages(collection, include):
            metas = page.get("metadatas") or [{}] * len(page["ids"])
            yield page["ids"], np.asarray(page["embeddings"], dtype=np.float32), [m or {} for m in metas]

    def _pages(self, collection, include: list[str]):
        for page in self._raw_pages(collection, include):
            ids = page["ids"]
            yield ids, page.get("documents") or [None] * len(ids), page.get("metadatas") or [{}] * len(ids)

    def _raw_pages(self, collection, include: list[str]):
        """``collection.get`` page by page, ``_PAGE`` records at a time."""
        offset = 0
        while True:
            page = self._call("read the index", collection.get, limit=_PAGE, offset=offset, include=include)
            if not page["ids"]:
                return
            yield self._unpacked(collection, page)
            if len(page["ids"]) < _PAGE:
                return
            offset += len(page["ids"])

    def _by_ids(self, which: str, ids: Sequence[str], include: list[str], doing: str):
        """Pages of ``collection.get(ids=...)`` for these ids (duplicates dropped), a few thousand per read."""
        unique = list(dict.fromkeys(ids))
        if not unique or not self._open(create=False):
            return
        collection = self._chunks if which == "chunks" else self._papers
        for start in range(0, len(unique), _PAGE):
            yield self._unpacked(collection, self._call(doing, collection.get, ids=unique[start : start + _PAGE],
                                                        include=include))

    def _unpacked(self, collection, page: dict) -> dict:
        """A page of records with the papers' metadata as flat keys, whatever format wrote them."""
        if collection is self._papers and page.get("metadatas") is not None:
            page["metadatas"] = [unpack(meta) for meta in page["metadatas"]]
        return page

    def get_papers(self, paper_ids: Sequence[str]) -> dict[str, Paper]:
        return {
            pid: paper
            for page in self._by_ids("papers", paper_ids, ["documents", "metadatas"], "read papers")
            for pid, paper in self._papers_of(page["ids"], page["documents"], page["metadatas"]).items()
        }

    def chunk_texts(self, chunk_ids: Sequence[str]) -> dict[str, str]:
        """chunk_id -> text for the chunks that exist. A chunk id names its paper and number (``PAPER::N``), so the
        texts are sliced from the papers' records in one read; the chunk rows are read only for chunks a record
        does not span (stores of the older formats, chunks whose record is missing). Every search reads the texts
        of the chunks it shows."""
        named = {cid: cid.rpartition("::") for cid in dict.fromkeys(chunk_ids)}
        records = self._records({pid for pid, _, _ in named.values()})
        texts: dict[str, str] = {}
        rest = []
        for cid, (pid, _, number) in named.items():
            record = records.get(pid, {})
            if number.isdigit() and int(number) < len(record.get(SPANS, ())) and ABSTRACT in record:
                texts[cid] = chunk_text(record, int(number)) or ""
            else:
                rest.append(cid)
        for page in self._by_ids("chunks", rest, ["documents", "metadatas"], "read chunks"):
            texts.update(zip(page["ids"], self._chunk_texts_of(page["documents"], page["metadatas"]), strict=True))
        return texts

    def query_chunks(self, vector: np.ndarray, n: int) -> list[ChunkMatch]:
        if not self._open(create=False):
            return []
        result = self._call(
            "search the index",
            self._chunks.query,
            query_embeddings=vector.reshape(1, -1).astype(np.float32),
            n_results=max(1, n),
            include=["distances", "documents", "metadatas"],
        )
        texts = self._chunk_texts_of(result["documents"][0], result["metadatas"][0])
        return [
            ChunkMatch(cid, str(meta["paper_id"]), text, 1.0 - float(dist))
            for cid, text, meta, dist in zip(
                result["ids"][0], texts, result["metadatas"][0], result["distances"][0], strict=True
            )
        ]

    def query_chunks_many(self, vectors: np.ndarray, n: int) -> list[list[tuple[str, str, float]]]:
        """For each row of ``vectors``, its ``n`` nearest chunks as (chunk_id, paper_id, similarity).

        One call per few hundred questions, and no chunk texts: a search reads the texts of the few
        chunks it shows afterwards (``chunk_texts``), which is most of what a query costs otherwise.
        """
        # Chunk ids are "<paper_id>::<n>" (Chunk.chunk_id): reading metadata just for the paper id costs time.
        rows_per_question = self._query_many("chunks", vectors, n)
        return [[(cid, cid.rsplit("::", 1)[0], sim) for cid, sim in rows] for rows in rows_per_question]

    def query_papers_many(self, vectors: np.ndarray, n: int) -> list[dict[str, float]]:
        """For each row of ``vectors``: paper_id -> cosine to the paper's (unit) profile vector, top ``n``.
        No metadata: reading it costs more than the query (store.vectors keeps what scoring needs)."""
        return [dict(rows) for rows in self._query_many("papers", vectors, n)]

    def paper_profiles(self, paper_ids: Sequence[str]) -> dict[str, tuple[np.ndarray, dict]]:
        """paper_id -> (stored unit profile vector, metadata) for the papers that exist."""
        return {
            pid: (np.asarray(vector, dtype=np.float32), meta or {})
            for page in self._by_ids("papers", paper_ids, ["embeddings", "metadatas"], "read papers")
            for pid, vector, meta in zip(page["ids"], page["embeddings"], page["metadatas"], strict=True)
        }

    def chunk_vectors(self, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """chunk_id -> stored vector, read by id (a ``where`` filter on paper ids scans the collection)."""
        return {
            cid: np.asarray(vector, dtype=np.float32)
            for page in self._by_ids("chunks", chunk_ids, ["embeddings"], "read chunks")
            for cid, vector in zip(page["ids"], page["embeddings"], strict=True)
        }

    def _query_many(self, which: str, vectors: np.ndarray, n: int) -> list[list[tuple[str, float]]]:
        """(id, cosine similarity) of the ``n`` nearest records, for each row of ``vectors``."""
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(vectors), -1)
        if not len(vectors) or not self._open(create=False):
            return [[] for _ in range(len(vectors))]
        collection = self._chunks if which == "chunks" else self._papers
        out = []
        # Chroma reads a call's results with one SQL statement: questions x results must stay under
        # SQLite's 32,766 variables ("too many SQL variables" otherwise).
        step = max(1, min(_QUERY_BATCH, _QUERY_ROWS // max(1, n)))
        for start in range(0, len(vectors), step):
            result = self._call(
                "search the index", collection.query, query_embeddings=vectors[start : start + step],
                n_results=max(1, n), include=["distances"],
            )
            for ids, distances in zip(result["ids"], result["distances"], strict=True):
                out.append([(i, 1.0 - float(d)) for i, d in zip(ids, distances, strict=True)])
        return out

    def query_papers(self, vector: np.ndarray, n: int) -> dict[str, float]:
        """paper_id -> cosine similarity of the question to the paper's stored (profile) vector."""
        if not self._open(create=False):
            return {}
        result = self._call(
            "search the index",
            self._papers.query,
            query_embeddings=vector.reshape(1, -1).astype(np.float32),
            n_results=max(1, n),
            include=["distances"],
        )
        return {pid: 1.0 - float(d) for pid, d in zip(result["ids"][0], result["distances"][0], strict=True)}

