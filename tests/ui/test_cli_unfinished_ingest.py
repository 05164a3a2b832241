"""An ingest that stopped before it finished (killed, interrupted, a failed write) leaves part of its papers in
the index: `doctor` and `stats` say so and what to re-run, until an ingest completes it."""

from __future__ import annotations

import os
import shutil
import signal

from tests.conftest import BUNDLED_CORPUS, FakeEmbedder
from tests.hardening.conftest import cli, fake_cli_env, kill, start_driver
from ui.cli.main import main

UNFINISHED = "the last ingest did not finish (it stopped while writing): the index holds only part of what it was given"


class StopsMidway(FakeEmbedder):
    """Ctrl-C once 40 texts are embedded (the papers embedded before are stored)."""

    def embed(self, texts):
        if self.texts_embedded >= 40:
            raise KeyboardInterrupt
        return super().embed(texts)


def copy_corpus(folder):
    shutil.copytree(BUNDLED_CORPUS, folder)
    return folder.resolve()


def assert_reported_until_completed(data_dir, corpus, command: str) -> None:
    with fake_cli_env(data_dir):
        code, out, err = cli("doctor", "--extractive")
        assert code == 1, out + err
        assert "last ingest  PROBLEM: did not finish" in out
        assert f"- {UNFINISHED}; run `{command}` again to complete it" in out
        code, out, _ = cli("stats")
        assert code == 0 and f"last_ingest: did not finish (the index holds part of what it was given); run " \
                              f"`{command}` to complete it" in out

        assert cli("ingest", str(corpus))[0] == 0
        code, out, err = cli("doctor", "--extractive")
        assert code == 0 and "did not finish" not in out, out + err
        assert "last_ingest" not in cli("stats")[1]


def test_doctor_and_stats_say_an_interrupted_ingest_did_not_finish_and_what_to_rerun(tmp_path):
    corpus = copy_corpus(tmp_path / "my corpus")
    data_dir = tmp_path / "data"
    with fake_cli_env(data_dir):
        assert main(["ingest", str(corpus)], parts={"embedder": StopsMidway()}) == 130
        code, out, _ = cli("stats")
        assert 0 < int(out.split("papers: ")[1].split()[0]) < 76
    assert_reported_until_completed(data_dir, corpus, f"paperchat ingest '{corpus}'")


def test_a_default_ingest_that_did_not_finish_is_rerun_without_a_path(tmp_path):
    data_dir = tmp_path / "data"
    with fake_cli_env(data_dir):
        assert main(["ingest"], parts={"embedder": StopsMidway()}) == 130
    assert_reported_until_completed(data_dir, BUNDLED_CORPUS, "paperchat ingest")


def test_an_ingest_killed_with_sigterm_is_reported(tmp_path):
    """The user's case: `kill PID` (SIGTERM) of a real ingest process, stopped at a known point (5 papers stored)."""
    corpus = copy_corpus(tmp_path / "corpus")
    data_dir = tmp_path / "data"
    proc = start_driver(["ingest", str(corpus)], data_dir, HARDENING_PAUSE_AT="paper:5")
    try:
        line = proc.stdout.readline()  # the driver prints this line, then waits
        assert line.startswith("PAUSED paper:5"), proc.stderr.read()
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(10) == -signal.SIGTERM
    finally:
        kill(proc)
    assert_reported_until_completed(data_dir, corpus, f"paperchat ingest {corpus}")


class StopsAtOnce(FakeEmbedder):
    """Ctrl-C before the first text is embedded: a rebuild has dropped the index, and nothing is stored yet."""

    def embed(self, texts):
        raise KeyboardInterrupt


def interrupted(args: list[str], embedder: FakeEmbedder) -> str:
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(args, parts={"embedder": embedder}) == 130
    return err.getvalue()


def write_own_file(folder):
    folder.mkdir()
    own = folder / "mine.jsonl"
    own.write_text('{"id": "q", "title": "QuackNet", "abstract": "QuackNet detects duck calls in wetland audio '
                   'recordings with a small convolutional network trained on field data."}\n', encoding="utf-8")
    return own


def test_an_interrupted_rebuild_says_the_index_is_partial_and_answers_warn_until_it_is_completed(tmp_path):
    # `ingest --rebuild` stopped by Ctrl-C said only "interrupted"; `ask` then answered from 23 of 78 papers.
    own = write_own_file(tmp_path / "own")
    with fake_cli_env(tmp_path / "data"):
        assert cli("ingest")[0] == 0 and cli("ingest", str(own))[0] == 0
        err = interrupted(["ingest", "--rebuild"], StopsMidway())
        assert "the ingest stopped before it finished: the index holds" in err and "run `paperchat ingest " in err
        assert err.rstrip().endswith("paperchat: interrupted")
        code, _out, err = cli("search", "duck calls")
        assert code == 0 and "the last ingest did not finish: the index holds" in err
        assert "answers come from those only; run `paperchat ingest " in err
        resume = err.split("run `")[1].split("`")[0]
        assert cli(*resume.split()[1:])[0] == 0  # the command it gives completes the index
        code, out, err = cli("stats")
        assert "papers: 77" in out and "did not finish" not in cli("search", "duck calls")[2]


def test_an_index_a_rebuild_emptied_is_built_again_from_the_files_it_was_reading(tmp_path):
    # Interrupted before anything was stored, the next `ask` built the bundled corpus alone: the user's file was lost.
    own = write_own_file(tmp_path / "own")
    with fake_cli_env(tmp_path / "data"):
        assert cli("ingest")[0] == 0 and cli("ingest", str(own))[0] == 0
        interrupted(["ingest", "--rebuild"], StopsAtOnce())
        assert "papers: 0" in cli("stats")[1]
        code, out, err = cli("search", "duck calls in wetlands")
        assert code == 0 and "the index is empty: building it from " in err and "mine.jsonl" in err
        assert "QuackNet" in out
        assert "papers: 77" in cli("stats")[1]
