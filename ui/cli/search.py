"""``paperchat search`` and ``paperchat prompt``: the papers that match a question, and reading questions
from the command line, stdin or a JSON Lines batch."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from rag.errors import QueryError
from rag.exports.filters import parse_filters
from rag.labels import metadata_line
from rag.plain_text import readable
from rag.text import clean_input, say
from ui.cli.filtering import check_filters, filtered_search
from ui.cli.output import read_line, show, show_json
from ui.shared.commands import components_from_args

_QUESTION_KEYS = ("question", "query", "text")  # BEIR's queries.jsonl ({"_id", "text"}) works as it is
_ID_KEYS = ("id", "_id", "qid", "query_id")


def read_batch(path: str) -> list[dict]:
    """The records of a JSON Lines batch (``-``: stdin), each with a clean ``question``."""
    from rag.evaluation import parse_jsonl, read_jsonl

    rows = parse_jsonl(sys.stdin.read().splitlines(), "stdin") if path == "-" else read_jsonl(Path(path), "batch")
    if not rows:
        raise QueryError(f"{path} holds no questions: write one JSON object per line, e.g. {{\"question\": \"...\"}}")
    for number, row in enumerate(rows, start=1):
        question = next((row[key] for key in _QUESTION_KEYS if isinstance(row.get(key), str)), None)
        if question is None:
            raise QueryError(f"{path}: record {number}: no 'question' string (expected {{\"question\": \"...\"}})")
        row["question"] = clean_input(question)
    return rows


def batch_line(row: dict, payload: dict) -> str:
    """One output line; the record's id (if it has one) comes back with its results."""
    ident = next((row[key] for key in _ID_KEYS if key in row), None)
    return json.dumps({**({"id": ident} if ident is not None else {}), **payload}, ensure_ascii=False)


def check_one_source(args) -> None:
    """A question and --batch are two sources of questions: the batch alone would be answered, the question
    silently dropped."""
    if args.batch and args.question:
        raise QueryError(f"give a question or --batch FILE, not both: put {' '.join(args.question)!r} in "
                         f"{args.batch} as {{\"question\": \"...\"}}, or drop --batch")


def question_arg(words: Sequence[str]) -> str:
    """The question from the command line; ``-`` reads it from stdin (for questions longer than argv allows)."""
    if list(words) == ["-"]:
        return clean_input(sys.stdin.read())
    return clean_input(" ".join(words))  # an invalid byte in an argument arrives as a lone surrogate


def hit_details(hit) -> list[str]:
    """The lines under a paper's title: authors · venue · year, and its link, when its record gave them."""
    lines = []
    if details := metadata_line(hit.authors, hit.year, hit.venue, source=hit.source):
        lines.append(details)
    if hit.url:
        lines.append(hit.url)
    return lines


def _show_hits(hits) -> None:
    if not hits:
        show("no matching papers")
    for hit in hits:
        show(f"{hit.rank}. {hit.title}  [{hit.label}]  score {hit.score:.3f}")
        for line in hit_details(hit):
            show(f"   {line}")
        text = readable(hit.text)
        excerpt = text if len(text) <= 300 else text[:297] + "..."
        show(f"   {excerpt}")


def cmd_search(args) -> int:
    check_one_source(args)
    filters = parse_filters(args.where, args.source)  # a bad filter is said before anything is built
    components = components_from_args(args)
    components.ensure_index()
    if filters:  # filters no paper passes are named, as `ask` names them, not shown as "no matching papers"
        check_filters(components.papers(), filters)
    retriever = components.retriever
    if args.batch:
        rows = read_batch(args.batch)
        if filters:
            k = args.k or components.settings.top_k
            results = [filtered_search(components, r["question"], k, filters) for r in rows]
        else:
            results = retriever.search_many([r["question"] for r in rows], args.k)
        for row, hits in zip(rows, results, strict=True):
            show_json(batch_line(row, {"query": row["question"], "hits": [h.to_dict() for h in hits]}))
        return 0
    if not args.question:
        raise QueryError("give a question, e.g. paperchat search \"state space models for client selection\"")
    question = question_arg(args.question)
    hits = filtered_search(components, question, args.k or components.settings.top_k, filters)
    if args.json:
        show_json(json.dumps({"query": question, "hits": [h.to_dict() for h in hits]}, ensure_ascii=False))
    else:
        _show_hits(hits)
    return 0


def cmd_prompt(args) -> int:
    """An interactive search prompt: the papers for each question typed, without answers."""
    components = components_from_args(args)
    components.ensure_index()
    retriever = components.retriever
    show("paperchat search: type a question; quit, an empty line or Ctrl-D to end")
    while (question := read_line("? ")) is not None:
        try:
            _show_hits(retriever.search(question, args.k))
        except QueryError as e:
            say(str(e))
    return 0
