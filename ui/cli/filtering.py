"""Filters on metadata (``--where``, ``--source``) over searches and paper lists: the filtered retriever of
rag/exports/filtered.py, over the command's components (the same one ``ask`` hands its pipeline)."""

from __future__ import annotations

from rag.exports.filtered import check_filters, check_sources
from rag.exports.filtered import filtered_search as _filtered_search
from rag.exports.filters import PaperFilter

__all__ = ["check_filters", "check_sources", "filtered_search"]


def filtered_search(components, question: str, k: int, filters: list[PaperFilter]):
    """The ``k`` best hits that pass ``filters``: a search over-fetches, then the filters pick, ranks renumbered."""
    if not filters:
        return components.retriever.search(question, k)
    papers = components.papers()
    check_sources(papers, filters)
    return _filtered_search(components.retriever, papers, question, k, filters)
