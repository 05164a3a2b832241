"""``paperchat topics`` and ``paperchat related``: the corpus as a whole (rag/topics)."""

from __future__ import annotations

import json
import re

from rag.corpus.titles import name_regex
from rag.errors import QueryError
from rag.labels import place_label
from rag.text import clean_input, counted
from rag.topics.related import HOW_TO_FIND_IDS, related_papers
from rag.types import Paper
from ui.cli.output import show, show_json
from ui.shared.commands import components_from_args

DEFAULT_RELATED = 5
CENTRAL_PAPERS = 3  # the papers named as a topic's most central


def _paper_entry(paper: Paper, collection: str) -> dict:
    return {"paper_id": paper.paper_id, "title": paper.title,
            "label": place_label(paper.source, paper.ordinal, venue=paper.venue, collection=collection)}


def topics_payload(components) -> dict:
    """Every topic with its label, size, most central papers and papers (the most central first)."""
    components.ensure_index()
    topic_map = components.topics()
    by_id = {p.paper_id: p for p in components.papers()}
    collection = components.settings.collection
    topics = []
    for topic in topic_map.topics:
        papers = [_paper_entry(by_id[pid], collection) for pid in topic.paper_ids if pid in by_id]
        topics.append({"number": topic.number, "label": topic.label, "terms": list(topic.terms), "size": topic.size,
                       "central": list(topic.paper_ids[:CENTRAL_PAPERS]), "papers": papers})
    return {"papers": len(topic_map.paper_topic), "topics": topics}


def cmd_topics(args) -> int:
    payload = topics_payload(components_from_args(args))
    if args.json:
        show_json(json.dumps(payload, ensure_ascii=False))
        return 0
    if not payload["topics"]:
        show("no topics: the index holds no papers")
    for topic in payload["topics"]:
        show(f"Topic {topic['number']}: {topic['label']}  ({counted(topic['size'], 'paper')})")
        for rank, paper in enumerate(topic["papers"]):
            mark = "*" if rank < CENTRAL_PAPERS else "-"
            show(f"  {mark} {paper['title']}  [{paper['label']}]  {paper['paper_id']}")
    if payload["topics"]:
        show(f"{counted(payload['papers'], 'paper')} in {counted(len(payload['topics']), 'topic')}; * = most central")
    return 0


def paper_by_name(given: str, papers: list[Paper]) -> str:
    """The id of the paper ``given`` names: its id, or else its title or short name ("FedSSM", "fed ssm") when
    exactly one paper has it; ``given`` unchanged otherwise (``related_papers`` then says the id is unknown)."""
    if any(p.paper_id == given for p in papers):
        return given
    wanted = " ".join(given.lower().split())
    named = [p for p in papers if " ".join(p.title.lower().split()) == wanted]
    if not named:
        named = [p for p in papers if 0 < len(p.title.split()) <= 2
                 and re.fullmatch(name_regex(p.title.strip()), given.strip(), re.IGNORECASE)]
    if len(named) > 1:
        ids = ", ".join(p.paper_id for p in named[:5])
        raise QueryError(f"{len(named)} papers are called {given!r} ({ids}): give one of their ids")
    return named[0].paper_id if named else given


def cmd_related(args) -> int:
    paper_id = clean_input(args.paper_id or "").strip()
    if not paper_id:
        raise QueryError(f"give a paper id, e.g. paperchat related '000_dcbf1b5d2daaeff5.txt#1'; {HOW_TO_FIND_IDS}")
    components = components_from_args(args)
    components.ensure_index()
    topic_map = components.topics()
    papers = components.papers()
    components.retriever.refresh()  # its vector table, in step with the store
    paper_id = paper_by_name(paper_id, papers)
    related = related_papers(paper_id, papers, components.retriever.vectors, topic_map, args.k or DEFAULT_RELATED)
    paper = next(p for p in papers if p.paper_id == paper_id)
    if args.json:
        show_json(json.dumps({"paper": _paper_entry(paper, components.settings.collection),
                              "related": [r.to_dict() for r in related]}, ensure_ascii=False))
        return 0
    show(f"Papers related to {paper.title}:")
    if not related:
        show("no other papers in the index")
    for rank, item in enumerate(related, start=1):
        label = place_label(item.paper.source, item.paper.ordinal, venue=item.paper.venue,
                            collection=components.settings.collection)
        show(f"{rank}. {item.paper.title}  [{label}]  {item.paper.paper_id}")
        show(f"   {item.shares}")
    return 0
