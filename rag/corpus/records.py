"""One JSON or CSV record to one ``Paper``: field names in any case (``id``/``_id``, ``title``,
``abstract``/``text``, ``authors``, ``url``, ``venue``/``journal-ref``, ``year``/``update_date``, arXiv's
``authors_parsed``), each value checked, and a clear reason when a record cannot be used. Also what every
reader shares: whitespace clean-up, the abstract length limit, URLs lifted from the text, derived titles.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rag.corpus.problems import LoadProblem, Located, _one_line, json_type, short
from rag.corpus.titles import derive_title
from rag.text import clean_input, clean_value
from rag.types import Paper

TEXT_KEYS = ("abstract", "text")
ID_KEYS = ("id", "_id")
VENUE_KEYS = ("venue", "journal-ref", "journal_ref")
DATE_KEYS = ("update_date", "date", "published")
# Longest abstract (or text) accepted, in characters. Abstracts run to 2,000-5,000; a longer "abstract" is a
# whole paper or a broken record, and would cost minutes of embedding for nothing useful.
MAX_ABSTRACT_CHARS = 100_000
_URL = re.compile(r"(?:https?://|www\.)[^\s<>\"'{}|\\^`\[\]]+", re.IGNORECASE)
_URL_HAS_HOST = re.compile(r"(?:https?://|www\.)[^\W_]", re.IGNORECASE)
_URL_TRAILING = ".,;:!?'\"*"
_YEAR = re.compile(r"(?<!\d)([12]\d\d\d)(?!\d)")
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
_AUTHOR_AND = re.compile(r"\s+and\s+|\s*&\s*", re.IGNORECASE)
_LEADING_AND = re.compile(r"^and\s+", re.IGNORECASE)


def add_record(
    record: Any, path: Path, ordinal: int, where: str, located: list[Located], problems: list[LoadProblem]
) -> None:
    """Turn one JSON/CSV record into a paper, or report why it cannot be one."""
    shown = str(path)
    if not isinstance(record, dict):
        problems.append(LoadProblem(shown, where, f"not an object (got {json_type(record)}); skipped"))
        return
    fields = lower_keys(clean_value(record))  # valid JSON may still hold lone surrogates ("\ud800")
    metadata = fields.get("metadata")
    extra = lower_keys(metadata) if isinstance(metadata, dict) else {}
    abstract, reason = _record_text(fields)
    if abstract is None:
        problems.append(LoadProblem(shown, where, f"{reason}; skipped"))
        return
    notes: list[str] = []
    paper_id = _record_id(fields, f"{path.name}#{ordinal}", notes)
    title = _record_title(fields, notes)
    authors = _authors(fields.get("authors", extra.get("authors")), fields.get("authors_parsed"), notes)
    url = _first_str(fields, extra, ("url", "link"))
    venue = _first_str(fields, extra, VENUE_KEYS)
    year = _record_year(fields, extra, notes)
    paper = make_paper(
        paper_id=paper_id,
        title=title,
        abstract=abstract,
        source=path.name,
        ordinal=ordinal,
        authors=authors,
        url=url,
        venue=venue,
        year=year,
    )
    problems.extend(LoadProblem(shown, where, note, kept=True) for note in notes)
    located.append(Located(paper, shown, where))


def _record_text(fields: dict[str, Any]) -> tuple[str | None, str]:
    """The abstract (preferred) or text of a record, or None and a reason naming the field."""
    present = [key for key in TEXT_KEYS if key in fields]
    if not present:
        return None, "no 'abstract' or 'text' field"
    for key in present:
        value = fields[key]
        if isinstance(value, str) and len(value) > MAX_ABSTRACT_CHARS:
            return None, too_long(key, len(value))
        cleaned = clean_text(value) if isinstance(value, str) else ""
        if cleaned:
            return cleaned, ""
    key = present[0]
    value = fields[key]
    if value is None:
        return None, f"'{key}' is null"
    if not isinstance(value, str):
        return None, f"'{key}' is {json_type(value)}, not a string"
    return None, f"'{key}' is empty"


def _record_id(fields: dict[str, Any], derived: str, notes: list[str]) -> str:
    for key in ID_KEYS:
        value = fields.get(key)
        if isinstance(value, str) and value.strip():
            return _one_line(value.strip())
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        if value is not None and not isinstance(value, str):
            notes.append(f"'{key}' is {json_type(value)}, not a string or number; using the id {derived}")
            return derived
    return derived


def _record_title(fields: dict[str, Any], notes: list[str]) -> str:
    value = fields.get("title")
    if value is None or isinstance(value, str):
        return clean_text(value or "")
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    notes.append(f"'title' is {json_type(value)}, not a string; a title was derived from the abstract")
    return ""


def _record_year(fields: dict[str, Any], extra: dict[str, Any], notes: list[str]) -> int | None:
    value = fields.get("year", extra.get("year"))
    if value is not None and not (isinstance(value, str) and not value.strip()):
        year = year_from(value)
        if year is None:
            notes.append(f"'year' {short(repr(value), 40)} is not a year; ignored")
        return year
    for key in DATE_KEYS:
        raw = fields.get(key, extra.get(key))
        if isinstance(raw, str) and year_from(raw):
            return year_from(raw)
    return None


def year_from(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 1000 <= value <= 2999 else None
    if isinstance(value, float) and value.is_integer():
        return year_from(int(value))
    if isinstance(value, str):
        match = _YEAR.search(value)
        return int(match.group(1)) if match else None
    return None


def _authors(value: Any, parsed: Any, notes: list[str]) -> tuple[str, ...]:
    """Authors from a list of names, a list of {"name": ...}, a string "A, B and C", or arXiv's authors_parsed."""
    if isinstance(value, str):
        return _split_authors(value)
    if isinstance(value, list):
        names = [_author_name(item) for item in value]
        return tuple(name for name in names if name)
    if value is not None:
        notes.append(f"'authors' is {json_type(value)}; expected a list of names or a string; ignored")
    if isinstance(parsed, list):
        names = [
            " ".join(reversed([p for p in item[:2] if isinstance(p, str)])) for item in parsed if isinstance(item, list)
        ]
        return tuple(clean_text(n) for n in names if clean_text(n))
    return ()


def _author_name(item: Any) -> str:
    if isinstance(item, str):
        return clean_text(item)
    if isinstance(item, dict):
        fields = lower_keys(item)
        name = fields.get("name")
        if isinstance(name, str):
            return clean_text(name)
        parts = [fields.get(k) for k in ("first", "given", "last", "family")]
        return clean_text(" ".join(p for p in parts if isinstance(p, str)))
    return ""


def _split_authors(text: str) -> tuple[str, ...]:
    """Names from "A, B and C", "A; B" or "A, B, and C"; commas inside parentheses (affiliations) are kept."""
    text = clean_text(text)
    separator = ";" if ";" in text else ","
    pieces = _split_outside_parentheses(text, separator) if "(" in text else text.split(separator)
    names = [part.strip() for piece in pieces for part in _AUTHOR_AND.split(piece.strip())]
    return tuple(_LEADING_AND.sub("", name) for name in names if name and name.lower() != "and")


def _split_outside_parentheses(text: str, separator: str) -> list[str]:
    pieces: list[str] = []
    depth, current = 0, []
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if ch == separator and depth <= 0:
            pieces.append("".join(current))
            current = []
        else:
            current.append(ch)
    pieces.append("".join(current))
    return pieces


def make_paper(
    *,
    paper_id: str,
    title: str,
    abstract: str,
    source: str,
    ordinal: int,
    authors: tuple[str, ...] = (),
    url: str = "",
    venue: str = "",
    year: int | None = None,
) -> Paper:
    """A Paper with URLs lifted into metadata and a derived title when none was given."""
    urls = extract_urls(abstract)
    if url:
        urls = (url, *[u for u in urls if u != url])
    title_given = bool(title)
    return Paper(
        paper_id=paper_id,
        title=title if title_given else derive_title(abstract),
        abstract=abstract,
        source=clean_input(source),  # a file name with invalid bytes
        ordinal=ordinal,
        authors=authors,
        urls=urls,
        venue=venue,
        year=year,
        title_given=title_given,
    )


def extract_urls(text: str) -> tuple[str, ...]:
    """The http(s)/www links in ``text``, in order, without duplicates or trailing punctuation."""
    urls: list[str] = []
    if "://" not in text and "www." not in text.lower():
        return ()  # the common case, checked cheaply: most abstracts have no link
    for match in _URL.finditer(text):
        url = _strip_url_tail(match.group(0))
        if _URL_HAS_HOST.match(url) and url not in urls:
            urls.append(url)
    return tuple(urls)


def _strip_url_tail(url: str) -> str:
    """Drop sentence punctuation after a link, and closing brackets that the link did not open."""
    opened, closed = url.count("("), url.count(")")
    end = len(url)
    while end:
        last = url[end - 1]
        if last == ")" and closed > opened:
            closed -= 1
        elif last not in _URL_TRAILING:
            break
        end -= 1
    return url[:end]


def too_long(what: str, size: int) -> str:
    return (
        f"'{what}' is {size:,} characters long; the limit is {MAX_ABSTRACT_CHARS:,} "
        "(an abstract, not a whole paper): shorten it"
    )


def clean_text(text: str) -> str:
    """Collapse all whitespace (newlines inside arXiv fields included) and drop control characters."""
    if _CONTROL.search(text):
        text = _CONTROL.sub(" ", text)
    return " ".join(text.split())


def _first_str(fields: dict[str, Any], extra: dict[str, Any], keys: Sequence[str]) -> str:
    for source in (fields, extra):
        for key in keys:
            value = source.get(key)
            if isinstance(value, str) and clean_text(value):
                return clean_text(value)
    return ""


def lower_keys(record: dict[Any, Any]) -> dict[str, Any]:
    """Case-insensitive field names; an exact lowercase key wins over ``Title``/``TITLE``."""
    lowered: dict[str, Any] = {}
    for key, value in record.items():
        name = key.strip().lower() if isinstance(key, str) else str(key).lower()
        if name not in lowered or key == name:
            lowered[name] = value
    return lowered
