"""What a corpus load reports: ``LoadProblem`` (one unusable file, line, record or row, named precisely
enough to fix it), ``LoadResult`` (the papers, the problems, the files read), where each paper came from,
and the short wording helpers every reader shares (one-line text, type names, OS error reasons).
"""

from __future__ import annotations

import errno
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag.text import one_line
from rag.types import Paper


@dataclass(frozen=True)
class LoadProblem:
    """One thing that could not be used, named precisely enough to find and fix it."""

    path: str  # the file as the user gave it or as we found it in a folder
    location: str | None  # "line 7", "record 3", "row 12 (line 13)"; None for the whole file
    reason: str  # what is wrong and, where useful, what to do
    kept: bool = False  # True for a note about a record that was stored anyway (a bad year, say)

    def __str__(self) -> str:
        parts = [self.path] + ([self.location] if self.location else []) + [self.reason]
        return ": ".join(_one_line(part) for part in parts)


@dataclass
class LoadResult:
    """Everything a load produced: the papers, the problems, and which files were read."""

    papers: list[Paper] = field(default_factory=list)
    problems: list[LoadProblem] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    labels: dict[Path, str] = field(default_factory=dict)  # file -> the prefix of its papers' ids (namespaced)


@dataclass(frozen=True)
class Located:
    """A paper and where it came from, so a duplicate id can name both places."""

    paper: Paper
    path: str
    location: str
    local_id: str | None = None  # the id within its file, when ``paper.paper_id`` is namespaced


@dataclass
class FileLoad:
    """What one file gave: papers with their places, problems, and whether any bytes were read."""

    located: list[Located] = field(default_factory=list)
    problems: list[LoadProblem] = field(default_factory=list)
    read: bool = False


def _one_line(text: str) -> str:
    # Blank text is shown quoted, so a problem never names an invisible value.
    return one_line(text, limit=sys.maxsize) or repr(text)


def short(text: str, limit: int) -> str:
    text = _one_line(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def json_syntax(error: json.JSONDecodeError) -> str:
    """What ``error`` says, as a whole phrase: json's message ends in "at" before the position it leaves to the
    caller ("Invalid control character at", "Unterminated string starting at"); the caller's location says it."""
    return error.msg.removesuffix(" at").replace("string starting", "string that starts there")


def json_cut_off(text: str, error: json.JSONDecodeError) -> bool:
    """Whether the JSON broke because the text ends inside it (a string never closed, nothing after the place)."""
    return error.msg.startswith("Unterminated string") or not text[error.pos:].strip()


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def os_reason(error: OSError) -> str:
    """A short, fixable reason for an OS error."""
    if isinstance(error, PermissionError):
        return "permission denied; check the file's permissions (e.g. chmod +r)"
    if error.errno == errno.ELOOP:
        return "symbolic link loop (the link points back to itself); fix or remove the link"
    return _one_line(error.strerror or str(error))
