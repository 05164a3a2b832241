"""The seed ``.txt`` format: an optional header line (the venue, like ``ICML 2026 Papers``), then one
abstract per paragraph (paragraphs separated by blank lines)."""

from __future__ import annotations

import re
from pathlib import Path

from rag.corpus.problems import LoadProblem, Located, short
from rag.corpus.records import MAX_ABSTRACT_CHARS, clean_text, make_paper, too_long, year_from

MAX_HEADER_CHARS = 100
MAX_HEADER_WORDS = 12
_SENTENCE_FINAL = (".", "!", "?", "…", ":", ";")
_VENUE_SUFFIX = re.compile(r"\s+(?:papers|abstracts)\s*$", re.IGNORECASE)


def parse_txt(text: str, path: Path) -> tuple[list[Located], list[LoadProblem]]:
    """Seed format: an optional header line (the venue), then one abstract per paragraph."""
    paragraphs = _paragraphs(text)
    venue = ""
    if len(paragraphs) == 1 and _is_header(paragraphs[0][1]):
        header = short(paragraphs[0][1][0], 60)
        reason = f"no abstracts found, only the header line {header!r}; add one abstract per paragraph after it"
        return [], [LoadProblem(str(path), None, reason)]
    if len(paragraphs) > 1 and _is_header(paragraphs[0][1]):
        venue = _VENUE_SUFFIX.sub("", clean_text(paragraphs[0][1][0]))
        paragraphs = paragraphs[1:]
    year = year_from(venue)
    located: list[Located] = []
    problems: list[LoadProblem] = []
    for line_no, lines in paragraphs:
        size = sum(len(line) + 1 for line in lines)
        if size > MAX_ABSTRACT_CHARS:
            problems.append(LoadProblem(str(path), f"line {line_no}", too_long("paragraph", size) + "; skipped"))
            continue
        abstract = clean_text(" ".join(lines))
        if not any(ch.isalpha() for ch in abstract):
            problems.append(LoadProblem(str(path), f"line {line_no}", "paragraph has no words; skipped"))
            continue
        ordinal = len(located) + 1
        paper = make_paper(
            paper_id=f"{path.name}#{ordinal}",
            title="",
            abstract=abstract,
            source=path.name,
            ordinal=ordinal,
            venue=venue,
            year=year,
        )
        located.append(Located(paper, str(path), f"paragraph at line {line_no}"))
    if not located:
        reason = "no abstracts found; put one abstract per paragraph, separated by blank lines"
        problems.append(LoadProblem(str(path), None, reason))
    return located, problems


def _paragraphs(text: str) -> list[tuple[int, list[str]]]:
    """Runs of non-blank lines with the line number each starts on (CRLF and whitespace-only lines handled)."""
    paragraphs: list[tuple[int, list[str]]] = []
    current: list[str] = []
    start = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            if not current:
                start = number
            current.append(line.strip())
        elif current:
            paragraphs.append((start, current))
            current = []
    if current:
        paragraphs.append((start, current))
    return paragraphs


def _is_header(lines: list[str]) -> bool:
    """A single short line without sentence-final punctuation, like ``ICML 2026 Papers``."""
    if len(lines) != 1:
        return False
    line = clean_text(lines[0])
    return (
        0 < len(line) <= MAX_HEADER_CHARS
        and len(line.split()) <= MAX_HEADER_WORDS
        and not line.endswith(_SENTENCE_FINAL)
    )
