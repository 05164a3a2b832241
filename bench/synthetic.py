"""Synthetic corpora for the store benchmarks (bench/stages.py ``synthetic-build`` and ``write-costs``).

Papers of random words (SciFact's word frequencies) with random unit vectors are written through the
product's own ingest: ``rag.ingest.Ingestor`` (windows, the writer thread, ``ChromaStore.write_papers``) with
an embedder that returns random vectors at no cost, so what is measured is the ingest's write path where the
embedder is not the bottleneck. ``write-costs`` measures what each part of a Chroma row costs, in one process.
"""

from __future__ import annotations

import time

import numpy as np

SYNTHETIC_DIMENSION = 384
SENTENCE_WORDS = 20
# Sentences per paper, alternately: 7 (one chunk of 256 word pieces) and 15 (two chunks): 1.5 chunks per paper.
SENTENCES = (7, 15)


class RandomEmbedder:
    """Random unit vectors for any text, at no cost: the ingest's write path without the model."""

    name = "synthetic-random-384"
    dimension = SYNTHETIC_DIMENSION
    max_tokens = 256

    def __init__(self, seed: int = 1) -> None:
        self._rng = np.random.default_rng(seed)

    def count_tokens(self, text: str) -> int:
        return len(text.split()) + 2

    def embed(self, texts):
        vectors = self._rng.standard_normal((len(texts), self.dimension)).astype(np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def synthetic_papers(chunks: int, chunker, vocabulary, seed: int = 1) -> tuple[list, int]:
    """Titled papers until their chunks (as ``chunker`` cuts them) reach ``chunks``; (papers, chunks)."""
    from rag.types import Paper

    rng = np.random.default_rng(seed)
    words, cdf = vocabulary
    papers, total = [], 0
    # Every sentence has the same number of words, so every paper of a kind has the same chunks: the chunker
    # cuts the first paper of each kind, and the count is reused (chunking a million papers twice costs minutes).
    per_kind: dict[int, int] = {}
    while total < chunks:
        block = 4096
        sentences = [SENTENCES[(len(papers) + i) % 2] for i in range(block)]
        picks = np.minimum(np.searchsorted(cdf, rng.random(sum(sentences) * SENTENCE_WORDS + block * 6),
                                           side="right"), len(words) - 1)
        drawn = words[picks].tolist()
        at = 0
        for n in sentences:
            text = " ".join(" ".join(drawn[at + s * SENTENCE_WORDS : at + (s + 1) * SENTENCE_WORDS]).capitalize() + "."
                            for s in range(n))
            at += n * SENTENCE_WORDS
            title = " ".join(drawn[at : at + 6]).capitalize()
            at += 6
            number = len(papers)
            paper = Paper(paper_id=f"synthetic.jsonl#{number:07d}", title=title, abstract=text,
                          source="synthetic.jsonl", ordinal=number + 1, title_given=True)
            if n not in per_kind:
                per_kind[n] = len(chunker.chunk(paper))
            total += per_kind[n]
            papers.append(paper)
            if total >= chunks:
                break
    return papers, total


def write_through_ingest(data_dir, papers, chunker, embedder, checkpoint=None) -> dict:
    """Ingest ``papers`` into the store at ``data_dir`` (a re-run skips those already stored); the time, and
    progress as [seconds, papers]. ``checkpoint(seconds, papers_done)`` is called about once a minute."""
    from rag.ingest import Ingestor
    from store.chroma import ChromaStore
    from store.layout import chroma_dir

    store = ChromaStore(path=chroma_dir(data_dir), collection="paperchat")
    progress: list[list[float]] = []
    started = time.perf_counter()

    def record(done: int, total: int) -> None:
        progress.append([round(time.perf_counter() - started, 2), done])
        if checkpoint is not None and (len(progress) < 2 or progress[-1][0] // 60 > progress[-2][0] // 60):
            checkpoint(progress[-1][0], done)

    report = Ingestor(store, embedder, chunker, progress=record).ingest(papers)
    return {"write_s": time.perf_counter() - started, "report": report, "progress": progress, "store": store}


def final_rate(progress: list[list[float]]) -> float:
    """Papers per second over the last tenth of the papers (HNSW inserts slow down as the graphs grow)."""
    if len(progress) < 2:
        return 0.0
    last = progress[-1]
    start = next(p for p in progress if p[1] >= 0.9 * last[1])
    if start is last:
        start = progress[-2]
    return round((last[1] - start[1]) / max(1e-9, last[0] - start[0]), 1)


def write_costs(folder, rows: int, batch: int, vocabulary, chunker, rounds: int = 2) -> dict:
    """Rows per second of ``collection.add`` into fresh collections (embeddings only; + chunk metadata; +
    900-character documents), and of the ingest path on papers of the same number of chunks (its rows: the
    chunks and the papers' records), interleaved over ``rounds`` (order reversed every other round)."""
    import shutil
    from pathlib import Path

    import chromadb

    folder = Path(folder)
    shutil.rmtree(folder, ignore_errors=True)
    client = chromadb.PersistentClient(path=str(folder / "raw"), settings=chromadb.Settings(anonymized_telemetry=False))
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((rows, SYNTHETIC_DIMENSION)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    papers, chunks = synthetic_papers(rows, chunker, vocabulary)
    documents = [p.abstract[:900] for p in papers for _ in range(2)][:rows]
    metadatas = [{"paper_id": f"p{i // 2}", "chunk": i % 2, "start": 0, "end": 900} for i in range(rows)]
    variants = ("embeddings", "embeddings + metadata", "embeddings + metadata + documents", "ingest path")
    times: dict[str, list[float]] = {v: [] for v in variants}
    for round_ in range(rounds):
        for variant in variants if round_ % 2 == 0 else variants[::-1]:
            if variant == "ingest path":
                done = write_through_ingest(folder / f"ingest{round_}", papers, chunker, RandomEmbedder())
                times[variant].append(done["write_s"])
                continue
            collection = client.create_collection(f"costs-{round_}-{len(times[variant])}-{variants.index(variant)}",
                                                  configuration={"hnsw": {"space": "cosine"}},
                                                  embedding_function=None)
            started = time.perf_counter()
            for at in range(0, rows, batch):
                extra = {}
                if "metadata" in variant:
                    extra["metadatas"] = metadatas[at : at + batch]
                if "documents" in variant:
                    extra["documents"] = documents[at : at + batch]
                collection.add(ids=[f"r{i}" for i in range(at, min(rows, at + batch))],
                               embeddings=vectors[at : at + batch], **extra)
            times[variant].append(time.perf_counter() - started)
    ingest_rows = chunks + len(papers)
    out = {}
    for variant, spent in times.items():
        n = ingest_rows if variant == "ingest path" else rows
        out[variant] = {"rows": n, "seconds": [round(t, 1) for t in spent],
                        "rows_per_s": round(n / float(np.median(spent)), 1)}
    out["ingest path"]["chunks"] = chunks
    out["ingest path"]["papers"] = len(papers)
    return out
