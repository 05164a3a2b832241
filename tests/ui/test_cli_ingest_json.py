"""``paperchat ingest --json``: one JSON summary on stdout and no progress bar, even on a terminal; without
--json the progress bar is drawn on a terminal (so the first test can fail). In process, fake embedder."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from tests.conftest import BUNDLED_CORPUS
from tests.hardening.conftest import fake_cli_env


class TerminalStream(io.StringIO):
    def isatty(self) -> bool:
        return True


def ingest_on_a_terminal(*args: str) -> tuple[int, str, str]:
    from tests.conftest import FakeEmbedder
    from ui.cli.main import main

    out, err = io.StringIO(), TerminalStream()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["ingest", *args], parts={"embedder": FakeEmbedder()})
    return code, out.getvalue(), err.getvalue()


def test_ingest_json_prints_one_summary_and_no_progress_bar(tmp_path):
    with fake_cli_env(tmp_path / "data"):
        code, out, err = ingest_on_a_terminal("--json", str(BUNDLED_CORPUS))
        assert code == 0, err
        assert err == ""
        lines = out.splitlines()
        assert len(lines) == 1
        summary = json.loads(lines[0])
        assert {k: summary[k] for k in ("files", "papers", "rejected", "added", "updated", "unchanged", "removed",
                                        "index_papers")} == {
            "files": 4, "papers": 76, "rejected": 0, "added": 76, "updated": 0, "unchanged": 0, "removed": 0,
            "index_papers": 76}
        assert summary["chunks"] == summary["index_chunks"] >= 76
        assert summary["seconds"] > 0 and summary["papers_per_s"] == pytest.approx(76 / summary["seconds"], rel=0.01)

        code, out, err = ingest_on_a_terminal("--json", str(BUNDLED_CORPUS))
        again = json.loads(out)
        assert code == 0 and (again["added"], again["unchanged"], again["chunks"]) == (0, 76, 0)


def test_ingest_without_json_draws_progress_on_a_terminal(tmp_path):
    with fake_cli_env(tmp_path / "data"):
        code, out, err = ingest_on_a_terminal(str(BUNDLED_CORPUS))
    assert code == 0, err
    assert "ingest [" in err and "papers/s ETA" in err
    assert out.startswith("ingested 76 papers from 4 files")


def test_ingest_of_one_paper_says_paper_file_and_chunk_in_the_singular(tmp_path):
    corpus = tmp_path / "one.jsonl"
    corpus.write_text(json.dumps({"id": "a", "title": "T", "abstract": "A short abstract about graphs."}) + "\n")
    with fake_cli_env(tmp_path / "data"):
        code, out, err = ingest_on_a_terminal(str(corpus))
    assert code == 0, err
    assert out.startswith("ingested 1 paper from 1 file in ")
    assert out.rstrip().endswith("1 added, 0 updated, 0 unchanged, 0 removed; 1 chunk written; index: 1 paper, 1 chunk")
