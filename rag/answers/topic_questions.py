"""Questions about the collection as a whole: "what are the main topics?", "what is this collection about?",
answered from the papers' topics (rag/topics: clusters of their vectors, each named by the words that set its
abstracts apart), with each topic's size and its most central papers cited; and "which papers are similar to
X?", answered from the papers nearest to X (rag/topics/related.py), as the Papers tab and `paperchat related` do.

A search finds papers close to a question, which is no way to see the whole: these answers are built from every
paper, are the same whatever the answer writer, and say what the labels are (distinctive words, not titles
someone gave the topics).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from rag.answers.extractive import names_paper, without_title
from rag.answers.metadata import cited_answer, listing
from rag.corpus.chunking import first_sentence
from rag.text import counted
from rag.topics.model import TopicMap
from rag.topics.related import related_papers
from rag.types import Answer, Hit, Paper

CENTRAL_SHOWN = 2  # papers named (and cited) per topic
RELATED_SHOWN = 5  # papers listed for "which papers are similar to X?"
_SIZE_PATTERN = (
    r"^how\s+many\s+(?:papers|abstracts|articles|works|documents)\s+(?:are\s+there|do\s+you\s+have|"
    r"(?:are\s+there\s+|do\s+you\s+have\s+|are\s+)?(?:in\s+(?:the|this|your)\s+(?:index|collection|corpus|conference|"
    r"dataset|set|database)|in\s+total|altogether)|(?:does|do)\s+(?:the|this|your)\s+(?:index|collection|corpus|"
    r"conference|dataset|database)\s+(?:have|hold|contain))(?:\s+(?:in\s+total|altogether))?\s*[?.!]*$")
# The size of the whole collection ("how many papers are there?"): the number, then what its topics are.
_SIZE = re.compile(_SIZE_PATTERN, re.IGNORECASE)
_TOPICS = re.compile(
    r"^(?:so,?\s+)?(?:what|which)\s+(?:are\s+|were\s+)?(?:the\s+)?(?:main\s+|key\s+|major\s+|big\s+|research\s+)?"
    r"(?:topics|themes|research\s+areas|areas)\b|"
    r"^(?:list|show|give\s+me|summari[sz]e)\s+(?:me\s+)?(?:the\s+)?(?:main\s+|key\s+)?(?:topics|themes)\b|"
    r"^what\s+(?:is|are)\s+(?:this|these|the)\s+(?:conference|collection|corpus|index|papers)\s+(?:mostly\s+)?about\b|"
    + _SIZE_PATTERN,
    re.IGNORECASE,
)
# The whole collection asked for ("list all papers", "show me every paper"): its topics, and where every paper is.
_EVERY_PAPER = re.compile(
    r"^(?:please\s+)?(?:list|show|give)\s+(?:me\s+)?(?:all|every|each)\s+(?:of\s+)?(?:the\s+)?(?:papers?|abstracts?)"
    r"(?:\s+(?:in\s+(?:the|this|your)\s+(?:index|collection|corpus|conference)|you\s+have))?\s*[?.!]*$",
    re.IGNORECASE,
)
EVERY_PAPER_HINT = ("Every paper is listed in the Papers tab (filter by topic or keyword), or by "
                    "`paperchat export all` (CSV or BibTeX).")


# "Which papers are similar to FedSSM?", "what else is like CogRouter?", "papers related to MA-RAG".
_RELATED = re.compile(
    r"\b(?:papers?|works?|abstracts?|anything|what\s+else|others?|which\s+ones?)\b.{0,40}?"
    r"\b(?:(?:most\s+)?(?:related|similar|closest|nearest|close)\s+to|(?:most\s+)?like)\s+(?P<subject>[^?!]+)",
    re.IGNORECASE,
)


_POINTS_BACK = re.compile(r"(?:it|this|that|them|(?:this|that|the\s+(?:first|last|same))\s+(?:one|paper|work))",
                          re.IGNORECASE)
_SUBJECT_FILLER = frozenset([
    "the", "a", "an", "paper", "papers", "work", "one", "ones", "abstract", "method", "approach", "in", "this",
    "index", "corpus", "collection", "please",
])


def related_answer(question: str, hits: Sequence[Hit], topic_map: Callable[[], TopicMap] | None,
                   papers: Callable[[], Sequence[Paper]] | None, vectors, *, collection: str = "",
                   pinned: Hit | None = None) -> Answer | None:
    """The papers nearest to the one the question names ("which papers are similar to FedSSM?"), or to the one a
    follow-up points at (``pinned``: "what else is like it?"), each cited with what it shares with it; None when
    the question asks no such thing or names no paper among ``hits``."""
    match = _RELATED.search(" ".join(question.split()))
    if match is None or topic_map is None or papers is None or vectors is None:
        return None
    asked = match.group("subject")
    named = [h for h in hits if names_paper(asked, h)]
    if not named and pinned is not None and _POINTS_BACK.fullmatch(asked.strip(" .")):
        named, asked = [pinned], ""
    if len(named) != 1:
        return None
    subject = named[0]
    # "papers like FedSSM that use GNNs" asks for more than nearness: a list question, answered as one.
    rest = re.findall(r"[\w-]+", without_title(asked, subject.title).lower())
    if any(word not in _SUBJECT_FILLER for word in rest):
        return None
    everything = list(papers())
    near = related_papers(subject.paper_id, everything, vectors, topic_map(), RELATED_SHOWN)
    by_id = {p.paper_id: p for p in everything}
    if not near or subject.paper_id not in by_id:
        return None
    shown = [by_id[subject.paper_id], *(r.paper for r in near)]
    listed = [Hit.of_paper(p, rank=i, score=1.0, collection=collection, dense_score=1.0)
              for i, p in enumerate(shown, start=1)]
    lines = [f"The papers nearest to {subject.title} [1], by how alike their abstracts are (as in the Papers tab):"]
    cited = [(1, listed[0], f"{subject.title} is the paper asked about", first_sentence(shown[0].abstract))]
    for hit, item in zip(listed[1:], near, strict=True):
        lines.append(f"- {item.paper.title} [{hit.rank}]: {item.shares}")
        cited.append((hit.rank, hit, f"{item.paper.title} is among the papers nearest to {subject.title}",
                       first_sentence(item.paper.abstract)))
    return cited_answer(question, "\n".join(lines), listed, cited)


def asks_for_topics(question: str) -> bool:
    text = " ".join(question.split())
    return bool(_TOPICS.search(text) or _EVERY_PAPER.search(text))


def topics_answer(question: str, topic_map: Callable[[], TopicMap] | None,
                  papers: Callable[[], Sequence[Paper]] | None, *, collection: str = "") -> Answer | None:
    """The topics of the whole collection, each with its size and central papers cited; None when the
    question does not ask for them (or the topics are not available here)."""
    if topic_map is None or papers is None or not asks_for_topics(question):
        return None
    topics = topic_map()
    by_id = {p.paper_id: p for p in papers()}
    if not topics.topics or not by_id:
        return None
    groups = (f"{len(topics.topics)} topics (groups of similar abstracts, each named by the words that set it "
              "apart)")
    # "How many papers are there?" is answered by the number first; the topics follow for what they are.
    lines = [f"There are {counted(len(by_id), 'paper')} in the index. They fall into {groups}:"
             if _SIZE.search(" ".join(question.split())) else f"The {len(by_id)} papers fall into {groups}:"]
    hits: list[Hit] = []
    cited = []
    for topic in topics.topics:
        named = []
        for paper in (by_id[pid] for pid in topic.paper_ids[:CENTRAL_SHOWN] if pid in by_id):
            hit = Hit.of_paper(paper, rank=len(hits) + 1, score=1.0, collection=collection, dense_score=1.0)
            hits.append(hit)
            named.append(f"{paper.title} [{hit.rank}]")
            cited.append((hit.rank, hit, f"{paper.title} is among the papers on {topic.label}",
                          first_sentence(paper.abstract)))
        papers_word = "paper" if topic.size == 1 else "papers"
        lines.append(f"- {topic.label} ({topic.size} {papers_word}), e.g. {', '.join(named)}")
    if _EVERY_PAPER.search(" ".join(question.split())):
        lines.append(EVERY_PAPER_HINT)
    return cited_answer(question, "\n".join(lines), hits, cited)


def filtered_collection_answer(question: str, papers: Callable[[], Sequence[Paper]] | None, filters: Sequence,
                               *, collection: str = "") -> Answer | None:
    """"How many papers are there?", "list all papers", "what are the main topics?" with filters set: the papers
    that pass them, listed and counted (the topics describe the whole collection, not the part the filters keep)."""
    if not filters or papers is None or not asks_for_topics(question):
        return None
    said = "; ".join(str(f) for f in filters)
    return listing(question, papers(), f"pass the filters ({said})", collection)
