"""paperchat benchmarks (``make bench``): start-up, embedding speed and quality, ingest, search latency.

    python bench/run.py [--sizes 76,100000,1000000] [--scifact-index DIR[:COLLECTION] ...] [--skip quality,...]

Runs each stage of ``bench/stages.py`` in its own process (so each stage's peak memory is its own), then
writes ``bench/results/report.md`` and ``bench/results/search_latency.png``. Every figure in the report is
printed with the command that produced it; ``bench/results/results.json`` holds the raw numbers. Nothing
here runs in the tests. The machine may be shared: compare the ratios (measured in one process, interleaved),
not absolute times across runs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
STAGES = PROJECT / "bench" / "stages.py"
ALL_STAGES = ("prepare", "startup", "embed", "quality", "ingest", "search", "scifact", "synthetic")
BACKENDS = ("onnx", "onnx-int8", "torch")
DEFAULT_SCIFACT = ("/tmp/scifact:scifact", "/tmp/scifact-int8:scifact")  # each skipped when missing


def shell(command: list[str]) -> str:
    shown = []
    for part in command:
        if part == sys.executable:
            part = os.path.relpath(part, PROJECT) if part.startswith(str(PROJECT)) else part
        elif part.startswith(str(PROJECT) + os.sep):
            part = os.path.relpath(part, PROJECT)
        shown.append(shlex.quote(part))
    return " ".join(shown)


class Bench:
    def __init__(self, args) -> None:
        self.args = args
        self.results: list[dict] = []
        self.notes: list[str] = []
        self.python = sys.executable
        self.meta: dict = {}

    def stage(self, *arguments: str, label: str) -> dict | None:
        command = [self.python, str(STAGES), *arguments]
        print(f"[bench] {label}: {shell(command)}", flush=True)
        started = time.monotonic()
        done = subprocess.run(command, cwd=PROJECT, capture_output=True, text=True)
        elapsed = time.monotonic() - started
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode != 0 or not lines:
            error = (done.stderr or done.stdout).strip().splitlines()[-5:]
            print(f"[bench] {label} FAILED after {elapsed:.0f}s: {' | '.join(error)}", flush=True)
            entry = {"label": label, "command": shell(command), "error": "\n".join(error), "wall_s": elapsed}
            self.results.append(entry)
            return None
        result = json.loads(lines[-1])
        result.update(label=label, command=shell(command), wall_s=round(elapsed, 1))
        self.results.append(result)
        print(f"[bench] {label} done in {elapsed:.0f}s (peak RSS {result.get('maxrss_mb')} MB)", flush=True)
        self.save()
        return result

    def save(self) -> None:
        out = self.args.out
        out.mkdir(parents=True, exist_ok=True)
        saved = {"meta": self.meta, "notes": self.notes, "results": self.results}
        (out / "results.json").write_text(json.dumps(saved, indent=1))

    def cache(self) -> list[str]:
        return ["--cache", str(self.args.work_dir / "models")]

    def run(self) -> None:
        args = self.args
        skip = set(filter(None, args.skip.split(",")))
        cache = self.cache()
        if "prepare" not in skip:
            self.stage("prepare", *cache, label="prepare: export and quantise the bundled model")
        bundled: dict[str, str] = {}
        if "ingest" not in skip or "startup" not in skip or "search" not in skip:
            for backend in args.backends.split(","):
                r = self.stage("ingest", *cache, "--backend", backend, "--data-dir",
                               str(args.work_dir / f"bundled-{backend}"), "--rounds", str(args.rounds),
                               label=f"ingest bundled corpus ({backend})")
                if r:
                    bundled[backend] = r["data_dir"]
        if "startup" not in skip and ("onnx" in bundled or "torch" in bundled):
            # `paperchat search` as shipped: auto on the int8-built index, torch on an fp32-built one.
            fp32 = bundled.get("onnx") or bundled["torch"]
            int8 = ["--int8-data-dir", bundled["onnx-int8"]] if "onnx-int8" in bundled else []
            self.stage("startup", *cache, "--data-dir", fp32, *int8, "--reps", str(args.reps),
                       label="start-up: fresh processes")
        if "embed" not in skip:
            self.stage("embed-speed", *cache, "--texts", str(args.texts), "--rounds", str(args.rounds),
                       "--backends", "torch,onnx,onnx-int8", label="embedding speed (same process)")
        if "quality" not in skip:
            backends = "onnx,onnx-int8" + (",torch" if args.quality_torch else "")
            self.stage("quality", *cache, "--backends", backends, "--vector-cache",
                       str(args.work_dir / "vectors"), label="SciFact nDCG@10, dense only")
        sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
        if "search" not in skip and ("76" in sizes or "bundled" in sizes):
            for backend, data_dir in bundled.items():
                self.stage("search", *cache, "--backend", backend, "--data-dir", data_dir,
                           label=f"search latency, bundled corpus ({backend})")
        if "scifact" not in skip:
            self.scifact()
        if "synthetic" not in skip:
            self.stage("write-costs", "--data-dir", str(args.work_dir / "write-costs"),
                       label="what a Chroma write costs")
        for size in sizes:
            if size not in ("76", "bundled") and "synthetic" not in skip:
                self.synthetic(int(float(size)))

    def synthetic(self, chunks: int) -> None:
        args = self.args
        data_dir = args.work_dir / f"synthetic-{chunks}"
        built = [r for r in self.results if r.get("stage") == "synthetic-build"]  # reused ones carry their times
        if built and not (data_dir / "done.json").is_file():
            # The write rate falls as the HNSW graphs grow: extrapolate from the largest store's last batches
            # (stores built earlier, not measured in this run yet, count too).
            known = built + [json.loads((d / "done.json").read_text()) for d in args.work_dir.glob("synthetic-*")
                             if (d / "done.json").is_file()]
            ref = max(known, key=lambda r: ("final_chunks_per_s" in r, r["chunks"]))
            rate = ref.get("final_chunks_per_s") or ref["chunks_per_s"]
            bm25_per_chunk = ref["bm25_build_s"] / ref["chunks"]
            estimate_min = (chunks / rate + chunks * bm25_per_chunk) / 60
            if estimate_min > args.max_write_minutes:
                rss_gb = ref["maxrss_mb"] / ref["chunks"] * chunks / 1024
                note = (f"{chunks:,} synthetic chunks not built: at the {rate:.0f} chunks/s measured over the last "
                        f"batches of the {ref['chunks']:,}-chunk store (Chroma's HNSW inserts, "
                        f"{ref.get('load_average', ['?'])[0]} load average on 2 cores) writing them would take at "
                        f"least {chunks / rate / 60:.0f} min, plus about {chunks * bm25_per_chunk / 60:.0f} min for "
                        f"the first refresh's BM25 build (linear from {ref['bm25_build_s']:.0f} s), peak RSS about "
                        f"{rss_gb:.1f} GB (linear from {ref['maxrss_mb']:,.0f} MB); over --max-write-minutes "
                        f"{args.max_write_minutes:g}")
                measured = {r["chunks"] for r in built}
                cached = sorted(int(d.name.split("-")[1]) for d in args.work_dir.glob("synthetic-*")
                                if (d / "done.json").is_file() and d.name.split("-")[1].isdigit())
                larger = [c for c in cached if c < chunks and c > max(measured)]
                feasible = int(rate * args.max_write_minutes * 60 / (1 + rate * bm25_per_chunk) // 50000 * 50000)
                if larger:
                    chunks = larger[-1]
                    note += f"; measured the largest store already built instead ({chunks:,} chunks)"
                elif feasible > max(measured):
                    chunks = feasible
                    note += f"; measured {chunks:,} instead, the largest size that fits"
                else:
                    self.notes.append(note)
                    print(f"[bench] {note}", flush=True)
                    return
                self.notes.append(note)
                print(f"[bench] {note}", flush=True)
                data_dir = args.work_dir / f"synthetic-{chunks}"
        r = self.stage("synthetic-build", "--chunks", str(chunks), "--data-dir", str(data_dir),
                       label=f"synthetic store, {chunks:,} chunks: write + BM25")
        if r:
            self.stage("search", "--backend", "synthetic", "--data-dir", str(data_dir),
                       label=f"search latency, synthetic {chunks:,} chunks")
        if r and not args.keep_synthetic:
            import shutil

            shutil.rmtree(data_dir, ignore_errors=True)

    def scifact(self) -> None:
        for spec in self.args.scifact_index or DEFAULT_SCIFACT:
            path, _, collection = spec.partition(":")
            self.scifact_one(Path(path), collection or None)

    def scifact_one(self, index: Path, collection: str | None) -> None:
        if not index.exists():
            self.notes.append(
                f"SciFact index {index} skipped: not there (a paperchat data dir holding chroma/ with SciFact "
                "ingested, e.g. `PAPERCHAT_DATA_DIR=DIR PAPERCHAT_COLLECTION=scifact paperchat ingest "
                "../shared/eval/scifact/corpus.jsonl`, 35 min here with torch)"
            )
            return
        data_dir = index.parent if (index / "chroma.sqlite3").is_file() else index
        collection = collection or self.args.scifact_collection or detect_collection(data_dir / "chroma")
        if collection is None:
            self.notes.append(f"SciFact search latency skipped: no paperchat collection found in {data_dir / 'chroma'}")
            return
        # What auto picks for this index: int8 ONNX for an int8-built index, fp32 ONNX for torch/fp32-built ones.
        backend = "onnx-int8" if collection_model(data_dir / "chroma", collection).endswith("-int8") else "onnx"
        self.stage("search", *self.cache(), "--backend", backend, "--data-dir", str(data_dir), "--collection",
                   collection, label=f"search latency, SciFact ({backend})")

def detect_collection(chroma_dir: Path) -> str | None:
    import chromadb

    client = chromadb.PersistentClient(path=str(chroma_dir), settings=chromadb.Settings(anonymized_telemetry=False))
    names = [c.name if hasattr(c, "name") else c for c in client.list_collections()]
    chunks = [n for n in names if not n.endswith("-papers")]
    for preferred in ("scifact", "paperchat"):
        if preferred in chunks:
            return preferred
    return chunks[0] if len(chunks) == 1 else None


def collection_model(chroma_dir: Path, collection: str) -> str:
    import chromadb

    client = chromadb.PersistentClient(path=str(chroma_dir), settings=chromadb.Settings(anonymized_telemetry=False))
    return str((client.get_collection(collection).metadata or {}).get("embedding_model", ""))


# --- report ------------------------------------------------------------------------------------------


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = []
    for module in ("onnxruntime", "torch", "sentence_transformers", "chromadb", "bm25s", "numpy"):
        try:
            code = f"import importlib.metadata as m; print(m.version('{module}'))"
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip()
            versions.append(f"{module} {out or '?'}")
        except OSError:
            continue
    return f"{cpu}, {os.cpu_count()} cores; Python {platform.python_version()}; " + ", ".join(versions)


def fmt(value, digits: int = 2) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def by_stage(results: list[dict], stage: str) -> list[dict]:
    return [r for r in results if r.get("stage") == stage]


def write_report(args, bench: Bench, started: str, loads: tuple[str, str], run_command: str) -> Path:
    results = bench.results
    lines = [
        "# paperchat benchmarks",
        "",
        f"Generated {started} by `{run_command}` (total {loads[2]}).",
        f"Machine: {machine()}.",
        f"Load average at start {loads[0]}, at end {loads[1]}: the machine is shared, so absolute times drift; "
        "each ratio below is measured in one process (or one run of fresh processes), interleaved.",
        "",
        "Each figure is followed by the command that produced it (run from the project root; the stage "
        "prints its numbers as JSON). Peak RSS is `ru_maxrss` of that stage's process.",
        "",
    ]
    failures = [r for r in results if "error" in r]
    for r in by_stage(results, "startup"):
        lines += startup_section(r, args.reps)
    for r in by_stage(results, "embed-speed"):
        lines += embed_speed_section(r)
    for r in by_stage(results, "quality"):
        lines += quality_section(r)
    lines += ingest_section(by_stage(results, "ingest"), by_stage(results, "full-ingest"),
                            by_stage(results, "write-costs"))
    lines += search_section(args, results, run_command)
    for r in by_stage(results, "prepare"):
        lines += prepare_section(r)
    if bench.notes or failures:
        lines += ["## Notes", ""]
        lines += [f"- {note}" for note in bench.notes]
        lines += [f"- FAILED {r['label']}: `{r['command']}`: {r['error'][-400:]}" for r in failures]
        lines.append("")
    report = args.out / "report.md"
    report.write_text("\n".join(lines))
    return report


STARTUP_LABELS = {
    "import_sentence_transformers": "`import sentence_transformers` alone",
    "onnx_query_script": "ONNX query script: import, open Chroma, embed, query",
    "cli_search_auto": "`paperchat search --json` as shipped (auto, int8-built index: int8 ONNX)",
    "cli_search_torch": "`paperchat search --json`, `PAPERCHAT_EMBEDDING_BACKEND=torch`, fp32-built index",
    # earlier runs' names
    "cli_search_onnx": "`paperchat search --json` with the ONNX embedder (patched in)",
    "cli_search_as_is": "`paperchat search --json` (torch wiring of the time)",
}


def startup_section(r: dict, reps: int) -> list[str]:
    """1. Start-up: one question in a fresh process, against the time of importing sentence-transformers."""
    base = r["commands"].get("import_sentence_transformers", {}).get("median_s")
    lines = ["## 1. Start-up: one question in a fresh process", "",
             f"Goal: a search finishes in at most 0.6x the time of `import sentence_transformers` "
             f"({fmt(base)} s here). Median of {reps} runs per command after one warm-up run, "
             "commands interleaved.", "",
             "| what | median wall time | ratio to the import | heavy modules imported | runs (s) |",
             "| --- | --- | --- | --- | --- |"]
    labels = STARTUP_LABELS
    auto = r["commands"].get("cli_search_auto", {}).get("ratio_to_import")
    if auto is not None:
        lines[-2:-2] = [f"**`paperchat search` as shipped: {auto:.3f}x the import "
                        f"({'meets' if auto <= 0.6 else 'misses'} the 0.6x goal).**", ""]
    for name, entry in r["commands"].items():
        heavy = entry.get("notes", {}).get("heavy_modules")
        heavy_text = "n/a" if heavy is None else (", ".join(heavy) or "none")
        if entry.get("notes", {}).get("onnxruntime"):
            heavy_text += " (onnxruntime answered)"
        lines.append(f"| {labels.get(name, name)} | {fmt(entry['median_s'])} s | "
                     f"{fmt(entry.get('ratio_to_import'), 3)} | {heavy_text} | "
                     f"{', '.join(str(s) for s in entry['seconds'])} |")
    lines += ["", "Commands (each timed as a whole process):", ""]
    lines += [f"- {labels.get(n, n)}: `{e['command']}`" for n, e in r["commands"].items()]
    for name, error in r.get("errors", {}).items():
        lines.append(f"- {name} FAILED: `{error[-300:]}`")
    return lines + ["", f"Stage: `{r['command']}`", ""]


def embed_speed_section(r: dict) -> list[str]:
    """2. Embedding speed of each backend in one process, with paired speed-ups and cosines."""
    lines = ["## 2. Embedding speed, same process", "",
             f"{r['texts']} texts: {r['described']}; mean {r['mean_tokens']} word pieces, "
             f"{r['truncated_share']:.0%} truncated at 256; batch size {r['batch_size']}; "
             f"median of {len(next(iter(r['backends'].values()))['seconds'])} interleaved rounds.", "",
             "| backend | median time | texts/s | rounds (s) |", "| --- | --- | --- | --- |"]
    for name, b in r["backends"].items():
        lines.append(f"| {name} | {fmt(b['median_s'])} s | {fmt(b['texts_per_s'], 1)} | "
                     f"{', '.join(str(s) for s in b['seconds'])} |")
    lines += ["", "| ratio (paired per round, median) | value |", "| --- | --- |"]
    for key, value in r.items():
        if key.startswith("speedup_"):
            lines.append(f"| {key.removeprefix('speedup_').replace('_vs_', ' faster than ')} | x{fmt(value, 2)} |")
    for key, value in r.items():
        if key.startswith("cosine_"):
            a, b = key.removeprefix("cosine_").split("_vs_")
            lines.append(f"| cosine {a} vs {b}: min / mean | {value['min']:.6f} / {value['mean']:.6f} |")
    return lines + ["", f"Command: `{r['command']}` (peak RSS {fmt(r['maxrss_mb'], 0)} MB)", ""]


def quality_section(r: dict) -> list[str]:
    """3. Dense retrieval quality on SciFact per backend, and whether int8 keeps it."""
    lines = ["## 3. Retrieval quality: SciFact test, dense only", "",
             f"{r['docs']:,} documents (`title + \" \" + text`, truncated by the model at 256 word pieces), "
             f"{r['queries']} test queries, cosine top-k in NumPy, nDCG@10 with linear gain and log2 "
             "discount (trec_eval's ndcg_cut). Published all-MiniLM-L6-v2: 0.645 (MTEB).", "",
             "| backend | nDCG@10 | Recall@100 | embedding the corpus |", "| --- | --- | --- | --- |"]
    for name, b in r["backends"].items():
        took = f"{fmt(b['doc_embed_s'], 0)} s"
        if b["doc_embed_s"] is None:
            earlier = b.get("doc_embed_s_cached")
            took = "vectors cached" + (f" (the run that made them took {fmt(earlier, 0)} s)" if earlier else "")
        lines.append(f"| {name} | {b['ndcg@10']:.4f} | {b['recall@100']:.4f} | {took} |")
    if "int8_minus_fp32" in r:
        delta = r["int8_minus_fp32"]
        low, high = r["int8_minus_fp32_ci95"]
        verdict = "passes" if delta >= -0.01 else "fails"
        lines += ["", f"int8 minus fp32: {delta:+.4f} nDCG@10 (paired bootstrap 95% interval {low:+.4f} .. "
                      f"{high:+.4f}). Decision rule (int8 may be the default only if it loses <= 0.01): "
                      f"**{verdict}**."]
    return lines + ["", f"Command: `{r['command']}` (peak RSS {fmt(r['maxrss_mb'], 0)} MB)", ""]


def ingest_section(ingests: list[dict], full: list[dict], costs: list[dict]) -> list[str]:
    """4. Ingest throughput against raw embedding of the same texts, the full SciFact ingest, and what a
    Chroma write costs."""
    if not ingests and not full and not costs:
        return []
    lines = ["## 4. Ingest throughput: `Ingestor` into a fresh Chroma store vs raw `embed` of the same texts", "",
             "Both sides in one process, interleaved round by round, model load excluded. The texts are every "
             "text the ingest embeds (chunks with their paper's title; for titled papers also the whole text and "
             "the title); raw = one `embed` call over the distinct ones. The ratio (raw time / ingest time, "
             "median of the rounds' ratios) is the share of the embedder's speed the ingest keeps: 1.0 = chunking "
             "and store writes cost nothing or hide behind the embedding. Goal: >= 0.9. `code` is the tree and "
             "commit whose `rag` the stage imported (`PYTHONPATH` picks a tree to compare).", "",
             "| code | corpus | papers | texts (distinct) | raw embed texts/s | ingest papers/s | **ratio** | "
             "rounds' ratios | load avg | peak RSS | command |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in ingests:
        code = r.get("code", {})
        name = r["label"].rsplit(", ", 1)[-1] if ", " in r["label"] else Path(code.get("tree", "?")).name
        tree = f"{name}@{code.get('commit', '?')}" if code else "n/a"
        texts = f"{fmt(r['texts'])} ({fmt(r['distinct_texts'])})" if "texts" in r else f"{fmt(r['chunks'])} chunks"
        raw = r.get("raw_texts_per_s", r.get("raw_chunks_per_s"))
        papers_s = r.get("ingest_papers_per_s")
        lines.append(f"| {tree} | {r.get('corpus', 'bundled corpus')} | {fmt(r['papers'])} | {texts} | {fmt(raw, 1)} | "
                     f"{fmt(papers_s, 2)} | **{fmt(r['ingest_over_raw_rate'], 3)}** | "
                     f"{', '.join(fmt(x, 2) for x in r.get('rounds_ratio', []))} | "
                     f"{(r.get('load_average') or ['n/a'])[0]} | {fmt(r['maxrss_mb'], 0)} MB | `{r['command']}` |")
    for r in full:
        lines += ["", f"**{r['label']}: {fmt(r['seconds'], 0)} s** ({r['what']}). Command: `{r['command']}`"]
    for r in costs:
        lines += ["", f"What a Chroma write costs, in one process ({fmt(r['rows'])} rows per variant into fresh "
                      f"collections, `collection.add` in batches of {fmt(r['batch'])}; the ingest path writes papers "
                      "of the same number of chunks: its rows are the chunks and the papers' records; load "
                      f"average {r['load_average'][0]}):", "",
                  "| rows written | rows | rows/s | rounds (s) |", "| --- | --- | --- | --- |"]
        for name, v in r["variants"].items():
            lines.append(f"| {name} | {fmt(v['rows'])} | {fmt(v['rows_per_s'], 1)} | "
                         f"{', '.join(str(t) for t in v['seconds'])} |")
        lines += ["", f"Command: `{r['command']}`"]
    return lines + [""]


def search_section(args, results: list[dict], run_command: str) -> list[str]:
    """5. Search latency: the headline ratio, one question at a time, the search path alone, cold start,
    the synthetic stores' builds and the plot."""
    searches = by_stage(results, "search")
    builds = {r["chunks"]: r for r in by_stage(results, "synthetic-build")}
    if not searches:
        return []
    real = [r for r in searches if "batch" in r]
    lines = search_headline(real) + search_one_at_a_time(real) + search_path_alone(searches)
    lines += cold_start(searches) + search_commands(searches)
    if builds:
        lines += synthetic_builds(builds)
    png = plot(args.out / "search_latency.png", searches)
    if png:
        lines += ["", f"![search latency against corpus size]({png.name})", "",
                  f"Plotted from the search commands above (`{run_command}`, figure by `plot` in bench/run.py).",
                  ""]
    return lines


def corpus_label(r: dict) -> str:
    return r["label"].removeprefix("search latency, ")


def search_headline(real: list[dict]) -> list[str]:
    lines = ["## 5. Search latency", "",
             "**Headline (the project's goal: <= 2.5).** Per-question search latency over the one-question "
             "embedding floor, both measured in one process the same way: (`search_many` of 201 questions "
             "minus `search_many` of 1) / 200, over (`embed` of the same 201 minus `embed` of 1) / 200. "
             "`search_many` includes its own embedding call. Three rounds, order flipped each round, ratio "
             "per round; the median round is shown.", "",
             "| corpus | chunks | search_many per question | embed per question | **ratio** | goal <= 2.5 | "
             "rounds' ratios |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in real:
        b = r["batch"]
        lines.append(f"| {corpus_label(r)} | {fmt(r['chunks'])} | "
                     f"{fmt(b['search_many_marginal_ms'], 1)} ms | {fmt(b['embed_marginal_ms'], 1)} ms | "
                     f"**{fmt(b['ratio'], 2)}** | {'meets' if b['ratio'] <= 2.5 else 'misses'} | "
                     f"{', '.join(fmt(x, 2) for x in b.get('ratios', [b['ratio']]))} |")
    return lines


def search_one_at_a_time(real: list[dict]) -> list[str]:
    lines = ["", "**Stricter view: one question at a time.** `HybridRetriever.search(q)` (= `search_many([q])`, "
             "embedding included) against `embedder.embed([q])`, interleaved question by question over the "
             "same 201 questions; ratio of the p50s. This view pays per question the fixed costs a batch "
             "shares: the nearest-neighbour step (brute force over the vector table up to 250k chunks, "
             "Chroma's HNSW above), two BM25 passes, and two Chroma reads (papers, shown chunks).", "",
             "| corpus | search p50 / p95 | embed([q]) p50 / p95 | ratio p50 | peak RSS |",
             "| --- | --- | --- | --- | --- |"]
    for r in real:
        lines.append(f"| {corpus_label(r)} | "
                     f"{fmt(r['search']['p50_ms'], 1)} / {fmt(r['search']['p95_ms'], 1)} ms | "
                     f"{fmt(r['embed_one']['p50_ms'], 1)} / {fmt(r['embed_one']['p95_ms'], 1)} ms | "
                     f"{fmt(r['search_over_embed_p50'], 2)} | {fmt(r['maxrss_mb'], 0)} MB |")
    return lines


def search_path_alone(searches: list[dict]) -> list[str]:
    lines = ["", "**The search path alone (question vector given)**, the only figures for synthetic stores, whose "
             "vectors are random unit vectors (dimension 384) and texts random words with SciFact's word "
             "frequencies: `search_with_vector` per question (p50 / p95), `search_with_vectors` batched "
             "(201 minus 1, over 200), and the parts of a one-question search. k=5, 100 candidates from "
             "each side.", "",
             "| corpus | chunks | papers | search_with_vector p50 / p95 | batched per question | "
             "Chroma dense (chunks + papers) p50 | BM25 top-100 p50 | read papers p50 | peak RSS |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in searches:
        swv, parts = r["search_with_vector"], r["parts"]
        lines.append(
            f"| {corpus_label(r)} | {fmt(r['chunks'])} | {fmt(r['papers'])} | "
            f"{fmt(swv['p50_ms'], 1)} / {fmt(swv['p95_ms'], 1)} ms | "
            f"{fmt(r.get('search_with_vectors_marginal_ms'), 1)}"
            f"{' ms' if 'search_with_vectors_marginal_ms' in r else ''} | "
            f"{fmt(parts['dense_chroma']['p50_ms'], 1)} ms | {fmt(parts['lexical_bm25']['p50_ms'], 1)} ms | "
            f"{fmt(parts['get_papers']['p50_ms'], 1)} ms | {fmt(r['maxrss_mb'], 0)} MB |")
    return lines


def cold_start(searches: list[dict]) -> list[str]:
    lines = ["", "Open + first refresh is what a fresh process pays before its first question (cold); the first "
             "refresh loads BM25 and the title table saved beside it (lexical format 2), so it reads no "
             "papers unless BM25 on disk is missing or stale:", "",
             "| corpus | open the store | first refresh | of which loading BM25 + titles | refresh again |",
             "| --- | --- | --- | --- | --- |"]
    for r in searches:
        cold = r.get("cold_start_s", {})
        first = cold.get("first_refresh", cold.get("read_papers_for_titles"))
        built = "" if r.get("bm25_loaded", True) else " (no current BM25 on disk: this built it)"
        lines.append(f"| {corpus_label(r)} | {fmt(cold.get('open_store'))} s | "
                     f"{fmt(first)} s{built} | {fmt(cold.get('load_bm25'))} s | "
                     f"{fmt(r.get('refresh_again_s'), 4)} s |")
    return lines


def search_commands(searches: list[dict]) -> list[str]:
    """The commands, and a warning when the search code's hashes differ between stages."""
    lines = ["", "Commands:", ""]
    lines += [f"- {r['label']}: `{r['command']}`" for r in searches]
    versions = {json.dumps(r["sources"], sort_keys=True) for r in searches if "sources" in r}
    if len(versions) > 1:
        files = ", ".join(dict.fromkeys(name for r in searches for name in r.get("sources", {})))
        lines += ["", f"**The search code changed between these stages** (hashes of {files} "
                      "as each stage imported them): compare rows with equal hashes only.", ""]
        lines += [f"- {r['label']}: {', '.join(f'{k} {v}' for k, v in r['sources'].items())}"
                  for r in searches if "sources" in r]
    return lines


def synthetic_builds(builds: dict[int, dict]) -> list[str]:
    """How the synthetic stores were written, one row per size, and where a bigger build passed a smaller."""
    lines = ["", "Synthetic stores: random unit vectors (dimension 384) for papers of random words. Stores marked "
                 "`Ingestor` are written through the product's ingest (bench/synthetic.py: `Ingestor` with an "
                 "embedder returning random vectors, so windows, the writer thread and `ChromaStore.write_papers` "
                 "are what is measured; 1.5 chunks per titled paper); the others by the older bench writer, "
                 "straight to the two collections, 5,000 rows per `add`. Then the first `refresh` reads every "
                 "chunk back and builds BM25 and the vector table. \"final\" is the write rate over the last "
                 "tenth: HNSW inserts slow down as the graphs grow.", "",
             "| chunks | papers | writer | write | chunks/s (final) | rows/s (chunks + papers) | BM25 build | "
             "on disk | peak RSS after write / overall | load avg at end | command |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in sorted(builds.values(), key=lambda r: r["chunks"]):
        reused = " (reused: the run that built it)" if r.get("reused") else ""
        rows = r.get("rows_per_s") or round((r["chunks"] + r["papers"]) / r["write_s"], 1)
        lines.append(f"| {fmt(r['chunks'])} | {fmt(r['papers'])} | {r.get('writer', 'bench writer')} | "
                     f"{fmt(r['write_s'], 0)} s{reused} | "
                     f"{fmt(r['chunks_per_s'], 0)} ({fmt(r.get('final_chunks_per_s'), 0)}) | {fmt(rows, 0)} | "
                     f"{fmt(r['bm25_build_s'], 0)} s | {fmt(r['disk_mb'], 0)} MB | "
                     f"{fmt(r.get('maxrss_after_write_mb'), 0)} / {fmt(r['maxrss_mb'], 0)} MB | "
                     f"{(r.get('load_average') or ['n/a'])[0]} | `{r['command']}` |")
    for r in sorted(builds.values(), key=lambda r: r["chunks"]):
        progress = r.get("progress", []) if r.get("writer") != "Ingestor" else []  # [chunks, batch s] only
        passed = zip([c for c, _ in progress], itertools.accumulate(t for _, t in progress), strict=True)
        marks = [(c, t) for c, t in passed if c in builds and c < r["chunks"]]
        for c, t in marks:
            other = builds[c]
            lines += ["", f"The {fmt(r['chunks'])}-chunk build passed {fmt(c)} chunks after {fmt(t, 0)} s of "
                      f"adds ({fmt(c / t, 0)} chunks/s); the {fmt(c)}-chunk store above took "
                      f"{fmt(other['write_s'], 0)} s ({fmt(other['chunks_per_s'], 0)} chunks/s)"
                      + (" with the earlier writer, under another load." if "chunks_add_s" not in other
                         else ".")]
    return lines


def prepare_section(r: dict) -> list[str]:
    lines = ["## ONNX files", ""]
    for label in ("fp32", "int8"):
        side = r[label].get("sidecar", {})
        lines.append(f"- {label}: {r[label]['mb']} MB, {side.get('kind')}, "
                     f"{'export' if label == 'fp32' else 'quantisation'} took {side.get('seconds')} s")
    return lines + ["", f"Command: `{r['command']}`", ""]


def plot(path: Path, searches: list[dict]) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    # One point per corpus size for the search path (the fp32 ONNX index where there are several).
    preference = {"onnx": 0, "synthetic": 1, "onnx-int8": 2, "torch": 3}
    per_size: dict[int, dict] = {}
    for r in searches:
        held = per_size.get(r.get("chunks"))
        if r.get("chunks") and (held is None or preference.get(r["backend"], 9) < preference.get(held["backend"], 9)):
            per_size[r["chunks"]] = r
    points = sorted(per_size.items(), key=lambda item: item[0])
    if not points:
        return None
    fig, ax = plt.subplots(figsize=(8, 5), dpi=120)
    xs = [c for c, _ in points]
    ax.plot(xs, [r["search_with_vector"]["p50_ms"] for _, r in points], "o-", label="search path p50 (vector given)")
    ax.plot(xs, [r["search_with_vector"]["p95_ms"] for _, r in points], "o--", label="search path p95")
    ax.plot(xs, [r["parts"]["dense_chroma"]["p50_ms"] for _, r in points], "s:", label="Chroma dense queries p50")
    ax.plot(xs, [r["parts"]["lexical_bm25"]["p50_ms"] for _, r in points], "^:", label="BM25 top-100 p50")
    batched = [(c, r["search_with_vectors_marginal_ms"]) for c, r in points if r.get("search_with_vectors_marginal_ms")]
    if batched:
        ax.plot([c for c, _ in batched], [m for _, m in batched], "D-", label="search path, batched, per question")
    for c, r in points:
        name = r["label"].removeprefix("search latency, ").split(" (")[0]
        ax.annotate(name, (c, r["search_with_vector"]["p95_ms"]), textcoords="offset points", xytext=(0, 8),
                    fontsize=7, ha="center")
    full = [(r["chunks"], r) for r in searches if "search" in r]
    for c, r in full:
        ax.scatter([c], [r["search"]["p50_ms"]], marker="*", s=120, zorder=5,
                   label=f"full search p50 incl. embedding, {r['label'].removeprefix('search latency, ')}")
    floors = [r["embed_one"]["p50_ms"] for _, r in full if r["backend"] == "onnx"]
    if floors:
        ax.axhline(floors[0], color="grey", linestyle="-.", label="one-question embedding floor p50 (ONNX fp32)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("chunks in the index")
    ax.set_ylabel("latency per question (ms)")
    ax.set_title("paperchat search latency against corpus size")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def merge_results(bench: Bench, files: list[Path], drop: Sequence[str] = ()) -> None:
    """Put the stage results in ``files`` (JSON lines with label and command) into the bench's results, each
    replacing the earlier result of the same label (a synthetic build: of the same size); ``drop``: label
    prefixes of earlier results to leave out (measurements of code that is gone)."""
    merged = [json.loads(line) for f in files for line in f.read_text().splitlines() if line.strip()]

    def replaced(r: dict) -> bool:
        return any(r.get("label") == m["label"]
                   or (m["stage"] == "synthetic-build" == r.get("stage") and r.get("chunks") == m["chunks"])
                   for m in merged)

    bench.results = [r for r in bench.results
                     if not replaced(r) and not any(r.get("label", "").startswith(d) for d in drop)] + merged


def loadavg() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="paperchat benchmarks: see bench/run.py's docstring")
    parser.add_argument("--sizes", default="76,100000,1000000",
                        help="corpus sizes: 76 = the bundled corpus (real embedder), others = synthetic chunks")
    parser.add_argument("--scifact-index", action="append", default=None, metavar="DIR[:COLLECTION]",
                        help="a data dir with SciFact ingested (repeatable; default: "
                             f"{' and '.join(DEFAULT_SCIFACT)}, each skipped when missing)")
    parser.add_argument("--scifact-collection", default=None)
    parser.add_argument("--work-dir", type=Path, default=PROJECT / ".paperchat" / "bench",
                        help="ONNX exports, bench indexes and synthetic stores (git-ignored)")
    parser.add_argument("--out", type=Path, default=PROJECT / "bench" / "results")
    parser.add_argument("--backends", default=",".join(BACKENDS), help="embedders for the ingest/search stages")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds for same-process ratios")
    parser.add_argument("--reps", type=int, default=3, help="fresh-process runs per start-up command")
    parser.add_argument("--texts", type=int, default=500, help="texts for the embedding speed stage")
    parser.add_argument("--skip", default="", help=f"comma-separated stages to skip: {','.join(ALL_STAGES)}")
    parser.add_argument("--quality-torch", action="store_true", help="also embed SciFact with sentence-transformers")
    parser.add_argument("--max-write-minutes", type=float, default=20.0,
                        help="skip (or shrink) synthetic sizes whose estimated write time exceeds this")
    parser.add_argument("--keep-synthetic", action=argparse.BooleanOptionalAction, default=True,
                        help="keep synthetic stores in --work-dir for the next run")
    parser.add_argument("--report-only", action="store_true", help="rewrite the report from results.json")
    parser.add_argument("--merge", type=Path, action="append", default=[], metavar="FILE",
                        help="JSON lines of stage results (each with its label and command) to put into results.json "
                             "(with --report-only): they replace the earlier results of their stages")
    parser.add_argument("--drop-result", action="append", default=[], metavar="LABEL",
                        help="drop the stage results whose label starts with LABEL (with --report-only)")
    parser.add_argument("--drop-note", action="append", default=[], metavar="TEXT",
                        help="drop the notes that start with TEXT (with --report-only)")
    parser.add_argument("--note", action="append", default=[],
                        help="a note to add to the report (kept in results.json), e.g. what changed during the run")
    args = parser.parse_args(argv)
    args.work_dir = args.work_dir.resolve()
    args.out = args.out.resolve()
    run_command = "python bench/run.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    started = dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    start_load = loadavg()
    t0 = time.monotonic()
    bench = Bench(args)
    bench.meta = {"run_command": run_command, "started": started, "start_load": start_load}
    if args.report_only:
        saved = json.loads((args.out / "results.json").read_text())
        bench.results, bench.notes, bench.meta = saved["results"], saved["notes"], saved.get("meta", bench.meta)
        merge_results(bench, args.merge, args.drop_result)
        bench.notes = [n for n in bench.notes if not any(n.startswith(d) for d in args.drop_note)]
        if args.merge or args.drop_note or args.drop_result:
            bench.save()
    else:
        bench.run()
        bench.meta.update(end_load=loadavg(), took=f"{(time.monotonic() - t0) / 60:.0f} min")
        bench.save()
    for note in args.note:
        if note not in bench.notes:
            bench.notes.append(f"{note} (note added with --note)")
    if args.note:
        bench.save()
    meta = bench.meta
    loads = (meta["start_load"], meta.get("end_load", "n/a"), meta.get("took", "n/a"))
    report = write_report(args, bench, meta["started"], loads, meta["run_command"])
    print(f"[bench] report: {os.path.relpath(report, PROJECT)}")
    return 1 if any("error" in r for r in bench.results) else 0


if __name__ == "__main__":
    sys.exit(main())
