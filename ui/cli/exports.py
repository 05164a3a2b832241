"""``paperchat export``: a paper list (a topic, a search, the whole corpus) as CSV or BibTeX, filtered on
metadata; and the filtered search that ``paperchat search --where`` shares with it."""

from __future__ import annotations

import sys
from pathlib import Path

from rag.errors import QueryError
from rag.exports.filters import keep, parse_filters
from rag.exports.papers import papers_bibtex, papers_csv
from rag.text import clean_input, counted, say
from ui.cli.filtering import check_sources, filtered_search
from ui.shared.commands import components_from_args


def _chosen_papers(args, components) -> list:
    papers = components.papers()
    if args.topic is not None:
        topic_map = components.topics()
        topic = topic_map.topic(args.topic)
        if topic is None:
            raise QueryError(f"no topic {args.topic}: the index has topics 1 to {len(topic_map.topics)}; "
                             "`paperchat topics` lists them")
        by_id = {p.paper_id: p for p in papers}
        return [by_id[pid] for pid in topic.paper_ids if pid in by_id]
    if args.query:
        by_id = {p.paper_id: p for p in papers}
        k = args.k or components.settings.top_k
        hits = filtered_search(components, clean_input(args.query), k, args.filters)
        return [by_id[h.paper_id] for h in hits if h.paper_id in by_id]
    return list(papers)


def cmd_export(args) -> int:
    args.filters = parse_filters(args.where, args.source)  # a bad filter is said before anything is built
    if args.query is not None and not clean_input(args.query).strip():
        raise QueryError("--query needs a question, e.g. paperchat export --query \"federated learning\"")
    components = components_from_args(args)
    components.ensure_index()
    check_sources(components.papers(), args.filters)
    papers = keep(_chosen_papers(args, components), args.filters)
    collection = components.settings.collection
    text = papers_bibtex(papers, collection=collection) if args.format == "bibtex" else \
        papers_csv(papers, collection=collection)
    if args.output:
        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as e:
            raise QueryError(f"cannot write {args.output}: {e.strerror or e}; choose another -o path") from e
        say(f"wrote {counted(len(papers), 'paper')} to {args.output} ({args.format})")
    else:
        sys.stdout.write(text)  # its control characters are written out already (rag/exports/papers.py)
    if not papers:
        say("no paper matches: the export holds none")
    return 0
