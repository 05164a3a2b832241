"""The Chroma-backed index: one collection of chunks and one of papers.

Embeddings are always passed in (collections are opened with ``embedding_function=None``), so
Chroma's own ONNX default, which would download a model, never runs.

The papers collection holds one record per paper: the whole abstract, its metadata, its content hash
and the mean of its chunk vectors. A paper record is written only after all of its chunks, so it
doubles as the commit marker that makes ingest resumable: a paper whose record is missing or has an
old hash is simply written again, over the same deterministic chunk ids.

The chunks collection's metadata is the index manifest: which embedding model and chunking settings
built it, and a ``generation`` counter bumped by every write, which lets lexical indexes (one per
process or machine) notice that they are stale.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rag.errors import IndexMismatch, StoreError, StoreUnavailable
from rag.types import Chunk, Paper

PAPERS_SUFFIX = "-papers"
_PAGE = 2000
_QUERY_BATCH = 256  # questions per Chroma query call, at most
_QUERY_ROWS = 16000  # questions x results per call, at most
_MANIFEST_KEYS = (
    "embedding_model", "embedding_dimension", "chunk_max_tokens", "chunk_overlap_sentences", "chunker", "index_format",
)


@dataclass(frozen=True)
class ChunkMatch:
    chunk_id: str
    paper_id: str
    text: str
    similarity: float


def paper_to_metadata(paper: Paper) -> dict[str, Any]:
    return {
        "paper_id": paper.paper_id,
        "title": paper.title,
        "source": paper.source,
        "ordinal": paper.ordinal,
        "authors": json.dumps(list(paper.authors), ensure_ascii=False),
        "urls": json.dumps(list(paper.urls), ensure_ascii=False),
        "venue": paper.venue,
        "year": paper.year if paper.year is not None else -1,
        "title_given": paper.title_given,
        "content_hash": paper.content_hash,
    }


def paper_from_record(document: str, meta: dict[str, Any]) -> Paper:
    year = meta.get("year", -1)
    return Paper(
        paper_id=str(meta["paper_id"]),
        title=str(meta.get("title", "")),
        abstract=document or "",
        source=str(meta.get("source", "")),
        ordinal=int(meta.get("ordinal", 0)),
        authors=tuple(json.loads(meta.get("authors") or "[]")),
        urls=tuple(json.loads(meta.get("urls") or "[]")),
        venue=str(meta.get("venue", "")),
        year=None if year in (None, -1) else int(year),
        title_given=bool(meta.get("title_given", False)),
    )


class ChromaStore:
    """Chunks and papers of one corpus in Chroma, embedded (a folder) or on a server (host:port)."""

    def __init__(
        self,
        *,
        path: Path | None = None,
        host: str | None = None,
        port: int = 8000,
        collection: str = "paperchat",
        timeout: int = 30,
    ) -> None:
        if (path is None) == (host is None):
            raise ValueError("give exactly one of path= (embedded store) or host= (Chroma server)")
        self.path = path
        self.host = host
        self.port = port
        self.timeout = timeout
        self.name = collection
        self._client = None
        self._chunks = None
        self._papers = None

    def __repr__(self) -> str:
        return f"ChromaStore({self.location})"

    @classmethod
    def from_settings(cls, settings) -> ChromaStore:
        if settings.chroma_host:
            return cls(host=settings.chroma_host, port=settings.chroma_port, collection=settings.collection,
                       timeout=settings.chroma_timeout)
        return cls(path=settings.index_dir, collection=settings.collection)

    @property
    def location(self) -> str:
        if self.host is not None:
            return f"chroma server http://{self.host}:{self.port} (collection {self.name})"
        return f"{self.path} (collection {self.name})"

    # --- connection ----------------------------------------------------------------------------

    @property
    def client(self):
        if self._client is None:
            import chromadb

            settings = chromadb.Settings(anonymized_telemetry=False, allow_reset=False)
            try:
                if self.host is not None:
                    self._probe_server()  # chromadb.HttpClient's constructor already talks to the server
                    self._client = chromadb.HttpClient(host=self.host, port=self.port, settings=settings)
                    _set_session_timeout(self._client, self.timeout)
                    self._client.heartbeat()
                else:
                    self.path.mkdir(parents=True, exist_ok=True)
                    self._client = chromadb.PersistentClient(path=str(self.path), settings=settings)
            except PermissionError as e:
                raise StoreError(f"cannot write the index folder {self.path}: {e.strerror}; "
                                 "set PAPERCHAT_DATA_DIR to a writable folder") from e
            except Exception as e:
                self._client = None
                raise self._translate(e, "open the index") from e
        return self._client

    def _probe_server(self) -> None:
        """Fail within the timeout, with the usual errors, if the server does not answer its heartbeat."""
        import httpx

        with httpx.Client(timeout=self.timeout, trust_env=False) as http:
            http.get(f"http://{self.host}:{self.port}/api/v2/heartbeat")

    def _translate(self, error: Exception, doing: str) -> StoreError:
        if isinstance(error, StoreError):
            return error
        if self.host is not None and _is_timeout(error):
            return StoreUnavailable(
                f"the Chroma server at http://{self.host}:{self.port} did not answer within {self.timeout} s "
                f"(PAPERCHAT_CHROMA_TIMEOUT) to {doing}: check that `chroma run` is running and not stuck, "
                "or raise PAPERCHAT_CHROMA_TIMEOUT"
            )
        text = f"{type(error).__name__}: {error}".replace("\n", " ")[:300]
        if self.host is not None and any(
            word in text.lower() for word in ("connect", "refused", "timed out", "timeout", "unreachable", "resolve")
        ):
            return StoreUnavailable(
                f"cannot reach the Chroma server at http://{self.host}:{self.port} to {doing}: start it with "
                f"`chroma run --path DIR --host {self.host} --port {self.port}` or unset PAPERCHAT_CHROMA_HOST "
                "to use the embedded store"
            )
        if "readonly" in text.lower() or "read-only" in text.lower() or "permission" in text.lower():
            return StoreError(f"cannot {doing} at {self.location}: the folder is read-only ({text}); "
                              "make it writable or set PAPERCHAT_DATA_DIR")
        if "no space" in text.lower() or "disk is full" in text.lower() or "database or disk is full" in text.lower():
            return StoreError(f"cannot {doing} at {self.location}: the disk is full; free space and run the ingest "
                              "again (it resumes where it stopped)")
        return StoreError(f"cannot {doing} at {self.location}: {text}")

    def _call(self, doing: str, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except StoreError:
            raise
        except Exception as e:
            # A server that went away: forget the client so the next call reconnects.
            if self.host is not None:
                self._client = self._chunks = self._papers = None
            raise self._translate(e, doing) from e

    def _collection(self, name: str, create: bool, metadata: dict | None = None):
        def op():
            try:
                return self.client.get_collection(name, embedding_function=None)
            except Exception as e:
                if not create or not _is_missing(e):
                    raise
            # get_or_create would overwrite an existing collection's manifest: only create when missing.
            return self.client.create_collection(
                name, metadata=metadata, configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
            )

        return self._call("open the index", op)

    def _open(self, create: bool, manifest: dict | None = None) -> bool:
        if self._chunks is not None:
            return True
        collections = self._call("list collections", self.client.list_collections)
        existing = {c.name if hasattr(c, "name") else c for c in collections}
        if self.name not in existing and not create:
            return False
        self._chunks = self._collection(self.name, create, metadata={**(manifest or {}), "generation": 0})
        self._papers = self._collection(self.name + PAPERS_SUFFIX, create, metadata={"role": "papers"})
        return True

    def exists(self) -> bool:
        return self._open(create=False)

    # --- manifest ------------------------------------------------------------------------------

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

    def write_unfinished(self) -> bool:
        """Did an earlier ingest stop between its first write and ``bump_generation`` (killed, disk full...)?"""
        if not self._open(create=False):
            return False
        return bool((self._chunks.metadata or {}).get("writing"))

    def begin_write(self) -> None:
        """Mark the index as being written until ``bump_generation``, so that a re-run knows to finish the job."""
        meta = dict(self._chunks.metadata or {})
        if not meta.get("writing"):
            meta["writing"] = True
            self._call("update the index", self._chunks.modify, metadata=meta)

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
        self._call("update the index", self._chunks.modify, metadata=meta)
        return meta["generation"]

    def generation(self) -> int:
        manifest = self.manifest()
        return int(manifest.get("generation") or 0) if manifest else 0

    # --- writes --------------------------------------------------------------------------------

    def write_paper(self, paper: Paper, chunks: Sequence[Chunk], vectors: np.ndarray, profile=None) -> None:
        """Chunks first, stale chunks removed, then the paper record that marks the paper as done.

        The paper record's vector is ``profile.unit`` (rag.ingest.PaperVectors), its length and the weight
        of the best chunk in its metadata; without a profile, the unit mean of the chunk vectors.
        """
        if chunks:
            self._call(
                "write chunks",
                self._chunks.upsert,
                ids=[c.chunk_id for c in chunks],
                embeddings=vectors,
                documents=[c.text for c in chunks],
                metadatas=[
                    {"paper_id": c.paper_id, "chunk": c.index, "start": c.start, "end": c.end} for c in chunks
                ],
            )
        self._delete_chunks(paper.paper_id, keep=len(chunks))
        if profile is None:
            centroid = vectors.mean(axis=0) if len(vectors) else np.zeros(self._dimension(), dtype=np.float32)
            norm = float(np.linalg.norm(centroid))
            vector, length, chunk_weight = (centroid / norm if norm > 0 else centroid), 0.5, 0.5
        else:
            vector, length, chunk_weight = profile.unit, profile.norm, profile.chunk_weight
        meta = {**paper_to_metadata(paper), "n_chunks": len(chunks), "profile_norm": float(length),
                "chunk_weight": float(chunk_weight)}
        self._call(
            "write a paper",
            self._papers.upsert,
            ids=[paper.paper_id],
            embeddings=np.asarray(vector, dtype=np.float32).reshape(1, -1),
            documents=[paper.abstract],
            metadatas=[meta],
        )

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
        for name in (self.name, self.name + PAPERS_SUFFIX):
            try:
                self.client.delete_collection(name)
            except Exception as e:
                if not _is_missing(e):
                    raise self._translate(e, "drop the index") from e
        self._chunks = self._papers = None

    # --- reads ---------------------------------------------------------------------------------

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
            for chunk_id, doc, meta in zip(ids, docs, metas, strict=True):
                yield chunk_id, str(meta["paper_id"]), doc or ""

    def iter_papers(self) -> Iterator[Paper]:
        if not self._open(create=False):
            return
        for _ids, docs, metas in self._pages(self._papers, include=["documents", "metadatas"]):
            for doc, meta in zip(docs, metas, strict=True):
                yield paper_from_record(doc, meta)

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
            yield page
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
            yield self._call(doing, collection.get, ids=unique[start : start + _PAGE], include=include)

    def get_papers(self, paper_ids: Sequence[str]) -> dict[str, Paper]:
        return {
            pid: paper_from_record(doc, meta)
            for page in self._by_ids("papers", paper_ids, ["documents", "metadatas"], "read papers")
            for pid, doc, meta in zip(page["ids"], page["documents"], page["metadatas"], strict=True)
        }

    def chunk_texts(self, chunk_ids: Sequence[str]) -> dict[str, str]:
        """chunk_id -> text for the chunks that exist."""
        return {
            cid: doc or ""
            for page in self._by_ids("chunks", chunk_ids, ["documents"], "read chunks")
            for cid, doc in zip(page["ids"], page["documents"], strict=True)
        }

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
        return [
            ChunkMatch(cid, str(meta["paper_id"]), doc or "", 1.0 - float(dist))
            for cid, doc, meta, dist in zip(
                result["ids"][0], result["documents"][0], result["metadatas"][0], result["distances"][0], strict=True
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


def _is_missing(error: Exception) -> bool:
    text = str(error).lower()
    return type(error).__name__ == "NotFoundError" or "does not exist" in text or "not found" in text


def _is_timeout(error: BaseException) -> bool:
    import httpx

    while error is not None:
        if isinstance(error, httpx.TimeoutException | TimeoutError):
            return True
        error = error.__cause__ or error.__context__
    return False


def _set_session_timeout(client, seconds: float) -> None:
    """Give chromadb's HTTP session a timeout: chromadb 1.5 builds it with ``httpx.Client(timeout=None)`` and no
    setting reaches it (its ``chroma_*_timeout_seconds`` settings are the server's), so a stalled server would
    hang every call. The session is an attribute of chromadb's client internals; tests/store/test_chroma_server.py
    stops a real server to check that this still takes effect."""
    import httpx

    session = getattr(getattr(client, "_server", None), "_session", None)
    if not isinstance(session, httpx.Client):
        raise StoreError(
            "this chromadb version's HTTP client has no session paperchat can give a timeout to; "
            "install chromadb 1.x as pyproject.toml says, or unset PAPERCHAT_CHROMA_HOST to use the embedded store"
        )
    session.timeout = httpx.Timeout(float(seconds))
