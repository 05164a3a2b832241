"""Load abstracts from files and folders into ``Paper`` records, reporting every problem in plain words.

Formats: the seed ``.txt`` format (optional header line, then one abstract per paragraph), JSON Lines
(``.jsonl``/``.ndjson``), JSON (``.json``) and CSV (``.csv``). JSON and CSV records may carry ``id``/``_id``,
``title``, ``abstract``/``text``, ``authors``, ``url``, ``venue``/``journal-ref`` and ``year``/``update_date``,
which covers BEIR corpora and the arXiv metadata dump as they come.

Loading never stops at bad content: each unusable file, line, record or row becomes a ``LoadProblem``
and every valid record is still returned. Only a path that does not exist raises ``CorpusError``, since
that is almost always a typo the user wants to hear about before anything else happens.

This module is the entry point: it finds the files (rag.corpus.discovery), opens each one, hands it to
the reader of its format (txt_reader, jsonl_reader, json_reader, csv_reader, which share
rag.corpus.records) and keeps the first paper of each id.
"""

from __future__ import annotations

import stat
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import IO

from rag.corpus.csv_reader import parse_csv
from rag.corpus.decoding import decode
from rag.corpus.discovery import SUPPORTED_SUFFIXES, UNSUPPORTED_REASON, corpus_files, identity
from rag.corpus.json_reader import parse_json
from rag.corpus.jsonl_reader import is_json_lines, load_jsonl
from rag.corpus.problems import FileLoad, LoadProblem, LoadResult, Located, _one_line, os_reason, short
from rag.corpus.txt_reader import parse_txt
from rag.errors import CorpusError
from rag.text import counted
from rag.types import Paper

__all__ = ["file_label", "load_corpus", "load_file"]

MAX_PROBLEMS_PER_FILE = 50  # a broken file should not drown the report; the rest is summarised
# An abstract shorter than this is most likely a placeholder or the wrong field ("x", "TBD", "N/A"): said, and stored.
MIN_ABSTRACT_WORDS = 2


def load_corpus(paths: Sequence[str | Path], *, namespace_under: Path | None = None,
                known_label: Callable[[Path], str | None] | None = None) -> LoadResult:
    """Load every corpus file under ``paths`` (files and folders, recursively, in sorted order).

    With ``namespace_under`` (the corpus folder), every paper id is prefixed with its file's label
    (``file_label``) and ``#``: ``corpus.jsonl#doc1``, ``x/papers.jsonl#3``. Two files then never share an
    id, whatever ids their records carry; ``result.labels`` maps each file read to its label.
    ``known_label`` (resolved path -> the label an index already holds the file under, or None) wins over
    ``file_label``: a file keeps the label it was first stored under, given by itself or found in a folder.
    It is asked only once the paths are known to exist and a file was found.

    Raises ``CorpusError`` only when a given path does not exist; all else is reported as problems.
    """
    given = [Path(p) for p in paths]
    for path in given:
        if not path.exists() and not path.is_symlink():
            raise CorpusError(
                f"corpus path not found: {_one_line(str(path))} "
                "(check the spelling, or pass a file or folder of .txt, .jsonl, .json or .csv files)"
            )
    result = LoadResult()
    seen_files: set[Path] = set()
    first_place: dict[str, Located] = {}
    for path in given:
        for file_path, problem in corpus_files(path):
            if problem:
                result.problems.append(problem)
                continue
            key = identity(file_path)
            if key in seen_files:
                continue  # given twice (a file and its folder, or two links): read once
            seen_files.add(key)
            loaded = _load_located(file_path)
            if namespace_under is not None:
                label = (known_label and known_label(key)) or file_label(
                    file_path, namespace_under, folder=path if path.is_dir() else None
                )
                result.labels[file_path] = label
                loaded.located = [_namespaced(item, file_path, label) for item in loaded.located]
            if loaded.read:
                result.files.append(file_path)
            result.problems.extend(loaded.problems)
            for item in loaded.located:
                if _keep_first(item, first_place, result.problems):
                    result.papers.append(item.paper)
                    if (words := len(item.paper.abstract.split())) < MIN_ABSTRACT_WORDS:
                        result.problems.append(LoadProblem(item.path, item.location, (
                            f"the abstract is only {counted(words, 'word')}: stored, but a search will match it "
                            "by chance; check that the abstract field holds the abstract"), kept=True))
    return result


def file_label(path: Path, corpus_dir: Path, *, folder: Path | None = None) -> str:
    """How a file is named in paper ids: its path relative to the corpus folder when it lies inside it
    (``000_x.txt``), else relative to the folder being ingested when it was found in one (so a new version
    of a corpus folder updates the papers of the old one), else, for a file given by itself, relative to
    the working folder (``x/papers.jsonl``), else absolute. Two files given by themselves never share a label."""
    resolved = identity(path)
    bases = (corpus_dir, folder, Path.cwd()) if folder is not None else (corpus_dir, Path.cwd())
    for base in bases:
        root = identity(base)
        if resolved.is_relative_to(root):
            return resolved.relative_to(root).as_posix()
    return resolved.as_posix()


def _namespaced(item: Located, path: Path, label: str) -> Located:
    """The paper with its id prefixed by its file's label (an id derived from the position keeps its number)."""
    paper = item.paper
    derived = f"{path.name}#{paper.ordinal}"
    local = str(paper.ordinal) if paper.paper_id == derived else paper.paper_id
    return Located(replace(paper, paper_id=f"{label}#{local}"), item.path, item.location, local)


def load_file(path: Path) -> tuple[list[Paper], list[LoadProblem]]:
    """Load one corpus file; never raises for its content. Duplicate ids within the file are problems."""
    loaded = _load_located(Path(path))
    first_place: dict[str, Located] = {}
    problems = list(loaded.problems)
    papers = [item.paper for item in loaded.located if _keep_first(item, first_place, problems)]
    return papers, problems


def _load_located(path: Path) -> FileLoad:
    """Read and parse one file, catching every surprise so that content can never raise."""
    shown = str(path)
    problem = _check_regular_file(path)
    if problem:
        return FileLoad(problems=[problem])
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        return FileLoad(problems=[LoadProblem(shown, None, UNSUPPORTED_REASON)])
    try:
        loaded = _read(path, suffix)
    except OSError as e:
        return FileLoad(problems=[LoadProblem(shown, None, f"cannot read file: {os_reason(e)}")])
    except (MemoryError, RecursionError) as e:
        return FileLoad(
            problems=[LoadProblem(shown, None, f"file too large or deeply nested to load ({type(e).__name__})")]
        )
    except Exception as e:  # noqa: BLE001 - the contract: no file content may crash a load
        reason = f"unexpected error while loading ({type(e).__name__}: {short(str(e), 120)}); please report this"
        return FileLoad(problems=[LoadProblem(shown, None, reason)])
    loaded.problems = _cap_problems(loaded.problems, shown)
    return loaded


def _check_regular_file(path: Path) -> LoadProblem | None:
    """Refuse folders, pipes and devices up front: opening a pipe would hang the load."""
    try:
        mode = path.stat().st_mode
    except OSError as e:
        return LoadProblem(str(path), None, f"cannot read file: {os_reason(e)}")
    if stat.S_ISDIR(mode):
        return LoadProblem(str(path), None, "is a folder, not a file; pass the folder to load everything in it")
    if not stat.S_ISREG(mode):
        return LoadProblem(str(path), None, "not a regular file (pipe, socket or device); skipped")
    return None


def _open_binary(path: Path) -> IO[bytes]:
    """The only place files are opened (tests replace it to simulate unreadable files)."""
    return open(path, "rb")  # noqa: SIM115 - callers close it with ``with``


def _read(path: Path, suffix: str) -> FileLoad:
    """Open the file once: JSON Lines (also when saved as .json) is streamed, the other formats read whole."""
    with _open_binary(path) as handle:
        if suffix in (".jsonl", ".ndjson") or (suffix == ".json" and is_json_lines(handle)):
            handle.seek(0)
            return load_jsonl(handle, path)
        handle.seek(0)
        data = handle.read()
    loaded = FileLoad(read=True)
    text = decode(data, str(path), loaded.problems)
    if text is None:
        return loaded
    if suffix == ".txt":
        loaded.located, problems = parse_txt(text, path)
    elif suffix == ".json":
        loaded.located, problems = parse_json(text, path)
    else:
        loaded.located, problems = parse_csv(text, path)
    loaded.problems.extend(problems)
    return loaded


def _cap_problems(problems: list[LoadProblem], shown: str) -> list[LoadProblem]:
    if len(problems) <= MAX_PROBLEMS_PER_FILE:
        return problems
    hidden = len(problems) - MAX_PROBLEMS_PER_FILE
    return [
        *problems[:MAX_PROBLEMS_PER_FILE],
        LoadProblem(shown, None, f"{hidden} more problems in this file not shown"),
    ]


def _keep_first(item: Located, first_place: dict[str, Located], problems: list[LoadProblem]) -> bool:
    """True for the first paper with its id; later ones become a problem naming both places."""
    earlier = first_place.get(item.paper.paper_id)
    if earlier is None:
        first_place[item.paper.paper_id] = item
        return True
    same_name = earlier.paper.source == item.paper.source and earlier.path != item.path
    hint = "; two files share this name: rename one" if same_name else ""
    problems.append(
        LoadProblem(
            item.path,
            item.location,
            f"duplicate id {short(item.local_id or item.paper.paper_id, 80)!r} "
            f"(first at {earlier.path}: {earlier.location}); "
            f"kept the first, skipped this one{hint}",
        )
    )
    return False
