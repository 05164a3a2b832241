"""How a paper is kept in the papers collection, and how its chunks' texts are read back.

A paper's record holds all it has in two metadata keys: ``paper_id`` and ``RECORD``, a JSON object with its
fields, its abstract, each chunk's character span in it (``SPANS``) and its profile's figures. Its chunk rows
hold their vectors and only the keys deletes filter on (``paper_id``, ``chunk``): a chunk's text is the slice
of its paper's abstract that its span gives. What a row costs is Chroma's (bench/results/report.md, section
4): a document (its trigrams are indexed) costs about as much as the rest of the row, every metadata key a
row of its own in Chroma's SQLite tables, and overlapping chunks repeat text; a text held once, in one key,
doubled the rows written per second (``bench/stages.py synthetic-build``).

Stores written earlier are read as they were (``unpack`` gives every format the same flat keys):

- records whose keys are the fields themselves and carry ``ABSTRACT_REST``, whose chunks carry their texts as
  documents (the abstract is put back together from the chunks and the pieces they do not cover);
- records of the first format: the abstract is the record's document, the chunks' texts theirs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from rag.types import Chunk, Paper

RECORD = "record"  # the record's fields as one JSON object
ABSTRACT = "abstract"  # in RECORD: the abstract
SPANS = "spans"  # in RECORD: [[start, end], ...] of chunk 0, 1, ... in the abstract
# Records of the second format: the abstract is rebuilt from the chunks' documents and this, JSON
# [length, [[start, text], ...]] (the pieces no chunk covers).
ABSTRACT_REST = "abstract_rest"


def record_metadata(paper: Paper, chunks: Sequence[Chunk], **figures: float) -> dict[str, Any]:
    """A paper's record as Chroma metadata; ``figures``: numbers kept with it (its profile's)."""
    fields = {
        **_fields(paper),
        ABSTRACT: paper.abstract,
        SPANS: [[c.start, c.end] for c in sorted(chunks, key=lambda c: c.index)],
        "n_chunks": len(chunks),
        **figures,
    }
    return {"paper_id": paper.paper_id, RECORD: json.dumps(fields, ensure_ascii=False)}


def _fields(paper: Paper) -> dict[str, Any]:
    """A paper's fields but its id and abstract, as JSON values (lists, a missing year None)."""
    return {
        "title": paper.title,
        "source": paper.source,
        "ordinal": paper.ordinal,
        "authors": list(paper.authors),
        "urls": list(paper.urls),
        "venue": paper.venue,
        "year": paper.year,
        "title_given": paper.title_given,
        "content_hash": paper.content_hash,
    }


def unpack(meta: dict[str, Any] | None) -> dict[str, Any]:
    """A record's metadata as flat keys, whatever its format."""
    if not meta:
        return {}
    if RECORD in meta:
        return {**json.loads(meta[RECORD]), "paper_id": meta["paper_id"]}
    return meta


def chunk_text(record: dict[str, Any], chunk: int) -> str | None:
    """The text of chunk number ``chunk`` from its paper's (unpacked) record; None for records of the older
    formats, whose chunks hold their texts as documents."""
    if ABSTRACT not in record or SPANS not in record:
        return None
    spans = record[SPANS]
    if not 0 <= chunk < len(spans):
        return ""
    start, end = spans[chunk]
    return str(record[ABSTRACT])[int(start) : int(end)]


def abstract_rest(abstract: str, chunks: Sequence[Chunk]) -> str:
    """``ABSTRACT_REST`` of a paper (the second format, no longer written; it defines what is read back):
    the length of ``abstract`` and the pieces of it no chunk covers."""
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


def paper_to_metadata(paper: Paper) -> dict[str, Any]:
    """A record's fields as flat keys (the older formats' layout; tests write such stores with it): Chroma
    metadata values are scalars, so lists are JSON text and a missing year is -1."""
    fields = _fields(paper)
    return {
        "paper_id": paper.paper_id,
        **fields,
        "authors": json.dumps(fields["authors"], ensure_ascii=False),
        "urls": json.dumps(fields["urls"], ensure_ascii=False),
        "year": paper.year if paper.year is not None else -1,
    }


def _list(value: Any) -> tuple:
    """A list field: a list (RECORD) or JSON text of one (older formats)."""
    return tuple(value if isinstance(value, list) else json.loads(value or "[]"))


def paper_from_record(document: str | None, meta: dict[str, Any], abstract: str | None = None) -> Paper:
    """The paper of an unpacked record: its abstract is ``ABSTRACT``, else ``abstract`` (rebuilt from its
    chunks by ``rebuild_abstract``: second format), else the document (first format)."""
    year = meta.get("year")
    return Paper(
        paper_id=str(meta["paper_id"]),
        title=str(meta.get("title", "")),
        abstract=str(meta[ABSTRACT]) if ABSTRACT in meta else abstract if abstract is not None else document or "",
        source=str(meta.get("source", "")),
        ordinal=int(meta.get("ordinal", 0)),
        authors=_list(meta.get("authors")),
        urls=_list(meta.get("urls")),
        venue=str(meta.get("venue", "")),
        year=None if year in (None, -1) else int(year),
        title_given=bool(meta.get("title_given", False)),
    )
