"""A retriever that keeps only the papers passing metadata filters (``year>=2024``, ``source=FILE``): the one
way ``paperchat search --where``, ``paperchat ask --where`` and the web UI's filter box narrow a search.

It wraps any retriever (the ``Retriever`` protocol of rag/retrieval/retriever.py, by duck typing: this layer
does not import that one) and changes nothing in its ranking: a search reads more papers than it keeps, then
the filters pick and the ranks are renumbered. The answer pipeline is handed one of these instead of the
plain retriever (rag/components.py), so every kind of answer (search, "which papers", counts, metadata
questions) sees only the papers that pass.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence

from rag.errors import QueryError
from rag.exports.filters import FIELDS, PaperFilter, keep, parse_filters
from rag.types import Hit, Paper

OVERFETCH = 10  # a filtered search reads this many times the papers it keeps (at least MIN_FETCHED)
MIN_FETCHED = 100
DEFAULT_K = 5  # papers a search keeps when neither the caller nor the inner retriever says
# A value holding what reads as another filter after a comma: "title~graph,year=2026" is one title filter.
_COMMA_FILTER = re.compile(rf",\s*(?:{'|'.join(FIELDS)})\s*(?:!=|<=|>=|=|<|>|~)", re.IGNORECASE)


def filters_in(text: str) -> tuple[PaperFilter, ...]:
    """The filters of one line of text, ``;`` between them (``year>=2024; author~Bengio``; blank: none)."""
    return tuple(parse_filters([part for part in (text or "").split(";") if part.strip()]))


def check_sources(papers: Sequence[Paper], filters: Sequence[PaperFilter]) -> None:
    """A ``--source`` that names no file of the index is a mistake, not an empty list: say which files there are."""
    sources = sorted({p.source for p in papers})
    for f in filters:
        if f.field == "source" and f.op == "=" and not any(f.matches(p) for p in papers):
            listed = ", ".join(sources[:5]) + (f" and {len(sources) - 5} more" if len(sources) > 5 else "")
            raise QueryError(f"no paper in the index comes from {f.value!r}; its files: {listed or 'none'}")


def check_some_pass(papers: Sequence[Paper], filters: Sequence[PaperFilter]) -> None:
    """Filters no paper passes would make every answer "not covered": say so, and which filter to loosen."""
    if not filters or keep(papers, filters):
        return
    said = "; ".join(str(f) for f in filters)
    fields = sorted({f.field for f in filters})
    recorded = {"year": "a year", "venue": "a venue", "author": "authors"}
    missing = [recorded[name] for name in fields if name in recorded
               and not any(getattr(p, "authors" if name == "author" else name) for p in papers)]
    why = f" (no paper in the index records {' or '.join(missing)})" if missing else ""
    comma = next((f for f in filters if _COMMA_FILTER.search(f.value)), None)
    if comma is not None:  # "title~graph,year=2026": the comma was meant to start a second filter
        split = "; ".join(part.strip() for part in str(comma).split(","))
        raise QueryError(f"no paper of the {len(papers)} in the index passes {said}{why}: separate filters with "
                         f"';', not ',' (e.g. {split})")
    raise QueryError(f"no paper of the {len(papers)} in the index passes {said}{why}: loosen or remove the filter")


def check_filters(papers: Sequence[Paper], filters: Sequence[PaperFilter]) -> None:
    """Filters that would silently leave nothing to answer from: a ``QueryError`` that says what to change."""
    check_sources(papers, filters)
    check_some_pass(papers, filters)


def filtered_search(retriever, papers: Sequence[Paper], question: str, k: int,
                    filters: Sequence[PaperFilter]) -> list[Hit]:
    """The ``k`` best hits that pass ``filters``: a search over-fetches, then the filters pick, ranks renumbered."""
    if not filters:
        return retriever.search(question, k)
    fetched = retriever.search(question, min(len(papers), max(k * OVERFETCH, MIN_FETCHED)) or 1)
    return [dataclasses.replace(h, rank=rank) for rank, h in enumerate(keep(fetched, filters)[:k], start=1)]


class FilteredRetriever:
    """``retriever`` seen through ``filters``: searches, named papers, titles and the paper list keep only the
    papers that pass. ``papers()`` lists every paper of the index (how deep a search must read)."""

    def __init__(self, retriever, filters: Sequence[PaperFilter], papers: Callable[[], Sequence[Paper]]) -> None:
        self.inner = retriever
        self.filters = tuple(filters)
        self._papers = papers

    def __getattr__(self, name: str):
        # What the pipeline may also ask of the retriever it was given (refresh, vectors, top_k): the inner one's.
        if name == "every_paper" and not hasattr(self.inner, "every_paper"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def max_question_chars(self) -> int:
        return self.inner.max_question_chars

    def search(self, question: str, k: int | None = None) -> list[Hit]:
        k = k or getattr(self.inner, "top_k", DEFAULT_K)  # the inner retriever's own default
        return filtered_search(self.inner, self._papers(), question, k, self.filters)

    def search_many(self, questions: Sequence[str], k: int | None = None) -> list[list[Hit]]:
        return [self.search(q, k) for q in questions]

    def hits_for(self, paper_ids: Sequence[str]) -> list[Hit]:
        kept = keep(self.inner.hits_for(paper_ids), self.filters)
        return [dataclasses.replace(h, rank=rank) for rank, h in enumerate(kept, start=1)]

    def titles_in(self, text: str) -> list[str]:
        passing = {p.paper_id for p in self.every_paper()}
        return [pid for pid in self.inner.titles_in(text) if pid in passing]

    def idf(self, term: str) -> float:
        return self.inner.idf(term)  # how telling a word is: a property of the whole corpus

    def every_paper(self) -> list[Paper]:
        source = self.inner.every_paper if hasattr(self.inner, "every_paper") else self._papers
        return keep(source(), self.filters)
