"""CSV files (``.csv``): a header row naming the columns (any case), then one paper per row."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from rag.corpus.problems import LoadProblem, Located, short
from rag.corpus.records import TEXT_KEYS, add_record, clean_text


def parse_csv(text: str, path: Path) -> tuple[list[Located], list[LoadProblem]]:
    """A header row (column names in any case) and one paper per row."""
    shown = str(path)
    reader = csv.reader(io.StringIO(text, newline=""))
    problems: list[LoadProblem] = []
    try:
        header = next((row for row in reader if any(cell.strip() for cell in row)), None)
    except csv.Error as e:
        return [], [LoadProblem(shown, f"line {reader.line_num}", f"malformed CSV: {e}")]
    columns = [clean_text(name).lower() for name in header or []]
    if not any(key in columns for key in TEXT_KEYS):
        found = ", ".join(short(c, 30) for c in columns[:12] if c) or "none"
        return [], [
            LoadProblem(
                shown,
                None,
                f"no 'abstract' or 'text' column (found: {found}); add a header row "
                "that names the abstract column 'abstract' or 'text'",
            )
        ]
    located: list[Located] = []
    ordinal = 0
    try:
        for row in reader:
            if not any(cell.strip() for cell in row):
                continue
            ordinal += 1
            cells = row + [""] * (len(columns) - len(row))  # short rows: missing cells are empty
            record = {name: value for name, value in zip(columns, cells, strict=False) if name}
            where = f"row {ordinal} (line {reader.line_num})"
            add_record(record, path, ordinal, where, located, problems)
    except csv.Error as e:
        problems.append(LoadProblem(shown, f"line {reader.line_num}", f"malformed CSV: {e}; stopped reading here"))
    if ordinal == 0 and not problems:
        problems.append(LoadProblem(shown, None, "no records found (only a header row)"))
    return located, problems
