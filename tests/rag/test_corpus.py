"""Corpus loading: every format round-trips, and every kind of bad input becomes one clear problem
while the valid records around it are still loaded."""

from __future__ import annotations

import codecs
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag.corpus import load as corpus
from rag.corpus.discovery import SUPPORTED_SUFFIXES
from rag.corpus.load import load_corpus, load_file
from rag.corpus.problems import LoadProblem, LoadResult
from rag.corpus.records import extract_urls
from rag.errors import CorpusError
from rag.types import Paper

CORPUS = Path(__file__).resolve().parents[2] / "data" / "icml2026"
GOOD_RECORDS = [
    {"id": "good-1", "title": "Good One", "abstract": "A valid abstract about graphs."},
    {"id": "good-2", "abstract": "Another valid abstract about proteins."},
]
GOOD_IDS = {"good-1", "good-2"}


def _jsonl(*records: object) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def _write(folder: Path, files: dict[str, bytes]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (folder / name).write_bytes(content)


def _ids(result: LoadResult) -> set[str]:
    return {p.paper_id for p in result.papers}


def _one_line_problems(problems: list[LoadProblem]) -> list[str]:
    lines = [str(p) for p in problems]
    for line in lines:
        assert "\n" not in line and len(line.splitlines()) == 1, line
        assert "unexpected error" not in line, line
    return lines


# --- the bundled corpus ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bundled() -> LoadResult:
    return load_corpus([CORPUS])


def test_bundled_corpus_loads_76_papers_19_per_file(bundled: LoadResult) -> None:
    assert bundled.problems == []
    assert len(bundled.papers) == 76
    assert [p.name for p in bundled.files] == sorted(p.name for p in CORPUS.glob("*.txt"))
    for path in bundled.files:
        papers = [p for p in bundled.papers if p.source == path.name]
        assert [p.ordinal for p in papers] == list(range(1, 20))
        assert [p.paper_id for p in papers] == [f"{path.name}#{i}" for i in range(1, 20)]


def test_bundled_corpus_metadata(bundled: LoadResult) -> None:
    first = bundled.papers[0]
    assert first.paper_id == "000_dcbf1b5d2daaeff5.txt#1"
    assert first.source == "000_dcbf1b5d2daaeff5.txt"
    assert first.title == "FedSSM" and not first.title_given
    assert first.abstract.startswith("Multimodal Federated Learning (MMFL) addresses")
    assert {p.venue for p in bundled.papers} == {"ICML 2026"}
    assert {p.year for p in bundled.papers} == {2026}
    assert all(p.title and "\n" not in p.abstract for p in bundled.papers)


def test_bundled_titles_include_known_names(bundled: LoadResult) -> None:
    titles = {p.title for p in bundled.papers}
    assert {"FedSSM", "MA-RAG", "MoDEX"} <= titles


def test_ids_and_hashes_are_stable_across_loads(bundled: LoadResult) -> None:
    again = load_corpus([str(CORPUS)])
    assert [p.paper_id for p in again.papers] == [p.paper_id for p in bundled.papers]
    assert [p.content_hash for p in again.papers] == [p.content_hash for p in bundled.papers]


def test_load_file_on_one_bundled_file() -> None:
    papers, problems = load_file(CORPUS / "002_735305cd7294d037.txt")
    assert problems == [] and len(papers) == 19
    assert papers[0].title == "MA-RAG"
    assert papers[0].urls == ("https://github.com/NJU-RL/MA-RAG",)
    assert "https://github.com/NJU-RL/MA-RAG" in papers[0].abstract  # the abstract stays verbatim


# --- formats round-trip ------------------------------------------------------------------------


def test_txt_with_header_crlf_bom_and_whitespace_separators(tmp_path: Path) -> None:
    text = "NeurIPS 2030 Papers\r\n\r\nFirst abstract line one\r\ncontinues   here.\r\n \t \r\nSecond abstract.\r\n"
    path = tmp_path / "conf.txt"
    path.write_bytes(codecs.BOM_UTF8 + text.encode())
    papers, problems = load_file(path)
    assert problems == []
    assert [p.abstract for p in papers] == ["First abstract line one continues here.", "Second abstract."]
    assert [p.paper_id for p in papers] == ["conf.txt#1", "conf.txt#2"]
    assert {p.venue for p in papers} == {"NeurIPS 2030"} and {p.year for p in papers} == {2030}


def test_txt_without_header(tmp_path: Path) -> None:
    path = tmp_path / "plain.txt"
    path.write_text("We study one thing.\n\nWe study another thing.\n", encoding="utf-8")
    papers, problems = load_file(path)
    assert problems == []
    assert [(p.ordinal, p.venue, p.year) for p in papers] == [(1, "", None), (2, "", None)]


def test_jsonl_and_ndjson(tmp_path: Path) -> None:
    for suffix in (".jsonl", ".ndjson"):
        path = tmp_path / f"papers{suffix}"
        path.write_bytes(
            _jsonl(
                {
                    "id": 7,
                    "title": "Seven",
                    "abstract": "Text  with\nnewlines.",
                    "authors": ["Ann", "Bob"],
                    "url": "https://ex.org/7",
                    "venue": "ICLR",
                    "year": "2024",
                },
            )
            + b"\n"
            + _jsonl({"text": "No id here.", "authors": [{"name": "Cy"}], "year": 2023})
        )
        papers, problems = load_file(path)
        assert problems == []
        first, second = papers
        assert (first.paper_id, first.title, first.title_given) == ("7", "Seven", True)
        assert first.abstract == "Text with newlines."
        assert (first.authors, first.urls, first.venue, first.year) == (
            ("Ann", "Bob"),
            ("https://ex.org/7",),
            "ICLR",
            2024,
        )
        assert (second.paper_id, second.ordinal, second.authors, second.year) == (f"papers{suffix}#2", 2, ("Cy",), 2023)
        assert not second.title_given and second.title


def test_json_array_papers_key_and_single_object(tmp_path: Path) -> None:
    records = [{"id": "a", "abstract": "Alpha abstract."}, {"id": "b", "abstract": "Beta abstract."}]
    (tmp_path / "array.json").write_text(json.dumps(records), encoding="utf-8")
    wrapped = {"papers": [{"id": "c", "text": "Gamma text."}]}
    (tmp_path / "wrapped.json").write_text(json.dumps(wrapped), encoding="utf-8")
    (tmp_path / "single.json").write_text(json.dumps({"id": "d", "abstract": "Delta abstract."}), encoding="utf-8")
    result = load_corpus([tmp_path])
    assert result.problems == []
    assert [p.paper_id for p in result.papers] == ["a", "b", "d", "c"]  # array, single, wrapped: sorted by name
    assert [p.ordinal for p in result.papers] == [1, 2, 1, 1]


def test_abstract_wins_over_text(tmp_path: Path) -> None:
    path = tmp_path / "both.json"
    path.write_text(json.dumps([{"abstract": "From abstract.", "text": "From text."}]), encoding="utf-8")
    papers, _ = load_file(path)
    assert papers[0].abstract == "From abstract."


def test_beir_corpus(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(
        _jsonl(
            {
                "_id": "4983",
                "title": "Microstructural development of white matter",
                "text": "Alterations of the architecture of cerebral white matter were studied.",
                "metadata": {"url": "https://pubmed.org/4983"},
            },
            {"_id": "5836", "title": "", "text": "Induction of myelodysplasia.", "metadata": {}},
        )
    )
    papers, problems = load_file(path)
    assert problems == []
    assert [p.paper_id for p in papers] == ["4983", "5836"]
    assert papers[0].title == "Microstructural development of white matter" and papers[0].title_given
    assert papers[0].urls == ("https://pubmed.org/4983",)
    assert not papers[1].title_given and papers[1].title


def test_arxiv_metadata_dump(tmp_path: Path) -> None:
    record = {
        "id": "0704.0001",
        "submitter": "Pavel Nadolsky",
        "authors": "C. Bal\\'azs, E. L. Berger, P. M. Nadolsky and C.-P. Yuan",
        "title": "Calculation of prompt diphoton production cross sections at Tevatron and\n  LHC energies",
        "comments": "37 pages, 15 figures; published version",
        "journal-ref": "Phys.Rev.D76:013009,2007",
        "doi": "10.1103/PhysRevD.76.013009",
        "categories": "hep-ph",
        "license": None,
        "abstract": "  A fully differential calculation in perturbative quantum chromodynamics is\npresented for "
        "the production of massive photon pairs at hadron colliders.\n",
        "versions": [{"version": "v1", "created": "Mon, 2 Apr 2007 19:18:42 GMT"}],
        "update_date": "2008-11-13",
        "authors_parsed": [["Balázs", "C.", ""], ["Berger", "E. L.", ""]],
    }
    path = tmp_path / "arxiv-metadata-oai-snapshot.json"  # JSON Lines despite its name
    path.write_bytes(_jsonl(record, {**record, "id": "0704.0002"}))
    papers, problems = load_file(path)
    assert [p.paper_id for p in papers] == ["0704.0001", "0704.0002"]
    papers = papers[:1]
    assert problems == []
    (paper,) = papers
    assert paper.paper_id == "0704.0001"
    assert paper.title == "Calculation of prompt diphoton production cross sections at Tevatron and LHC energies"
    assert paper.abstract.startswith(
        "A fully differential calculation in perturbative quantum chromodynamics is presented"
    )
    assert paper.authors == ("C. Bal\\'azs", "E. L. Berger", "P. M. Nadolsky", "C.-P. Yuan")
    assert (paper.venue, paper.year) == ("Phys.Rev.D76:013009,2007", 2008)


def test_csv_with_bom_and_any_case_columns(tmp_path: Path) -> None:
    text = (
        'ID,Title,Abstract,Authors,Year,URL\r\nc1,First,"An abstract, with a comma.","A, B and C",2021,\r\n'
        'c2,,"Second abstract\nover two lines.",,,https://ex.org/c2\r\n'
    )
    path = tmp_path / "sheet.csv"
    path.write_bytes(codecs.BOM_UTF8 + text.encode())
    papers, problems = load_file(path)
    assert problems == []
    assert [p.paper_id for p in papers] == ["c1", "c2"]
    assert (papers[0].title, papers[0].authors, papers[0].year) == ("First", ("A", "B", "C"), 2021)
    assert papers[1].abstract == "Second abstract over two lines." and papers[1].urls == ("https://ex.org/c2",)
    assert not papers[1].title_given


def test_csv_without_ids_derives_them_from_row_position(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    path.write_text("text\nOne abstract.\n\nTwo abstract.\n", encoding="utf-8")
    papers, _ = load_file(path)
    assert [(p.paper_id, p.ordinal) for p in papers] == [("rows.csv#1", 1), ("rows.csv#2", 2)]


# --- URLs --------------------------------------------------------------------------------------


def test_urls_become_metadata_and_the_abstract_stays_verbatim(tmp_path: Path) -> None:
    abstract = (
        "Code (see https://github.com/x/Tool). Data at www.example.org/data, "
        "mirror https://github.com/x/Tool; wiki https://en.wikipedia.org/wiki/Foo_(bar)."
    )
    path = tmp_path / "u.jsonl"
    path.write_bytes(_jsonl({"id": "u", "abstract": abstract, "url": "https://paper.org/u"}))
    (paper,) = load_file(path)[0]
    assert paper.urls == (
        "https://paper.org/u",
        "https://github.com/x/Tool",
        "www.example.org/data",
        "https://en.wikipedia.org/wiki/Foo_(bar)",
    )
    assert paper.abstract == abstract


@pytest.mark.parametrize(
    ("text", "urls"),
    [
        ("no links here", ()),
        ("trailing http://a.io/x.,;", ("http://a.io/x",)),
        ("markdown [code](https://a.io/b)", ("https://a.io/b",)),
        (r"latex \url{https://a.io/c}", ("https://a.io/c",)),
        ("twice https://a.io and https://a.io.", ("https://a.io",)),
        ("bare http:// and www. alone", ()),
    ],
)
def test_extract_urls(text: str, urls: tuple[str, ...]) -> None:
    assert extract_urls(text) == urls


# --- bad inputs --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bad:
    """One bad input: files written next to a good file, the problem expected, the ids still loaded."""

    name: str
    files: dict[str, bytes]
    fragment: str
    bad_file: str
    also_loaded: frozenset[str] = field(default_factory=frozenset)


def _bad(name: str, files: dict[str, bytes], fragment: str, bad_file: str | None = None, *also: str) -> Bad:
    return Bad(name, files, fragment, bad_file or next(iter(files)), frozenset(also))


LONG = "x" * 9000  # pushes a later line past the binary sniffing window
BAD_INPUTS = [
    _bad("txt-binary", {"bad.txt": b"ICML\x00\x01\x02 binary"}, "binary file (NUL byte at byte offset 4)"),
    _bad(
        "txt-latin1",
        {"bad.txt": "Café abstract.\n\nSecond.".encode("latin-1")},
        "not UTF-8: invalid byte 0xE9 at byte offset 3; re-save the file as UTF-8",
    ),
    _bad("txt-empty", {"bad.txt": b""}, "empty file"),
    _bad("txt-whitespace-only", {"bad.txt": b"  \r\n\n \t\n"}, "empty file"),
    _bad("txt-header-only", {"bad.txt": b"ICML 2026 Papers\n"}, "no abstracts found, only the header line"),
    _bad("txt-utf16", {"bad.txt": "An abstract.".encode("utf-16")}, "file is UTF-16, not UTF-8; re-save it as UTF-8"),
    _bad(
        "txt-wordless-paragraph",
        {"bad.txt": b"Venue X\n\nFirst abstract.\n\n-----\n\nSecond abstract.\n"},
        "line 5: paragraph has no words",
        None,
        "bad.txt#1",
        "bad.txt#2",
    ),
    _bad(
        "json-missing-comma",
        {"bad.json": b'[{"id": "j1", "abstract": "Fine."}\n {"id": "j2"}]'},
        "line 2, column 2: malformed JSON: Expecting ',' delimiter",
    ),
    _bad("json-truncated", {"bad.json": b'[{"id": "j1", "abstract": "Fine'},
         "line 1, column 27: malformed JSON: Unterminated string that starts there; the file ends inside its JSON: "
         "is it cut off?"),
    _bad("json-truncated-at-a-line-end", {"bad.json": b'[{"id": "j1", "abstract": "Fine\n'},
         "line 1, column 32: malformed JSON: Invalid control character; the file ends inside its JSON: is it cut off?"),
    _bad("json-truncated-between-records", {"bad.json": b'[{"id": "j1", "abstract": "Fine."},\n {"id": "j2"'},
         "line 2, column 13: malformed JSON: Expecting ',' delimiter; the file ends inside its JSON: is it cut off?"),
    _bad("json-top-level-string", {"bad.json": b'"just a string"'}, "expected an array of paper objects, got a string"),
    _bad(
        "json-non-object-record",
        {"bad.json": b'[{"id": "j1", "abstract": "Fine."}, 42]'},
        "record 2: not an object (got a number); skipped",
        None,
        "j1",
    ),
    _bad(
        "json-record-without-text",
        {"bad.json": b'[{"id": "j1", "abstract": "Fine."}, {"id": "j2", "title": "T"}]'},
        "record 2: no 'abstract' or 'text' field; skipped",
        None,
        "j1",
    ),
    _bad(
        "json-empty-abstract",
        {"bad.json": b'[{"id": "j2", "abstract": "  "}, {"id": "j1", "abstract": "Fine."}]'},
        "record 1: 'abstract' is empty; skipped",
        None,
        "j1",
    ),
    _bad(
        "json-abstract-not-a-string",
        {"bad.json": b'[{"id": "j2", "abstract": 42}, {"id": "j1", "text": "Ok."}]'},
        "record 1: 'abstract' is a number, not a string",
        None,
        "j1",
    ),
    _bad("json-empty-array", {"bad.json": b"[]"}, "no records found"),
    _bad("json-object-without-records", {"bad.json": b'{"foo": 1}'}, "no 'papers', 'records' or 'data' list"),
    _bad(
        "json-trailing-garbage",
        {"bad.json": b'[{"id": "j1", "abstract": "A."}] and more'},
        "line 1, column 34: malformed JSON: Extra data",
    ),
    _bad(
        "json-lines-after-a-broken-first-line",
        {"bad.json": b'{"id": "j1", "abstract": "A."\n{"id": "j2", "abstract": "B."}\n'},
        "line 2, column 1: malformed JSON: Expecting ',' delimiter",
    ),
    _bad("json-deeply-nested", {"bad.json": b"[" * 100_000}, "nested too deeply"),
    _bad(
        "json-bad-year",
        {"bad.json": b'[{"id": "j1", "abstract": "Fine.", "year": "soon"}]'},
        "record 1: 'year' 'soon' is not a year; ignored",
        None,
        "j1",
    ),
    _bad(
        "json-title-not-a-string",
        {"bad.json": b'[{"id": "j1", "abstract": "Fine.", "title": ["x"]}]'},
        "'title' is an array, not a string",
        None,
        "j1",
    ),
    _bad(
        "json-authors-wrong-type",
        {"bad.json": b'[{"id": "j1", "abstract": "Fine.", "authors": 5}]'},
        "'authors' is a number; expected a list of names or a string",
        None,
        "j1",
    ),
    _bad(
        "jsonl-line-not-an-object",
        {"bad.jsonl": _jsonl({"id": "l1", "abstract": "One."}, [1, 2], {"id": "l3", "abstract": "Three."})},
        "line 2: not a JSON object (got an array); line skipped",
        None,
        "l1",
        "l3",
    ),
    _bad(
        "jsonl-line-cut-off-in-a-string",
        {"bad.jsonl": b'{"id": "l1", "abstract": "One."}\n{"id": "l2", "abstract": "Tw\n'},
        "line 2: malformed JSON at column 29: Invalid control character (the line ends inside its JSON: is it cut "
        "off?); line skipped",
        None,
        "l1",
    ),
    _bad(
        "jsonl-malformed-line",
        {"bad.jsonl": b'{"id": "l1", "abstract": "One."}\n{"id": "l2", \n'},
        "line 2: malformed JSON at column",
        None,
        "l1",
    ),
    _bad(
        "jsonl-null-text",
        {"bad.jsonl": _jsonl({"id": "l1", "text": None}, {"id": "l2", "text": "Two."})},
        "line 1: 'text' is null; skipped",
        None,
        "l2",
    ),
    _bad(
        "jsonl-invalid-utf8-line",
        {"bad.jsonl": b'{"id": "l1", "abstract": "One."}\n{"abstract": "\xff"}\n'},
        "line 2: not UTF-8: invalid byte 0xFF at byte offset 47",
        None,
        "l1",
    ),
    _bad(
        "jsonl-nul-in-later-line",
        {"bad.jsonl": _jsonl({"id": "l1", "abstract": LONG}) + b'{"abstract": "a\x00b"}\n'},
        "line 2: contains NUL bytes",
        None,
        "l1",
    ),
    _bad(
        "jsonl-that-is-a-json-array",
        {"bad.jsonl": b'[\n  {"id": "l1", "abstract": "One."}\n]\n'},
        "looks like a JSON array: rename the file to .json",
    ),
    _bad(
        "jsonl-id-of-wrong-type",
        {"bad.jsonl": _jsonl({"id": [1], "abstract": "One."})},
        "'id' is an array, not a string or number; using the id bad.jsonl#1",
        None,
        "bad.jsonl#1",
    ),
    _bad(
        "jsonl-duplicate-id-in-file",
        {"bad.jsonl": _jsonl({"id": "d1", "abstract": "First."}, {"id": "d1", "abstract": "Second."})},
        "line 2: duplicate id 'd1' (first at",
        None,
        "d1",
    ),
    _bad(
        "duplicate-id-across-files",
        {"z.jsonl": _jsonl({"id": "good-1", "abstract": "Clash."})},
        "duplicate id 'good-1' (first at",
    ),
    _bad(
        "csv-no-text-column",
        {"bad.csv": b"title,body\nT,B\n"},
        "no 'abstract' or 'text' column (found: title, body); add a header row",
    ),
    _bad(
        "csv-row-without-text",
        {"bad.csv": b"id,title,abstract\nc1,T,Fine abstract.\nc2,T2,\n"},
        "row 2 (line 3): 'abstract' is empty; skipped",
        None,
        "c1",
    ),
    _bad(
        "csv-short-row",
        {"bad.csv": b"id,title,abstract\nc1,T,Fine abstract.\nc2\n"},
        "row 2 (line 3): 'abstract' is empty",
        None,
        "c1",
    ),
    _bad("csv-empty", {"bad.csv": b""}, "empty file"),
    _bad("csv-header-only", {"bad.csv": b"id,abstract\n"}, "no records found (only a header row)"),
    _bad("csv-latin1", {"bad.csv": "id,abstract\nc1,Caf\u00e9.\n".encode("latin-1")}, "not UTF-8"),
    _bad("csv-nul", {"bad.csv": b"id,abstract\nc1,a\x00b\n"}, "binary file"),
    _bad(
        "csv-huge-field",
        {"bad.csv": b"id,abstract\nc1,Fine abstract.\nc2," + b"y" * 200_000 + b"\n"},
        "malformed CSV: field larger than field limit",
        None,
        "c1",
    ),
    _bad("unsupported-extension", {"paper.pdf": b"%PDF-1.4"}, "unsupported file type; use .txt, .jsonl, .json or .csv"),
    _bad("unsupported-markdown", {"notes.md": b"# notes"}, "unsupported file type"),
]


@pytest.mark.parametrize("case", BAD_INPUTS, ids=[c.name for c in BAD_INPUTS])
def test_bad_input_is_one_clear_problem_and_valid_records_survive(tmp_path: Path, case: Bad) -> None:
    folder = tmp_path / "corpus"
    _write(folder, {"good.jsonl": _jsonl(*GOOD_RECORDS), **case.files})
    result = load_corpus([folder])
    lines = _one_line_problems(result.problems)
    bad_path = str(folder / case.bad_file)
    matching = [line for line in lines if case.fragment in line]
    assert matching, f"no problem contains {case.fragment!r}: {lines}"
    assert all(line.startswith(bad_path + ": ") for line in matching), matching
    assert GOOD_IDS | case.also_loaded <= _ids(result)
    assert len(result.papers) == len(_ids(result)), "ids must be unique"


def test_there_are_at_least_30_distinct_bad_inputs() -> None:
    assert len({c.name for c in BAD_INPUTS}) == len(BAD_INPUTS) >= 30


def test_duplicate_problem_names_both_places(tmp_path: Path) -> None:
    _write(
        tmp_path, {"a.jsonl": _jsonl({"id": "x", "abstract": "First abstract."}),
                   "b.csv": b"id,abstract\ny,Other one.\nx,Second one.\n"}
    )
    result = load_corpus([tmp_path])
    (problem,) = result.problems
    assert str(problem) == (
        f"{tmp_path / 'b.csv'}: row 2 (line 3): duplicate id 'x' (first at {tmp_path / 'a.jsonl'}: line 1); "
        "kept the first, skipped this one"
    )
    assert [p.abstract for p in result.papers] == ["First abstract.", "Other one."]


def test_same_file_name_in_two_folders_says_to_rename(tmp_path: Path) -> None:
    _write(tmp_path / "a", {"x.txt": b"One abstract."})
    _write(tmp_path / "b", {"x.txt": b"Another abstract."})
    result = load_corpus([tmp_path])
    assert [p.abstract for p in result.papers] == ["One abstract."]
    assert "two files share this name: rename one" in str(result.problems[0])


def test_folder_mixing_good_and_bad_files_names_every_bad_file(tmp_path: Path) -> None:
    files = {
        "a_good.txt": b"Venue 2020 Papers\n\nAbstract one.\n\nAbstract two.\n",
        "b_binary.txt": b"\x00\x01",
        "c_broken.json": b"[{",
        "d_good.csv": b"abstract\nRow abstract.\n",
        "e_empty.jsonl": b"",
        "f_image.png": b"\x89PNG",
        ".DS_Store": b"\x00\x00junk",
        ".gitkeep": b"",
    }
    _write(tmp_path / "top", files)
    _write(tmp_path / "top" / "nested", {"g_good.jsonl": _jsonl({"id": "n1", "text": "Nested abstract."})})
    _write(tmp_path / "top" / ".hidden", {"h_hidden.txt": b"Never read."})
    result = load_corpus([tmp_path / "top"])
    assert _ids(result) == {"a_good.txt#1", "a_good.txt#2", "d_good.csv#1", "n1"}
    named = {Path(p.path).name for p in result.problems}
    assert named == {"b_binary.txt", "c_broken.json", "e_empty.jsonl", "f_image.png"}
    _one_line_problems(result.problems)
    assert [p.name for p in result.files] == [
        "a_good.txt",
        "b_binary.txt",
        "c_broken.json",
        "d_good.csv",
        "e_empty.jsonl",
        "g_good.jsonl",
    ]


def test_hidden_files_are_ignored_silently(tmp_path: Path) -> None:
    _write(tmp_path, {"ok.txt": b"An abstract.", ".DS_Store": b"\x00", ".gitkeep": b""})
    result = load_corpus([tmp_path])
    assert result.problems == [] and len(result.papers) == 1


def test_missing_path_raises_corpus_error_saying_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match=r"corpus path not found: .*nope.*check the spelling"):
        load_corpus([tmp_path / "nope"])


def test_explicit_unsupported_file_is_a_problem_not_an_error(tmp_path: Path) -> None:
    _write(tmp_path, {"paper.docx": b"PK", "ok.txt": b"Fine abstract."})
    result = load_corpus([tmp_path / "paper.docx", tmp_path / "ok.txt"])
    assert [str(p) for p in result.problems] == [
        f"{tmp_path / 'paper.docx'}: unsupported file type; use .txt, .jsonl, .json or .csv"
    ]
    assert len(result.papers) == 1


def test_empty_folder_is_reported(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = load_corpus([tmp_path / "empty"])
    assert "no corpus files in this folder" in str(result.problems[0])


def test_unreadable_file_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path, {"locked.txt": b"Secret abstract.", "ok.txt": b"Open abstract."})
    real_open = corpus._open_binary

    def fake_open(path: Path):
        if path.name == "locked.txt":
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path)

    monkeypatch.setattr(corpus, "_open_binary", fake_open)
    result = load_corpus([tmp_path])
    assert [str(p) for p in result.problems] == [
        f"{tmp_path / 'locked.txt'}: cannot read file: permission denied; check the file's permissions (e.g. chmod +r)"
    ]
    assert [p.abstract for p in result.papers] == ["Open abstract."]
    assert [p.name for p in result.files] == ["ok.txt"]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root can read any file")
def test_chmod_000_file_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "locked.txt"
    path.write_text("Secret abstract.", encoding="utf-8")
    path.chmod(0)
    try:
        papers, problems = load_file(path)
    finally:
        path.chmod(0o644)
    assert papers == [] and "permission denied" in str(problems[0])


def test_folder_named_like_a_file(tmp_path: Path) -> None:
    (tmp_path / "x.txt").mkdir()
    papers, problems = load_file(tmp_path / "x.txt")
    assert papers == [] and "is a folder, not a file" in str(problems[0])


def test_symlink_loops_do_not_hang(tmp_path: Path) -> None:
    top = tmp_path / "top"
    _write(top / "sub", {"ok.txt": b"Looped abstract."})
    (top / "sub" / "back").symlink_to(top, target_is_directory=True)
    (top / "self.txt").symlink_to(top / "self.txt")
    (top / "gone.jsonl").symlink_to(tmp_path / "missing.jsonl")
    result = load_corpus([top])
    assert [p.abstract for p in result.papers] == ["Looped abstract."]
    named = {Path(p.path).name: str(p) for p in result.problems}
    assert set(named) == {"self.txt", "gone.jsonl"}
    assert "broken symbolic link" in named["gone.jsonl"]
    assert "symbolic link loop" in named["self.txt"]
    papers, problems = load_file(top / "self.txt")
    assert papers == [] and "symbolic link loop" in str(problems[0])


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_named_pipe_is_skipped_without_blocking(tmp_path: Path) -> None:
    _write(tmp_path, {"ok.txt": b"An abstract."})
    os.mkfifo(tmp_path / "pipe.txt")
    result = load_corpus([tmp_path])
    assert len(result.papers) == 1
    assert "not a regular file" in str(result.problems[0])
    papers, problems = load_file(tmp_path / "pipe.txt")
    assert papers == [] and "not a regular file" in str(problems[0])


def test_problems_per_file_are_capped(tmp_path: Path) -> None:
    path = tmp_path / "many.jsonl"
    path.write_bytes(b"[1]\n" * 500 + _jsonl({"id": "last", "abstract": "Still loaded."}))
    papers, problems = load_file(path)
    assert [p.paper_id for p in papers] == ["last"]
    assert len(problems) == corpus.MAX_PROBLEMS_PER_FILE + 1
    assert str(problems[-1]).endswith("450 more problems in this file not shown")


def test_load_problem_str_is_one_line() -> None:
    assert str(LoadProblem("a.txt", "line 7", "bad")) == "a.txt: line 7: bad"
    assert str(LoadProblem("a.txt", None, "bad")) == "a.txt: bad"
    assert str(LoadProblem("we\nird.txt", "line\r1", "two\nlines\u2028here")) == "we ird.txt: line 1: two lines here"


# --- property tests: no content can make loading raise -----------------------------------------


def _check_load(folder: Path, suffix: str, data: bytes) -> None:
    path = folder / f"fuzz{suffix}"
    path.write_bytes(data)
    papers, problems = load_file(path)
    assert all(isinstance(p, Paper) and p.abstract.strip() and p.title for p in papers)
    assert all(p.source == path.name for p in papers)
    _one_line_problems(problems)


suffixes = st.sampled_from(SUPPORTED_SUFFIXES)


@settings(max_examples=80, deadline=None)
@given(suffix=suffixes, data=st.binary(max_size=2048))
def test_random_bytes_never_raise(tmp_path_factory: pytest.TempPathFactory, suffix: str, data: bytes) -> None:
    _check_load(tmp_path_factory.getbasetemp(), suffix, data)


@settings(max_examples=80, deadline=None)
@given(suffix=suffixes, text=st.text(max_size=1024))
def test_random_unicode_never_raises(tmp_path_factory: pytest.TempPathFactory, suffix: str, text: str) -> None:
    _check_load(tmp_path_factory.getbasetemp(), suffix, text.encode("utf-8", errors="surrogatepass"))


@settings(max_examples=12, deadline=None)
@given(
    suffix=suffixes,
    piece=st.sampled_from(["a", "We propose FooNet, ", "{", '"', ",", "https://x.io/(", ")", "\n", " ", "é"]),
    size=st.integers(min_value=100_000, max_value=400_000),
)
def test_huge_lines_never_raise(tmp_path_factory: pytest.TempPathFactory, suffix: str, piece: str, size: int) -> None:
    _check_load(tmp_path_factory.getbasetemp(), suffix, (piece * (size // len(piece))).encode())


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "id",
                    "_id",
                    "title",
                    "abstract",
                    "text",
                    "authors",
                    "url",
                    "venue",
                    "journal-ref",
                    "year",
                    "update_date",
                    "metadata",
                    "papers",
                    "name",
                    "authors_parsed",
                ]
            ),
            inner,
            max_size=6,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=120, deadline=None)
@given(suffix=st.sampled_from([".json", ".jsonl"]), values=st.lists(json_values, min_size=1, max_size=4))
def test_random_json_records_never_raise(
    tmp_path_factory: pytest.TempPathFactory, suffix: str, values: list[object]
) -> None:
    if suffix == ".json":
        data = json.dumps(values if len(values) > 1 else values[0]).encode()
    else:
        data = "\n".join(json.dumps(v) for v in values).encode()
    _check_load(tmp_path_factory.getbasetemp(), suffix, data)


def test_jsonl_records_keep_authors_year_venue_and_url():
    """The metadata fixture: authors as a list or "A and B", year as a number or a string, venue, url."""
    from tests.metadata_corpus import metadata_papers

    papers = {p.paper_id: p for p in metadata_papers()}
    assert papers["adam"].authors == ("Diederik P. Kingma", "Jimmy Ba")
    assert (papers["adam"].year, papers["adam"].venue) == (2015, "ICLR")
    assert papers["adam"].urls[0] == "https://arxiv.org/abs/1412.6980"
    assert papers["vae"].authors == ("Diederik P. Kingma", "Max Welling") and papers["vae"].year == 2014
    assert papers["kan"].venue == "" and papers["kan"].year == 2024
    assert all(p.title_given for p in papers.values())


def test_a_placeholder_abstract_is_stored_with_a_warning(tmp_path):
    # {"abstract": "x"} was stored without a word, then ranked 4th for "federated".
    from rag.corpus.load import load_corpus

    path = tmp_path / "mine.jsonl"
    path.write_text('{"id": "a", "title": "T", "abstract": "x"}\n'
                    '{"id": "b", "title": "U", "abstract": "We detect duck calls in wetland audio recordings."}\n')
    result = load_corpus([path])
    assert [p.paper_id for p in result.papers] == ["a", "b"]
    (problem,) = result.problems
    assert problem.kept and problem.location == "line 1" and "the abstract is only 1 word" in problem.reason
