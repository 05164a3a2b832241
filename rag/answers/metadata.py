"""Questions about papers' metadata, answered from it: "who wrote the Adam paper?" (the authors of a named
paper, or that the index records none), "papers from 2024" (the papers of a year) and "papers by Kingma" (an
author's papers), each cited.

Abstracts rarely name their authors or year, so neither the writer nor the citation check could answer
these; the records the user ingested do (JSONL/CSV/JSON ``authors``, ``year``, ``venue``). These answers are
deterministic and written the same whatever the answer writer: each claim cites the paper whose metadata
states it, and the citation's evidence is that metadata line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from rag.answers.prompts import NOT_COVERED
from rag.corpus.chunking import first_sentence
from rag.labels import authors_text, metadata_line
from rag.types import Answer, Citation, Hit, Paper

MAX_LISTED = 20  # papers named in a listing answer; the count says how many more there are
# The whole question asks for the authors ("what did the authors of X evaluate on?" is about X's abstract).
_WHO_WROTE = re.compile(
    r"^(?:who\s+(?:wrote|authored|are\s+the\s+authors\s+of|is\s+the\s+author\s+of)|"
    r"(?:(?:what|who)\s+(?:are|were)\s+)?(?:the\s+)?authors?\s+of)\s+(?P<subject>.+?)\s*[?.!]*$",
    re.IGNORECASE,
)
_PAPERS = r"(?:papers?|articles?|works?|abstracts?|publications?)"
_OF_YEAR = re.compile(
    rf"^(?:(?:list|show|find|which|what|any|all)\s+)*(?:the\s+)?{_PAPERS}\s+(?:(?:are|were)\s+)?(?:from|of|in|published\s+in)\s+"
    r"(?:the\s+year\s+)?(?P<year>[12]\d{3})\s*[?.!]*$",
    re.IGNORECASE,
)
_BY_AUTHOR = re.compile(
    rf"^(?:(?:list|show|find|which|what|any|all)\s+)*(?:the\s+)?{_PAPERS}\s+(?:(?:are|were)\s+)?(?:by|written\s+by|authored\s+by)\s+"
    r"(?P<name>[^?.!]{2,80}?)\s*[?.!]*$",
    re.IGNORECASE,
)
_FILLER = {"the", "a", "an", "paper", "papers", "article", "work", "on", "about", "called", "titled", "this", "that"}
_WORD = re.compile(r"[\w-]+")


def metadata_answer(question: str, hits: Sequence[Hit], papers: Callable[[], Sequence[Paper]] | None,
                    *, pinned: bool = False, collection: str = "") -> Answer | None:
    """The answer to a metadata question, or None when ``question`` is not one (or the metadata is missing:
    then the usual answer path says what the abstracts say)."""
    text = " ".join(question.split())
    if match := _WHO_WROTE.match(text):
        return _authors_of(question, match.group("subject"), hits, pinned=pinned)
    if papers is None:
        return None
    if match := _OF_YEAR.match(text):
        year = int(match.group("year"))
        found = [p for p in papers() if p.year == year]
        return _listing(question, found, f"from {year}", collection) if found else None
    if match := _BY_AUTHOR.match(text):
        name = match.group("name").strip().lower()
        found = [p for p in papers() if any(_same_author(name, a) for a in p.authors)]
        return _listing(question, found, f"by {match.group('name').strip()}", collection) if found else None
    return None


def _same_author(asked: str, author: str) -> bool:
    """"kingma" or "diederik kingma" matches "Diederik P. Kingma": every asked word is one of the name's."""
    words = set(_WORD.findall(author.lower()))
    asked_words = _WORD.findall(asked)
    return bool(asked_words) and all(w in words for w in asked_words)


def _subject_words(subject: str) -> list[str]:
    return [w for w in _WORD.findall(subject.lower()) if w not in _FILLER]


def _authors_of(question: str, subject: str, hits: Sequence[Hit], *, pinned: bool) -> Answer | None:
    """The authors of the paper the question names: the first of the top hits whose title has every word of
    the subject ("the Adam paper" -> a title with "Adam"); for a follow-up ("who wrote it?"), the pinned one."""
    words = _subject_words(subject)
    named = None
    for hit in hits[:5]:
        title_words = set(_WORD.findall(hit.title.lower()))
        if words and all(w in title_words for w in words):
            named = hit
            break
    if named is None and pinned and hits:
        named = hits[0]
    if named is None:
        return None
    number = hits.index(named) + 1
    if not named.authors:
        return _no_authors(question, named, number, hits)
    claim = f"{named.title} was written by {authors_text(named.authors, limit=len(named.authors))}"
    details = metadata_line((), named.year, named.venue, source=named.source)
    text = f"{claim} [{number}]." + (f" ({details})" if details else "")
    evidence = "Authors: " + ", ".join(named.authors)
    return cited_answer(question, text, list(hits), [(number, named, claim, evidence)])


def _no_authors(question: str, named: Hit, number: int, hits: Sequence[Hit]) -> Answer:
    """"Who wrote X?" where the index records no authors for X: said so, X cited as the paper asked about (an
    abstract does not name its authors, so its sentences would answer something else)."""
    text = (f"The index records no authors for \"{named.title}\" [{number}]. Its corpus file gives none, and an "
            "abstract does not name its authors (ingest a JSONL or CSV file with an 'authors' field to record "
            f"them). {NOT_COVERED}")
    evidence = first_sentence(named.abstract or named.text)
    citation = Citation(marker=number, paper_id=named.paper_id, title=named.title, source=named.source,
                        ordinal=named.ordinal, evidence=evidence, support=0.0,
                        claim="the paper asked about; the index records no authors for it", weak=False)
    return Answer(question=question, answer=text, citations=[citation], sources=list(hits), grounded=False,
                  refused=True, not_stated=True, search_query=question)


def _listing(question: str, papers: Sequence[Paper], what: str, collection: str) -> Answer:
    """"N papers from 2024: [1] Title (authors); ..." with every paper shown as a source and cited."""
    papers = sorted(papers, key=lambda p: (p.source, p.ordinal, p.paper_id))
    shown = papers[:MAX_LISTED]
    hits = [Hit.of_paper(p, rank=i, score=1.0, collection=collection, dense_score=1.0)
            for i, p in enumerate(shown, start=1)]
    lines = [f"{len(papers)} paper{'s' if len(papers) != 1 else ''} {what}"
             + (f" (the first {len(shown)} listed)" if len(papers) > len(shown) else "") + ":"]
    cited = []
    for number, hit in enumerate(hits, start=1):
        details = metadata_line(hit.authors, hit.year, hit.venue, source=hit.source)
        lines.append(f"- {hit.title}" + (f" ({details})" if details else "") + f" [{number}]")
        cited.append((number, hit, f"{hit.title} is {what}", details or hit.title))
    return cited_answer(question, "\n".join(lines), hits, cited)


def cited_answer(question: str, text: str, sources: list[Hit], cited: list[tuple[int, Hit, str, str]]) -> Answer:
    """An answer built from what is known of the papers, each claim citing the paper it is about."""
    citations = [
        Citation(marker=number, paper_id=hit.paper_id, title=hit.title, source=hit.source, ordinal=hit.ordinal,
                 evidence=evidence, support=1.0, claim=claim)
        for number, hit, claim, evidence in cited
    ]
    return Answer(question=question, answer=text, citations=citations, sources=sources, grounded=True,
                  search_query=question)
