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
