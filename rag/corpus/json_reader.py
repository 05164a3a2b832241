"""JSON files (``.json``): an array of paper objects, an object holding one under ``papers``/``records``/
``data``, or a single paper object."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rag.corpus.problems import LoadProblem, Located, json_cut_off, json_syntax, json_type, short
from rag.corpus.records import TEXT_KEYS, add_record, lower_keys

COLLECTION_KEYS = ("papers", "records", "data")


def parse_json(text: str, path: Path) -> tuple[list[Located], list[LoadProblem]]:
    """An array of objects, an object holding one under papers/records/data, or a single object."""
    shown = str(path)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as e:
        hint = _json_hint(text, e)
        return [], [LoadProblem(shown, f"line {e.lineno}, column {e.colno}", f"malformed JSON: {json_syntax(e)}{hint}")]
    except RecursionError:
        return [], [LoadProblem(shown, None, "JSON nested too deeply to read")]
    except ValueError as e:  # e.g. an integer literal longer than Python's digit limit
        return [], [LoadProblem(shown, None, f"malformed JSON: {short(str(e), 120)}")]
    records, problem = _json_records(document)
    if problem:
        return [], [LoadProblem(shown, None, problem)]
    if not records:
        return [], [LoadProblem(shown, None, "no records found (the JSON array is empty)")]
    located: list[Located] = []
    problems: list[LoadProblem] = []
    for ordinal, record in enumerate(records, start=1):
        add_record(record, path, ordinal, f"record {ordinal}", located, problems)
    return located, problems


def _json_hint(text: str, error: json.JSONDecodeError) -> str:
    if json_cut_off(text, error):
        return "; the file ends inside its JSON: is it cut off? Complete it or export it again"
    if error.msg.startswith("Extra data") and error.lineno > 1:
        return "; if this is JSON Lines (one object per line), rename the file to .jsonl"
    return "; fix the syntax there"


def _json_records(document: Any) -> tuple[list[Any], str | None]:
    if isinstance(document, list):
        return document, None
    if isinstance(document, dict):
        lowered = lower_keys(document)
        for key in COLLECTION_KEYS:
            if isinstance(lowered.get(key), list):
                return lowered[key], None
        if any(key in lowered for key in TEXT_KEYS):
            return [document], None
        return [], (
            "JSON object has no 'papers', 'records' or 'data' list and no 'abstract' or 'text' field; "
            "expected an array of paper objects"
        )
    return [], f"expected an array of paper objects, got {json_type(document)}"
