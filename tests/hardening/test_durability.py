"""Ingest durability: SIGKILL at known points of a first ingest and of an update, then a re-run, must end
exactly where an uninterrupted run ends; two ingests at once never interleave.

The killed processes are real ``paperchat ingest`` processes (``tests/hardening/driver.py``: the CLI with
the fake embedder) stopped at a pause point and sent SIGKILL from here. The re-runs and comparisons run
in this process. All kills of one phase run in parallel to keep the wall time down.
"""

from __future__ import annotations

import select
import shutil
import time
from pathlib import Path

import pytest

from tests.conftest import BUNDLED_CORPUS
from tests.hardening.conftest import QUERIES, cli, fake_cli_env, kill, run_driver, snapshot, start_driver

pytestmark = pytest.mark.slow

# A first ingest into an empty data folder, killed at:
FRESH_POINTS = ("manifest", "chunks:1", "paper:1", "chunks:40", "generation")


# An update of an index built from v1 (its BM25 index saved by a search), killed at a point, then re-run
# with a corpus: (pause point, corpus of the killed run, corpus of the re-run, why it fails today or None).
UPDATE_CASES = {
    "update-chunks-of-changed-paper": ("chunks:1", "v2", "v2", None),
    "update-before-generation-bump": ("generation", "v2", "v2", None),
    "update-between-record-and-chunk-delete": ("delete", "v2", "v2", None),
    "update-new-paper-then-dropped-from-corpus": ("chunks:2", "v2", "v2b", None),
}


def write_corpora(root: Path) -> dict[str, Path]:
    """v1: three files of the bundled corpus. v2: one abstract changed (same chunk count, new words), the last
    abstract of one file removed, one abstract added to another. v2b: v2 without the added abstract."""
    v1 = root / "v1"
    v1.mkdir(parents=True)
    files = sorted(p.name for p in BUNDLED_CORPUS.glob("*.txt"))[:3]  # 57 abstracts: enough, and quicker
    for name in files:
        shutil.copy(BUNDLED_CORPUS / name, v1 / name)
    versions = {"v1": v1}
    for name in ("v2", "v2b"):
        folder = root / name
        shutil.copytree(v1, folder)
        changed = folder / files[0]
        paragraphs = changed.read_text(encoding="utf-8").split("\n\n")
        paragraphs[2] = paragraphs[2].rstrip("\n") + " Quokka zebrafish ablations confirm the gains."
        changed.write_text("\n\n".join(paragraphs), encoding="utf-8")
        shortened = folder / files[1]
        paragraphs = [p for p in shortened.read_text(encoding="utf-8").split("\n\n") if p.strip()]
        shortened.write_text("\n\n".join(paragraphs[:-1]) + "\n", encoding="utf-8")
        if name == "v2":
            grown = folder / files[2]
            grown.write_text(grown.read_text(encoding="utf-8").rstrip("\n") + "\n\nWe introduce Wombat, a planner "
                             "for quokka zebrafish ablations that halves the search cost.\n", encoding="utf-8")
        versions[name] = folder
    return versions


def wait_paused(proc, point: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if ready:
            line = proc.stdout.readline()
            if line.startswith("PAUSED"):
                assert line.split()[1] == point
                return
            if not line and proc.poll() is not None:
                break
    kill(proc)
    raise AssertionError(f"the ingest never reached {point!r}: {proc.stderr.read()[-2000:]}")


def ingest_in_process(data_dir: Path, corpus: Path) -> tuple[int, str, str]:
    with fake_cli_env(data_dir):
        return cli("ingest", str(corpus))


def killed_state(data_dir: Path) -> tuple[int, int, int]:
    """(papers, chunks, generation) a killed ingest left behind."""
    from store.chroma import ChromaStore

    store = ChromaStore(path=data_dir / "chroma", collection="paperchat")
    return (*store.counts(), store.generation())


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every kill scenario, killed and re-run, and the clean runs to compare them with."""
    root = tmp_path_factory.mktemp("durability")
    corpora = write_corpora(root / "corpora")
    base = root / "base"
    base_proc = start_driver(["ingest", str(corpora["v1"]), "+", "search", QUERIES[0]], base)
    fresh = {point: (root / f"fresh-{point.replace(':', '-')}") for point in FRESH_POINTS}
    procs = {point: start_driver(["ingest", str(corpora["v1"])], folder, HARDENING_PAUSE_AT=point)
             for point, folder in fresh.items()}
    for point, proc in procs.items():
        wait_paused(proc, point)
        kill(proc)
    _, err = base_proc.communicate(timeout=120)
    assert base_proc.returncode == 0, err

    updates = {}
    procs = {}
    for name, (point, killed_with, _rerun_with, _why) in UPDATE_CASES.items():
        updates[name] = root / name
        shutil.copytree(base, updates[name])
        procs[name] = start_driver(["ingest", str(corpora[killed_with])], updates[name], HARDENING_PAUSE_AT=point)
    for name, proc in procs.items():
        wait_paused(proc, UPDATE_CASES[name][0])
        kill(proc)

    references = {"v1": root / "clean-v1"}
    assert ingest_in_process(references["v1"], corpora["v1"])[0] == 0
    for name in ("v2", "v2b"):
        references[name] = root / f"clean-update-{name}"
        shutil.copytree(base, references[name])
        assert ingest_in_process(references[name], corpora[name])[0] == 0

    results = {}
    for point, folder in fresh.items():
        killed = killed_state(folder)
        results[f"fresh-{point}"] = (folder, references["v1"], ingest_in_process(folder, corpora["v1"]),
                                     ingest_in_process(folder, corpora["v1"]), killed)
    for name, folder in updates.items():
        killed = killed_state(folder)
        rerun_with = UPDATE_CASES[name][2]
        results[name] = (folder, references[rerun_with], ingest_in_process(folder, corpora[rerun_with]),
                         ingest_in_process(folder, corpora[rerun_with]), killed)
    return {"results": results, "corpora": corpora, "references": references}


def check_rerun_matches_clean_run(runs, name: str) -> None:
    folder, reference, first, second, _killed = runs["results"][name]
    code, out, err = first
    assert code == 0 and "Traceback" not in err, err
    assert snapshot(folder) == snapshot(reference)
    code, out, _ = second
    assert code == 0 and "0 added, 0 updated" in out and "0 chunks written" in out  # nothing left to redo


@pytest.mark.parametrize("point", FRESH_POINTS)
def test_first_ingest_killed_then_rerun_matches_a_clean_run(runs, point):
    check_rerun_matches_clean_run(runs, f"fresh-{point}")


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=[pytest.mark.xfail(strict=True, reason=why)] if why else [])
        for name, (_point, _killed, _rerun, why) in UPDATE_CASES.items()
    ],
)
def test_update_killed_then_rerun_matches_a_clean_update(runs, name):
    check_rerun_matches_clean_run(runs, name)


def test_kill_points_were_really_mid_write(runs):
    """The scenarios above are only worth something if each killed run left the index unfinished."""
    killed = {name: result[4] for name, result in runs["results"].items()}
    assert killed["fresh-manifest"] == (0, 0, 0)
    assert killed["fresh-chunks:1"][0] == 0 and killed["fresh-chunks:1"][1] >= 1
    assert killed["fresh-paper:1"][0] == 1
    assert killed["fresh-chunks:40"][0] == 39 and killed["fresh-chunks:40"][1] > 39
    assert killed["fresh-generation"] == (57, 57, 0)  # everything written, the generation not bumped
    assert killed["update-between-record-and-chunk-delete"][:2] == (57, 58)  # a record went, its chunk not


def test_second_ingest_fails_fast_with_the_lock_message_and_the_first_completes(runs, tmp_path):
    corpus = runs["corpora"]["v1"]
    data_dir = tmp_path / "data"
    gate = tmp_path / "gate"
    first = start_driver(["ingest", str(corpus)], data_dir, HARDENING_PAUSE_AT="paper:3", HARDENING_GATE=str(gate))
    try:
        wait_paused(first, "paper:3")  # it holds the lock and has written 3 papers

        started = time.monotonic()
        second = run_driver(["ingest", str(corpus)], data_dir, timeout=90)
        elapsed = time.monotonic() - started
        assert second.returncode == 1, second.stderr
        assert second.stderr.splitlines() == [
            f"paperchat: error: another ingest (pid {first.pid}) is writing to {data_dir}; "
            "wait for it to finish, then run this one again"
        ]
        assert second.stdout == "" and "Traceback" not in second.stderr
        assert elapsed < 30, elapsed  # a process start; it never waits for the lock

        with fake_cli_env(data_dir):  # the same from this process: the refusal itself is immediate
            started = time.monotonic()
            code, out, err = cli("ingest", str(corpus))
            assert code == 1 and "another ingest" in err and time.monotonic() - started < 5

        gate.touch()
        out, err = first.communicate(timeout=120)
        assert first.returncode == 0, err
        assert "57 added" in out
    finally:
        kill(first)
    assert snapshot(data_dir) == snapshot(runs["references"]["v1"])
