"""The ``paperchat`` entry point: the argument parser (every command and option) and ``main``.

Every command exits 0 on success and non-zero on failure with a one-line message on stderr; user
errors never show a traceback (set PAPERCHAT_DEBUG=1 to see one for a bug report). The README's command
reference is generated from this parser (``python -m ui.cli.reference``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence

from ui.shared.commands import run_command  # light: what it runs is imported when build_parser runs

DESCRIPTION = "Ask questions about research papers from their abstracts, with citations."


def add_filter_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--where", action="append", metavar="FILTER",
                        help="keep papers whose FIELD OP VALUE holds, e.g. year>=2024 or author~Bengio (fields: "
                             "year, venue, author, source, title; ops: = != < <= > >= ~ for contains); repeatable")
    parser.add_argument("--source", metavar="FILE", help="keep papers from this corpus file")


def paper_count(text: str) -> int:
    """``--k``: a whole number within what PAPERCHAT_TOP_K allows, said as an error about the option itself."""
    from rag.settings import top_k_bounds

    low, high = top_k_bounds()
    try:
        k = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of papers, {low} to {high}, not {text!r}") from None
    if not low <= k <= high:
        raise argparse.ArgumentTypeError(f"{k} papers is out of range: choose {low} to {high}")
    return k


def build_parser() -> argparse.ArgumentParser:
    # The commands' modules load numpy, pydantic and the store: imported here, which run_command calls inside
    # its handler, so that Ctrl-C while they load is "interrupted" like Ctrl-C later (not a traceback).
    from ui.cli.answers import cmd_ask, cmd_chat, cmd_mcp
    from ui.cli.corpus import cmd_related, cmd_topics
    from ui.cli.doctor import cmd_doctor
    from ui.cli.evaluate import cmd_eval
    from ui.cli.exports import cmd_export
    from ui.cli.index import cmd_ingest, cmd_stats
    from ui.cli.search import cmd_prompt, cmd_search
    from ui.serve import add_serve_arguments

    parser = argparse.ArgumentParser(prog="paperchat", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"paperchat {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("ingest", help="index abstracts (default: the bundled ICML 2026 corpus)")
    p.add_argument("paths", nargs="*", help="files or folders: .txt (one abstract per paragraph), .jsonl, .json, .csv")
    p.add_argument("--rebuild", action="store_true",
                   help="drop the index and build it again from the paths, or with none from every file it holds "
                        "papers of (refused, naming them, if papers would be lost)")
    p.add_argument("--force", action="store_true",
                   help="with --rebuild: rebuild even if papers are dropped (their files are gone or not given)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON summary (papers, chunks, seconds, papers/s) and no progress bar")
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("search", help="find the papers that match a question")
    p.add_argument("question", nargs="*", help="the question ('-': read it from stdin)")
    p.add_argument("--k", type=paper_count, default=None, help="papers to return (default: PAPERCHAT_TOP_K)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--batch", metavar="FILE", help="JSON Lines file with a 'question' per line ('-': stdin)")
    add_filter_arguments(p)
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("ask", help="answer a question from the abstracts, with citations")
    p.add_argument("question", nargs="*", help="the question ('-': read it from stdin)")
    p.add_argument("--k", type=paper_count, default=None, help="papers to consult (default: PAPERCHAT_TOP_K)")
    answer_format = p.add_mutually_exclusive_group()
    answer_format.add_argument("--json", action="store_true", help="print the answer as JSON")
    answer_format.add_argument("--markdown", action="store_true",
                               help="print the answer and its references as Markdown ([n] link to the references)")
    p.add_argument("--batch", metavar="FILE", help="JSON Lines: a 'question' (and optional 'history') per line")
    p.add_argument("--extractive", action="store_true", help="no LLM: answer with cited sentences")
    add_filter_arguments(p)
    p.set_defaults(func=cmd_ask)

    p = sub.add_parser("chat", help="a conversation in the terminal, with follow-ups")
    p.add_argument("--k", type=paper_count, default=None, help="papers to consult (default: PAPERCHAT_TOP_K)")
    p.add_argument("--extractive", action="store_true", help="no LLM: answer with cited sentences")
    p.set_defaults(func=cmd_chat)

    p = sub.add_parser("doctor", help="check the index, the model and the LLM endpoint, and say what to fix")
    p.add_argument("--extractive", action="store_true", help="check as if answers were extractive (no LLM)")
    p.set_defaults(func=cmd_doctor)

    add_serve_arguments(sub.add_parser("serve", help="open the web UI (http://127.0.0.1:7860), with the "
                                                     "OpenAI-compatible API at /v1 and the MCP server at /mcp"))

    p = sub.add_parser("mcp", help="an MCP server over stdio (tools: search_papers, ask, get_paper, list_papers)")
    p.add_argument("--k", type=paper_count, default=None, help="papers to consult (default: PAPERCHAT_TOP_K)")
    p.add_argument("--extractive", action="store_true", help="no LLM: answer with cited sentences")
    p.set_defaults(func=cmd_mcp)

    p = sub.add_parser("prompt", help="an interactive search prompt")
    p.add_argument("--k", type=paper_count, default=None, help="papers to show (default: PAPERCHAT_TOP_K)")
    p.set_defaults(func=cmd_prompt)

    p = sub.add_parser("stats", help="what the index holds")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("topics", help="the corpus's topics: papers grouped by meaning, each with its distinctive words")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_topics)

    p = sub.add_parser("related", help="the papers nearest to a paper, with what they share")
    p.add_argument("paper_id", help="a paper's id (as `search --json` prints it) or its title or short name (FedSSM)")
    p.add_argument("--k", type=paper_count, default=None, help="papers to list (default: 5)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_related)

    p = sub.add_parser("export", help="a paper list (a topic, a search or all papers) as CSV or BibTeX")
    what = p.add_mutually_exclusive_group()
    what.add_argument("all", nargs="?", choices=["all"], help="every paper (the default)")
    what.add_argument("--topic", type=int, metavar="N", help="the papers of topic N (`paperchat topics` lists them)")
    what.add_argument("--query", metavar="Q", help="the papers a search for Q finds")
    p.add_argument("--k", type=paper_count, default=None,
                   help="with --query: papers to keep (default: PAPERCHAT_TOP_K)")
    p.add_argument("--format", choices=["csv", "bibtex"], default="csv", help="csv (default) or bibtex")
    add_filter_arguments(p)
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE (default: print)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("eval", help="measure retrieval on a question file or a BEIR dataset")
    p.add_argument("file", nargs="?", help="questions with gold papers (format of data/eval/dev.jsonl)")
    p.add_argument("--beir", metavar="DIR", help="BEIR dataset folder (corpus must be ingested)")
    p.add_argument("--split", default="test", help="BEIR qrels split (default: test)")
    p.add_argument("--answers", action="store_true", help="judge answers (fact recall, citations, abstention)")
    p.add_argument("--extractive", action="store_true", help="with --answers: extractive answers")
    p.add_argument("--details", metavar="FILE", help="with --answers: write every answer as a JSON line to FILE")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_eval)
    return parser


def main(argv: Sequence[str] | None = None, *, parts: Mapping[str, object] | None = None) -> int:
    """``paperchat ARGS``; ``parts`` are given to the components instead of built (tests: a fake embedder)."""
    return run_command(build_parser, argv, parts=parts)


if __name__ == "__main__":
    sys.exit(main())


def _version() -> str:
    """The installed package's version ("unknown" when run from a tree that was never installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("paperchat")
    except PackageNotFoundError:
        return "unknown"
