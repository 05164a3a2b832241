"""Load abstracts from files and folders into ``Paper`` records, reporting every problem in plain words.

Formats: the seed ``.txt`` format (optional header line, then one abstract per paragraph), JSON Lines
(``.jsonl``/``.ndjson``), JSON (``.json``) and CSV (``.csv``). JSON and CSV records may carry ``id``/``_id``,
``title``, ``abstract``/``text``, ``authors``, ``url``, ``venue``/``journal-ref`` and ``year``/``update_date``,
which covers BEIR corpora and the arXiv metadata dump as they come.

Loading never stops at bad content: each unusable file, line, record or row becomes a ``LoadProblem``
and every valid record is still returned. Only a path that does not exist raises ``CorpusError``, since
that is almost always a typo the user wants to hear about before anything else happens.
"""

from __future__ import annotations

import codecs
import csv
import errno
import io
import json
import os
import re
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from rag.corpus.titles import derive_title
from rag.errors import CorpusError
from rag.text import clean_input, clean_value
from rag.types import Paper

__all__ = [
    "SUPPORTED_SUFFIXES",
    "LoadProblem",
    "LoadResult",
    "extract_urls",
    "file_label",
    "load_corpus",
    "load_file",
]

SUPPORTED_SUFFIXES = (".txt", ".jsonl", ".ndjson", ".json", ".csv")
UNSUPPORTED_REASON = "unsupported file type; use .txt, .jsonl, .json or .csv"
MAX_PROBLEMS_PER_FILE = 50  # a broken file should not drown the report; the rest is summarised
SNIFF_BYTES = 8192
MAX_SNIFF_LINE = 1 << 20
MAX_HEADER_CHARS = 100
MAX_HEADER_WORDS = 12
TEXT_KEYS = ("abstract", "text")
ID_KEYS = ("id", "_id")
VENUE_KEYS = ("venue", "journal-ref", "journal_ref")
DATE_KEYS = ("update_date", "date", "published")
COLLECTION_KEYS = ("papers", "records", "data")
# Longest abstract (or text) accepted, in characters. Abstracts run to 2,000-5,000; a longer "abstract" is a
# whole paper or a broken record, and would cost minutes of embedding for nothing useful.
MAX_ABSTRACT_CHARS = 100_000

_URL = re.compile(r"(?:https?://|www\.)[^\s<>\"'{}|\\^`\[\]]+", re.IGNORECASE)
_URL_HAS_HOST = re.compile(r"(?:https?://|www\.)[^\W_]", re.IGNORECASE)
_URL_TRAILING = ".,;:!?'\"*"
_YEAR = re.compile(r"(?<!\d)([12]\d\d\d)(?!\d)")
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
_SENTENCE_FINAL = (".", "!", "?", "…", ":", ";")
_AUTHOR_AND = re.compile(r"\s+and\s+|\s*&\s*", re.IGNORECASE)
_LEADING_AND = re.compile(r"^and\s+", re.IGNORECASE)
_VENUE_SUFFIX = re.compile(r"\s+(?:papers|abstracts)\s*$", re.IGNORECASE)


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
class _Located:
    """A paper and where it came from, so a duplicate id can name both places."""

    paper: Paper
    path: str
    location: str
    local_id: str | None = None  # the id within its file, when ``paper.paper_id`` is namespaced


@dataclass
class _FileLoad:
    """What one file gave: papers with their places, problems, and whether any bytes were read."""

    located: list[_Located] = field(default_factory=list)
    problems: list[LoadProblem] = field(default_factory=list)
    read: bool = False


# --- public API --------------------------------------------------------------------------------


def load_corpus(paths: Sequence[str | Path], *, namespace_under: Path | None = None) -> LoadResult:
    """Load every corpus file under ``paths`` (files and folders, recursively, in sorted order).

    With ``namespace_under`` (the corpus folder), every paper id is prefixed with its file's label
    (``file_label``) and ``#``: ``corpus.jsonl#doc1``, ``x/papers.jsonl#3``. Two files then never share an
    id, whatever ids their records carry; ``result.labels`` maps each file read to its label.

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
    first_place: dict[str, _Located] = {}
    for path in given:
        for file_path, problem in _corpus_files(path):
            if problem:
                result.problems.append(problem)
                continue
            key = _identity(file_path)
            if key in seen_files:
                continue  # given twice (a file and its folder, or two links): read once
            seen_files.add(key)
            loaded = _load_located(file_path)
            if namespace_under is not None:
                label = file_label(file_path, namespace_under, folder=path if path.is_dir() else None)
                result.labels[file_path] = label
                loaded.located = [_namespaced(item, file_path, label) for item in loaded.located]
            if loaded.read:
                result.files.append(file_path)
            result.problems.extend(loaded.problems)
            for item in loaded.located:
                if _keep_first(item, first_place, result.problems):
                    result.papers.append(item.paper)
    return result


def file_label(path: Path, corpus_dir: Path, *, folder: Path | None = None) -> str:
    """How a file is named in paper ids: its path relative to the corpus folder when it lies inside it
    (``000_x.txt``), else relative to the folder being ingested when it was found in one (so a new version
    of a corpus folder updates the papers of the old one), else, for a file given by itself, relative to
    the working folder (``x/papers.jsonl``), else absolute. Two files given by themselves never share a label."""
    resolved = _identity(path)
    bases = (corpus_dir, folder, Path.cwd()) if folder is not None else (corpus_dir, Path.cwd())
    for base in bases:
        root = _identity(base)
        if resolved.is_relative_to(root):
            return resolved.relative_to(root).as_posix()
    return resolved.as_posix()


def _namespaced(item: _Located, path: Path, label: str) -> _Located:
    """The paper with its id prefixed by its file's label (an id derived from the position keeps its number)."""
    paper = item.paper
    derived = f"{path.name}#{paper.ordinal}"
    local = str(paper.ordinal) if paper.paper_id == derived else paper.paper_id
    return _Located(replace(paper, paper_id=f"{label}#{local}"), item.path, item.location, local)


def load_file(path: Path) -> tuple[list[Paper], list[LoadProblem]]:
    """Load one corpus file; never raises for its content. Duplicate ids within the file are problems."""
    loaded = _load_located(Path(path))
    first_place: dict[str, _Located] = {}
    problems = list(loaded.problems)
    papers = [item.paper for item in loaded.located if _keep_first(item, first_place, problems)]
    return papers, problems


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


# --- finding files -----------------------------------------------------------------------------


def _corpus_files(path: Path) -> Iterator[tuple[Path, LoadProblem | None]]:
    """Files to load under ``path`` or problems about entries that cannot be loaded, in sorted order."""
    if path.is_dir():
        yield from _walk(path)
    elif _supported(path) or not path.is_file():
        yield path, None  # load_file reports what is wrong with non-regular files
    else:
        yield path, LoadProblem(str(path), None, UNSUPPORTED_REASON)


def _walk(root: Path) -> Iterator[tuple[Path, LoadProblem | None]]:
    """Depth-first, name-sorted walk that follows links to folders but never enters one twice (no loops).

    A symbolic link whose target lies outside ``root`` is skipped without being opened: a corpus folder
    (perhaps unpacked from someone else's archive) must not pull in files from elsewhere on the machine.
    """
    inside = _identity(root)
    visited: set[tuple[int, int]] = set()
    stack: list[Path] = [root]
    found_any = False
    while stack:
        folder = stack.pop()
        try:
            info = folder.stat()
        except OSError as e:
            yield folder, LoadProblem(str(folder), None, f"cannot open folder: {_os_reason(e)}")
            continue
        if (info.st_dev, info.st_ino) in visited:
            continue
        visited.add((info.st_dev, info.st_ino))
        try:
            entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
        except OSError as e:
            yield folder, LoadProblem(str(folder), None, f"cannot list folder: {_os_reason(e)}")
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
            elif kind == "file" and _supported(entry_path):
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
        return _os_reason(e) if e.errno == errno.ELOOP else f"cannot inspect: {_os_reason(e)}"
    return "not a regular file (pipe, socket or device); skipped"


def _supported(path: Path) -> bool:
    return path.suffix.lower() in SUPPORTED_SUFFIXES


def _identity(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path.absolute()


# --- one file ----------------------------------------------------------------------------------


def _load_located(path: Path) -> _FileLoad:
    """Read and parse one file, catching every surprise so that content can never raise."""
    shown = str(path)
    problem = _check_regular_file(path)
    if problem:
        return _FileLoad(problems=[problem])
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        return _FileLoad(problems=[LoadProblem(shown, None, UNSUPPORTED_REASON)])
    try:
        streamed = suffix in (".jsonl", ".ndjson") or (suffix == ".json" and _is_json_lines(path))
        loaded = _load_jsonl(path) if streamed else _load_whole(path, suffix)
    except OSError as e:
        return _FileLoad(problems=[LoadProblem(shown, None, f"cannot read file: {_os_reason(e)}")])
    except (MemoryError, RecursionError) as e:
        return _FileLoad(
            problems=[LoadProblem(shown, None, f"file too large or deeply nested to load ({type(e).__name__})")]
        )
    except Exception as e:  # noqa: BLE001 - the contract: no file content may crash a load
        reason = f"unexpected error while loading ({type(e).__name__}: {_short(str(e), 120)}); please report this"
        return _FileLoad(problems=[LoadProblem(shown, None, reason)])
    loaded.problems = _cap_problems(loaded.problems, shown)
    return loaded


def _check_regular_file(path: Path) -> LoadProblem | None:
    """Refuse folders, pipes and devices up front: opening a pipe would hang the load."""
    try:
        mode = path.stat().st_mode
    except OSError as e:
        return LoadProblem(str(path), None, f"cannot read file: {_os_reason(e)}")
    if stat.S_ISDIR(mode):
        return LoadProblem(str(path), None, "is a folder, not a file; pass the folder to load everything in it")
    if not stat.S_ISREG(mode):
        return LoadProblem(str(path), None, "not a regular file (pipe, socket or device); skipped")
    return None


def _open_binary(path: Path) -> IO[bytes]:
    """The only place files are opened (tests replace it to simulate unreadable files)."""
    return open(path, "rb")  # noqa: SIM115 - callers close it with ``with``


def _load_whole(path: Path, suffix: str) -> _FileLoad:
    with _open_binary(path) as handle:
        data = handle.read()
    loaded = _FileLoad(read=True)
    text = _decode(data, str(path), loaded.problems)
    if text is None:
        return loaded
    if suffix == ".txt":
        loaded.located, problems = _parse_txt(text, path)
    elif suffix == ".json":
        loaded.located, problems = _parse_json(text, path)
    else:
        loaded.located, problems = _parse_csv(text, path)
    loaded.problems.extend(problems)
    return loaded


def _decode(data: bytes, shown: str, problems: list[LoadProblem]) -> str | None:
    """UTF-8 text of a whole file (BOM tolerated), or None with a problem saying why not."""
    problem = _binary_problem(data, shown)
    if problem is None and not data.removeprefix(codecs.BOM_UTF8).strip():
        problem = LoadProblem(shown, None, "empty file")
    if problem is None:
        text, reason = _utf8(data)
        if reason is None and text is not None:
            return text
        problem = LoadProblem(shown, None, reason or "not UTF-8")
    problems.append(problem)
    return None


def _binary_problem(data: bytes, shown: str) -> LoadProblem | None:
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return LoadProblem(shown, None, "file is UTF-16, not UTF-8; re-save it as UTF-8")
    if b"\x00" in data:
        offset = data.index(b"\x00")
        return LoadProblem(shown, None, f"binary file (NUL byte at byte offset {offset}); expected UTF-8 text")
    return None


def _utf8(data: bytes, base_offset: int = 0) -> tuple[str | None, str | None]:
    """Decode UTF-8 (dropping a BOM); on failure, a reason naming the byte offset and the fix."""
    body = data[len(codecs.BOM_UTF8) :] if data.startswith(codecs.BOM_UTF8) else data
    skipped = len(data) - len(body)
    try:
        return body.decode("utf-8"), None
    except UnicodeDecodeError as e:
        offset = base_offset + skipped + e.start
        byte = body[e.start : e.start + 1].hex().upper()
        return None, f"not UTF-8: invalid byte 0x{byte} at byte offset {offset}; re-save the file as UTF-8"


# --- .txt --------------------------------------------------------------------------------------


def _parse_txt(text: str, path: Path) -> tuple[list[_Located], list[LoadProblem]]:
    """Seed format: an optional header line (the venue), then one abstract per paragraph."""
    paragraphs = _paragraphs(text)
    venue = ""
    if len(paragraphs) == 1 and _is_header(paragraphs[0][1]):
        header = _short(paragraphs[0][1][0], 60)
        reason = f"no abstracts found, only the header line {header!r}; add one abstract per paragraph after it"
        return [], [LoadProblem(str(path), None, reason)]
    if len(paragraphs) > 1 and _is_header(paragraphs[0][1]):
        venue = _VENUE_SUFFIX.sub("", _clean_text(paragraphs[0][1][0]))
        paragraphs = paragraphs[1:]
    year = _year_from(venue)
    located: list[_Located] = []
    problems: list[LoadProblem] = []
    for line_no, lines in paragraphs:
        size = sum(len(line) + 1 for line in lines)
        if size > MAX_ABSTRACT_CHARS:
            problems.append(LoadProblem(str(path), f"line {line_no}", _too_long("paragraph", size) + "; skipped"))
            continue
        abstract = _clean_text(" ".join(lines))
        if not any(ch.isalpha() for ch in abstract):
            problems.append(LoadProblem(str(path), f"line {line_no}", "paragraph has no words; skipped"))
            continue
        ordinal = len(located) + 1
        paper = _make_paper(
            paper_id=f"{path.name}#{ordinal}",
            title="",
            abstract=abstract,
            source=path.name,
            ordinal=ordinal,
            venue=venue,
            year=year,
        )
        located.append(_Located(paper, str(path), f"paragraph at line {line_no}"))
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
    line = _clean_text(lines[0])
    return (
        0 < len(line) <= MAX_HEADER_CHARS
        and len(line.split()) <= MAX_HEADER_WORDS
        and not line.endswith(_SENTENCE_FINAL)
    )


# --- .json / .jsonl ----------------------------------------------------------------------------


def _parse_json(text: str, path: Path) -> tuple[list[_Located], list[LoadProblem]]:
    """An array of objects, an object holding one under papers/records/data, or a single object."""
    shown = str(path)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as e:
        hint = _json_hint(text, e)
        return [], [LoadProblem(shown, f"line {e.lineno}, column {e.colno}", f"malformed JSON: {e.msg}{hint}")]
    except RecursionError:
        return [], [LoadProblem(shown, None, "JSON nested too deeply to read")]
    except ValueError as e:  # e.g. an integer literal longer than Python's digit limit
        return [], [LoadProblem(shown, None, f"malformed JSON: {_short(str(e), 120)}")]
    records, problem = _json_records(document)
    if problem:
        return [], [LoadProblem(shown, None, problem)]
    if not records:
        return [], [LoadProblem(shown, None, "no records found (the JSON array is empty)")]
    located: list[_Located] = []
    problems: list[LoadProblem] = []
    for ordinal, record in enumerate(records, start=1):
        _add_record(record, path, ordinal, f"record {ordinal}", located, problems)
    return located, problems


def _json_hint(text: str, error: json.JSONDecodeError) -> str:
    if error.msg.startswith("Extra data") and error.lineno > 1:
        return "; if this is JSON Lines (one object per line), rename the file to .jsonl"
    return "; fix the syntax there"


def _json_records(document: Any) -> tuple[list[Any], str | None]:
    if isinstance(document, list):
        return document, None
    if isinstance(document, dict):
        lowered = _lower_keys(document)
        for key in COLLECTION_KEYS:
            if isinstance(lowered.get(key), list):
                return lowered[key], None
        if any(key in lowered for key in TEXT_KEYS):
            return [document], None
        return [], (
            "JSON object has no 'papers', 'records' or 'data' list and no 'abstract' or 'text' field; "
            "expected an array of paper objects"
        )
    return [], f"expected an array of paper objects, got {_json_type(document)}"


def _is_json_lines(path: Path) -> bool:
    """True for JSON Lines saved as .json (arXiv's ``arxiv-metadata-oai-snapshot.json``).

    The first line holds one complete object and more content follows. Streaming such a file avoids
    reading a multi-gigabyte dump into memory only to fail with "Extra data".
    """
    with _open_binary(path) as handle:
        first = handle.readline(MAX_SNIFF_LINE).removeprefix(codecs.BOM_UTF8)
        if not first.lstrip().startswith(b"{") or b"\x00" in first:
            return False
        try:
            value = json.loads(first.decode("utf-8"))
        except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            return False
        return isinstance(value, dict) and bool(handle.read(SNIFF_BYTES).strip())


def _load_jsonl(path: Path) -> _FileLoad:
    """JSON Lines, streamed line by line so multi-gigabyte dumps (arXiv) do not need to fit in memory."""
    shown = str(path)
    loaded = _FileLoad()
    ordinal = 0
    offset = 0
    with _open_binary(path) as handle:
        head = handle.read(SNIFF_BYTES)
        loaded.read = True
        problem = _binary_problem(head, shown)
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
                _add_record(record, path, ordinal, f"line {line_no}", loaded.located, loaded.problems)
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
    text, reason = _utf8(raw, offset)
    if text is None:
        problems.append(LoadProblem(shown, where, f"{reason}; line skipped"))
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        hint = "; this looks like a JSON array: rename the file to .json" if text.lstrip().startswith("[") else ""
        problems.append(LoadProblem(shown, where, f"malformed JSON at column {e.colno}: {e.msg}; line skipped{hint}"))
        return None
    except RecursionError:
        problems.append(LoadProblem(shown, where, "JSON nested too deeply; line skipped"))
        return None
    except ValueError as e:  # e.g. an integer literal longer than Python's digit limit
        problems.append(LoadProblem(shown, where, f"malformed JSON: {_short(str(e), 120)}; line skipped"))
        return None
    if not isinstance(value, dict):
        problems.append(LoadProblem(shown, where, f"not a JSON object (got {_json_type(value)}); line skipped"))
        return None
    return value


# --- .csv --------------------------------------------------------------------------------------


def _parse_csv(text: str, path: Path) -> tuple[list[_Located], list[LoadProblem]]:
    """A header row (column names in any case) and one paper per row."""
    shown = str(path)
    reader = csv.reader(io.StringIO(text, newline=""))
    problems: list[LoadProblem] = []
    try:
        header = next((row for row in reader if any(cell.strip() for cell in row)), None)
    except csv.Error as e:
        return [], [LoadProblem(shown, f"line {reader.line_num}", f"malformed CSV: {e}")]
    columns = [_clean_text(name).lower() for name in header or []]
    if not any(key in columns for key in TEXT_KEYS):
        found = ", ".join(_short(c, 30) for c in columns[:12] if c) or "none"
        return [], [
            LoadProblem(
                shown,
                None,
                f"no 'abstract' or 'text' column (found: {found}); add a header row "
                "that names the abstract column 'abstract' or 'text'",
            )
        ]
    located: list[_Located] = []
    ordinal = 0
    try:
        for row in reader:
            if not any(cell.strip() for cell in row):
                continue
            ordinal += 1
            cells = row + [""] * (len(columns) - len(row))  # short rows: missing cells are empty
            record = {name: value for name, value in zip(columns, cells, strict=False) if name}
            where = f"row {ordinal} (line {reader.line_num})"
            _add_record(record, path, ordinal, where, located, problems)
    except csv.Error as e:
        problems.append(LoadProblem(shown, f"line {reader.line_num}", f"malformed CSV: {e}; stopped reading here"))
    if ordinal == 0 and not problems:
        problems.append(LoadProblem(shown, None, "no records found (only a header row)"))
    return located, problems


# --- records -----------------------------------------------------------------------------------


def _add_record(
    record: Any, path: Path, ordinal: int, where: str, located: list[_Located], problems: list[LoadProblem]
) -> None:
    """Turn one JSON/CSV record into a paper, or report why it cannot be one."""
    shown = str(path)
    if not isinstance(record, dict):
        problems.append(LoadProblem(shown, where, f"not an object (got {_json_type(record)}); skipped"))
        return
    fields = _lower_keys(clean_value(record))  # valid JSON may still hold lone surrogates ("\ud800")
    metadata = fields.get("metadata")
    extra = _lower_keys(metadata) if isinstance(metadata, dict) else {}
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
    paper = _make_paper(
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
    located.append(_Located(paper, shown, where))


def _record_text(fields: dict[str, Any]) -> tuple[str | None, str]:
    """The abstract (preferred) or text of a record, or None and a reason naming the field."""
    present = [key for key in TEXT_KEYS if key in fields]
    if not present:
        return None, "no 'abstract' or 'text' field"
    for key in present:
        value = fields[key]
        if isinstance(value, str) and len(value) > MAX_ABSTRACT_CHARS:
            return None, _too_long(key, len(value))
        cleaned = _clean_text(value) if isinstance(value, str) else ""
        if cleaned:
            return cleaned, ""
    key = present[0]
    value = fields[key]
    if value is None:
        return None, f"'{key}' is null"
    if not isinstance(value, str):
        return None, f"'{key}' is {_json_type(value)}, not a string"
    return None, f"'{key}' is empty"


def _record_id(fields: dict[str, Any], derived: str, notes: list[str]) -> str:
    for key in ID_KEYS:
        value = fields.get(key)
        if isinstance(value, str) and value.strip():
            return _one_line(value.strip())
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        if value is not None and not isinstance(value, str):
            notes.append(f"'{key}' is {_json_type(value)}, not a string or number; using the id {derived}")
            return derived
    return derived


def _record_title(fields: dict[str, Any], notes: list[str]) -> str:
    value = fields.get("title")
    if value is None or isinstance(value, str):
        return _clean_text(value or "")
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    notes.append(f"'title' is {_json_type(value)}, not a string; a title was derived from the abstract")
    return ""


def _record_year(fields: dict[str, Any], extra: dict[str, Any], notes: list[str]) -> int | None:
    value = fields.get("year", extra.get("year"))
    if value is not None and not (isinstance(value, str) and not value.strip()):
        year = _year_from(value)
        if year is None:
            notes.append(f"'year' {_short(repr(value), 40)} is not a year; ignored")
        return year
    for key in DATE_KEYS:
        raw = fields.get(key, extra.get(key))
        if isinstance(raw, str) and _year_from(raw):
            return _year_from(raw)
    return None


def _year_from(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 1000 <= value <= 2999 else None
    if isinstance(value, float) and value.is_integer():
        return _year_from(int(value))
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
        notes.append(f"'authors' is {_json_type(value)}; expected a list of names or a string; ignored")
    if isinstance(parsed, list):
        names = [
            " ".join(reversed([p for p in item[:2] if isinstance(p, str)])) for item in parsed if isinstance(item, list)
        ]
        return tuple(_clean_text(n) for n in names if _clean_text(n))
    return ()


def _author_name(item: Any) -> str:
    if isinstance(item, str):
        return _clean_text(item)
    if isinstance(item, dict):
        fields = _lower_keys(item)
        name = fields.get("name")
        if isinstance(name, str):
            return _clean_text(name)
        parts = [fields.get(k) for k in ("first", "given", "last", "family")]
        return _clean_text(" ".join(p for p in parts if isinstance(p, str)))
    return ""


def _split_authors(text: str) -> tuple[str, ...]:
    """Names from "A, B and C", "A; B" or "A, B, and C"; commas inside parentheses (affiliations) are kept."""
    text = _clean_text(text)
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


# --- papers ------------------------------------------------------------------------------------


def _make_paper(
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


def _keep_first(item: _Located, first_place: dict[str, _Located], problems: list[LoadProblem]) -> bool:
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
            f"duplicate id {_short(item.local_id or item.paper.paper_id, 80)!r} "
            f"(first at {earlier.path}: {earlier.location}); "
            f"kept the first, skipped this one{hint}",
        )
    )
    return False


# --- small helpers -----------------------------------------------------------------------------


def _too_long(what: str, size: int) -> str:
    return (
        f"'{what}' is {size:,} characters long; the limit is {MAX_ABSTRACT_CHARS:,} "
        "(an abstract, not a whole paper): shorten it"
    )


def _clean_text(text: str) -> str:
    """Collapse all whitespace (newlines inside arXiv fields included) and drop control characters."""
    if _CONTROL.search(text):
        text = _CONTROL.sub(" ", text)
    return " ".join(text.split())


def _one_line(text: str) -> str:
    return " ".join(str(text).split()) or repr(text)


def _short(text: str, limit: int) -> str:
    text = _one_line(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


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


def _first_str(fields: dict[str, Any], extra: dict[str, Any], keys: Sequence[str]) -> str:
    for source in (fields, extra):
        for key in keys:
            value = source.get(key)
            if isinstance(value, str) and _clean_text(value):
                return _clean_text(value)
    return ""


def _lower_keys(record: dict[Any, Any]) -> dict[str, Any]:
    """Case-insensitive field names; an exact lowercase key wins over ``Title``/``TITLE``."""
    lowered: dict[str, Any] = {}
    for key, value in record.items():
        name = key.strip().lower() if isinstance(key, str) else str(key).lower()
        if name not in lowered or key == name:
            lowered[name] = value
    return lowered


def _json_type(value: Any) -> str:
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


def _os_reason(error: OSError) -> str:
    """A short, fixable reason for an OS error."""
    if isinstance(error, PermissionError):
        return "permission denied; check the file's permissions (e.g. chmod +r)"
    if error.errno == errno.ELOOP:
        return "symbolic link loop (the link points back to itself); fix or remove the link"
    return _one_line(error.strerror or str(error))


def _cap_problems(problems: list[LoadProblem], shown: str) -> list[LoadProblem]:
    if len(problems) <= MAX_PROBLEMS_PER_FILE:
        return problems
    hidden = len(problems) - MAX_PROBLEMS_PER_FILE
    return [
        *problems[:MAX_PROBLEMS_PER_FILE],
        LoadProblem(shown, None, f"{hidden} more problems in this file not shown"),
    ]
