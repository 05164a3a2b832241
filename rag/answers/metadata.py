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
# About the collection as a whole: "what conference is this?", "which venue are these papers from?", "who are the
# authors?", "what's the newest paper?".
_THESE = (r"(?:(?:this|these|the|all\s+(?:of\s+)?(?:the|these))\s+(?:papers|abstracts|collection|corpus|index)|"
          r"this|these|it|they|them)")
# One paper's venue or year: "what venue is FedSSM from?", "when was the Adam paper published?".
_VENUE_OF = re.compile(
    r"^(?:(?:what|which)\s+(?:conference|venue|journal)\s+(?:is|was)\s+(?P<subject>.+?)\s+"
    r"(?:from|in|at|published\s+(?:at|in)|presented\s+at)"
    r"|where\s+(?:is|was)\s+(?P<subject2>.+?)\s+(?:published|presented|from))\s*[?.!]*$",
    re.IGNORECASE,
)
_YEAR_OF = re.compile(
    r"^(?:when\s+(?:was|is)\s+(?P<subject>.+?)\s+(?:published|released|written|from)"
    r"|(?:what|which)\s+year\s+(?:is|was)\s+(?P<subject2>.+?)\s+(?:from|published|released|written))\s*[?.!]*$",
    re.IGNORECASE,
)
_VENUE = re.compile(
    r"^(?:so,?\s+)?(?:(?:what|which)\s+(?:conference|venue|journal|proceedings)(?:\s+(?:is|are|was|were|do|does)\s+"
    rf"{_THESE}(?:\s+(?:from|in|at|published\s+(?:at|in)|come\s+from))?)?"
    rf"|where\s+(?:are|were)\s+{_THESE}\s+(?:published|from|presented))\s*[?.!]*$",
    re.IGNORECASE,
)
_ALL_AUTHORS = re.compile(
    rf"^(?:who\s+(?:are|were)\s+the\s+authors|who\s+wrote\s+{_THESE}|(?:list|show)\s+(?:me\s+)?the\s+authors)"
    r"\s*[?.!]*$",
    re.IGNORECASE,
)
_NEWEST = re.compile(
    r"^(?:what|which)(?:'s|\s+is|\s+are)?\s+the\s+(?P<end>newest|latest|most\s+recent|oldest|earliest)\s+"
    r"(?:papers?|works?|ones?|articles?)\s*[?.!]*$",
    re.IGNORECASE,
)
_RECORD_HINT = "ingest a JSONL or CSV file with '{field}' fields to record them"
_FILLER = {"the", "a", "an", "paper", "papers", "article", "work", "on", "about", "called", "titled", "this", "that"}
_WORD = re.compile(r"[\w-]+")


def metadata_answer(question: str, hits: Sequence[Hit], papers: Callable[[], Sequence[Paper]] | None,
                    *, pinned: bool = False, collection: str = "") -> Answer | None:
    """The answer to a metadata question, or None when ``question`` is not one (or the metadata is missing:
    then the usual answer path says what the abstracts say)."""
    text = " ".join(question.split())
    if match := _WHO_WROTE.match(text):
        return _authors_of(question, match.group("subject"), hits, pinned=pinned)
    for pattern, field in ((_VENUE_OF, "venue"), (_YEAR_OF, "year")):
        if (match := pattern.match(text)) and not re.fullmatch(_THESE, subject := (
                match.group("subject") or match.group("subject2")), re.IGNORECASE):
            return _field_of(question, subject, field, hits, pinned=pinned)
    if papers is None:
        return None
    if match := _OF_YEAR.match(text):
        year = int(match.group("year"))
        every = papers()
        found = [p for p in every if p.year == year]
        return listing(question, found, f"from {year}", collection) if found else _none_of(
            question, f"No paper in the index is from {year}.", every, "year")
    if match := _BY_AUTHOR.match(text):
        name = match.group("name").strip().lower()
        every = papers()
        found = [p for p in every if any(_same_author(name, a) for a in p.authors)]
        return listing(question, found, f"by {match.group('name').strip()}", collection) if found else _none_of(
            question, f"No paper in the index lists an author named {match.group('name').strip()!r}.", every,
            "authors")
    if _VENUE.match(text):
        return _about_collection(question, _spread(papers(), "venue"))
    if _ALL_AUTHORS.match(text):
        every = papers()
        with_authors = sum(bool(p.authors) for p in every)
        text = (f"{with_authors} of the {len(every)} papers record their authors: ask about one paper (\"who wrote "
                "X?\") or for an author's papers (\"papers by NAME\")." if with_authors else
                f"The index records no authors for its {len(every)} papers (its corpus files give none, and an "
                f"abstract does not name its authors; {_RECORD_HINT.format(field='authors')}).")
        return _about_collection(question, text, refused=not with_authors)
    if match := _NEWEST.match(text):
        return _about_collection(question, _newest(papers(), newest=match.group("end").lower() not in (
            "oldest", "earliest")))
    return None


def _spread(papers: Sequence[Paper], field: str) -> str:
    """How the papers spread over a metadata field: "All 76 papers are from ICML 2026." or the counts."""
    counts: dict[str, int] = {}
    for p in papers:
        value = str(getattr(p, field) or "").strip()
        counts[value] = counts.get(value, 0) + 1
    recorded = {v: n for v, n in counts.items() if v}
    if not recorded:
        return (f"The index records no {field} for its {len(papers)} papers "
                f"({_RECORD_HINT.format(field=field)}).")
    if len(recorded) == 1 and len(counts) == 1:
        return f"All {len(papers)} papers are from {next(iter(recorded))}, as their corpus records them."
    parts = [f"{v} ({n})" for v, n in sorted(recorded.items(), key=lambda kv: (-kv[1], kv[0]))]
    unknown = counts.get("", 0)
    return (f"The {len(papers)} papers are from " + ", ".join(parts)
            + (f"; {unknown} record{'s' if unknown == 1 else ''} no {field}." if unknown else "."))


def _newest(papers: Sequence[Paper], *, newest: bool) -> str:
    years = sorted({p.year for p in papers if p.year is not None})
    if not years:
        return f"The index records no year for its {len(papers)} papers ({_RECORD_HINT.format(field='year')})."
    year = years[-1] if newest else years[0]
    count = sum(p.year == year for p in papers)
    if len(years) == 1:
        return (f"All {count} papers with a year are from {year}; the index records no finer date, so none is "
                f"{'newer' if newest else 'older'} than another.")
    return (f"The {'newest' if newest else 'oldest'} papers are from {year}: {count} of them "
            f"(ask \"papers from {year}\" for the list).")


def _none_of(question: str, said: str, papers: Sequence[Paper], field: str) -> Answer:
    """"papers from 2024" where none is: said so, with what the index does hold for that field."""
    if field == "year":
        held = _spread(papers, "year")
        if any(p.year for p in papers):
            held = held.replace("are from", "are from the year")
    else:
        recorded = sum(bool(p.authors) for p in papers)
        held = (f"{recorded} of the {len(papers)} papers record their authors." if recorded else
                f"The index records no authors for its {len(papers)} papers "
                f"({_RECORD_HINT.format(field='authors')}).")
    return _about_collection(question, f"{said} {held}", refused=True)


def _about_collection(question: str, text: str, *, refused: bool = False) -> Answer:
    """An answer about the collection as a whole, from its records: no one paper to cite."""
    return Answer(question=question, answer=text, citations=[], sources=[], grounded=False, refused=refused,
                  search_query="", about_paperchat=True)


def _same_author(asked: str, author: str) -> bool:
    """"kingma" or "diederik kingma" matches "Diederik P. Kingma": every asked word is one of the name's."""
    words = set(_WORD.findall(author.lower()))
    asked_words = _WORD.findall(asked)
    return bool(asked_words) and all(w in words for w in asked_words)


def _subject_words(subject: str) -> list[str]:
    return [w for w in _WORD.findall(subject.lower()) if w not in _FILLER]


def _named(subject: str, hits: Sequence[Hit], *, pinned: bool) -> Hit | None:
    """The paper the question names: the first of the top hits whose title has every word of the subject ("the
    Adam paper" -> a title with "Adam"); for a follow-up ("who wrote it?"), the pinned one."""
    words = _subject_words(subject)
    for hit in hits[:5]:
        title_words = set(_WORD.findall(hit.title.lower()))
        if words and all(w in title_words for w in words):
            return hit
    return hits[0] if pinned and hits else None


def _field_of(question: str, subject: str, field: str, hits: Sequence[Hit], *, pinned: bool) -> Answer | None:
    """One paper's venue or year, from its record, cited; or that its record gives none."""
    named = _named(subject, hits, pinned=pinned)
    if named is None:
        return None
    number = hits.index(named) + 1
    value = getattr(named, field)
    if not value:
        return _not_recorded(question, named, number, hits, field, (
            f"The index records no {field} for \"{named.title}\" [{number}] "
            f"({_RECORD_HINT.format(field=field)}). {NOT_COVERED}"))
    claim = f"{named.title} is from {value}"
    return cited_answer(question, f"{claim} [{number}], as its corpus records it.", list(hits),
                        [(number, named, claim, f"{field.capitalize()}: {value}")])


def _authors_of(question: str, subject: str, hits: Sequence[Hit], *, pinned: bool) -> Answer | None:
    """The authors of the paper the question names (``_named``), from its record."""
    named = _named(subject, hits, pinned=pinned)
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
    return _not_recorded(question, named, number, hits, "authors", (
        f"The index records no authors for \"{named.title}\" [{number}]. Its corpus file gives none, and an "
        "abstract does not name its authors (ingest a JSONL or CSV file with an 'authors' field to record "
        f"them). {NOT_COVERED}"))


def _not_recorded(question: str, named: Hit, number: int, hits: Sequence[Hit], field: str, text: str) -> Answer:
    """``text`` saying that ``named``'s record gives no ``field``, the paper cited as the one asked about (counted
    as declined: its abstract's sentences would answer something else)."""
    citation = Citation(marker=number, paper_id=named.paper_id, title=named.title, source=named.source,
                        ordinal=named.ordinal, evidence=first_sentence(named.abstract or named.text), support=0.0,
                        claim=f"the paper asked about; the index records no {field} for it", weak=False)
    return Answer(question=question, answer=text, citations=[citation], sources=list(hits), grounded=False,
                  refused=True, not_stated=True, search_query=question)


def listing(question: str, papers: Sequence[Paper], what: str, collection: str) -> Answer:
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
