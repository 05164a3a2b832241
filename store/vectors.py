"""Every stored vector, beside the BM25 index: exact dense scores for any candidate without a Chroma read.

Retrieval takes its candidates from Chroma's approximate nearest neighbours and from BM25, then scores
every candidate exactly (rag/retrieval/hybrid.py). Reading the candidates' vectors back from Chroma cost more
than the rest of a search together (figures: bench/results/tuning.md), so the vectors are kept here as
NumPy files, memory-mapped: a search touches only its candidates' rows.
Like the BM25 index it is derived data, saved per collection with the store's ``generation`` and
rebuilt from the store whenever that differs (so instances sharing a Chroma server each keep a copy),
written to a temporary folder and swapped in.

Chunk rows are grouped by paper: paper ``i``'s chunks are rows ``starts[i]:starts[i + 1]``.
"""

from __future__ import annotations

import json
import tempfile
from array import array as typed_array
from pathlib import Path

import numpy as np

from store.atomic import save_folder_atomically
from store.layout import IDS_FILE, STATE_FILE, VECTOR_ARRAYS, VECTORS_FORMAT


class VectorTable:
    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        empty = {"chunks": np.zeros((0, 0), np.float32), "profiles": np.zeros((0, 0), np.float32),
                 "norms": np.zeros(0, np.float32), "chunk_weights": np.zeros(0, np.float32),
                 "starts": np.zeros(1, np.int64)}
        self._adopt([], [], empty, None)

    def _adopt(self, paper_ids: list[str], chunk_ids: list[str], arrays: dict[str, np.ndarray], generation) -> None:
        """Take a built or loaded table, with the lookups every search needs (made once, not per search)."""
        self.paper_ids, self.chunk_ids, self.generation = paper_ids, chunk_ids, generation
        self.paper_rows = {pid: i for i, pid in enumerate(paper_ids)}
        for name, array in arrays.items():
            setattr(self, name, array)
        # The paper row of each chunk row, for brute-force nearest chunks.
        self.owner = np.repeat(np.arange(len(paper_ids)), np.diff(np.asarray(self.starts)))

    def build(self, store, generation: int) -> None:
        """Read every vector from the store, save them and map the saved files.

        The vectors go from the store's pages to files as they are read, and are searched from the mapped files:
        at a million chunks, holding them (and a sorted copy) in memory was GBs of a first refresh's peak. A data
        folder that cannot be written gets a table built in a temporary folder and loaded into memory."""
        save_folder_atomically(self.folder, lambda tmp: _write_table(store, tmp, generation), optional=True)
        if self.load(generation):
            return
        with tempfile.TemporaryDirectory(prefix="paperchat-vectors-") as tmp:
            _write_table(store, Path(tmp), generation)
            self._load_from(Path(tmp), generation, mmap=False)

    def load(self, generation: int) -> bool:
        """Map the saved table if it was built at ``generation``; False when missing, stale or damaged."""
        return self._load_from(self.folder, generation, mmap=True)

    def _load_from(self, folder: Path, generation: int, *, mmap: bool) -> bool:
        try:
            state = json.loads((folder / STATE_FILE).read_text())
            if state.get("format") != VECTORS_FORMAT or state.get("generation") != generation:
                return False
            ids = json.loads((folder / IDS_FILE).read_text())
            arrays = {
                name: np.load(folder / f"{name}.npy", mmap_mode="r" if mmap else None, allow_pickle=False)
                for name in VECTOR_ARRAYS
            }
        except (OSError, ValueError, KeyError, TypeError):
            return False
        papers = ids["papers"]
        if len(papers) != state["papers"] or len(arrays["starts"]) != len(papers) + 1:
            return False
        # .view(np.ndarray): still file-backed, without np.memmap's per-index overhead.
        self._adopt(papers, ids["chunks"], {name: array.view(np.ndarray) for name, array in arrays.items()}, generation)
        return True

    def score(self, paper_ids: list[str], vector: np.ndarray) -> np.ndarray:
        """Exact dense scores of these papers: ``chunk_weight * best chunk + q . profile``; papers not in the
        table score -inf."""
        rows = np.array([self.paper_rows.get(pid, -1) for pid in paper_ids], dtype=np.int64)
        scores = np.full(len(paper_ids), -np.inf, dtype=np.float64)
        known = rows >= 0
        if not known.any():
            return scores
        r = rows[known]
        profile = self.norms[r] * (self.profiles[r] @ vector)
        starts, lengths = self.starts[r], self.starts[r + 1] - self.starts[r]
        best = np.zeros(len(r), dtype=np.float64)
        has = lengths > 0
        if has.any():
            # All candidates' chunk rows in one gather and one product, then the max of each paper's run.
            s, n = starts[has], lengths[has]
            offsets = np.concatenate([[0], np.cumsum(n)[:-1]])
            chunk_rows = np.repeat(s - offsets, n) + np.arange(int(n.sum()))
            sims = self.chunks[chunk_rows] @ vector
            best[has] = np.maximum.reduceat(sims, offsets)
        scores[known] = self.chunk_weights[r] * best + profile
        return scores

    def best_chunk(self, paper_id: str, vector: np.ndarray) -> str:
        """The id of the paper's chunk nearest to ``vector`` ("" when unknown or without chunks)."""
        row = self.paper_rows.get(paper_id)
        if row is None or self.starts[row + 1] == self.starts[row]:
            return ""
        start, end = int(self.starts[row]), int(self.starts[row + 1])
        return self.chunk_ids[start + int(np.argmax(self.chunks[start:end] @ vector))]

    @property
    def chunk_count(self) -> int:
        return int(self.starts[-1]) if len(self.starts) else 0

    def nearest(self, vectors: np.ndarray, n: int) -> list[set[str]]:
        """For each question vector, the papers of its ``n`` nearest chunks and its ``n`` nearest profiles,
        by exact brute force: one matrix product per block of questions (faster than an HNSW query per
        question up to a few hundred thousand chunks, and exact)."""
        paper_ids, owner = self.paper_ids, self.owner
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(vectors), -1)
        out: list[set[str]] = []
        # Blocks keep the similarity matrix near 64 MB whatever the corpus size.
        block = max(1, min(256, 16_000_000 // max(1, self.chunk_count)))
        for start in range(0, len(vectors), block):
            q = vectors[start : start + block]
            for sims, rows in ((q @ self.chunks.T, owner), (q @ self.profiles.T, None)):
                top = _top_columns(sims, n)
                for i, columns in enumerate(top):
                    if len(out) <= start + i:
                        out.append(set())
                    found = rows[columns] if rows is not None else columns
                    out[start + i].update(paper_ids[int(r)] for r in found)
        return out


def _top_columns(matrix: np.ndarray, n: int) -> np.ndarray:
    """Column indices of each row's ``n`` largest values (unordered)."""
    if matrix.shape[1] <= n:
        return np.tile(np.arange(matrix.shape[1]), (matrix.shape[0], 1))
    return np.argpartition(-matrix, n - 1, axis=1)[:, :n]


_COPY_ROWS = 65536  # rows copied at a time from a raw file to the saved array


def _write_table(store, folder: Path, generation: int) -> None:
    """Write the table's files (``VECTOR_ARRAYS`` as .npy, the ids, the state) into ``folder``, reading the store
    page by page: the vectors go to raw files as they come and are then copied, chunks grouped by paper, into
    the saved arrays, so memory holds the ids and a few pages of vectors, never the table."""
    paper_ids: list[str] = []
    norms: list[float] = []
    weights: list[float] = []
    dimension = 0
    with open(folder / "profiles.raw", "wb") as raw:
        for ids, vectors, metas in store.iter_vectors("papers"):
            paper_ids.extend(ids)
            dimension = dimension or _width(vectors)
            raw.write(np.ascontiguousarray(vectors, dtype=np.float32).tobytes())
            # Papers written without a profile: the unit centroid, half the weight (store.write_paper).
            norms.extend(float(m.get("profile_norm", 0.5)) for m in metas)
            weights.extend(float(m.get("chunk_weight", 0.5)) for m in metas)
    rows = {pid: i for i, pid in enumerate(paper_ids)}
    read_ids: list[str] = []
    owners = typed_array("q")  # each chunk's paper row; -1: its paper has no record (an unfinished write)
    numbers = typed_array("q")
    with open(folder / "chunks.raw", "wb") as raw:
        for ids, vectors, _metas in store.iter_vectors("chunks"):
            dimension = dimension or _width(vectors)
            for cid in ids:
                pid, _, number = cid.rpartition("::")
                owners.append(rows.get(pid, -1))
                numbers.append(int(number) if number.isdigit() else 0)
            read_ids.extend(ids)
            raw.write(np.ascontiguousarray(vectors, dtype=np.float32).tobytes())
    owner = np.frombuffer(owners, dtype=np.int64) if owners else np.zeros(0, np.int64)
    number = np.frombuffer(numbers, dtype=np.int64) if numbers else np.zeros(0, np.int64)
    kept = np.flatnonzero(owner >= 0)
    order = kept[np.lexsort((number[kept], owner[kept]))]  # by paper, then by chunk number (stable)
    starts = np.zeros(len(paper_ids) + 1, dtype=np.int64)
    np.cumsum(np.bincount(owner[kept], minlength=len(paper_ids)), out=starts[1:])
    _copy_rows(folder / "chunks.raw", len(read_ids), dimension, order, folder / "chunks.npy")
    _copy_rows(folder / "profiles.raw", len(paper_ids), dimension, None, folder / "profiles.npy")
    np.save(folder / "norms.npy", np.asarray(norms, dtype=np.float32), allow_pickle=False)
    np.save(folder / "chunk_weights.npy", np.asarray(weights, dtype=np.float32), allow_pickle=False)
    np.save(folder / "starts.npy", starts, allow_pickle=False)
    chunk_ids = [read_ids[i] for i in order.tolist()]
    (folder / IDS_FILE).write_text(json.dumps({"papers": paper_ids, "chunks": chunk_ids}))
    (folder / STATE_FILE).write_text(json.dumps(
        {"format": VECTORS_FORMAT, "generation": generation, "papers": len(paper_ids)}
    ))


def _width(vectors: np.ndarray) -> int:
    return int(vectors.shape[1]) if vectors.ndim == 2 else 0


def _copy_rows(raw_path: Path, n: int, dimension: int, order: np.ndarray | None, target: Path) -> None:
    """Save the raw float32 file's ``n`` rows as a .npy array (``order``: which rows, in which order; None: all
    as they are), a block of rows at a time, then delete the raw file."""
    count = n if order is None else len(order)
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)), "fortran_order": False,
              "shape": (count, dimension)}
    with open(target, "wb") as out:
        np.lib.format.write_array_header_1_0(out, header)
        if count and dimension:
            source = np.memmap(raw_path, dtype=np.float32, mode="r", shape=(n, dimension))
            for first in range(0, count, _COPY_ROWS):
                rows = slice(first, first + _COPY_ROWS) if order is None else order[first : first + _COPY_ROWS]
                out.write(np.ascontiguousarray(source[rows]).tobytes())
            del source
    raw_path.unlink()
