"""The ``paperchat`` command line.

Every command exits 0 on success and non-zero on failure with a one-line message on stderr; user
errors never show a traceback (set PAPERCHAT_DEBUG=1 to see one for a bug report).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from rag.errors import CorpusError, LLMError, PaperchatError, QueryError
from rag.settings import load_settings
from rag.text import clean_input, json_line_safe, terminal_safe

EXIT_REJECTED = 1  # ingest stored what it could but rejected some input
MAX_LISTED = 10  # paper ids named in a report line, at most


def _err(message: str) -> None:
    print(terminal_safe(f"paperchat: {message}"), file=sys.stderr, flush=True)


def _print(*parts: object, **kwargs) -> None:
    """``print`` for text that may hold corpus or model text: control characters are shown, not obeyed."""
    print(*(terminal_safe(str(part)) for part in parts), **kwargs)


def _print_json(line: str, **kwargs) -> None:
    print(json_line_safe(line), **kwargs)


def _components(args):
    from rag.components import components_from_args

    return components_from_args(args)


# --- ingest --------------------------------------------------------------------------------------


def run_ingest(components, paths: Sequence[str], *, rebuild: bool = False, quiet: bool = False) -> int:
    from rag.corpus.load import load_corpus
    from rag.ingest import ingest_lock

    settings = components.settings
    targets = [Path(p) for p in paths] or [settings.corpus_dir]
    started = time.monotonic()
    result = load_corpus(targets, namespace_under=settings.corpus_dir)
    rejected = [p for p in result.problems if not p.kept]
    for problem in result.problems:
        _err(f"{'warning' if problem.kept else 'skipped'} {problem}")
    if not result.papers:
        raise CorpusError(
            f"nothing to ingest: no valid abstracts in {', '.join(map(str, targets))} "
            "(supported: .txt one abstract per paragraph, .jsonl/.json, .csv)"
        )
    # Only a file read without rejections is complete: papers missing from it were really removed.
    rejected_files = {Path(p.path) for p in rejected}
    complete = {result.labels[f] for f in result.files if f not in rejected_files}
    with ingest_lock(settings.data_dir):
        if rebuild:
            components.store.reset()
        report = components.ingestor().ingest(result.papers, complete_sources=complete)
    elapsed = time.monotonic() - started
    if not quiet:
        _print(f"ingested {len(result.papers)} papers from {len(result.files)} files in {elapsed:.1f}s: "
              f"{report.summary()}")
        if report.updated_ids:
            shown = ", ".join(report.updated_ids[:MAX_LISTED])
            more = f" and {len(report.updated_ids) - MAX_LISTED} more" if len(report.updated_ids) > MAX_LISTED else ""
            _print(f"updated (changed in the same file since the last ingest): {shown}{more}")
    if rejected:
        _err(f"{len(rejected)} problem(s) above: those records were not stored; fix them and run again")
        return EXIT_REJECTED
    return 0


def cmd_ingest(args) -> int:
    return run_ingest(_components(args), args.paths, rebuild=args.rebuild)


# --- search --------------------------------------------------------------------------------------


def ensure_index(components) -> None:
    """An empty index is built from the bundled corpus first, and the user is told."""
    papers, _chunks = components.store.counts()
    if papers == 0:
        _err(f"the index is empty: building it from {components.settings.corpus_dir} first")
        run_ingest(components, [], quiet=True)


def _read_batch(path: str) -> list[dict]:
    from rag.evaluation import parse_jsonl, read_jsonl

    rows = parse_jsonl(sys.stdin.read().splitlines(), "stdin") if path == "-" else read_jsonl(Path(path), "batch")
    for number, row in enumerate(rows, start=1):
        # BEIR's queries.jsonl ({"_id", "text"}) works as it is.
        question = next((row[key] for key in _QUESTION_KEYS if isinstance(row.get(key), str)), None)
        if question is None:
            raise QueryError(f"{path}: record {number}: no 'question' string (expected {{\"question\": \"...\"}})")
        row["question"] = clean_input(question)
    return rows


_QUESTION_KEYS = ("question", "query", "text")
_ID_KEYS = ("id", "_id", "qid", "query_id")


def _batch_line(row: dict, payload: dict) -> str:
    """One output line; the record's id (if it has one) comes back with its results."""
    ident = next((row[key] for key in _ID_KEYS if key in row), None)
    return json.dumps({**({"id": ident} if ident is not None else {}), **payload}, ensure_ascii=False)


def _question_arg(words: Sequence[str]) -> str:
    """The question from the command line; ``-`` reads it from stdin (for questions longer than argv allows)."""
    if list(words) == ["-"]:
        return clean_input(sys.stdin.read())
    return clean_input(" ".join(words))  # an invalid byte in an argument arrives as a lone surrogate


def _print_hits(hits) -> None:
    if not hits:
        _print("no matching papers")
    for hit in hits:
        _print(f"{hit.rank}. {hit.title}  [{hit.source} #{hit.ordinal}]  score {hit.score:.3f}")
        excerpt = hit.text if len(hit.text) <= 300 else hit.text[:297] + "..."
        _print(f"   {excerpt}")


def cmd_search(args) -> int:
    components = _components(args)
    ensure_index(components)
    retriever = components.retriever
    if args.batch:
        rows = _read_batch(args.batch)
        results = retriever.search_many([r["question"] for r in rows], args.k)
        for row, hits in zip(rows, results, strict=True):
            _print_json(_batch_line(row, {"query": row["question"], "hits": [h.to_dict() for h in hits]}))
        return 0
    if not args.question:
        raise QueryError("give a question, e.g. paperchat search \"state space models for client selection\"")
    question = _question_arg(args.question)
    hits = retriever.search(question, args.k)
    if args.json:
        _print_json(json.dumps({"query": question, "hits": [h.to_dict() for h in hits]}, ensure_ascii=False))
    else:
        _print_hits(hits)
    return 0


def cmd_prompt(args) -> int:
    """Interactive search prompt (the demo until the chat UI exists)."""
    components = _components(args)
    ensure_index(components)
    retriever = components.retriever
    _print("paperchat search: type a question, empty line or Ctrl-D to quit")
    while True:
        try:
            question = clean_input(input("? ")).strip()
        except EOFError:
            return 0
        if not question:
            return 0
        try:
            _print_hits(retriever.search(question, args.k))
        except QueryError as e:
            _err(str(e))


# --- answers ------------------------------------------------------------------------------------


def _print_sources(answer) -> None:
    cited = {c.paper_id for c in answer.citations}
    if answer.citations:
        _print("\nSources:")
        for c in answer.citations:
            flag = "  (weakly supported)" if c.weak else ""
            _print(f"[{c.marker}] {c.title}  ({c.source} #{c.ordinal})  support {c.support:.2f}{flag}")
            if c.evidence:
                _print(f"    evidence: {c.evidence}")
    others = [h for h in answer.sources if h.paper_id not in cited]
    if others:
        _print("\nNearest papers:" if answer.refused or not answer.citations else "\nAlso consulted (not cited):")
        for h in others:
            _print(f"- {h.title}  ({h.source} #{h.ordinal})")
    flagged = [c for c in answer.claims if not c.supported]
    if flagged:
        _print("\nUnsupported (no source says this; struck through as ~~...~~ above):")
        for c in flagged:
            why = f"names or figures in no source: {', '.join(c.invented)}" if c.invented else "no source supports it"
            _print(f"[unsupported] {c.text}  ({why})")
    recited = [c for c in answer.claims if c.recited]
    notes = []
    if recited:
        notes.append(f"{len(recited)} claim(s) were re-cited to the source that supports them")
    if answer.invalid_markers:
        notes.append(f"{answer.invalid_markers} citation(s) that matched no source were removed")
    if not answer.grounded and not answer.refused:
        notes.append("not grounded: the answer cites no source, check it against the abstracts")
    if answer.interrupted:
        notes.append("the answer was interrupted: the endpoint stopped mid-answer")
    for note in notes:
        _print(f"note: {note}")
    _print(f"answered by: {answer.backend}")


def _stream_answer(pipeline, question: str, history=(), k=None):
    from rag.answers.pipeline import FinalEvent, TextEvent

    final = None
    shown: list[str] = []
    for event in pipeline.stream(question, history, k=k):
        if isinstance(event, TextEvent) and event.content:
            shown.append(event.content)
            sys.stdout.write(terminal_safe(event.content))
            sys.stdout.flush()
        elif isinstance(event, FinalEvent):
            final = event.answer
    _print()
    if final is not None and " ".join(final.answer.split()) != " ".join("".join(shown).split()):
        # The claims were re-cited or flagged after the stream: show the checked text too.
        _print(f"\nChecked answer:\n{final.answer}")
    return final


def _history_entry(answer) -> dict:
    return {"role": "assistant", "content": answer.answer, "papers": [c.paper_id for c in answer.citations]}


def cmd_ask(args) -> int:
    from rag.components import print_notice

    with _components(args) as components:
        ensure_index(components)
        pipeline = components.pipeline
        print_notice(components)
        if args.batch:
            rows = _read_batch(args.batch)
            for row in rows:
                history = row.get("history") or []
                if not isinstance(history, list) or not all(isinstance(m, dict) for m in history):
                    raise QueryError("'history' must be a list of {\"role\": ..., \"content\": ...} objects")
                answer = pipeline.answer(row["question"], history, k=args.k)
                _print_json(_batch_line(row, answer.to_dict()), flush=True)
            return 0
        if not args.question:
            raise QueryError("give a question, e.g. paperchat ask \"what did the MA-RAG authors evaluate on?\"")
        question = _question_arg(args.question)
        if args.json:
            _print_json(json.dumps(pipeline.answer(question, k=args.k).to_dict(), ensure_ascii=False))
            return 0
        answer = _stream_answer(pipeline, question, k=args.k)
        _print_sources(answer)
        return 0


def cmd_chat(args) -> int:
    from rag.components import print_notice

    with _components(args) as components:
        ensure_index(components)
        pipeline = components.pipeline
        print_notice(components)
        _print("paperchat: ask about the papers; follow-ups use the conversation. Empty line or Ctrl-D quits.")
        history: list[dict] = []
        while True:
            try:
                question = clean_input(input("\nyou> ")).strip()
            except EOFError:
                return 0
            if not question:
                return 0
            try:
                answer = _stream_answer(pipeline, question, history, k=args.k)
            except (QueryError, LLMError) as e:
                _err(f"error: {e}")
                continue
            _print_sources(answer)
            history += [{"role": "user", "content": question}, _history_entry(answer)]


# --- MCP ----------------------------------------------------------------------------------------


def cmd_mcp(args) -> int:
    """An MCP server over stdio (for desktop clients and agents): stdout carries the protocol only."""
    from rag.components import print_notice
    from ui.api.mcp_server import run_stdio
    from ui.web.callbacks import Services

    components = _components(args)
    services = Services(components)
    try:
        ensure_index(components)
        services.warm_up()
        print_notice(components)
        run_stdio(services)
    finally:
        services.close()
    return 0


# --- doctor -------------------------------------------------------------------------------------


def cmd_doctor(args) -> int:
    """Check each part in turn and say what to fix; exit 1 when something needs fixing."""
    from rag.llm.client import OpenAIChatModel

    fixes: list[str] = []
    settings = load_settings(**({"llm": "extractive"} if args.extractive else {}))

    def line(name: str, status: str) -> None:
        _print(f"{name:<12} {status}")

    from rag.components import Components

    with Components(settings) as components:
        store = components.store
        try:
            papers, chunks = store.counts()
            manifest = store.manifest() or {}
            if papers:
                line("index", f"{papers} papers, {chunks} chunks, model {manifest.get('embedding_model')}, "
                              f"at {store.location}")
                store.check_manifest(components.retriever.expected_manifest or {})
            else:
                line("index", f"empty at {store.location}")
                fixes.append("build the index: paperchat ingest")
        except PaperchatError as e:
            line("index", f"PROBLEM: {e}")
            fixes.append(str(e))
        try:
            embedder = components.embedder
            line("embedding", f"{embedder.name} ({embedder.dimension} dimensions, {embedder.max_tokens} word pieces)")
        except PaperchatError as e:
            line("embedding", f"PROBLEM: {e}")
            fixes.append(str(e))

        kind = components.backend_kind()
        if kind == "extractive":
            line("answers", "extractive (no LLM): quoted, cited sentences")
            if settings.llm == "auto":
                from rag.components import HOW_TO_GENERATE

                fixes.append(HOW_TO_GENERATE)
        else:
            try:
                model = components.chat_model
                assert isinstance(model, OpenAIChatModel)
                where = "embedded llama.cpp server" if kind == "embedded" else f"endpoint {model.label_url}"
                models = model.list_models()
                line("answers", f"{where}: reachable, models: {', '.join(models[:8]) or 'none listed'}")
                started = time.monotonic()
                text, _reasoning = model.complete([{"role": "user", "content": "Say OK."}], max_tokens=8)
                line("streaming", f"works ({time.monotonic() - started:.1f}s for a short reply: {text.strip()[:40]!r})")
                line("context", f"{settings.llm_context_window} tokens (PAPERCHAT_LLM_CONTEXT_WINDOW)")
                if kind == "embedded":
                    from rag.components import HOW_TO_CONNECT

                    fixes.append(f"the embedded model is tiny; {HOW_TO_CONNECT}")
            except PaperchatError as e:
                line("answers", f"PROBLEM: {e}")
                fixes.append(str(e))
    if fixes:
        _print("\nto fix or improve:")
        for fix in fixes:
            _print(f"- {fix}")
    problems = [f for f in fixes if not f.startswith(("the embedded model is tiny", "answers are extractive"))]
    return 1 if problems else 0


# --- stats and eval ------------------------------------------------------------------------------


def cmd_stats(args) -> int:
    components = _components(args)
    store = components.store
    papers, chunks = store.counts()
    manifest = store.manifest() or {}
    stats = {
        "papers": papers,
        "chunks": chunks,
        "embedding_model": manifest.get("embedding_model") or components.embedder.name,
        "chunk_max_tokens": manifest.get("chunk_max_tokens"),
        "store": store.location,
        "collection": components.settings.collection,
    }
    if args.json:
        _print_json(json.dumps(stats))
    else:
        for key, value in stats.items():
            _print(f"{key}: {value}")
    return 0


def cmd_eval(args) -> int:
    from rag.evaluation import beir_metrics, dev_metrics, load_beir, load_dev

    components = _components(args)
    if args.beir:
        queries, qrels = load_beir(Path(args.beir), args.split)
        retriever = components.retriever
        retriever.refresh()

        # Stored ids are namespaced by their file ("corpus.jsonl#doc1"); the qrels name the documents' own ids.
        from rag.corpus.load import file_label

        corpus_file = Path(args.beir) / "corpus.jsonl"
        prefixes = tuple(
            file_label(corpus_file, components.settings.corpus_dir, folder=folder) + "#"
            for folder in (None, Path(args.beir))  # ingested by itself, or with its folder
        )

        def local_id(paper_id: str) -> str:
            return next((paper_id[len(p) :] for p in prefixes if paper_id.startswith(p)), paper_id)

        def search(texts: list[str]) -> list[list[str]]:
            results = retriever.search_many(texts, 100)
            return [[local_id(h.paper_id) for h in hits] for hits in results]

        metrics = beir_metrics(queries, qrels, search)
    else:
        if not args.file:
            raise QueryError("give an evaluation file (e.g. data/eval/dev.jsonl) or --beir DIR")
        ensure_index(components)
        questions = load_dev(Path(args.file))
        if args.answers:
            from rag.evaluation import answer_metrics

            with components:
                pipeline = components.pipeline
                answers = []
                details = open(args.details, "w", encoding="utf-8") if args.details else None  # noqa: SIM115
                try:
                    for q in questions:
                        answers.append(pipeline.answer(q.question, q.history))
                        if details:
                            details.write(json.dumps({"id": q.id, "type": q.kind, "gold": q.gold, "facts": q.facts,
                                                      **answers[-1].to_dict()}, ensure_ascii=False) + "\n")
                            details.flush()
                finally:
                    if details:
                        details.close()
                metrics = {"backend": pipeline.backend, **answer_metrics(questions, answers)}
        else:
            results = components.retriever.search_many([q.question for q in questions], 10)
            metrics = dev_metrics(questions, results)
    if args.json:
        _print_json(json.dumps(metrics))
    else:
        for key, value in metrics.items():
            _print(f"{key}: {value:.4f}" if isinstance(value, float) else f"{key}: {value}")
    return 0


# --- entry point ---------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="paperchat", description="Ask questions about research papers from their abstracts, with citations."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("ingest", help="index abstracts (default: the bundled ICML 2026 corpus)")
    p.add_argument("paths", nargs="*", help="files or folders: .txt (one abstract per paragraph), .jsonl, .json, .csv")
    p.add_argument("--rebuild", action="store_true", help="drop the index and build it again")
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("search", help="find the papers that match a question")
    p.add_argument("question", nargs="*", help="the question ('-': read it from stdin)")
    p.add_argument("--k", type=int, default=None, help="papers to return (default: PAPERCHAT_TOP_K)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--batch", metavar="FILE", help="JSON Lines file with a 'question' per line ('-': stdin)")
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("ask", help="answer a question from the abstracts, with citations")
    p.add_argument("question", nargs="*", help="the question ('-': read it from stdin)")
    p.add_argument("--k", type=int, default=None, help="papers to consult (default: PAPERCHAT_TOP_K)")
    p.add_argument("--json", action="store_true", help="print the answer as JSON")
    p.add_argument("--batch", metavar="FILE", help="JSON Lines: a 'question' (and optional 'history') per line")
    p.add_argument("--extractive", action="store_true", help="no LLM: answer with cited sentences")
    p.set_defaults(func=cmd_ask)

    p = sub.add_parser("chat", help="a conversation in the terminal, with follow-ups")
    p.add_argument("--k", type=int, default=None)
    p.add_argument("--extractive", action="store_true")
    p.set_defaults(func=cmd_chat)

    p = sub.add_parser("doctor", help="check the index, the model and the LLM endpoint, and say what to fix")
    p.add_argument("--extractive", action="store_true")
    p.set_defaults(func=cmd_doctor)

    from ui.serve import add_serve_arguments, cmd_serve

    p = sub.add_parser("serve", help="open the web UI (http://127.0.0.1:7860), with the OpenAI-compatible API at "
                                     "/v1 and the MCP server at /mcp")
    add_serve_arguments(p)
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("mcp", help="an MCP server over stdio (tools: search_papers, ask, get_paper, list_papers)")
    p.add_argument("--k", type=int, default=None, help="papers to consult (default: PAPERCHAT_TOP_K)")
    p.add_argument("--extractive", action="store_true", help="no LLM: answer with cited sentences")
    p.set_defaults(func=cmd_mcp)

    p = sub.add_parser("prompt", help="an interactive search prompt")
    p.add_argument("--k", type=int, default=None)
    p.set_defaults(func=cmd_prompt)

    p = sub.add_parser("stats", help="what the index holds")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("eval", help="measure retrieval on a question file or a BEIR dataset")
    p.add_argument("file", nargs="?", help="questions with gold papers (format of data/eval/dev.jsonl)")
    p.add_argument("--beir", metavar="DIR", help="BEIR dataset folder (corpus must be ingested)")
    p.add_argument("--split", default="test", help="BEIR qrels split (default: test)")
    p.add_argument("--answers", action="store_true", help="judge answers (fact recall, citations, abstention)")
    p.add_argument("--extractive", action="store_true", help="with --answers: extractive answers")
    p.add_argument("--details", metavar="FILE", help="with --answers: write every answer as a JSON line to FILE")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_eval)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "k", None) is not None and args.k < 1:
        parser.error("--k must be at least 1")
    try:
        return int(args.func(args) or 0)
    except PaperchatError as e:
        _err(f"error: {e}")
        return e.exit_code
    except KeyboardInterrupt:
        _err("interrupted")
        return 130
    except BrokenPipeError:
        # `paperchat search ... | head`: the reader left; not an error worth a message.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as e:
        if os.environ.get("PAPERCHAT_DEBUG"):
            raise
        _err(f"internal error: {type(e).__name__}: {e} (this is a bug; rerun with PAPERCHAT_DEBUG=1 for details)")
        return 70


if __name__ == "__main__":
    sys.exit(main())
