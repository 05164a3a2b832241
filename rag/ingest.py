"""Ingest: papers -> chunks -> vectors -> store, idempotent and resumable.

* Idempotent: each paper's content hash is stored with it; an unchanged paper writes nothing, a
  changed one replaces its chunks (chunk ids are ``paper_id::n``, so nothing is ever duplicated).
* Resumable: a paper's record is written after its chunks and is the marker that the paper is done,
  so an ingest killed at any point and run again ends exactly as a clean run would.
* Fast: embedding and store writes overlap, writes are batched (``Ingestor``).
* Serialised: an exclusive lock file in the data folder; a second ingest fails at once with a clear
  message instead of interleaving writes.
"""

from __future__ import annotations

import fcntl
import os
import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rag.corpus.chunking import CHUNKER_VERSION, Chunker
from rag.corpus.discovery import identity
from rag.embedding.batching import embed_distinct_by_length
from rag.embedding.models import Embedder
from rag.errors import ConfigError, IndexLocked, StoreError
from rag.labels import file_label
from rag.settings import BUNDLED_CORPUS, Settings
from rag.text import counted
from rag.types import Chunk, Paper
from store.background_writer import BackgroundWriter
from store.chroma import ChromaStore, PaperWrite
from store.layout import LOCK_FILE


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
    updated_ids: list[str] = field(default_factory=list)  # papers already stored whose content changed

    def summary(self) -> str:
        return (
            f"{self.added} added, {self.updated} updated, {self.unchanged} unchanged, {self.removed} removed; "
            f"{counted(self.chunks_written, 'chunk')} written; index: {counted(self.papers_in_index, 'paper')}, "
            f"{counted(self.chunks_in_index, 'chunk')}"
        )


# What the vectors of an index are (bump when it changes: an index of another format must be rebuilt).
# 2: chunks of titled papers are embedded with their title; each paper stores a profile vector (below).
# 3: paper ids are namespaced by their file (``corpus.jsonl#doc1``), so two files never collide.
INDEX_FORMAT = 3

MIN_WINDOW_TEXTS = 32  # texts embedded together at least (one embedding batch), the first paper aside

# A paper's dense score is ``chunk_weight * best chunk similarity + q . profile``, where the profile mixes
# the paper-level vectors: the whole text and the title add evidence a single chunk lacks. Weights tuned on
# SciFact's train queries and checked on its test queries (figures: bench/results/tuning.md). Untitled
# abstracts (titles derived from the text) keep the chunk + centroid mix, since their "title" would repeat
# the abstract's own words.
TITLED_WEIGHTS = {"chunk": 0.25, "centroid": 0.25, "document": 0.25, "title": 0.15}
UNTITLED_WEIGHTS = {"chunk": 0.5, "centroid": 0.5, "document": 0.0, "title": 0.0}


def index_manifest(embedder: Embedder, chunker: Chunker) -> dict:
    return {
        "embedding_model": embedder.name,
        "embedding_dimension": embedder.dimension,
        "chunk_max_tokens": chunker.max_tokens,
        "chunk_overlap_sentences": chunker.overlap_sentences,
        "chunker": CHUNKER_VERSION,
        "index_format": INDEX_FORMAT,
    }


def has_real_title(paper: Paper) -> bool:
    return bool(paper.title_given and paper.title.strip())


def chunk_embedding_text(paper: Paper, text: str) -> str:
    """What is embedded for a chunk: with the paper's title when it has one (a chunk alone lacks context)."""
    return f"{paper.title.strip()}. {text}" if has_real_title(paper) else text


def _unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


def paper_profile(
    paper: Paper, chunk_vectors: np.ndarray, document: np.ndarray | None, title: np.ndarray | None
) -> PaperVectors:
    """The paper-level vectors mixed into one (see ``TITLED_WEIGHTS``); q . profile = their weighted sum."""
    weights = TITLED_WEIGHTS if has_real_title(paper) and document is not None and title is not None else (
        UNTITLED_WEIGHTS
    )
    dimension = chunk_vectors.shape[1]
    profile = np.zeros(dimension, dtype=np.float64)
    if len(chunk_vectors):
        profile += weights["centroid"] * _unit(chunk_vectors.astype(np.float64).mean(axis=0))
    if weights["document"] and document is not None:
        profile += weights["document"] * _unit(document.astype(np.float64))
    if weights["title"] and title is not None:
        profile += weights["title"] * _unit(title.astype(np.float64))
    norm = float(np.linalg.norm(profile))
    unit = (profile / norm if norm > 0 else profile).astype(np.float32)
    return PaperVectors(unit, norm, weights["chunk"])


@dataclass(frozen=True)
class PaperVectors:
    """A paper's stored profile: a unit vector (Chroma compares directions) and the length it had."""

    unit: np.ndarray
    norm: float
    chunk_weight: float


def make_chunker(embedder: Embedder, max_tokens: int, overlap_sentences: int) -> Chunker:
    # Never exceed the model's window, whatever is configured: longer text would be truncated silently.
    return Chunker(embedder.count_tokens, min(max_tokens, embedder.max_tokens), overlap_sentences,
                   getattr(embedder, "token_starts", None))


@contextmanager
def ingest_lock(folder: Path) -> Iterator[None]:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle = open(folder / LOCK_FILE, "a+")  # noqa: SIM115 - held for the whole block
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
    """Writes papers into the store; receives its parts, builds none of them.

    Embedding and store writes overlap: the calling thread embeds window after window of papers while a
    writer thread (store.background_writer) stores the previous ones, a few windows at most waiting
    between them (``_windows`` says how big). Each window's texts are embedded longest first and each
    distinct text once (rag.embedding.batching). ``progress(papers stored, papers to store)``.
    """

    def __init__(
        self,
        store: ChromaStore,
        embedder: Embedder,
        chunker: Chunker,
        *,
        progress: Callable[[int, int], None] | None = None,
        window_texts: int = 512,
        queue_depth: int = 2,
        write_rows: int = 4000,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.chunker = chunker
        self.progress = progress
        self.window_texts = max(1, window_texts)
        self.queue_depth = queue_depth
        self.write_rows = write_rows
        self.texts_embedded = 0  # distinct texts embedded by the last ingest (a text repeated is embedded once)

    def ingest(self, papers: Sequence[Paper], *, complete_sources: set[str] | None = None,
               sources: Mapping[str, str] | None = None, paths: Sequence[str] = ()) -> IngestReport:
        """Store ``papers``. For each file label in ``complete_sources`` (a file that loaded without
        problems; its papers' ids start with ``label#``), papers of that file no longer in it are removed.
        ``sources`` (file label -> resolved path) are added to the index's record of its files first, so
        that no paper is ever stored without its file being known. ``paths``: what the papers were read from,
        kept with the index until the ingest finishes (what to re-run if it does not)."""
        report = IngestReport()
        self.store.open_for_writing(index_manifest(self.embedder, self.chunker))
        if sources is not None:
            self.store.record_sources(sources)
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
            pid for pid in stored
            if complete_sources and pid not in wanted and _file_of(pid, complete_sources)
        ]
        unfinished = self.store.write_unfinished()  # an earlier ingest stopped mid-write: finish its job
        self.texts_embedded = 0
        if todo or stale or unfinished:
            self.store.begin_write(paths)
            self._write(todo, report, unfinished=unfinished)
            if stale:
                self.store.delete_papers(stale)
                report.removed = len(stale)
            if unfinished:
                self.store.delete_orphan_chunks()
            self.store.bump_generation()
        report.papers_in_index, report.chunks_in_index = self.store.counts()
        return report

    def _write(self, todo: list[tuple[Paper, bool]], report: IngestReport, *, unfinished: bool) -> None:
        total = len(todo)

        def store(batches: list[list[tuple[PaperWrite, bool]]]) -> None:  # in the writer thread
            writes = [item for batch in batches for item in batch]
            self.store.write_papers([w for w, _ in writes])
            for w, existed in writes:
                report.chunks_written += len(w.chunks)
                report.written_ids.append(w.paper.paper_id)
                if existed:
                    report.updated += 1
                    report.updated_ids.append(w.paper.paper_id)
                else:
                    report.added += 1
            if self.progress is not None:
                self.progress(len(report.written_ids), total)

        # A paper stored before may have more chunks than now; so may one an earlier ingest left unfinished.
        def replace(existed: bool) -> bool:
            return existed or unfinished

        writer: BackgroundWriter[list[tuple[PaperWrite, bool]]] = BackgroundWriter(
            store, depth=self.queue_depth, max_rows=self.write_rows,
            rows=lambda batch: sum(len(w.chunks) + 1 for w, _ in batch),
        )
        windows = _ahead(self._windows(todo))
        try:
            for window in windows:
                writer.submit(self._embed(window, replace))
            writer.close()
        except BaseException:
            writer.abort()  # the write under way finishes; whatever is left is written again by the next ingest
            raise
        finally:
            windows.close()

    def _windows(self, todo: list[tuple[Paper, bool]]) -> Iterator[list[tuple[Paper, bool, list[Chunk]]]]:
        """Papers with their chunks: the first paper alone (the writer stores it while the next window is
        embedded: a store that cannot be written fails after one window, not after the corpus), then windows
        of about an eighth of the work (so that the last write, which nothing hides, is short), between one
        embedding batch (``MIN_WINDOW_TEXTS``) and ``window_texts`` texts."""
        target = min(self.window_texts, max(MIN_WINDOW_TEXTS, len(todo) // 8))
        window: list[tuple[Paper, bool, list[Chunk]]] = []
        texts, first = 0, True
        for paper, existed in todo:
            chunks = self.chunker.chunk(paper)
            window.append((paper, existed, chunks))
            texts += len(chunks) + (2 if chunks and has_real_title(paper) else 0)
            if first or texts >= target:
                yield window
                window, texts, first = [], 0, False
        if window:
            yield window

    def _embed(self, window: list[tuple[Paper, bool, list[Chunk]]], replace) -> list[tuple[PaperWrite, bool]]:
        """The window's papers ready to store, each with whether it was stored before."""
        texts = [chunk_embedding_text(paper, c.text) for paper, _, chunks in window for c in chunks]
        n_chunks = len(texts)
        # Titled papers also embed their title and their whole text (title + abstract, as BEIR does).
        titled = [paper for paper, _, chunks in window if chunks and has_real_title(paper)]
        texts += [f"{p.title.strip()} {p.abstract}" for p in titled] + [p.title.strip() for p in titled]
        vectors, distinct = embed_distinct_by_length(self.embedder, texts)
        self.texts_embedded += distinct
        documents = dict(zip((p.paper_id for p in titled), vectors[n_chunks : n_chunks + len(titled)], strict=True))
        titles = dict(zip((p.paper_id for p in titled), vectors[n_chunks + len(titled) :], strict=True))
        writes, offset = [], 0
        for paper, existed, chunks in window:
            chunk_vectors = vectors[offset : offset + len(chunks)]
            profile = paper_profile(paper, chunk_vectors, documents.get(paper.paper_id), titles.get(paper.paper_id))
            writes.append((PaperWrite(paper, chunks, chunk_vectors, profile, replace=replace(existed)), existed))
            offset += len(chunks)
        return writes


_END = object()


def _ahead(items: Iterable, depth: int = 2) -> Iterator:
    """``items`` in order, computed by a thread up to ``depth`` items ahead (the next windows are chunked
    while this one is embedded: the model leaves gaps on the cores that Python work can fill). The thread's
    error is raised here; closing the generator stops the thread."""
    handoff: queue.Queue = queue.Queue(maxsize=max(1, depth))
    stop = threading.Event()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                handoff.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def run() -> None:
        try:
            for item in items:
                if not put((item, None)):
                    return
            put((_END, None))
        except BaseException as e:  # noqa: BLE001 - raised in the consumer's thread
            put((_END, e))

    thread = threading.Thread(target=run, name="paperchat-chunker", daemon=True)
    thread.start()
    try:
        while True:
            item, error = handoff.get()
            if item is _END:
                if error is not None:
                    raise error
                return
            yield item
    finally:
        stop.set()


@dataclass
class SourceFile:
    """A file the index holds papers of."""

    label: str  # the prefix of its papers' ids ("" for ids that name no file: an index of format 2)
    path: Path | None  # the file now (None: gone, or not known)
    recorded: str | None  # the path the index recorded for it (None: stored before paths were recorded)
    paper_ids: list[str] = field(default_factory=list)


COPY_MIN_WORDS = 20  # an abstract this long, word for word another paper's, is a copy; shorter ones may agree


def _abstract_key(paper: Paper) -> str:
    return " ".join(paper.abstract.split()).lower()


def without_copies(papers: Sequence[Paper], stored: Callable[[], Iterable[Paper]],
                   stored_ids: set[str]) -> tuple[list[Paper], list[tuple[Paper, Paper]]]:
    """``papers`` without those whose abstract is word for word another's (a file copied under another name):
    an earlier one of ``papers`` or, for papers not stored yet, one in the index (``stored``, read only then).
    Returns (the papers to store, [(copy, the paper it copies)])."""
    first: dict[str, Paper] = {}
    if any(p.paper_id not in stored_ids for p in papers):
        wanted = {p.paper_id for p in papers}
        for paper in stored():
            if paper.paper_id not in wanted and len(paper.abstract.split()) >= COPY_MIN_WORDS:
                first.setdefault(_abstract_key(paper), paper)
    kept: list[Paper] = []
    copies: list[tuple[Paper, Paper]] = []
    for paper in papers:
        key = _abstract_key(paper)
        original = first.get(key) if len(paper.abstract.split()) >= COPY_MIN_WORDS else None
        if original is not None and paper.paper_id not in stored_ids:
            copies.append((paper, original))
            continue
        first.setdefault(key, paper)
        kept.append(paper)
    return kept, copies


def copies_text(copies: Sequence[tuple[Paper, Paper]], shown: int = 3) -> list[str]:
    """One line for each file copied from another: "skipped 19 papers of copy.txt (#1, #2, #3, ...): word for word
    the abstracts of file 000 (#1, #2, #3, ...), stored once"."""
    by_files: dict[tuple[str, str], list[tuple[Paper, Paper]]] = {}
    for copy, original in copies:
        by_files.setdefault((copy.source, original.source), []).append((copy, original))
    def places(ordinals: list[int]) -> str:
        return ", ".join(f"#{n}" for n in ordinals[:shown]) + (", ..." if len(ordinals) > shown else "")

    lines = []
    for (copy_file, original_file), pairs in by_files.items():
        plural = "s" if len(pairs) > 1 else ""
        lines.append(f"skipped {counted(len(pairs), 'paper')} of {file_label(copy_file)} "
                     f"({places([c.ordinal for c, _ in pairs])}): word for word the abstract{plural} of "
                     f"{file_label(original_file)} ({places([o.ordinal for _, o in pairs])}), stored once")
    return lines


def index_sources(store: ChromaStore, corpus_dir: Path) -> dict[str, SourceFile]:
    """Every file the index holds papers of or recorded (an ingest stopped before it stored a file's papers
    records the file first), by label, with where it is now. A file whose path the index recorded
    (``ChromaStore.sources``) is that path, else the corpus folder's file of that label (the same papers, the
    same ids). A paper of an index written before paths were recorded is traced by its id's label
    (``trace_label``). Reads every paper id: for a rebuild, and once for an index of before."""
    recorded = store.sources() or {}
    out: dict[str, SourceFile] = {}
    for label, path in recorded.items():
        found = next((p for p in (Path(path), Path(corpus_dir) / label) if _is_file(p)), None)
        out[label] = SourceFile(label, found, path)
    labels = set(recorded)
    for paper_id in store.paper_hashes():
        label = _file_of(paper_id, labels)
        if label is None:
            label, path = trace_label(paper_id, corpus_dir)
            if label:
                labels.add(label)  # the next papers of this file are found by their label
            out.setdefault(label, SourceFile(label, path, None))
        out[label].paper_ids.append(paper_id)
    return out


def rebuild_targets(held: Mapping[str, SourceFile], corpus_dir: Path) -> list[Path]:
    """What ``ingest --rebuild`` with no path reads: every file of ``index_sources`` that is still there, the
    corpus folder whole when any of them lies in it (a killed first ingest may have stored part of it), and
    the corpus folder alone for an empty index. Files that are gone are left out (``rebuild_losses`` names them)."""
    corpus = identity(Path(corpus_dir))
    files = sorted({s.path for s in held.values() if s.path is not None})
    others = [f for f in files if not f.is_relative_to(corpus)]
    return ([Path(corpus_dir)] if not held or len(others) < len(files) else []) + others


@dataclass(frozen=True)
class RebuildLoss:
    """Papers of one file that a rebuild would not store again; ``why``: which file and why, for the user."""

    label: str
    paper_ids: tuple[str, ...]
    kind: str  # "unloadable" (records that no longer load), "not given", "gone" (the file), "unknown" (the file)
    why: str  # "from /x/mine.txt (the file is gone)"


def rebuild_losses(held: Mapping[str, SourceFile], kept: set[str], read: Mapping[str, Path],
                   complete: set[str]) -> list[RebuildLoss]:
    """The papers of the index that a rebuild storing only ``kept`` (paper ids) would lose, by file: all but
    those gone from a file read without problems (``complete``; an ingest removes those too). ``read``: label ->
    file of the files the rebuild read."""
    losses = []
    for label, source in sorted(held.items()):
        lost = tuple(pid for pid in source.paper_ids if pid not in kept and label not in complete)
        if not lost:
            continue
        if label in read:
            kind, why = "unloadable", f"from {read[label]} (records that no longer load: see the problems above)"
        elif source.path is not None:
            kind, why = "not given", f"from {source.path} (not among the paths given)"
        elif source.recorded:
            kind, why = "gone", f"from {source.recorded} (the file is gone)"
        elif label:
            kind, why = "unknown", f"from {label} (no such file; the index was built before it recorded its files)"
        else:
            kind, why = "unknown", f"whose ids name no file (e.g. {lost[0]!r})"
        losses.append(RebuildLoss(label, lost, kind, why))
    return losses


def losses_text(losses: Sequence[RebuildLoss], shown: int = 5) -> str:
    """``3 papers from /x/mine.txt (the file is gone); ...`` (the first ``shown`` files)."""
    parts = [f"{counted(len(loss.paper_ids), 'paper')} {loss.why}"
             for loss in losses[:shown]]
    more = f"; and papers of {len(losses) - shown} more files" if len(losses) > shown else ""
    return "; ".join(parts) + more


_KEEP = {  # what keeps the papers of each kind of loss
    "unloadable": "fix those records",
    "not given": "add their files to the paths (or run `paperchat ingest --rebuild` with no path: every file the "
                 "index holds)",
    "gone": "put the files back",
    "unknown": "put the files back",
}


def rebuild_refusal(losses: Sequence[RebuildLoss]) -> str:
    """Why a rebuild is refused and what to do, in one line."""
    kinds = {loss.kind for loss in losses}
    keep = ", ".join(dict.fromkeys(_KEEP[kind] for kind in _KEEP if kind in kinds))
    moved = (" (files that moved: give their new places, `paperchat ingest --rebuild --force PATH...`; their papers "
             "get new ids)" if kinds & {"gone", "unknown"} else "")
    return (f"ingest --rebuild would lose {losses_text(losses)}; nothing was changed. To keep them, {keep} and run "
            f"it again; to drop them, add --force{moved}")


def trace_label(paper_id: str, corpus_dir: Path) -> tuple[str, Path | None]:
    """(label, file) of a paper whose file the index did not record, from its id (``label#local id``): the
    first label that names an existing file as ``file_label`` made it (relative to the corpus folder, absolute,
    or relative to the working folder), else (the text before the first ``#``, None); ("", None) for an id
    with no label."""
    at = paper_id.find("#")
    if at == -1:
        return "", None
    first = paper_id[:at]
    while at != -1:
        label = paper_id[:at]
        for candidate in (Path(corpus_dir) / label, Path.cwd() / label):  # an absolute label is itself twice
            if _is_file(candidate):
                return label, identity(candidate)
        at = paper_id.find("#", at + 1)
    return first, None


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):  # a name too long, a NUL byte
        return False


def _file_of(paper_id: str, labels: set[str]) -> str | None:
    """The label in ``labels`` that ``paper_id`` (``label#local id``) is namespaced by, if any."""
    at = paper_id.find("#")
    while at != -1:
        if paper_id[:at] in labels:
            return paper_id[:at]
        at = paper_id.find("#", at + 1)
    return None


def check_auto_build(store: ChromaStore, settings: Settings) -> None:
    """Raise ``ConfigError`` unless an empty index may be built from ``settings.corpus_dir`` on its own.

    Only the default collection is built from the bundled corpus unasked: a collection name the user set
    that the store lacks is most likely a typo (``mypaper`` for ``mypapers``), and indexing the bundled
    abstracts under it would answer from the wrong papers without a word."""
    default = type(settings).model_fields["collection"].default
    if settings.collection == default or settings.corpus_dir != BUNDLED_CORPUS or store.exists():
        return
    names = [n for n in store.collection_names() if n != settings.collection]
    existing = ", ".join(names) if names else "none yet"
    raise ConfigError(
        f"there is no collection named {settings.collection!r} in {store.location} (existing: {existing}): "
        "check PAPERCHAT_COLLECTION, or create it with `paperchat ingest PATH`"
    )

