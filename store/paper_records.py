"""How a paper is kept in the papers collection: its fields as Chroma metadata (scalars only, so lists
are JSON text and a missing year is -1) and back.

The abstract is not stored again in the record: its chunks hold it already (each a verbatim slice with
its character offsets), and a record's document costs about as much to write as the chunk rows
themselves (Chroma indexes every document's trigrams; bench/results/report.md, section 4). The record
keeps what the chunks do not cover (``ABSTRACT_REST``: the abstract's length and its uncovered pieces,
usually none but surrounding whitespace), and a read puts the abstract back together from both.
Records written before this carry the abstract as their document and no ``ABSTRACT_REST``: they are
read as they were.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from rag.types import Chunk, Paper

# The metadata key of a record whose abstract is rebuilt from its chunks: JSON [length, [[start, text], ...]].
ABSTRACT_REST = "abstract_rest"


def abstract_rest(abstract: str, chunks: Sequence[Chunk]) -> str:
    """``ABSTRACT_REST`` of a paper: the length of ``abstract`` and the pieces of it no chunk covers."""
    pieces, at = [], 0
    for start, end in sorted((c.start, c.end) for c in chunks):
        if start > at:
            pieces.append([at, abstract[at:start]])
        at = max(at, end)
    if at < len(abstract):
        pieces.append([at, abstract[at:]])
    return json.dumps([len(abstract), pieces], ensure_ascii=False)


def rebuild_abstract(rest: str, chunks: Iterable[tuple[int, str]]) -> str:
    """The abstract from its ``ABSTRACT_REST`` and its chunks' (start offset, text). A part missing from
    both (a chunk deleted by hand) reads as spaces, so the offsets of the rest stay true."""
    length, pieces = json.loads(rest)
    out = [" "] * int(length)
    for start, text in [*((int(a), str(t)) for a, t in pieces), *chunks]:
        out[start : start + len(text)] = text
    return "".join(out[: int(length)])


def paper_to_metadata(paper: Paper, chunks: Sequence[Chunk] | None = None) -> dict[str, Any]:
    """The record's metadata; with ``chunks``, the record's abstract is rebuilt from them when read."""
    meta: dict[str, Any] = {
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
    if chunks is not None:
        meta[ABSTRACT_REST] = abstract_rest(paper.abstract, chunks)
    return meta


def paper_from_record(document: str | None, meta: dict[str, Any], abstract: str | None = None) -> Paper:
    """The paper of a record; ``abstract``: rebuilt from its chunks (``rebuild_abstract``), else the document."""
    year = meta.get("year", -1)
    return Paper(
        paper_id=str(meta["paper_id"]),
        title=str(meta.get("title", "")),
        abstract=abstract if abstract is not None else document or "",
        source=str(meta.get("source", "")),
        ordinal=int(meta.get("ordinal", 0)),
        authors=tuple(json.loads(meta.get("authors") or "[]")),
        urls=tuple(json.loads(meta.get("urls") or "[]")),
        venue=str(meta.get("venue", "")),
        year=None if year in (None, -1) else int(year),
        title_given=bool(meta.get("title_given", False)),
    )

