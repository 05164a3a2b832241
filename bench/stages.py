"""Benchmark stages, one per process: ``python bench/stages.py STAGE [options]`` prints one JSON object.

Each stage runs alone so that its peak memory (``ru_maxrss``) is its own and any figure in the report can be
reproduced by rerunning the one command printed next to it. ``bench/run.py`` runs the stages in order and
writes the report. Timings that are compared are taken in the same process, interleaved round by round,
because the machine is shared and absolute times drift.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

PROJECT = Path(__file__).resolve().parents[1]
SHARED = PROJECT.parent / "shared"
SCIFACT = SHARED / "eval" / "scifact"
DEV_QUESTIONS = PROJECT / "data" / "eval" / "dev.jsonl"
COLLECTION = "paperchat"
BACKENDS = ("torch", "onnx", "onnx-int8")


# --- helpers ---------------------------------------------------------------------------------------


def maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def emit(result: dict) -> None:
    result["maxrss_mb"] = round(maxrss_mb(), 1)
    print(json.dumps(result))


def pct(values, q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def summary_ms(seconds: list[float]) -> dict:
    ms = [s * 1000.0 for s in seconds]
    return {"p50_ms": round(pct(ms, 50), 3), "p95_ms": round(pct(ms, 95), 3), "mean_ms": round(float(np.mean(ms)), 3),
            "n": len(ms)}


def timed(fn, *args, **kwargs):
    started = time.perf_counter()
    value = fn(*args, **kwargs)
    return time.perf_counter() - started, value


def source_fingerprint() -> dict[str, str]:
    """Short hashes of the search code this process imported: the working tree may change between stages."""
    import hashlib

    return {name: hashlib.sha256((PROJECT / name).read_bytes()).hexdigest()[:10]
            for name in ("rag/retrieval/hybrid.py", "store/bm25.py", "store/chroma.py", "store/chroma_reads.py")}


def chunk_defaults() -> tuple[int, int]:
    from rag.settings import Settings

    fields = Settings.model_fields
    return int(fields["chunk_max_tokens"].default), int(fields["chunk_overlap_sentences"].default)


def make_embedder(backend: str, cache_dir: Path, batch_size: int = 32):
    from rag.embedding.models import ModelRef, SentenceTransformerEmbedder

    if backend == "torch":
        return SentenceTransformerEmbedder(batch_size=batch_size)
    from rag.embedding.onnx_embedder import OnnxEmbedder
    from rag.embedding.onnx_files import INT8_SUFFIX, onnx_model_path

    quantized = backend == "onnx-int8"
    ref = ModelRef.resolve(None)
    path = onnx_model_path(cache_dir, ref.name, quantized)
    return OnnxEmbedder(ref.path, path, name=ref.name + (INT8_SUFFIX if quantized else ""), batch_size=batch_size)


def bundled_papers():
    from rag.corpus.load import load_corpus
    from rag.settings import BUNDLED_CORPUS

    return load_corpus([BUNDLED_CORPUS]).papers


def read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def scifact_docs(folder: Path = SCIFACT) -> list[tuple[str, str]]:
    """(doc id, title + " " + text) as BEIR embeds SciFact documents."""
    rows = read_jsonl(folder / "corpus.jsonl")
    return [(str(d["_id"]), f"{d.get('title', '')} {d.get('text', '')}".strip()) for d in rows]


def questions(n: int) -> list[str]:
    """``n`` real questions: the dev set's, then SciFact's claims (distinct texts, no cache can help)."""
    found: list[str] = []
    if DEV_QUESTIONS.is_file():
        found += [row["question"] for row in read_jsonl(DEV_QUESTIONS)]
    if len(found) < n and (SCIFACT / "queries.jsonl").is_file():
        found += [row["text"] for row in read_jsonl(SCIFACT / "queries.jsonl")]
    if not found:
        found = ["state space models for client selection in federated learning"]
    return [found[i % len(found)] for i in range(n)]


# --- prepare: the ONNX files -----------------------------------------------------------------------


def stage_prepare(args) -> None:
    from rag.embedding.models import ModelRef
    from rag.embedding.onnx import export_onnx, quantize_int8
    from rag.embedding.onnx_files import is_current, onnx_model_path, read_sidecar

    ref = ModelRef.resolve(None)
    fp32 = onnx_model_path(args.cache, ref.name, quantized=False)
    int8 = onnx_model_path(args.cache, ref.name, quantized=True)
    result: dict = {"stage": "prepare", "model_dir": str(ref.path)}
    if args.force or not is_current(ref.path, fp32):
        result["export_s"], _ = timed(export_onnx, ref.path, fp32)
    else:
        result["export_reused"] = True
    if args.force or not is_current(ref.path, int8):
        result["quantize_s"], _ = timed(quantize_int8, fp32, int8)
    else:
        result["quantize_reused"] = True
    for label, path in (("fp32", fp32), ("int8", int8)):
        result[label] = {"path": str(path), "mb": round(path.stat().st_size / 1e6, 1), "sidecar": read_sidecar(path)}
    emit(result)


# --- start-up: fresh processes ---------------------------------------------------------------------


def stage_startup(args) -> None:
    """Wall time of fresh processes: importing sentence-transformers against answering one question.

    ``paperchat search`` runs as shipped (``bench/cli_search.py`` only adds a report of the modules it
    imported): with ``PAPERCHAT_EMBEDDING_BACKEND`` unset (auto) on an index built with int8 ONNX, which
    ``auto`` answers with int8 ONNX, and with ``PAPERCHAT_EMBEDDING_BACKEND=torch`` on an fp32-built index.
    """
    python = sys.executable
    question = "which papers study client selection in federated learning?"
    fp32_dir = str(args.data_dir)
    int8_dir = str(args.int8_data_dir or args.data_dir)
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("PAPERCHAT_")}
    base_env.update(TOKENIZERS_PARALLELISM="false", PAPERCHAT_MODEL_CACHE_DIR=str(args.cache))
    cli = [python, str(PROJECT / "bench" / "cli_search.py"), "search", question, "--json"]
    # name -> (extra environment, command)
    commands: dict[str, tuple[dict[str, str], list[str]]] = {
        "import_sentence_transformers": ({}, [python, "-c", "import sentence_transformers"]),
        "onnx_query_script": ({"PAPERCHAT_DATA_DIR": fp32_dir},
                              [python, str(PROJECT / "bench" / "query_once.py"), "--data-dir", fp32_dir,
                               "--cache", str(args.cache), question]),
        "cli_search_auto": ({"PAPERCHAT_DATA_DIR": int8_dir}, cli),
        "cli_search_torch": ({"PAPERCHAT_DATA_DIR": fp32_dir, "PAPERCHAT_EMBEDDING_BACKEND": "torch"}, cli),
    }
    if args.only:
        commands = {k: v for k, v in commands.items() if k in args.only.split(",")}
    times: dict[str, list[float]] = {name: [] for name in commands}
    notes: dict[str, dict] = {}
    errors: dict[str, str] = {}
    names = list(commands)
    for rep in range(args.reps + 1):  # the first repetition warms the page cache and is discarded
        for name in names if rep % 2 == 0 else names[::-1]:
            extra, command = commands[name]
            started = time.perf_counter()
            done = subprocess.run(command, capture_output=True, text=True, env={**base_env, **extra}, cwd=PROJECT)
            elapsed = time.perf_counter() - started
            if done.returncode != 0:
                errors[name] = (done.stderr or done.stdout).strip()[-400:]
                continue
            if rep > 0:
                times[name].append(elapsed)
            for line in done.stderr.splitlines():
                if line.startswith("{\"bench\""):
                    notes[name] = json.loads(line)
    result: dict = {"stage": "startup", "question": question, "commands": {}, "errors": errors}

    def rel(part: str) -> str:
        return os.path.relpath(part, PROJECT) if part.startswith(str(PROJECT) + os.sep) else part

    for name, (extra, command) in commands.items():
        shown = " ".join(shlex.quote(rel(part)) for part in command)
        if name != "import_sentence_transformers":
            env_shown = {**extra, "PAPERCHAT_MODEL_CACHE_DIR": str(args.cache)} if name.startswith("cli") else extra
            shown = " ".join(f"{k}={shlex.quote(rel(v))}" for k, v in env_shown.items()) + " " + shown
        result["commands"][name] = {
            "command": shown,
            "seconds": [round(t, 3) for t in times[name]],
            "median_s": round(statistics.median(times[name]), 3) if times[name] else None,
            "notes": notes.get(name, {}),
        }
    base = result["commands"].get("import_sentence_transformers", {}).get("median_s")
    if base:
        for entry in result["commands"].values():
            if entry["median_s"]:
                entry["ratio_to_import"] = round(entry["median_s"] / base, 3)
    emit(result)


# --- embedders: speed and agreement ----------------------------------------------------------------


def speed_texts(n: int) -> tuple[list[str], str]:
    if (SCIFACT / "corpus.jsonl").is_file():
        return [text for _id, text in scifact_docs()[:n]], f"the first {n} SciFact abstracts (title + text)"
    from rag.ingest import make_chunker

    embedder = make_embedder("torch", Path("."))
    max_tokens, overlap = chunk_defaults()
    chunker = make_chunker(embedder, max_tokens, overlap)
    chunks = [c.text for p in bundled_papers() for c in chunker.chunk(p)]
    return [chunks[i % len(chunks)] for i in range(n)], f"{n} chunks of the bundled corpus, repeated"


def stage_embed_speed(args) -> None:
    backends = args.backends.split(",")
    texts, described = speed_texts(args.texts)
    embedders = {b: make_embedder(b, args.cache, args.batch_size) for b in backends}
    token_counts = [embedders[backends[0]].count_tokens(t) for t in texts]
    load_s = {}
    for name, embedder in embedders.items():
        load_s[name], _ = timed(embedder.embed, texts[:2])
        embedder.embed(texts[:64])  # first-call costs out of the way (torch prepares kernels per shape)
    times: dict[str, list[float]] = {b: [] for b in backends}
    vectors: dict[str, np.ndarray] = {}
    for round_ in range(args.rounds):
        for name in backends if round_ % 2 == 0 else backends[::-1]:
            elapsed, vectors[name] = timed(embedders[name].embed, texts)
            times[name].append(elapsed)
            print(f"round {round_} {name}: {elapsed:.1f}s", file=sys.stderr, flush=True)
    result: dict = {
        "stage": "embed-speed", "texts": len(texts), "described": described,
        "mean_tokens": round(float(np.mean(token_counts)), 1),
        "truncated_share": round(float(np.mean([c > 256 for c in token_counts])), 3),
        "threads": os.cpu_count(), "batch_size": args.batch_size, "load_s": load_s, "backends": {},
    }
    for name in backends:
        median = statistics.median(times[name])
        result["backends"][name] = {"seconds": [round(t, 2) for t in times[name]], "median_s": round(median, 2),
                                    "texts_per_s": round(len(texts) / median, 2)}
    # Speed-ups paired round by round (same load on the machine), then the median of the pairs.
    for a, b in (("onnx", "torch"), ("onnx-int8", "torch"), ("onnx-int8", "onnx")):
        if a in times and b in times:
            pairs = [tb / ta for ta, tb in zip(times[a], times[b], strict=True)]
            result[f"speedup_{a}_vs_{b}"] = round(statistics.median(pairs), 3)
    for a, b in (("onnx", "torch"), ("onnx-int8", "torch"), ("onnx-int8", "onnx")):
        if a in vectors and b in vectors:
            cos = (vectors[a] * vectors[b]).sum(axis=1)
            result[f"cosine_{a}_vs_{b}"] = {"min": round(float(cos.min()), 6), "mean": round(float(cos.mean()), 6)}
    emit(result)


# --- quality: SciFact nDCG@10, dense only, in numpy --------------------------------------------------


def ndcg_at_k(ranked: list[str], relevant: dict[str, int], k: int = 10) -> float:
    """trec_eval's ndcg_cut: linear gain, log2(rank + 1) discount, ideal from the judged documents."""
    dcg = sum(relevant.get(doc, 0) / math.log2(rank + 2) for rank, doc in enumerate(ranked[:k]))
    ideal = sorted((g for g in relevant.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(rank + 2) for rank, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def load_scifact_test(folder: Path) -> tuple[list[tuple[str, str]], dict[str, dict[str, int]]]:
    qrels: dict[str, dict[str, int]] = {}
    with open(folder / "qrels" / "test.tsv", encoding="utf-8") as handle:
        next(handle)
        for line in handle:
            qid, did, score = line.rstrip("\n").split("\t")
            qrels.setdefault(qid, {})[did] = int(score)
    queries = [(str(q["_id"]), q["text"]) for q in read_jsonl(folder / "queries.jsonl") if str(q["_id"]) in qrels]
    return queries, qrels


def _vector_cache(args, backend: str, embedder, texts: list[str]) -> Path | None:
    if not args.vector_cache:
        return None
    import hashlib

    key = hashlib.sha256("\x1e".join(texts).encode()).hexdigest()[:16]
    model = getattr(embedder, "onnx_path", None)
    if model is not None:
        stat = Path(model).stat()
        key += f"-{stat.st_size}-{int(stat.st_mtime)}"
    return Path(args.vector_cache) / f"scifact-{backend}-{key}.npy"


def stage_quality(args) -> None:
    folder = Path(args.scifact)
    docs = scifact_docs(folder)
    queries, qrels = load_scifact_test(folder)
    doc_ids = [d for d, _ in docs]
    result: dict = {"stage": "quality", "docs": len(docs), "queries": len(queries), "backends": {}}
    for backend in args.backends.split(","):
        embedder = make_embedder(backend, args.cache, args.batch_size)
        texts = [t for _, t in docs]
        cache = _vector_cache(args, backend, embedder, texts)
        cached_s = None
        if cache is not None and cache.is_file():
            doc_vectors, doc_s = np.load(cache), None
            with contextlib.suppress(OSError, ValueError, KeyError):  # what the run that made the cache took
                cached_s = json.loads(cache.with_suffix(".json").read_text())["doc_embed_s"]
        else:
            doc_s, doc_vectors = timed(embedder.embed, texts)
            if cache is not None:
                cache.parent.mkdir(parents=True, exist_ok=True)
                np.save(cache, doc_vectors)
                cache.with_suffix(".json").write_text(json.dumps({"doc_embed_s": round(doc_s, 1)}))
        query_s, query_vectors = timed(embedder.embed, [t for _, t in queries])
        scores = query_vectors @ doc_vectors.T
        top = np.argsort(-scores, axis=1, kind="stable")[:, :100]
        ndcgs, recalls = [], []
        for row, (qid, _text) in enumerate(queries):
            ranked = [doc_ids[i] for i in top[row]]
            ndcgs.append(ndcg_at_k(ranked, qrels[qid], 10))
            relevant = {d for d, g in qrels[qid].items() if g > 0}
            recalls.append(len(relevant & set(ranked[:100])) / len(relevant))
        result["backends"][backend] = {
            "ndcg@10": round(float(np.mean(ndcgs)), 4), "recall@100": round(float(np.mean(recalls)), 4),
            "doc_embed_s": None if doc_s is None else round(doc_s, 1), "doc_embed_s_cached": cached_s,
            "query_embed_s": round(query_s, 2),
            "per_query_ndcg": [round(x, 4) for x in ndcgs],
        }
        print(f"{backend}: nDCG@10 {np.mean(ndcgs):.4f}", file=sys.stderr, flush=True)
    names = list(result["backends"])
    if "onnx" in names and "onnx-int8" in names:
        a = np.array(result["backends"]["onnx"]["per_query_ndcg"])
        b = np.array(result["backends"]["onnx-int8"]["per_query_ndcg"])
        result["int8_minus_fp32"] = round(float(b.mean() - a.mean()), 4)
        # A paired bootstrap over queries: how much of the difference is noise.
        rng = np.random.default_rng(0)
        draws = rng.integers(0, len(a), size=(2000, len(a)))
        diffs = (b[draws] - a[draws]).mean(axis=1)
        result["int8_minus_fp32_ci95"] = [round(float(np.percentile(diffs, 2.5)), 4),
                                          round(float(np.percentile(diffs, 97.5)), 4)]
    for entry in result["backends"].values():
        entry.pop("per_query_ndcg")
    emit(result)


# --- ingest throughput -------------------------------------------------------------------------------


def ingest_corpus(corpus: str) -> tuple[list, str]:
    """The papers of ``--corpus``: ``bundled`` or a corpus file/folder (e.g. a SciFact slice)."""
    if corpus == "bundled":
        return bundled_papers(), "bundled corpus"
    from rag.corpus.load import load_corpus

    return load_corpus([Path(corpus)]).papers, Path(corpus).name


def ingest_texts(papers, chunker) -> tuple[list[str], int]:
    """Every text an ingest of ``papers`` embeds (chunks with their title, and for titled papers the whole
    text and the title), and how many chunks."""
    from rag.ingest import chunk_embedding_text, has_real_title

    texts: list[str] = []
    chunks = 0
    for paper in papers:
        pieces = chunker.chunk(paper)
        chunks += len(pieces)
        texts += [chunk_embedding_text(paper, c.text) for c in pieces]
        if pieces and has_real_title(paper):
            texts += [f"{paper.title.strip()} {paper.abstract}", paper.title.strip()]
    return texts, chunks


def code_under_test() -> dict:
    """Which tree's ``rag`` this process imported (the bench compares main's ingest with a branch's), its
    commit, and hashes of the ingest files."""
    import hashlib

    import rag

    root = Path(rag.__file__).resolve().parents[1]
    commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    hashes = {}
    for name in ("rag/ingest.py", "store/chroma.py"):
        with contextlib.suppress(OSError):
            hashes[name] = hashlib.sha256((root / name).read_bytes()).hexdigest()[:10]
    return {"tree": str(root), "commit": commit, "files": hashes}


def stage_ingest(args) -> None:
    """``Ingestor.ingest`` into a fresh Chroma store against raw ``embed`` of the same texts (each distinct text
    once, one call), interleaved round by round in this process; model load excluded from both.

    The texts are every text the ingest embeds (chunks, and whole texts and titles of titled papers), so the
    ratio raw time / ingest time is the share of the embedder's speed the ingest keeps (1.0: chunking and
    store writes cost nothing, or are hidden behind the embedding). Run it with ``PYTHONPATH`` set to the
    tree to measure (``code`` in the output says which one was imported).
    """
    from rag.ingest import Ingestor, make_chunker
    from store.chroma import ChromaStore
    from store.layout import chroma_dir

    papers, described = ingest_corpus(args.corpus)
    embedder = make_embedder(args.backend, args.cache, args.batch_size)
    max_tokens, overlap = chunk_defaults()
    chunker = make_chunker(embedder, max_tokens, overlap)
    texts, n_chunks = ingest_texts(papers, chunker)
    distinct = list(dict.fromkeys(texts))
    load_s, _ = timed(embedder.embed, distinct[:2])  # model load excluded from both sides
    embedder.embed(distinct[:64])  # and first-call costs (torch prepares kernels per input shape)
    raw_s: list[float] = []
    ingest_s: list[float] = []
    raw_cpu: list[float] = []  # CPU seconds of the whole process (every thread): less swayed by other jobs
    ingest_cpu: list[float] = []
    root = Path(args.data_dir)
    if root.exists():
        shutil.rmtree(root)
    # The store's first-use costs (Chroma's bindings and system start, once per process) are no more part of
    # the ingest's throughput than the model's load is of the embedder's: a few papers into a throwaway store.
    Ingestor(ChromaStore(path=chroma_dir(root / "warm-up"), collection=COLLECTION), embedder, chunker).ingest(
        papers[:3])
    shutil.rmtree(root / "warm-up")
    final = None
    for round_ in range(args.rounds):
        data_dir = root / f"round{round_}"

        def ingest(data_dir=data_dir):
            store = ChromaStore(path=chroma_dir(data_dir), collection=COLLECTION)
            return Ingestor(store, embedder, chunker).ingest(papers)

        steps = [("raw", lambda: embedder.embed(distinct)), ("ingest", ingest)]
        for name, fn in steps if round_ % 2 == 0 else steps[::-1]:
            cpu = time.process_time()
            elapsed, value = timed(fn)
            (raw_s if name == "raw" else ingest_s).append(elapsed)
            (raw_cpu if name == "raw" else ingest_cpu).append(time.process_time() - cpu)
            print(f"round {round_} {name}: {elapsed:.1f}s", file=sys.stderr, flush=True)
            if name == "ingest":
                report = value
        if final is not None:
            shutil.rmtree(final, ignore_errors=True)
        final = data_dir
    pairs = [r / i for r, i in zip(raw_s, ingest_s, strict=True)]
    session = getattr(embedder, "_session", None) if args.backend != "torch" else None
    threads = None
    if session is not None:
        threads = session.get_session_options().intra_op_num_threads
    emit({
        "stage": "ingest", "backend": args.backend, "corpus": described, "papers": len(papers), "chunks": n_chunks,
        "texts": len(texts), "distinct_texts": len(distinct),
        "chunk_max_tokens": chunker.max_tokens, "chunk_overlap_sentences": chunker.overlap_sentences,
        "chunks_written": report.chunks_written, "model_load_s": round(load_s, 2), "intra_op_threads": threads,
        "raw_embed_s": [round(t, 2) for t in raw_s], "ingest_s": [round(t, 2) for t in ingest_s],
        "raw_texts_per_s": round(len(distinct) / statistics.median(raw_s), 2),
        "ingest_papers_per_s": round(len(papers) / statistics.median(ingest_s), 2),
        "raw_chunks_per_s": round(n_chunks / statistics.median(raw_s), 2),
        "ingest_chunks_per_s": round(n_chunks / statistics.median(ingest_s), 2),
        "ingest_over_raw_rate": round(statistics.median(pairs), 3), "rounds_ratio": [round(x, 3) for x in pairs],
        "raw_cpu_s": [round(t, 2) for t in raw_cpu], "ingest_cpu_s": [round(t, 2) for t in ingest_cpu],
        "cpu_ratio": round(statistics.median(r / i for r, i in zip(raw_cpu, ingest_cpu, strict=True)), 3),
        "load_average": [round(x, 1) for x in os.getloadavg()], "code": code_under_test(),
        "data_dir": str(final),
    })


# --- search latency ----------------------------------------------------------------------------------


class NoEmbedder:
    """Stands in for the embedder where only ``search_with_vector`` is measured (synthetic vectors)."""

    name = "synthetic-random-384"
    dimension = 384
    max_tokens = 256

    def count_tokens(self, text: str) -> int:
        return len(text.split()) + 2

    def embed(self, texts):
        raise RuntimeError("synthetic stores are searched with precomputed vectors only")


def _memory_mb() -> dict[str, float]:
    """This process's resident memory now: all of it, and the private part (RssAnon: what the kernel cannot
    drop; file-backed pages such as a mapped vector table can be)."""
    found = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            key = line.split(":")[0]
            if key in ("VmRSS", "RssAnon", "RssFile"):
                found[key] = round(int(line.split()[1]) / 1024, 1)
    return found


def stage_rebuild(args) -> None:
    """A first refresh that rebuilds everything derived from the store (chunk BM25, paper BM25, vector table),
    as a process does after an ingest: time and memory per step. Built into a temporary folder, so the
    store's own derived indexes are left as they are. Private memory (RssAnon) is sampled every 0.2 s, since
    ``ru_maxrss`` also counts file pages the kernel may drop."""
    import tempfile
    import threading

    from rag.retrieval.hybrid import HybridRetriever
    from store.bm25 import LexicalIndex
    from store.chroma import ChromaStore
    from store.layout import chroma_dir

    store = ChromaStore(path=chroma_dir(args.data_dir), collection=args.collection or COLLECTION)
    generation = store.generation()
    folder = Path(tempfile.mkdtemp(prefix="paperchat-rebuild-"))
    retriever = HybridRetriever(store, NoEmbedder(), LexicalIndex(folder / "lexical"))
    peak_private = [0.0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.2):
            peak_private[0] = max(peak_private[0], _memory_mb().get("RssAnon", 0.0))

    steps = []

    def measured(build, name):
        def run(*a, **k):
            before, started = _memory_mb(), time.perf_counter()
            out = build(*a, **k)
            steps.append({"step": name, "seconds": round(time.perf_counter() - started, 1), "rss_before_mb":
                          before.get("VmRSS"), "rss_after_mb": _memory_mb().get("VmRSS"),
                          "peak_rss_so_far_mb": round(maxrss_mb(), 1), "peak_private_so_far_mb": peak_private[0]})
            print(json.dumps(steps[-1]), file=sys.stderr, flush=True)
            return out
        return run

    retriever.lexical.build = measured(retriever.lexical.build, "chunk BM25")
    if retriever.paper_lexical is not None:
        retriever.paper_lexical.build = measured(retriever.paper_lexical.build, "paper BM25")
    retriever.vectors.build = measured(retriever.vectors.build, "vector table")
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        seconds, _ = timed(retriever.refresh)
    finally:
        done.set()
        sampler.join()
        shutil.rmtree(folder, ignore_errors=True)
    emit({"stage": "rebuild", "data_dir": str(args.data_dir), "generation": generation,
          "chunks": retriever.vectors.chunk_count, "papers": len(retriever.vectors.paper_ids),
          "refresh_s": round(seconds, 1), "steps": steps, "peak_private_mb": peak_private[0],
          "memory_at_end_mb": _memory_mb(), "load_average": [round(x, 1) for x in os.getloadavg()],
          "code": code_under_test()})


def _random_unit(rng, n: int, dim: int) -> np.ndarray:
    vectors = rng.standard_normal((n, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def stage_search(args) -> None:
    from rag.retrieval.hybrid import HybridRetriever
    from store.bm25 import LexicalIndex
    from store.chroma import ChromaStore
    from store.layout import chroma_dir, lexical_dir

    data_dir = Path(args.data_dir)
    collection = args.collection or COLLECTION
    if args.chroma_host:  # the same store served by `chroma run --path DATA_DIR/chroma` (BM25 still read here)
        store = ChromaStore(host=args.chroma_host, port=args.chroma_port, collection=collection, timeout=600)
    else:
        store = ChromaStore(path=chroma_dir(data_dir), collection=collection)
    lexical = LexicalIndex(lexical_dir(data_dir, collection))
    synthetic = args.backend == "synthetic"
    embedder = NoEmbedder() if synthetic else make_embedder(args.backend, args.cache)
    retriever = HybridRetriever(store, embedder, lexical, top_k=args.k)
    result: dict = {"stage": "search", "backend": args.backend, "data_dir": str(data_dir), "collection": collection,
                    "store": store.location, "sources": source_fingerprint()}
    # What a fresh process pays before its first question: open the store, then the first refresh, which loads
    # BM25 and the title table saved beside it (format 2) or, when that is missing or stale, builds them.
    cold: dict[str, float] = {}
    cold["open_store"], generation = timed(store.generation)
    cold["load_bm25"], loaded = timed(LexicalIndex(lexical.folder).load, generation)  # a separate copy: the part
    result["bm25_loaded"] = bool(loaded)  # False: missing or stale, so the first refresh below builds it
    cold["first_refresh"], _ = timed(retriever.refresh)
    result["cold_start_s"] = {k: round(v, 3) for k, v in cold.items()}
    result["open_and_refresh_s"] = round(cold["open_store"] + cold["first_refresh"], 3)
    result["refresh_again_s"], _ = timed(retriever.refresh)  # what every later question pays: a generation check
    papers, chunks = store.counts()
    result.update(papers=papers, chunks=chunks, lexical_rows=len(lexical))
    qs = questions(args.n)
    candidates = retriever.params.candidates
    if synthetic:
        vectors = _random_unit(np.random.default_rng(7), len(qs), store.manifest()["embedding_dimension"] or 384)
    else:
        result["model_load_s"], _ = timed(embedder.embed, ["warm-up"])
        embed_one, search_one = [], []
        for i, q in enumerate(qs):
            steps = [("embed", lambda q=q: embedder.embed([q])), ("search", lambda q=q: retriever.search(q))]
            for name, fn in steps if i % 2 == 0 else steps[::-1]:
                elapsed, _ = timed(fn)
                (embed_one if name == "embed" else search_one).append(elapsed)
        result["embed_one"] = summary_ms(embed_one)
        result["search"] = summary_ms(search_one)
        result["search_over_embed_p50"] = round(result["search"]["p50_ms"] / result["embed_one"]["p50_ms"], 3)
        # "In one run": a batch of 201 minus a batch of 1, over 200, for search_many and for embed alone;
        # --batch-rounds rounds, the order flipped every round, the ratio taken per round, then the median.
        rounds = []
        for round_ in range(args.batch_rounds):
            steps = [("e1", embedder.embed, qs[:1]), ("en", embedder.embed, qs),
                     ("s1", retriever.search_many, qs[:1]), ("sn", retriever.search_many, qs)]
            took = {name: timed(fn, arg)[0] for name, fn, arg in (steps if round_ % 2 == 0 else steps[::-1])}
            embed_ms = (took["en"] - took["e1"]) / (len(qs) - 1) * 1000
            search_ms = (took["sn"] - took["s1"]) / (len(qs) - 1) * 1000
            rounds.append({**{k: round(v, 4) for k, v in took.items()}, "embed_marginal_ms": round(embed_ms, 3),
                           "search_many_marginal_ms": round(search_ms, 3), "ratio": round(search_ms / embed_ms, 3)})
        middle = sorted(rounds, key=lambda r: r["ratio"])[len(rounds) // 2]
        result["batch"] = {"n": len(qs), "rounds": rounds, "ratio": middle["ratio"],
                           "embed_marginal_ms": middle["embed_marginal_ms"],
                           "search_many_marginal_ms": middle["search_many_marginal_ms"],
                           "ratios": [r["ratio"] for r in rounds]}
        vectors = embedder.embed(qs)
    # The search path alone (question vector given), and its parts.
    with_vector, dense, lexical_s, fetch = [], [], [], []
    for q, v in zip(qs, vectors, strict=True):
        elapsed, hits = timed(retriever.search_with_vector, q, v, args.k)
        with_vector.append(elapsed)
        dense.append(timed(lambda v=v: (store.query_chunks(v, candidates), store.query_papers(v, candidates)))[0])
        lexical_s.append(timed(lexical.top, q, candidates)[0])
        fetch.append(timed(store.get_papers, [h.paper_id for h in hits])[0])
    result["search_with_vector"] = summary_ms(with_vector)
    # The search path alone, batched: search_with_vectors of 201 minus 1, over 200 (median of rounds).
    marginal = []
    for _ in range(args.batch_rounds):
        one = timed(retriever.search_with_vectors, qs[:1], vectors[:1], args.k)[0]
        many = timed(retriever.search_with_vectors, qs, vectors, args.k)[0]
        marginal.append((many - one) / (len(qs) - 1) * 1000)
    result["search_with_vectors_marginal_ms"] = round(statistics.median(marginal), 3)
    result["parts"] = {"dense_chroma": summary_ms(dense), "lexical_bm25": summary_ms(lexical_s),
                       "get_papers": summary_ms(fetch)}
    emit(result)


# --- synthetic stores ----------------------------------------------------------------------------------


_WORD = re.compile(r"[a-z][a-z0-9-]{1,24}")


def _vocabulary(limit: int = 50000) -> tuple[np.ndarray, np.ndarray]:
    counts: Counter[str] = Counter()
    if (SCIFACT / "corpus.jsonl").is_file():
        for _id, text in scifact_docs():
            counts.update(_WORD.findall(text.lower()))
    else:
        for paper in bundled_papers():
            counts.update(_WORD.findall(paper.abstract.lower()))
    words, freq = zip(*counts.most_common(limit), strict=True)
    cdf = np.cumsum(np.asarray(freq, dtype=np.float64))
    return np.asarray(words, dtype=object), cdf / cdf[-1]


def stage_synthetic_build(args) -> None:
    """``--chunks`` synthetic chunks written through the product's ingest (bench/synthetic.py: ``Ingestor`` with
    random vectors, so the store, not the model, is what is measured), then the first ``refresh``, which reads
    every chunk back and builds BM25 and the vector table."""
    from synthetic import RandomEmbedder, final_rate, synthetic_papers, write_through_ingest

    from rag.ingest import make_chunker
    from rag.retrieval.hybrid import HybridRetriever
    from store.bm25 import LexicalIndex
    from store.layout import lexical_dir

    data_dir = Path(args.data_dir)
    done_file = data_dir / "done.json"
    if done_file.is_file() and not args.force:
        built = json.loads(done_file.read_text())
        print(json.dumps({**built, "reused": True}))  # the figures, peak RSS included, of the run that built it
        return
    runs_file = data_dir / "runs.json"  # an unfinished build's runs: [seconds writing, papers stored at its end]
    earlier = json.loads(runs_file.read_text()) if args.resume and runs_file.is_file() else []
    if data_dir.exists() and not args.resume:
        shutil.rmtree(data_dir)
    embedder = RandomEmbedder(args.seed)
    max_tokens, overlap = chunk_defaults()
    chunker = make_chunker(embedder, max_tokens, overlap)
    generate_s, (papers, chunks) = timed(synthetic_papers, args.chunks, chunker, _vocabulary(), args.seed)
    print(f"{len(papers)} papers, {chunks} chunks generated in {generate_s:.0f}s", file=sys.stderr, flush=True)
    data_dir.mkdir(parents=True, exist_ok=True)

    def checkpoint(seconds: float, done: int) -> None:
        # A build of a million chunks can outlast a session: each run's time is kept as it goes, so a killed
        # run resumed with --resume (the ingest skips the papers already stored) still counts it.
        runs_file.write_text(json.dumps([*earlier, [round(seconds, 1), done]]))

    written = write_through_ingest(data_dir, papers, chunker, embedder, checkpoint=checkpoint)
    store = written["store"]
    checkpoint(written["write_s"], len(papers))
    rss_after_write = maxrss_mb()
    retriever = HybridRetriever(store, NoEmbedder(), LexicalIndex(lexical_dir(data_dir, COLLECTION)))
    bm25_s, _ = timed(retriever.refresh)  # reads every chunk back, builds BM25 and the vector table (first search)
    size_mb = sum(f.stat().st_size for f in data_dir.rglob("*") if f.is_file()) / 1e6
    write_s, papers_n = written["write_s"] + sum(run[0] for run in earlier), len(papers)
    result = {
        "stage": "synthetic-build", "writer": "Ingestor", "chunks": chunks, "papers": papers_n,
        "runs": json.loads(runs_file.read_text()),
        "write_s": round(write_s, 1), "generate_s": round(generate_s, 1),
        "chunks_per_s": round(chunks / write_s, 1),
        "rows_per_s": round((chunks + papers_n) / write_s, 1),
        "final_papers_per_s": final_rate(written["progress"]),
        "final_chunks_per_s": round(final_rate(written["progress"]) * chunks / papers_n, 1),
        "bm25_build_s": round(bm25_s, 1), "disk_mb": round(size_mb, 1),
        "maxrss_after_write_mb": round(rss_after_write, 1),
        "progress": written["progress"][:: max(1, len(written["progress"]) // 200)],
        "load_average": [round(x, 1) for x in os.getloadavg()], "code": code_under_test(),
    }
    result["maxrss_mb"] = round(maxrss_mb(), 1)
    done_file.write_text(json.dumps(result))
    emit(result)


def stage_write_costs(args) -> None:
    """What a Chroma row costs by its parts, and the ingest path's rows/s, in one process (bench/synthetic.py)."""
    from synthetic import RandomEmbedder, write_costs

    from rag.ingest import make_chunker

    max_tokens, overlap = chunk_defaults()
    chunker = make_chunker(RandomEmbedder(), max_tokens, overlap)
    costs = write_costs(args.data_dir, args.rows, args.batch, _vocabulary(), chunker, rounds=args.rounds)
    emit({"stage": "write-costs", "rows": args.rows, "batch": args.batch, "variants": costs,
          "load_average": [round(x, 1) for x in os.getloadavg()], "code": code_under_test()})


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="stage", required=True)
    cache_default = PROJECT / ".paperchat" / "bench" / "models"

    def common(p, *, cache=True):
        if cache:
            p.add_argument("--cache", type=Path, default=cache_default, help="folder of the ONNX exports")
        p.add_argument("--batch-size", type=int, default=32)
        return p

    p = common(sub.add_parser("prepare"))
    p.add_argument("--force", action="store_true")
    p.set_defaults(func=stage_prepare)

    p = common(sub.add_parser("startup"))
    p.add_argument("--data-dir", type=Path, required=True, help="an index built with fp32 vectors (torch or onnx)")
    p.add_argument("--int8-data-dir", type=Path, default=None, help="an index built with int8 ONNX (auto row)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--only", default="")
    p.set_defaults(func=stage_startup)

    p = common(sub.add_parser("embed-speed"))
    p.add_argument("--texts", type=int, default=500)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--backends", default=",".join(BACKENDS))
    p.set_defaults(func=stage_embed_speed)

    p = common(sub.add_parser("quality"))
    p.add_argument("--scifact", type=Path, default=SCIFACT)
    p.add_argument("--backends", default="onnx,onnx-int8")
    p.add_argument("--vector-cache", type=Path, default=None)
    p.set_defaults(func=stage_quality)

    p = common(sub.add_parser("ingest"))
    p.add_argument("--backend", choices=BACKENDS, default="onnx")
    p.add_argument("--corpus", default="bundled", help="bundled, or a corpus file or folder (e.g. a SciFact slice)")
    p.add_argument("--data-dir", type=Path, required=True)
    p.add_argument("--rounds", type=int, default=2)
    p.set_defaults(func=stage_ingest)

    p = common(sub.add_parser("search"))
    p.add_argument("--backend", choices=(*BACKENDS, "synthetic"), default="onnx")
    p.add_argument("--data-dir", type=Path, required=True)
    p.add_argument("--collection", default=None)
    p.add_argument("--n", type=int, default=201)
    p.add_argument("--batch-rounds", type=int, default=3, help="rounds of the 201-minus-1 batch measurement")
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--chroma-host", default=None,
                   help="search the store through a `chroma run --path DATA_DIR/chroma` server at this host")
    p.add_argument("--chroma-port", type=int, default=8000)
    p.set_defaults(func=stage_search)

    p = common(sub.add_parser("rebuild"), cache=False)
    p.add_argument("--data-dir", type=Path, required=True, help="a built index (e.g. a synthetic-build store)")
    p.add_argument("--collection", default=None)
    p.set_defaults(func=stage_rebuild)

    p = common(sub.add_parser("synthetic-build"), cache=False)
    p.add_argument("--chunks", type=int, required=True)
    p.add_argument("--data-dir", type=Path, required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--force", action="store_true")
    p.add_argument("--resume", action="store_true",
                   help="go on with an unfinished build in --data-dir (after a kill); its earlier runs' time counts")
    p.set_defaults(func=stage_synthetic_build)

    p = common(sub.add_parser("write-costs"), cache=False)
    p.add_argument("--data-dir", type=Path, required=True)
    p.add_argument("--rows", type=int, default=6000)
    p.add_argument("--batch", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=2)
    p.set_defaults(func=stage_write_costs)

    args = parser.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
