"""paperchat benchmarks (``make bench``): start-up, embedding speed and quality, ingest, search latency.

    python bench/run.py [--sizes 76,100000,1000000] [--scifact-index DIR] [--skip quality,...]

Runs each stage of ``bench/stages.py`` in its own process (so each stage's peak memory is its own), then
writes ``bench/results/report.md`` and ``bench/results/search_latency.png``. Every figure in the report is
printed with the command that produced it; ``bench/results/results.json`` holds the raw numbers. Nothing
here runs in the tests. The machine may be shared: compare the ratios (measured in one process, interleaved),
not absolute times across runs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
STAGES = PROJECT / "bench" / "stages.py"
ALL_STAGES = ("prepare", "startup", "embed", "quality", "ingest", "search", "scifact", "synthetic")
BACKENDS = ("onnx", "onnx-int8", "torch")


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
        if "startup" not in skip and "onnx" in bundled:
            self.stage("startup", *cache, "--data-dir", bundled["onnx"], "--reps", str(args.reps),
                       label="start-up: fresh processes")
        if "embed" not in skip:
            self.stage("embed-speed", *cache, "--texts", str(args.texts), "--rounds", str(args.rounds),
                       "--backends", "torch,onnx,onnx-int8", label="embedding speed (same process)")
        if "quality" not in skip:
            backends = "onnx,onnx-int8" + (",torch" if args.quality_torch else "")
            self.stage("quality", *cache, "--backends", backends, "--vector-cache",
                       str(args.work_dir / "vectors"), label="SciFact nDCG@10, dense only")
        for size in [s.strip() for s in args.sizes.split(",") if s.strip()]:
            if size in ("76", "bundled"):
                if "search" in skip:
                    continue
                for backend, data_dir in bundled.items():
                    self.stage("search", *cache, "--backend", backend, "--data-dir", data_dir,
                               label=f"search latency, bundled corpus ({backend})")
                continue
            if "synthetic" in skip:
                continue
            self.synthetic(int(float(size)))
        if "scifact" not in skip:
            self.scifact()

    def synthetic(self, chunks: int) -> None:
        args = self.args
        built = [r for r in self.results if r.get("stage") == "synthetic-build"]  # reused ones carry their times
        data_dir = args.work_dir / f"synthetic-{chunks}"
        if built and not (data_dir / "done.json").is_file():
            rate = max(r["chunks"] / (r["write_s"] + r["bm25_build_s"]) for r in built)
            estimate_min = chunks / rate / 60
            if estimate_min > args.max_write_minutes:
                feasible = int(rate * args.max_write_minutes * 60 // 50000 * 50000)
                note = (f"{chunks:,} synthetic chunks skipped: writing them would take about {estimate_min:.0f} min at "
                        f"the {rate:.0f} chunks/s measured for {built[-1]['chunks']:,} (limit --max-write-minutes "
                        f"{args.max_write_minutes:g})")
                largest = max(r["chunks"] for r in built)
                if feasible > largest:
                    note += f"; measured {feasible:,} instead, the largest size that fits"
                    chunks = feasible
                    data_dir = args.work_dir / f"synthetic-{chunks}"
                    self.notes.append(note)
                else:
                    self.notes.append(note)
                    print(f"[bench] {note}", flush=True)
                    return
                print(f"[bench] {note}", flush=True)
        r = self.stage("synthetic-build", "--chunks", str(chunks), "--data-dir", str(data_dir),
                       label=f"synthetic store, {chunks:,} chunks: write + BM25")
        if r:
            self.stage("search", "--backend", "synthetic", "--data-dir", str(data_dir),
                       label=f"search latency, synthetic {chunks:,} chunks")
        if r and not args.keep_synthetic:
            import shutil

            shutil.rmtree(data_dir, ignore_errors=True)

    def scifact(self) -> None:
        index = self.args.scifact_index
        if index is None:
            self.notes.append(
                "SciFact search latency skipped: no --scifact-index DIR (a paperchat data dir holding chroma/ with "
                "SciFact ingested, e.g. `PAPERCHAT_DATA_DIR=DIR PAPERCHAT_COLLECTION=scifact paperchat ingest "
                "../shared/eval/scifact/corpus.jsonl`, about 15-35 min here)"
            )
            return
        index = Path(index)
        data_dir = index.parent if (index / "chroma.sqlite3").is_file() else index
        collection = self.args.scifact_collection or detect_collection(data_dir / "chroma")
        if collection is None:
            self.notes.append(f"SciFact search latency skipped: no paperchat collection found in {data_dir / 'chroma'}")
            return
        backend = "onnx-int8" if collection_model(data_dir / "chroma", collection).endswith("-int8") else "onnx"
        self.stage("search", *self.cache(), "--backend", backend, "--data-dir", str(data_dir), "--collection",
                   collection, label=f"search latency, SciFact index ({backend})")


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

    # 1. start-up
    for r in by_stage(results, "startup"):
        base = r["commands"].get("import_sentence_transformers", {}).get("median_s")
        lines += ["## 1. Start-up: one question in a fresh process", "",
                  f"Goal: a search finishes in at most 0.6x the time of `import sentence_transformers` "
                  f"({fmt(base)} s here). Median of {args.reps} runs per command after one warm-up run, "
                  "commands interleaved.", "",
                  "| what | median wall time | ratio to the import | heavy modules imported | runs (s) |",
                  "| --- | --- | --- | --- | --- |"]
        labels = {
            "import_sentence_transformers": "`import sentence_transformers` alone",
            "onnx_query_script": "ONNX query script: import, open Chroma, embed, query",
            "cli_search_onnx": "`paperchat search --json` with the ONNX embedder (proposed wiring)",
            "cli_search_as_is": "`paperchat search --json` as wired today",
        }
        for name, entry in r["commands"].items():
            heavy = entry.get("notes", {}).get("heavy_modules")
            heavy_text = "n/a" if heavy is None else (", ".join(heavy) or "none")
            lines.append(f"| {labels.get(name, name)} | {fmt(entry['median_s'])} s | "
                         f"{fmt(entry.get('ratio_to_import'), 3)} | {heavy_text} | "
                         f"{', '.join(str(s) for s in entry['seconds'])} |")
        lines += ["", "Commands (each timed as a whole process):", ""]
        lines += [f"- {labels.get(n, n)}: `{e['command']}`" for n, e in r["commands"].items()]
        for name, error in r.get("errors", {}).items():
            lines.append(f"- {name} FAILED: `{error[-300:]}`")
        lines += ["", f"Stage: `{r['command']}`", ""]

    # 2. embedding speed
    for r in by_stage(results, "embed-speed"):
        lines += ["## 2. Embedding speed, same process", "",
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
        lines += ["", f"Command: `{r['command']}` (peak RSS {fmt(r['maxrss_mb'], 0)} MB)", ""]

    # 3. quality
    for r in by_stage(results, "quality"):
        lines += ["## 3. Retrieval quality: SciFact test, dense only", "",
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
        lines += ["", f"Command: `{r['command']}` (peak RSS {fmt(r['maxrss_mb'], 0)} MB)", ""]

    # 4. ingest
    ingests = by_stage(results, "ingest")
    if ingests:
        lines += ["## 4. Ingest throughput: `Ingestor` into a fresh Chroma store vs raw `embed`", "",
                  "Bundled corpus; both sides in one process, interleaved, model load excluded; the ratio is "
                  "ingest chunks/s over raw-embed chunks/s (1.0 = chunking and Chroma writes cost nothing).", "",
                  "| backend | papers | chunks (max pieces) | raw embed chunks/s | ingest chunks/s | ratio | "
                  "peak RSS | command |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in ingests:
            lines.append(f"| {r['backend']} | {r['papers']} | {r['chunks']} ({r.get('chunk_max_tokens', '?')}) | "
                         f"{fmt(r['raw_chunks_per_s'], 1)} | "
                         f"{fmt(r['ingest_chunks_per_s'], 1)} | {fmt(r['ingest_over_raw_rate'], 3)} | "
                         f"{fmt(r['maxrss_mb'], 0)} MB | `{r['command']}` |")
        lines.append("")

    # 5. search
    searches = by_stage(results, "search")
    builds = {r["chunks"]: r for r in by_stage(results, "synthetic-build")}
    if searches:
        lines += ["## 5. Search latency", "",
                  "`HybridRetriever.search` per question (embedding included) against the one-question embedding "
                  "floor `embedder.embed([q])`, interleaved question by question; \"batch\" is one run of "
                  "`search_many` (and `embed`) on 201 questions minus 1 question, over 200. "
                  "`search_with_vector` is the search path alone (question vector given): the only figure for "
                  "synthetic stores, whose vectors are random unit vectors (dimension 384) and texts random "
                  "words with SciFact's word frequencies. k=5, 100 candidates from each side.", "",
                  "| corpus | chunks | open + refresh | search p50 / p95 | embed floor p50 / p95 | ratio p50 | "
                  "batch: search / embed per question | ratio | search_with_vector p50 / p95 | dense / BM25 p50 | "
                  "peak RSS |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in searches:
            name = r["label"].removeprefix("search latency, ")
            if "search" in r:
                full = f"{fmt(r['search']['p50_ms'], 1)} / {fmt(r['search']['p95_ms'], 1)} ms"
                floor = f"{fmt(r['embed_one']['p50_ms'], 1)} / {fmt(r['embed_one']['p95_ms'], 1)} ms"
                ratio = fmt(r["search_over_embed_p50"], 2)
                batch = (f"{fmt(r['batch']['search_many_marginal_ms'], 1)} / "
                         f"{fmt(r['batch']['embed_marginal_ms'], 1)} ms")
                bratio = fmt(r["batch"]["ratio"], 2)
            else:
                full = floor = ratio = batch = bratio = "n/a"
            swv = r["search_with_vector"]
            parts = r["parts"]
            lines.append(
                f"| {name} | {fmt(r['chunks'])} | {fmt(r['open_and_refresh_s'], 2)} s | {full} | {floor} | {ratio} | "
                f"{batch} | {bratio} | {fmt(swv['p50_ms'], 1)} / {fmt(swv['p95_ms'], 1)} ms | "
                f"{fmt(parts['dense_chroma']['p50_ms'], 1)} / {fmt(parts['lexical_bm25']['p50_ms'], 1)} ms | "
                f"{fmt(r['maxrss_mb'], 0)} MB |")
        lines += ["", "Open + refresh is what a fresh process pays before its first question (cold), by part:", "",
                  "| corpus | open the store | read every paper (title table) | load BM25 | refresh again (warm) |",
                  "| --- | --- | --- | --- | --- |"]
        for r in searches:
            cold = r.get("cold_start_s", {})
            lines.append(f"| {r['label'].removeprefix('search latency, ')} | {fmt(cold.get('open_store'))} s | "
                         f"{fmt(cold.get('read_papers_for_titles'))} s | {fmt(cold.get('load_bm25'))} s | "
                         f"{fmt(r.get('refresh_again_s'))} s"
                         f"{'' if r.get('bm25_loaded', True) else ' (no current BM25 on disk: this built it)'} |")
        lines += ["", "Commands:", ""]
        lines += [f"- {r['label']}: `{r['command']}`" for r in searches]
        if builds:
            lines += ["", "Synthetic stores (written straight to the Chroma collections in batches, then the first "
                          "`refresh` reads every chunk back and builds BM25):", "",
                      "| chunks | papers | write | chunks/s | BM25 build | on disk | peak RSS | command |",
                      "| --- | --- | --- | --- | --- | --- | --- | --- |"]
            for r in builds.values():
                reused = " (reused)" if r.get("reused") else ""
                lines.append(f"| {fmt(r['chunks'])} | {fmt(r['papers'])} | {fmt(r['write_s'], 0)} s{reused} | "
                             f"{fmt(r['chunks_per_s'], 0)} | {fmt(r['bm25_build_s'], 0)} s | "
                             f"{fmt(r['disk_mb'], 0)} MB | "
                             f"{fmt(r['maxrss_mb'], 0)} MB | `{r['command']}` |")
        png = plot(args.out / "search_latency.png", searches)
        if png:
            lines += ["", f"![search latency against corpus size]({png.name})", ""]

    # prepare
    for r in by_stage(results, "prepare"):
        lines += ["## ONNX files", ""]
        for label in ("fp32", "int8"):
            side = r[label].get("sidecar", {})
            lines.append(f"- {label}: {r[label]['mb']} MB, {side.get('kind')}, "
                         f"{'export' if label == 'fp32' else 'quantisation'} took {side.get('seconds')} s")
        lines += ["", f"Command: `{r['command']}`", ""]

    if bench.notes or failures:
        lines += ["## Notes", ""]
        lines += [f"- {note}" for note in bench.notes]
        lines += [f"- FAILED {r['label']}: `{r['command']}`: {r['error'][-400:]}" for r in failures]
        lines.append("")
    report = args.out / "report.md"
    report.write_text("\n".join(lines))
    return report


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
    full = [(r["chunks"], r) for r in searches if "search" in r]
    for c, r in full:
        ax.scatter([c], [r["search"]["p50_ms"]], marker="*", s=120, zorder=5,
                   label=f"full search p50 incl. embedding ({r['backend']})")
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


def loadavg() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="paperchat benchmarks: see bench/run.py's docstring")
    parser.add_argument("--sizes", default="76,100000",
                        help="corpus sizes: 76 = the bundled corpus (real embedder), others = synthetic chunks")
    parser.add_argument("--scifact-index", type=Path, default=None, help="a data dir with SciFact ingested")
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
    else:
        bench.run()
        bench.meta.update(end_load=loadavg(), took=f"{(time.monotonic() - t0) / 60:.0f} min")
        bench.save()
    meta = bench.meta
    loads = (meta["start_load"], meta.get("end_load", "n/a"), meta.get("took", "n/a"))
    report = write_report(args, bench, meta["started"], loads, meta["run_command"])
    print(f"[bench] report: {os.path.relpath(report, PROJECT)}")
    return 1 if any("error" in r for r in bench.results) else 0


if __name__ == "__main__":
    sys.exit(main())
