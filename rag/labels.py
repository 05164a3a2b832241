"""How a paper is named where it is shown: "ICML 2026 · #5 of file 002" (the corpus, then the paper's place
in its file), and its metadata as one line ("D. Kingma, J. Ba · ICLR · 2015").

The corpus is the venue a ``.txt`` file's header line names (the bundled ICML 2026 files), else the
collection the paper was found in. A bundled file's name (``002_735305cd7294d037.txt``) carries a hash
that means nothing to a reader: the label keeps its number, the full name goes to details and tooltips.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_NUMBERED_FILE = re.compile(r"^(\d+)_[0-9a-f]{8,}\.txt$")
MAX_AUTHORS_SHOWN = 4


def file_label(source: str) -> str:
    """``002_735305cd7294d037.txt`` -> ``file 002``; any other file name as it is."""
    match = _NUMBERED_FILE.match(source)
    return f"file {match.group(1)}" if match else source


DEFAULT_COLLECTION = "paperchat"  # the collection's name unless the user gives one: names no corpus


def corpus_name(source: str, venue: str, collection: str = "") -> str:
    """The name of the corpus a paper belongs to: a .txt header's venue, else the name the user gave the collection
    (the default one names nothing: "paperchat · #3 of bad.jsonl" read as a venue)."""
    if venue and source.lower().endswith(".txt"):
        return venue  # the .txt reader sets the venue only from the file's header line
    return "" if collection == DEFAULT_COLLECTION else collection


def place_label(source: str, ordinal: int, *, venue: str = "", collection: str = "") -> str:
    """"ICML 2026 · #5 of file 002" (or "#5 of file 002" when no corpus name is known)."""
    name = corpus_name(source, venue, collection)
    place = f"#{ordinal} of {file_label(source)}"
    return f"{name} · {place}" if name else place


def authors_text(authors: Sequence[str], limit: int = MAX_AUTHORS_SHOWN) -> str:
    """"A, B and C"; past ``limit`` names: "A, B, C, D et al."."""
    names = [a for a in authors if a]
    if len(names) > limit:
        return ", ".join(names[:limit]) + " et al."
    if len(names) > 1:
        return ", ".join(names[:-1]) + " and " + names[-1]
    return names[0] if names else ""


def metadata_line(authors: Sequence[str], year: int | None, venue: str, *, source: str = "") -> str:
    """Authors · venue · year, whichever are known ("" when none is). A .txt header's venue is the corpus
    name (already in the place label), so it is left out here."""
    parts = [authors_text(authors)]
    if venue and not source.lower().endswith(".txt"):
        parts.append(venue)
    if year is not None and str(year) not in venue:
        parts.append(str(year))
    return " · ".join(p for p in parts if p)
