"""Bytes to text: every corpus file is UTF-8 (a BOM is tolerated); UTF-16 and binary files are named
as such, and a bad byte is reported with its offset and the fix.
"""

from __future__ import annotations

import codecs

from rag.corpus.problems import LoadProblem


def decode(data: bytes, shown: str, problems: list[LoadProblem]) -> str | None:
    """UTF-8 text of a whole file (BOM tolerated), or None with a problem saying why not."""
    problem = binary_problem(data, shown)
    if problem is None and not data.removeprefix(codecs.BOM_UTF8).strip():
        problem = LoadProblem(shown, None, "empty file")
    if problem is None:
        text, reason = utf8_text(data)
        if reason is None and text is not None:
            return text
        problem = LoadProblem(shown, None, reason or "not UTF-8")
    problems.append(problem)
    return None


def binary_problem(data: bytes, shown: str) -> LoadProblem | None:
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return LoadProblem(shown, None, "file is UTF-16, not UTF-8; re-save it as UTF-8")
    if b"\x00" in data:
        offset = data.index(b"\x00")
        return LoadProblem(shown, None, f"binary file (NUL byte at byte offset {offset}); expected UTF-8 text")
    return None


def utf8_text(data: bytes, base_offset: int = 0) -> tuple[str | None, str | None]:
    """Decode UTF-8 (dropping a BOM); on failure, a reason naming the byte offset and the fix."""
    body = data[len(codecs.BOM_UTF8) :] if data.startswith(codecs.BOM_UTF8) else data
    skipped = len(data) - len(body)
    try:
        return body.decode("utf-8"), None
    except UnicodeDecodeError as e:
        offset = base_offset + skipped + e.start
        byte = body[e.start : e.start + 1].hex().upper()
        return None, f"not UTF-8: invalid byte 0x{byte} at byte offset {offset}; re-save the file as UTF-8"
