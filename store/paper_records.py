"""How a paper is kept in the papers collection: its fields as Chroma metadata (scalars only, so lists
are JSON text and a missing year is -1) and back."""

from __future__ import annotations

import json
from typing import Any

from rag.types import Paper


def paper_to_metadata(paper: Paper) -> dict[str, Any]:
    return {
        "paper_id": paper.paper_id,
        "title": paper.title,
        "source": paper.source,
        "ordinal": paper.ordinal,
        "authors": json.dumps(list(paper.authors), ensure_ascii=False),
        "urls": json.dumps(list(paper.urls), ensure_ascii=False),
        "venue": paper.venue,
        "year": paper.year if paper.year is not None else -1,
        "title_given": paper.title_given,
        "content_hash": paper.content_hash,
    }


def paper_from_record(document: str, meta: dict[str, Any]) -> Paper:
    year = meta.get("year", -1)
    return Paper(
        paper_id=str(meta["paper_id"]),
        title=str(meta.get("title", "")),
        abstract=document or "",
        source=str(meta.get("source", "")),
        ordinal=int(meta.get("ordinal", 0)),
        authors=tuple(json.loads(meta.get("authors") or "[]")),
        urls=tuple(json.loads(meta.get("urls") or "[]")),
        venue=str(meta.get("venue", "")),
        year=None if year in (None, -1) else int(year),
        title_given=bool(meta.get("title_given", False)),
    )

