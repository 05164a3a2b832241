"""Paper lists as CSV (the csv module; one row per paper) and BibTeX (one entry per paper; ``@inproceedings``
when the record names a venue, else ``@misc``), with the metadata the corpus has: authors, year, venue, url. The
LaTeX that titles and abstracts hold is kept (rag/exports/latex.py).

Control characters in the corpus's text (an ESC in an id) are written out as every command shows them
(``\x1b``, rag.text.terminal_safe; percent-encoded in a URL), so an export is the same text whether it goes to
a terminal, a pipe or a file, and printing it later cannot drive a terminal either.
"""

from __future__ import annotations

import csv
import io
import re
import unicodedata
from collections.abc import Sequence
from urllib.parse import quote

from rag.exports.latex import latex_escape
from rag.labels import place_label
from rag.text import terminal_safe
from rag.types import Paper

CSV_COLUMNS = ("paper_id", "title", "authors", "year", "venue", "url", "source", "ordinal", "label", "abstract")


def papers_csv(papers: Sequence[Paper], *, collection: str = "") -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for p in papers:
        row = [p.paper_id, p.title, "; ".join(p.authors), "" if p.year is None else p.year, p.venue,
               p.urls[0] if p.urls else "", p.source, p.ordinal,
               place_label(p.source, p.ordinal, venue=p.venue, collection=collection), p.abstract]
        writer.writerow([terminal_safe(cell) if isinstance(cell, str) else cell for cell in row])
    return out.getvalue()


def _url(url: str) -> str:
    """A URL as it is (LaTeX's url packages read it verbatim) but with braces, spaces and control characters
    percent-encoded."""
    return "".join(quote(ch) if ch in "{} " or terminal_safe(ch) != ch else ch for ch in url.strip())


def _field_value(name: str, value: str) -> str:
    if name == "url":
        return _url(value)
    if name == "title":  # in braces: a style that lower-cases titles keeps "FedSSM" and "Adam" as written
        return f"{{{latex_escape(value)}}}"
    return latex_escape(value)


def _key_word(text: str) -> str:
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^A-Za-z0-9]", "", ascii_text)


def citation_key(paper: Paper) -> str:
    """``kingma2015adam``: first author's last name, year, first title word (``orbit2026`` without authors); a key
    always starts with a letter."""
    last = _key_word(paper.authors[0].split()[-1]).lower() if paper.authors and paper.authors[0].split() else ""
    words = (_key_word(w).lower() for w in paper.title.split())
    first_word = next((w for w in words if len(w) > 2 and not w.isdigit()), "")
    year = str(paper.year or "")
    key = f"{last}{year}{first_word}" if last else f"{first_word}{year}"
    return key if key[:1].isalpha() else f"paper{paper.ordinal}{key}"


def papers_bibtex(papers: Sequence[Paper], *, collection: str = "") -> str:
    used: dict[str, int] = {}
    entries = []
    for p in papers:
        key = citation_key(p)
        used[key] = used.get(key, 0) + 1
        if used[key] > 1:  # a second paper with the same key: kingma2015adam, kingma2015adam-2, ...
            key = f"{key}-{used[key]}"
        fields = [("title", p.title)]
        if p.authors:
            fields.append(("author", " and ".join(p.authors)))
        if p.year is not None:
            fields.append(("year", str(p.year)))
        if p.venue:
            fields.append(("booktitle", p.venue))
        if p.urls:
            fields.append(("url", p.urls[0]))
        # Where a reader finds it, in ASCII for classic BibTeX ("ICML 2026, #1 of file 000", not "·"); a title the
        # corpus did not give (a name read from the abstract) is said to be one.
        note = place_label(p.source, p.ordinal, venue=p.venue, collection=collection).replace(" \u00b7 ", ", ")
        if not p.title_given:
            note += "; title derived from the abstract (the corpus gives none)"
        fields.append(("note", note))
        fields.append(("abstract", p.abstract))
        kind = "inproceedings" if p.venue else "misc"
        body = ",\n".join(f"  {name} = {{{_field_value(name, value)}}}" for name, value in fields)
        entries.append(f"@{kind}{{{key},\n{body}\n}}\n")
    return "\n".join(entries)
