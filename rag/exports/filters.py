"""``FIELD OP VALUE`` filters over paper metadata (``year>=2024``, ``venue~ICML``, ``author~Bengio``), for
exports and searches. A paper without the field matches no filter on it."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from rag.errors import QueryError

FIELDS = ("year", "venue", "author", "source", "title")
OPERATORS = ("!=", "<=", ">=", "=", "<", ">", "~")  # two-character ones first: "<=" is not "<" then "=2024"
_FILTER = re.compile(r"^\s*([A-Za-z_]+)\s*(!=|<=|>=|=|<|>|~)\s*(.*?)\s*$", re.DOTALL)
EXAMPLE = "e.g. --where year>=2024 or --where author~Bengio"
_ORDERED = ("<", "<=", ">", ">=")


@dataclass(frozen=True)
class PaperFilter:
    field: str
    op: str
    value: str

    def __str__(self) -> str:
        return f"{self.field}{self.op}{self.value}"

    def matches(self, paper) -> bool:
        """Whether ``paper`` (a ``Paper`` or a ``Hit``: title, source, authors, venue, year) passes."""
        if self.field == "year":
            return paper.year is not None and _compare(int(paper.year), self.op, int(self.value))
        if self.field == "author":
            return any(_text_matches(name, self.op, self.value) for name in paper.authors) if self.op != "!=" \
                else not any(_text_matches(name, "=", self.value) for name in paper.authors)
        if self.field == "source":
            # "= files/bad.jsonl" (the path given to ingest, as the ids show it), "= bad.jsonl" (the file's name).
            label = paper.paper_id.rsplit("#", 1)[0] if "#" in paper.paper_id else ""
            return _text_matches(paper.source, self.op, self.value) or (self.op == "=" and (
                PurePosixPath(paper.source).name.lower() == PurePosixPath(self.value).name.lower()
                or label.lower() == self.value.lower()))
        return _text_matches(getattr(paper, self.field), self.op, self.value)


def _compare(left, op: str, right) -> bool:
    return {"=": left == right, "!=": left != right, "<": left < right, "<=": left <= right,
            ">": left > right, ">=": left >= right}[op]


def _text_matches(text: str, op: str, value: str) -> bool:
    text, value = (text or "").lower(), value.lower()
    if op == "~":
        return value in text
    return (text == value) if op == "=" else (text != value)


def parse_filter(text: str) -> PaperFilter:
    """``"year>=2024"`` -> a filter; a one-line ``QueryError`` naming the field and the allowed ones otherwise."""
    match = _FILTER.match(text or "")
    if match is None:
        raise QueryError(f"bad filter {text!r}: write FIELD OP VALUE with FIELD one of {', '.join(FIELDS)} "
                         f"and OP one of {' '.join(OPERATORS)} (~: contains); {EXAMPLE}")
    name, op, value = match.group(1).lower(), match.group(2), match.group(3)
    if name not in FIELDS:
        raise QueryError(f"unknown filter field {name!r} in {text!r}: use one of {', '.join(FIELDS)}; {EXAMPLE}")
    if not value:
        raise QueryError(f"filter {text!r} has no value after {op!r}; {EXAMPLE}")
    if name == "year":
        if op == "~" or not re.fullmatch(r"\d{1,4}", value):
            raise QueryError(f"filter {text!r}: the field 'year' takes a year and one of = != < <= > >=, "
                             "e.g. --where year>=2024")
    elif op in _ORDERED:
        raise QueryError(f"filter {text!r}: the field {name!r} takes = != or ~ (contains), e.g. --where {name}~word")
    return PaperFilter(name, op, value)


def parse_filters(texts: Iterable[str] | None, source: str | None = None) -> list[PaperFilter]:
    """The ``--where`` filters, and ``--source FILE`` as ``source=FILE``."""
    filters = [parse_filter(t) for t in texts or ()]
    if source is not None:
        if not source.strip():
            raise QueryError("--source needs a file name, e.g. --source 000_dcbf1b5d2daaeff5.txt")
        filters.append(PaperFilter("source", "=", source.strip()))
    return filters


def keep(papers: Sequence, filters: Sequence[PaperFilter]) -> list:
    """The papers that pass every filter, in their order."""
    return [p for p in papers if all(f.matches(p) for f in filters)]
