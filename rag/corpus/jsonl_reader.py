"""JSON Lines (``.jsonl``/``.ndjson``, and ``.json`` files that are JSON Lines, like arXiv's metadata dump):
one object per line, streamed so multi-gigabyte files need not fit in memory; a bad line is one problem."""

from __future__ import annotations

import codecs
import json
from pathlib import Path
from typing import IO, Any

from rag.corpus.decoding import binary_problem, utf8_text
from rag.corpus.problems import FileLoad, LoadProblem, json_cut_off, json_syntax, json_type, short
from rag.corpus.records import add_record

SNIFF_BYTES = 8192
MAX_SNIFF_LINE = 1 << 20


def is_json_lines(handle: IO[bytes]) -> bool:
    """True for JSON Lines saved as .json (arXiv's ``arxiv-metadata-oai-snapshot.json``), read from the
    start of ``handle`` (the caller rewinds it).

    The first line holds one complete object and more content follows. Streaming such a file avoids
    reading a multi-gigabyte dump into memory only to fail with "Extra data".
    """
    first = handle.readline(MAX_SNIFF_LINE).removeprefix(codecs.BOM_UTF8)
    if not first.lstrip().startswith(b"{") or b"\x00" in first:
        return False
    try:
        value = json.loads(first.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return False
    return isinstance(value, dict) and bool(handle.read(SNIFF_BYTES).strip())


def load_jsonl(handle: IO[bytes], path: Path) -> FileLoad:
    """JSON Lines from ``handle`` (positioned at the start of ``path``), streamed line by line so
    multi-gigabyte dumps (arXiv) do not need to fit in memory."""
    shown = str(path)
    loaded = FileLoad()
    ordinal = 0
    offset = 0
    head = handle.read(SNIFF_BYTES)
    loaded.read = True
    problem = binary_problem(head, shown)
    if problem and not (b"\x00" in head and _has_json_line(head)):
        loaded.problems.append(problem)
        return loaded
    # A NUL byte beside lines of JSON is one bad line (reported below), not a binary file.
    handle.seek(0)
    for line_no, raw in enumerate(handle, start=1):
        line_offset, offset = offset, offset + len(raw)
        if not raw.strip():
            continue
        ordinal += 1
        record = _jsonl_record(raw, line_no, line_offset, shown, loaded.problems)
        if record is not None:
            add_record(record, path, ordinal, f"line {line_no}", loaded.located, loaded.problems)
    if ordinal == 0:
        loaded.problems.append(LoadProblem(shown, None, "empty file"))
    elif not loaded.located and not loaded.problems:
        loaded.problems.append(LoadProblem(shown, None, "no records found"))
    return loaded


def _has_json_line(head: bytes) -> bool:
    """Whether a complete line at the start of a file is a JSON object (so the file is JSON Lines)."""
    for line in head.splitlines()[:-1] or head.splitlines():
        if line.strip() and b"\x00" not in line:
            try:
                return isinstance(json.loads(line.decode("utf-8")), dict)
            except (ValueError, RecursionError):
                return False
    return False


def _jsonl_record(raw: bytes, line_no: int, offset: int, shown: str, problems: list[LoadProblem]) -> Any:
    """The parsed object on one JSONL line, or None with a problem naming the line."""
    where = f"line {line_no}"
    if b"\x00" in raw:
        problems.append(LoadProblem(shown, where, "contains NUL bytes (binary data); line skipped"))
        return None
    text, reason = utf8_text(raw, offset)
    if text is None:
        problems.append(LoadProblem(shown, where, f"{reason}; line skipped"))
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        hint = "; this looks like a JSON array: rename the file to .json" if text.lstrip().startswith("[") else ""
        cut = " (the line ends inside its JSON: is it cut off?)" if json_cut_off(text, e) else ""
        problems.append(LoadProblem(shown, where,
                                    f"malformed JSON at column {e.colno}: {json_syntax(e)}{cut}; line skipped{hint}"))
        return None
    except RecursionError:
        problems.append(LoadProblem(shown, where, "JSON nested too deeply; line skipped"))
        return None
    except ValueError as e:  # e.g. an integer literal longer than Python's digit limit
        problems.append(LoadProblem(shown, where, f"malformed JSON: {short(str(e), 120)}; line skipped"))
        return None
    if not isinstance(value, dict):
        problems.append(LoadProblem(shown, where, f"not a JSON object (got {json_type(value)}); line skipped"))
        return None
    return value
