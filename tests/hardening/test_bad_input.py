"""``paperchat ingest`` on a folder of broken files, as a process: every broken file is named on stderr with
what is wrong with it, every valid record around them is stored, the exit code is 1, and nothing crashes.

tests/rag/test_corpus.py checks each bad input alone against the loader; this is the same kind of input
all at once, through the command a user runs (the CLI with the fake embedder, ``tests/hardening/driver.py``).
"""

from __future__ import annotations

import json
import os

import pytest

from tests.hardening.conftest import cli, run_driver

pytestmark = pytest.mark.slow


def jsonl(*records: object) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def ok(record_id: str, text: str = "A valid abstract about graphs and proteins.") -> dict:
    return {"id": record_id, "abstract": text}


# name -> (content, expected fragment of its message, ids of the valid records in it that must be stored).
# Every record id is unique across files, so no case changes what another case expects.
BROKEN: dict[str, tuple[bytes, str, set[str]]] = {
    "txt_binary.txt": (b"ICML\x00\x01\x02 binary", "binary file (NUL byte at byte offset 4); expected UTF-8 text",
                       set()),
    "txt_latin1.txt": ("Café abstract.\n\nSecond.".encode("latin-1"),
                       "not UTF-8: invalid byte 0xE9 at byte offset 3; re-save the file as UTF-8", set()),
    "txt_empty.txt": (b"", "empty file", set()),
    "txt_whitespace_only.txt": (b"  \r\n\n \t\n", "empty file", set()),
    "txt_header_only.txt": (b"ICML 2026 Papers\n", "no abstracts found, only the header line 'ICML 2026 Papers'",
                            set()),
    "txt_utf16.txt": ("An abstract.".encode("utf-16"), "file is UTF-16, not UTF-8; re-save it as UTF-8", set()),
    "txt_wordless_paragraph.txt": (b"Venue X\n\nFirst abstract on graphs.\n\n-----\n\nSecond abstract on trees.\n",
                                   "line 5: paragraph has no words; skipped",
                                   {"txt_wordless_paragraph.txt#1", "txt_wordless_paragraph.txt#2"}),
    "json_missing_comma.json": (b'[{"id": "jm1", "abstract": "Fine."}\n {"id": "jm2"}]',
                                "line 2, column 2: malformed JSON: Expecting ',' delimiter", set()),
    "json_truncated.json": (b'[{"id": "jt0", "abstract": "Fine', "malformed JSON: Unterminated string", set()),
    "json_top_level_string.json": (b'"just a string"', "expected an array of paper objects, got a string", set()),
    "json_non_object_record.json": (json.dumps([ok("jn1"), 42]).encode(),
                                    "record 2: not an object (got a number); skipped", {"jn1"}),
    "json_record_without_text.json": (json.dumps([ok("jw1"), {"id": "jw2", "title": "T"}]).encode(),
                                      "record 2: no 'abstract' or 'text' field; skipped", {"jw1"}),
    "json_empty_abstract.json": (json.dumps([{"id": "je2", "abstract": "  "}, ok("je1")]).encode(),
                                 "record 1: 'abstract' is empty; skipped", {"je1"}),
    "json_abstract_not_a_string.json": (json.dumps([{"id": "ja2", "abstract": 42}, ok("ja1")]).encode(),
                                        "record 1: 'abstract' is a number, not a string; skipped", {"ja1"}),
    "json_empty_array.json": (b"[]", "no records found (the JSON array is empty)", set()),
    "json_object_without_records.json": (b'{"foo": 1}', "JSON object has no 'papers', 'records' or 'data' list",
                                         set()),
    "json_trailing_garbage.json": (b'[{"id": "jg1", "abstract": "A."}] and more', "malformed JSON: Extra data",
                                   set()),
    "json_lines_with_a_broken_first_line.json": (
        b'{"id": "jb1", "abstract": "A."\n{"id": "jb2", "abstract": "B."}\n',
        "line 2, column 1: malformed JSON: Expecting ',' delimiter", set()),
    "json_deeply_nested.json": (b"[" * 100_000, "JSON nested too deeply to read", set()),
    "json_integer_too_long.json": (b'[{"id": "ji1", "abstract": ' + b"1" * 5000 + b"}]",
                                   "malformed JSON: Exceeds the limit", set()),
    "json_bad_year.json": (json.dumps([{**ok("jy1"), "year": "soon"}]).encode(),
                           "record 1: 'year' 'soon' is not a year; ignored", {"jy1"}),
    "json_title_not_a_string.json": (json.dumps([{**ok("jtt1"), "title": ["x"]}]).encode(),
                                     "'title' is an array, not a string; a title was derived from the abstract",
                                     {"jtt1"}),
    "json_authors_wrong_type.json": (json.dumps([{**ok("jau1"), "authors": 5}]).encode(),
                                     "'authors' is a number; expected a list of names or a string", {"jau1"}),
    "jsonl_line_not_an_object.jsonl": (jsonl(ok("lo1"), [1, 2], ok("lo3")),
                                       "line 2: not a JSON object (got an array); line skipped", {"lo1", "lo3"}),
    "jsonl_malformed_line.jsonl": (jsonl(ok("lm1")) + b'{"id": "lm2", \n', "line 2: malformed JSON at column",
                                   {"lm1"}),
    "jsonl_null_text.jsonl": (jsonl({"id": "ln1", "text": None}, {"id": "ln2", "text": "Two abstracts."}),
                              "line 1: 'text' is null; skipped", {"ln2"}),
    "jsonl_invalid_utf8_line.jsonl": (jsonl(ok("lu1")) + b'{"abstract": "\xff"}\n',
                                      "line 2: not UTF-8: invalid byte 0xFF", {"lu1"}),
    "jsonl_nul_in_a_later_line.jsonl": (jsonl(ok("lz1", "x" * 9000)) + b'{"abstract": "a\x00b"}\n',
                                        "line 2: contains NUL bytes (binary data); line skipped", {"lz1"}),
    "jsonl_that_is_a_json_array.jsonl": (b'[\n  {"id": "la1", "abstract": "One."}\n]\n',
                                         "looks like a JSON array: rename the file to .json", {"la1"}),
    "jsonl_id_of_wrong_type.jsonl": (jsonl({"id": [1], "abstract": "One abstract."}),
                                     "'id' is an array, not a string or number; using the id "
                                     "jsonl_id_of_wrong_type.jsonl#1", {"jsonl_id_of_wrong_type.jsonl#1"}),
    "jsonl_duplicate_id_in_file.jsonl": (jsonl(ok("dd1"), ok("dd1", "Second.")), "line 2: duplicate id 'dd1'",
                                         {"dd1"}),
    "jsonl_many_problems.jsonl": (b"[1]\n" * 60 + jsonl(ok("mp1")), "10 more problems in this file not shown",
                                  {"mp1"}),
    "jsonl_huge_abstract.jsonl": (jsonl({"id": "hg1", "abstract": "y " * 60_000}),
                                  "'abstract' is 120,000 characters long; the limit is 100,000", set()),
    "csv_no_text_column.csv": (b"title,body\nT,B\n", "no 'abstract' or 'text' column (found: title, body)", set()),
    "csv_row_without_text.csv": (b"id,title,abstract\ncr1,T,Fine abstract.\ncr2,T2,\n",
                                 "row 2 (line 3): 'abstract' is empty; skipped", {"cr1"}),
    "csv_short_row.csv": (b"id,title,abstract\ncs1,T,Fine abstract.\ncs2\n", "row 2 (line 3): 'abstract' is empty",
                          {"cs1"}),
    "csv_empty.csv": (b"", "empty file", set()),
    "csv_header_only.csv": (b"id,abstract\n", "no records found (only a header row)", set()),
    "csv_latin1.csv": ("id,abstract\nc1,Café.\n".encode("latin-1"), "not UTF-8: invalid byte 0xE9", set()),
    "csv_nul.csv": (b"id,abstract\nc1,a\x00b\n", "binary file (NUL byte", set()),
    "csv_huge_field.csv": (b"id,abstract\nch1,Fine abstract.\nch2," + b"y" * 200_000 + b"\n",
                           "malformed CSV: field larger than field limit", {"ch1"}),
    "paper.pdf": (b"%PDF-1.4", "unsupported file type; use .txt, .jsonl, .json or .csv", set()),
    "notes.md": (b"# notes", "unsupported file type; use .txt, .jsonl, .json or .csv", set()),
}
# Entries that are not regular files: name -> (how to make it, expected fragment).
SPECIAL = {
    "broken_link.jsonl": (lambda path: path.symlink_to(path.parent / "missing.jsonl"), "broken symbolic link"),
    "link_loop.txt": (lambda path: path.symlink_to(path), "symbolic link loop"),
    "named_pipe.txt": (lambda path: os.mkfifo(path), "not a regular file (pipe, socket or device); skipped"),
}
GOOD = {"good.jsonl": (jsonl(ok("good-1"), ok("good-2", "Another valid abstract about proteins.")),
                       {"good-1", "good-2"}),
        # Ids are namespaced by file: the same id in another file is another paper, not a duplicate.
        "zz_same_id_as_another_file.jsonl": (jsonl(ok("good-1", "Clash of ids.")), {"good-1"})}


def test_there_are_at_least_30_distinct_broken_files():
    assert len(BROKEN) + len(SPECIAL) >= 30
    assert len({fragment for _, fragment, _ in BROKEN.values()}) >= 30


def test_ingest_of_a_folder_of_broken_files_names_each_and_stores_every_valid_record(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    for name, (content, _, _) in {**BROKEN, **{k: (v[0], "", v[1]) for k, v in GOOD.items()}}.items():
        (folder / name).write_bytes(content)
    for name, (make, _) in SPECIAL.items():
        make(folder / name)

    result = run_driver(["ingest", str(folder)], tmp_path / "data", timeout=120)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    assert "unexpected error" not in result.stderr
    lines = result.stderr.splitlines()

    def lines_about(name: str) -> list[str]:
        # "skipped" leads, or ends the reason ("...: paragraph has no words; skipped"): said once.
        prefixes = (f"paperchat: skipped {folder / name}: ", f"paperchat: warning {folder / name}: ",
                    f"paperchat: {folder / name}: ")
        return [line for line in lines if line.startswith(prefixes)]

    def in_file(name: str, ids: set[str]) -> set[str]:
        """Stored ids are namespaced by their file, "good.jsonl#good-1" (derived ones are already)."""
        return {i if i.startswith(f"{name}#") else f"{name}#{i}" for i in ids}

    expected_ids = set().union(*(in_file(name, ids) for name, (_, ids) in GOOD.items()))
    missing = []
    for name, (_content, fragment, ids) in BROKEN.items():
        if not any(fragment in line for line in lines_about(name)):
            missing.append((name, fragment, lines_about(name)))
        expected_ids |= in_file(name, ids)
    for name, (_make, fragment) in SPECIAL.items():
        if not any(fragment in line for line in lines_about(name)):
            missing.append((name, fragment, lines_about(name)))
    assert not missing, missing
    assert not lines_about("good.jsonl") and not lines_about("zz_same_id_as_another_file.jsonl")
    assert lines[-1].startswith("paperchat: ") and lines[-1].endswith(
        "problem(s) above: those records were not stored; fix them and run again")
    assert all(line.startswith("paperchat: ") for line in lines)  # one line per problem, nothing else

    from store.chroma import ChromaStore

    stored = set(ChromaStore(path=tmp_path / "data" / "chroma", collection="paperchat").paper_hashes())
    assert {pid.removeprefix(f"{folder.resolve().as_posix()}/") for pid in stored} == expected_ids
    assert result.stdout.startswith(f"ingested {len(expected_ids)} papers from ")


def test_a_broken_file_given_by_name_and_nothing_else_is_one_clear_error(fake_cli, tmp_path):
    path = tmp_path / "json_deeply_nested.json"
    path.write_bytes(BROKEN[path.name][0])
    code, out, err = cli("ingest", str(path))
    assert code == 1 and out == "" and "Traceback" not in err
    assert err.splitlines() == [
        f"paperchat: skipped {path}: JSON nested too deeply to read",
        f"paperchat: error: nothing to ingest: no valid abstracts in {path} (supported: .txt one abstract per "
        "paragraph, .jsonl/.json, .csv)",
    ]

