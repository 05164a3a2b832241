"""Filters on metadata (``--where``, ``--source``) over searches and paper lists: a filtered search reads
more papers than it keeps, then the filters pick (the ranking itself is the retriever's, unchanged)."""

from __future__ import annotations

import dataclasses

from rag.errors import QueryError
from rag.exports.filters import PaperFilter, keep

OVERFETCH = 10  # a filtered search reads this many times the papers it keeps (at least MIN_FETCHED)
MIN_FETCHED = 100


def check_sources(papers, filters: list[PaperFilter]) -> None:
    """A ``--source`` that names no file of the index is a mistake, not an empty list: say which files there are."""
    sources = sorted({p.source for p in papers})
    for f in filters:
        if f.field == "source" and f.op == "=" and not any(f.matches(p) for p in papers):
            listed = ", ".join(sources[:5]) + (f" and {len(sources) - 5} more" if len(sources) > 5 else "")
            raise QueryError(f"no paper in the index comes from {f.value!r}; its files: {listed or 'none'}")


def filtered_search(components, question: str, k: int, filters: list[PaperFilter]):
    """The ``k`` best hits that pass ``filters``: a search over-fetches, then the filters pick, ranks renumbered."""
    if not filters:
        return components.retriever.search(question, k)
    papers = components.papers()
    check_sources(papers, filters)
    fetched = components.retriever.search(question, min(len(papers), max(k * OVERFETCH, MIN_FETCHED)) or 1)
    return [dataclasses.replace(h, rank=rank) for rank, h in enumerate(keep(fetched, filters)[:k], start=1)]
