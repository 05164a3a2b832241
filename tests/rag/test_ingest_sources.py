"""The files an index is built from: each file keeps the ids it was first stored under however it is given
again (by itself or with its folder), the index records where each file is, and an index written before it
recorded them keeps working."""

from __future__ import annotations

import json
from pathlib import Path

from rag.corpus.load import load_corpus
from store.chroma import ChromaStore
from tests.conftest import BUNDLED_CORPUS, FakeEmbedder
from tests.hardening.conftest import cli, fake_cli_env
from ui.cli.main import main

MINE = [
    "We propose Alphanet, a graph method that improves node accuracy by 10% on citation graphs.",
    "Betaplan is a planner for warehouse robots that halves the search cost of routing.",
    "Gammaseg segments tumours in MRI scans and reaches 0.91 Dice on two public datasets.",
]
OTHER = ["Deltaq quantises language models to four bits with a loss below one point of perplexity."]


def write_txt(path: Path, abstracts: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("Header line\n\n" + "\n\n".join(abstracts) + "\n", encoding="utf-8")
    return path


class StopsMidway(FakeEmbedder):
    """Ctrl-C once 40 texts are embedded (the papers embedded before are stored)."""

    def embed(self, texts):
        if self.texts_embedded >= 40:
            raise KeyboardInterrupt
        return super().embed(texts)


def stored(data_dir: Path) -> dict[str, str]:
    """paper_id -> abstract of every paper the index holds."""
    store = ChromaStore(path=data_dir / "chroma", collection="paperchat")
    return {p.paper_id: p.abstract for p in store.iter_papers()}


def forget_sources(data_dir: Path) -> None:
    """Make the index one written before ingests recorded their files (no ``sources`` in its metadata)."""
    store = ChromaStore(path=data_dir / "chroma", collection="paperchat")
    assert store.sources() is not None
    meta = dict(store._chunks.metadata or {})
    del meta["sources"]
    store._chunks.modify(metadata=meta)
    assert ChromaStore(path=data_dir / "chroma", collection="paperchat").sources() is None


def assert_one_copy_each(papers: dict[str, str]) -> None:
    abstracts = sorted(papers.values())
    assert len(abstracts) == len(set(abstracts)), papers
    assert not any("10%" in a for a in abstracts), "a stale copy of the edited abstract is still stored"


def test_a_file_ingested_by_itself_then_with_its_folder_is_updated_not_stored_twice(tmp_path):
    mine = write_txt(tmp_path / "corp" / "mine.txt", MINE)
    write_txt(tmp_path / "corp" / "other.txt", OTHER)
    with fake_cli_env(tmp_path / "data"):
        assert cli("ingest", str(mine))[0] == 0
        write_txt(mine, [MINE[0].replace("10%", "12%"), *MINE[1:]])
        code, out, err = cli("ingest", str(tmp_path / "corp"))
    assert code == 0, err
    assert "1 added, 1 updated, 2 unchanged, 0 removed" in out, out
    papers = stored(tmp_path / "data")
    assert len(papers) == 4
    assert_one_copy_each(papers)


def test_a_file_ingested_with_its_folder_then_by_itself_is_updated_not_stored_twice(tmp_path):
    mine = write_txt(tmp_path / "corp" / "mine.txt", MINE)
    write_txt(tmp_path / "corp" / "other.txt", OTHER)
    with fake_cli_env(tmp_path / "data"):
        assert cli("ingest", str(tmp_path / "corp"))[0] == 0
        write_txt(mine, [MINE[0].replace("10%", "12%"), *MINE[1:]])
        code, out, err = cli("ingest", str(mine))
    assert code == 0, err
    assert "0 added, 1 updated, 2 unchanged, 0 removed" in out, out
    papers = stored(tmp_path / "data")
    assert sorted(papers) == ["mine.txt#1", "mine.txt#2", "mine.txt#3", "other.txt#1"]
    assert_one_copy_each(papers)


def test_the_index_records_each_file_it_holds_and_where_it_is(tmp_path):
    mine = write_txt(tmp_path / "corp" / "mine.txt", MINE)
    with fake_cli_env(tmp_path / "data"):
        assert cli("ingest", str(mine))[0] == 0
        assert cli("ingest", str(BUNDLED_CORPUS))[0] == 0
    sources = ChromaStore(path=tmp_path / "data" / "chroma", collection="paperchat").sources()
    label = mine.resolve().as_posix()  # a file given by itself outside the working folder: its absolute path
    assert sources[label] == label
    bundled = {p.name: p.resolve().as_posix() for p in BUNDLED_CORPUS.glob("*.txt")}
    assert {k: v for k, v in sources.items() if k != label} == bundled


def test_an_index_written_before_files_were_recorded_still_updates_instead_of_duplicating(tmp_path):
    mine = write_txt(tmp_path / "corp" / "mine.txt", MINE)
    write_txt(tmp_path / "corp" / "other.txt", OTHER)
    data_dir = tmp_path / "data"
    with fake_cli_env(data_dir):
        assert cli("ingest", str(mine))[0] == 0
        forget_sources(data_dir)
        write_txt(mine, [MINE[0].replace("10%", "12%"), *MINE[1:]])
        code, out, err = cli("ingest", str(tmp_path / "corp"))
    assert code == 0, err
    assert "1 added, 1 updated, 2 unchanged" in out, out
    assert_one_copy_each(stored(data_dir))
    recorded = ChromaStore(path=data_dir / "chroma", collection="paperchat").sources()
    assert recorded[mine.resolve().as_posix()] == mine.resolve().as_posix()  # traced once, now recorded


def test_the_bundled_corpus_keeps_its_ids_however_it_is_given(tmp_path):
    expected = {p.paper_id for p in load_corpus([BUNDLED_CORPUS], namespace_under=BUNDLED_CORPUS).papers}
    assert "000_dcbf1b5d2daaeff5.txt#1" in expected
    data_dir = tmp_path / "data"
    with fake_cli_env(data_dir):
        assert cli("ingest")[0] == 0
        assert set(stored(data_dir)) == expected
        forget_sources(data_dir)  # an index of before: traced, the same ids
        code, out, _ = cli("ingest", str(BUNDLED_CORPUS / "000_dcbf1b5d2daaeff5.txt"))
        assert code == 0 and "0 added, 0 updated" in out, out
        code, out, _ = cli("ingest", "--json")
    assert code == 0 and json.loads(out)["unchanged"] == len(expected)
    assert set(stored(data_dir)) == expected


# --- ingest --rebuild ------------------------------------------------------------------------------------------------


def bundled_and_mine(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """An index of the bundled corpus plus three papers of the user's own file: (data folder, the file, papers)."""
    mine = write_txt(tmp_path / "own" / "mine.txt", MINE)
    data_dir = tmp_path / "data"
    with fake_cli_env(data_dir):
        assert cli("ingest")[0] == 0
        assert cli("ingest", str(mine))[0] == 0
    papers = stored(data_dir)
    assert len(papers) == 79
    return data_dir, mine, papers


def test_a_rebuild_with_no_path_rebuilds_every_file_the_index_holds(tmp_path):
    data_dir, mine, before = bundled_and_mine(tmp_path)
    with fake_cli_env(data_dir, PAPERCHAT_CHUNK_MAX_TOKENS="128"):  # settings changed: what a rebuild is for
        code, out, err = cli("ingest", "--rebuild")
    assert code == 0, err
    assert "79 added, 0 updated, 0 unchanged, 0 removed" in out, out
    assert f"rebuilding from the files the index holds papers of: {BUNDLED_CORPUS}, {mine.resolve()}" in err
    assert stored(data_dir) == before  # the same papers under the same ids


def test_a_rebuild_that_would_lose_papers_is_refused_and_changes_nothing_unless_forced(tmp_path):
    data_dir, mine, before = bundled_and_mine(tmp_path)
    mine.unlink()
    with fake_cli_env(data_dir):
        code, out, err = cli("ingest", "--rebuild")
        assert code == 1 and out == ""
        line = err.splitlines()[-1]
        assert f"would lose 3 papers from {mine.resolve()} (the file is gone); nothing was changed" in line, err
        assert "put the files back" in line and "add --force" in line
        assert stored(data_dir) == before

        code, out, err = cli("ingest", "--rebuild", "--force")
    assert code == 0, err
    assert "76 added, 0 updated, 0 unchanged, 3 removed" in out, out
    assert f"dropped by --rebuild --force: 3 papers from {mine.resolve()} (the file is gone)" in err
    assert stored(data_dir) == {pid: a for pid, a in before.items() if not pid.startswith(mine.resolve().as_posix())}


def test_a_rebuild_from_paths_that_leave_out_a_file_is_refused(tmp_path):
    data_dir, mine, before = bundled_and_mine(tmp_path)
    with fake_cli_env(data_dir):
        code, out, err = cli("ingest", "--rebuild", str(BUNDLED_CORPUS))
        assert code == 1 and f"3 papers from {mine.resolve()} (not among the paths given)" in err, err
        assert "`paperchat ingest --rebuild` with no path" in err
        assert stored(data_dir) == before
        code, out, err = cli("ingest", "--rebuild", str(BUNDLED_CORPUS), str(mine))
    assert code == 0 and "79 added" in out, err
    assert stored(data_dir) == before


def test_a_rebuild_refuses_to_drop_the_papers_of_records_that_no_longer_load(tmp_path):
    papers = tmp_path / "own" / "papers.jsonl"
    papers.parent.mkdir()
    records = [{"id": f"p{i}", "title": f"Paper {i}", "abstract": text} for i, text in enumerate(MINE)]
    papers.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    data_dir = tmp_path / "data"
    with fake_cli_env(data_dir):
        assert cli("ingest", str(papers))[0] == 0
        lines = papers.read_text(encoding="utf-8").splitlines()
        papers.write_text("\n".join([lines[0], "{broken", lines[2]]) + "\n", encoding="utf-8")
        code, out, err = cli("ingest", "--rebuild")
    assert code == 1 and "1 paper from " in err and "records that no longer load" in err, err
    assert len(stored(data_dir)) == 3


def test_an_index_written_before_files_were_recorded_is_rebuilt_whole(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_txt(tmp_path / "mine.txt", MINE)
    data_dir = tmp_path / "data"
    with fake_cli_env(data_dir):
        assert cli("ingest")[0] == 0
        assert cli("ingest", "mine.txt")[0] == 0  # given from here: its papers are mine.txt#1...
        before = stored(data_dir)
        assert "mine.txt#1" in before
        forget_sources(data_dir)
        code, out, err = cli("ingest", "--rebuild")
    assert code == 0 and "79 added" in out, err
    assert stored(data_dir) == before


def test_a_rebuild_stopped_midway_then_run_again_rebuilds_every_file(tmp_path):
    """The stopped rebuild had dropped the index and stored part of the bundled corpus, none of mine.txt: the files
    it was rebuilding from are recorded first, so the next rebuild still reads mine.txt."""
    data_dir, _mine, before = bundled_and_mine(tmp_path)
    with fake_cli_env(data_dir):
        assert main(["ingest", "--rebuild"], parts={"embedder": StopsMidway()}) == 130
        assert 0 < len(stored(data_dir)) < 76
        code, out, err = cli("ingest", "--rebuild")
    assert code == 0 and "79 added" in out, err
    assert stored(data_dir) == before


def test_force_goes_with_rebuild(tmp_path):
    with fake_cli_env(tmp_path / "data"):
        code, out, err = cli("ingest", "--force")
    assert code == 1 and "--force goes with --rebuild" in err and not (tmp_path / "data").exists()


LONG = [f"{text} Its evaluation covers twelve settings and every ablation we could think of, all reported in full."
        for text in MINE]  # abstracts long enough (COPY_MIN_WORDS) to tell a copy from a coincidence


def test_a_copied_file_is_not_stored_twice_and_the_copies_are_named_once(tmp_path):
    # A copy of a bundled file ingested beside it listed every paper twice ("4 papers", FedSSM twice).
    original = write_txt(tmp_path / "corp" / "mine.txt", LONG)
    copy = write_txt(tmp_path / "elsewhere" / "copy.txt", [*LONG[:2], OTHER[0] + " " + LONG[2]])
    with fake_cli_env(tmp_path / "data"):
        assert cli("ingest", str(original))[0] == 0
        code, out, err = cli("ingest", str(copy))
    assert code == 0, err
    assert "skipped 2 papers of copy.txt (#1, #2): word for word the abstracts of mine.txt (#1, #2)" in err
    assert "ingested 1 paper from 1 file" in out and "index: 4 papers" in out, out
    assert len(set(stored(tmp_path / "data").values())) == 4


def test_copies_within_one_ingest_keep_the_first_and_short_abstracts_may_agree(tmp_path):
    folder = tmp_path / "corp"
    write_txt(folder / "a.txt", [LONG[0], "Short and the same."])
    write_txt(folder / "b.txt", [LONG[0], "Short and the same."])
    with fake_cli_env(tmp_path / "data"):
        code, _out, err = cli("ingest", str(folder))
        again = cli("ingest", str(folder))  # the copy is still there: skipped and said again, nothing stored
    assert code == 0 and "skipped 1 paper of b.txt (#1): word for word the abstract of a.txt (#1)" in err
    assert sorted(stored(tmp_path / "data")) == ["a.txt#1", "a.txt#2", "b.txt#2"]
    assert again[0] == 0 and "word for word" in again[2] and "0 added" in again[1]
    assert sorted(stored(tmp_path / "data")) == ["a.txt#1", "a.txt#2", "b.txt#2"]
