"""``paperchat topics`` and ``paperchat related``: in-process over an index built with the fake embedder, and
once as a user runs them on the bundled corpus (slow: real model)."""

from __future__ import annotations

import json
import re

import pytest

from rag.corpus.load import load_corpus
from tests.conftest import BUNDLED_CORPUS, FakeEmbedder
from ui.cli.main import main


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """The bundled corpus indexed with the fake embedder."""
    from rag.components import Components
    from rag.settings import load_settings

    folder = tmp_path_factory.mktemp("cli-corpus")
    Components(load_settings(data_dir=folder), embedder=FakeEmbedder(), warn=lambda _l: None).ingest_files(
        [BUNDLED_CORPUS])
    return folder


@pytest.fixture
def cli(data_dir, monkeypatch, capsys):
    for key in [k for k in __import__("os").environ if k.startswith("PAPERCHAT_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PAPERCHAT_DATA_DIR", str(data_dir))

    def run(*argv):
        code = main(list(argv), parts={"embedder": FakeEmbedder()})
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


def abstracts() -> dict[str, str]:
    return {p.paper_id: p.abstract for p in load_corpus([BUNDLED_CORPUS], namespace_under=BUNDLED_CORPUS).papers}


def words_of(text: str) -> set[str]:
    return set(re.findall(r"[^\W_]+(?:-[^\W_]+)*", text.lower()))


def check_topics(payload: dict) -> None:
    """Every paper of the bundled corpus in exactly one topic; labels made of words of the topic's abstracts."""
    texts = abstracts()
    listed = [p["paper_id"] for t in payload["topics"] for p in t["papers"]]
    assert sorted(listed) == sorted(texts) and payload["papers"] == 76
    for topic in payload["topics"]:
        assert topic["size"] == len(topic["papers"]) and topic["label"] == ", ".join(topic["terms"])
        assert topic["central"] == [p["paper_id"] for p in topic["papers"][:3]]
        words = set().union(*(words_of(texts[p["paper_id"]]) for p in topic["papers"]))
        assert topic["terms"] and set(topic["terms"]) <= words


def test_topics_json_and_text(cli):
    code, out, err = cli("topics", "--json")
    assert code == 0, err
    payload = json.loads(out)
    check_topics(payload)
    code, text, _ = cli("topics")
    assert code == 0
    first = payload["topics"][0]
    assert text.splitlines()[0] == f"Topic 1: {first['label']}  ({first['size']} papers)"
    assert f"  * {first['papers'][0]['title']}  [{first['papers'][0]['label']}]" in text
    assert text.rstrip().endswith(f"76 papers in {len(payload['topics'])} topics; * = most central")


def test_related_lists_the_nearest_papers_with_what_they_share(cli):
    code, out, err = cli("related", "000_dcbf1b5d2daaeff5.txt#1", "--k", "2", "--json")
    assert code == 0, err
    payload = json.loads(out)
    assert payload["paper"]["title"] == "FedSSM" and len(payload["related"]) == 2
    assert all(r["paper_id"] != "000_dcbf1b5d2daaeff5.txt#1" and "shared words: " in r["shares"]
               for r in payload["related"])
    code, text, _ = cli("related", "000_dcbf1b5d2daaeff5.txt#1", "--k", "2")
    lines = text.splitlines()
    assert lines[0] == "Papers related to FedSSM:" and lines[1].startswith(f"1. {payload['related'][0]['title']}  [")
    assert lines[2] == f"   {payload['related'][0]['shares']}"


@pytest.mark.parametrize("paper_id", ["nope", "000_dcbf1b5d2daaeff5.txt#999"])
def test_an_unknown_paper_id_is_one_line_saying_how_to_find_ids(cli, paper_id):
    code, out, err = cli("related", paper_id)
    assert code != 0 and out == ""
    assert err.strip().count("\n") == 0 and "paperchat search QUESTION --json" in err and repr(paper_id) in err


@pytest.mark.slow
def test_topics_on_the_bundled_corpus_as_a_user_runs_it(bundled_index):
    from tests.ui.test_cli import run

    first = run(["topics", "--json"], bundled_index)
    assert first.returncode == 0, first.stderr
    check_topics(json.loads(first.stdout))
    second = run(["topics", "--json"], bundled_index)
    assert second.stdout == first.stdout  # the same output on a second run
    related = run(["related", "000_dcbf1b5d2daaeff5.txt#1", "--json", "--k", "3"], bundled_index)
    assert related.returncode == 0, related.stderr
    assert json.loads(related.stdout)["related"][0]["title"] == "FedVPA-GP"  # the other federated-learning paper
