"""Finding corpus files: the files under the paths given (folders walked recursively, in sorted order,
links followed but never out of the folder or round a loop), with a problem for every entry that
cannot be loaded (unsupported type, broken link, pipe...).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

from rag.corpus.problems import LoadProblem, os_reason

SUPPORTED_SUFFIXES = (".txt", ".jsonl", ".ndjson", ".json", ".csv")
UNSUPPORTED_REASON = "unsupported file type; use .txt, .jsonl, .json or .csv"


def corpus_files(path: Path) -> Iterator[tuple[Path, LoadProblem | None]]:
    """Files to load under ``path`` or problems about entries that cannot be loaded, in sorted order."""
    if path.is_dir():
        yield from _walk(path)
    elif is_supported(path) or not path.is_file():
        yield path, None  # load_file reports what is wrong with non-regular files
    else:
        yield path, LoadProblem(str(path), None, UNSUPPORTED_REASON)


def _walk(root: Path) -> Iterator[tuple[Path, LoadProblem | None]]:
    """Depth-first, name-sorted walk that follows links to folders but never enters one twice (no loops).

    A symbolic link whose target lies outside ``root`` is skipped without being opened: a corpus folder
    (perhaps unpacked from someone else's archive) must not pull in files from elsewhere on the machine.
    """
    inside = identity(root)
    visited: set[tuple[int, int]] = set()
    stack: list[Path] = [root]
    found_any = False
    while stack:
        folder = stack.pop()
        try:
            info = folder.stat()
        except OSError as e:
            yield folder, LoadProblem(str(folder), None, f"cannot open folder: {os_reason(e)}")
            continue
        if (info.st_dev, info.st_ino) in visited:
            continue
        visited.add((info.st_dev, info.st_ino))
        try:
            entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
        except OSError as e:
            yield folder, LoadProblem(str(folder), None, f"cannot list folder: {os_reason(e)}")
            continue
        subfolders: list[Path] = []
        for entry in entries:
            if entry.name.startswith("."):
                continue  # .DS_Store, .gitkeep, .git/: never corpus content
            entry_path = folder / entry.name
            if entry.is_symlink() and _leaves(entry_path, inside):
                yield entry_path, LoadProblem(str(entry_path), None, _OUTSIDE_LINK)
                continue
            kind = _entry_kind(entry)
            if kind == "dir":
                subfolders.append(entry_path)
            elif kind == "file" and is_supported(entry_path):
                found_any = True
                yield entry_path, None
            elif kind == "file":
                yield entry_path, LoadProblem(str(entry_path), None, UNSUPPORTED_REASON)
            else:
                yield entry_path, LoadProblem(str(entry_path), None, kind)
        stack.extend(reversed(subfolders))
    if not found_any:
        yield (
            root,
            LoadProblem(str(root), None, "no corpus files in this folder; add .txt, .jsonl, .json or .csv files"),
        )


_OUTSIDE_LINK = (
    "symbolic link to a place outside the corpus folder; skipped (copy the file into the folder, "
    "or pass the link itself as an argument to ingest it)"
)


def _leaves(path: Path, root: Path) -> bool:
    """Whether a link's target is outside ``root`` (a broken or looping link is reported elsewhere)."""
    try:
        target = path.resolve(strict=True)
    except (OSError, RuntimeError):
        return False
    return not target.is_relative_to(root)


def _entry_kind(entry: os.DirEntry) -> str:
    """Either "dir", "file", or the reason the entry is skipped (broken link, pipe, device...)."""
    try:
        if entry.is_dir():
            return "dir"
        if entry.is_file():
            return "file"
        if entry.is_symlink():
            return "broken symbolic link (its target does not exist or loops); fix or remove the link"
    except OSError as e:
        return os_reason(e) if e.errno == errno.ELOOP else f"cannot inspect: {os_reason(e)}"
    return "not a regular file (pipe, socket or device); skipped"


def is_supported(path: Path) -> bool:
    return path.suffix.lower() in SUPPORTED_SUFFIXES


def identity(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path.absolute()
