"""``paperchat search`` and ``ask`` show a paper's label and metadata: in-process over a real index of the
JSONL metadata corpus (fake embedder), and once as a user runs them (slow: real model)."""

from __future__ import annotations

import json

import pytest

from rag.answers.pipeline import AnswerPipeline
from tests.conftest import FakeEmbedder
from tests.metadata_corpus import METADATA_CORPUS, metadata_retriever
from ui.api.answers import citation_fields
from ui.cli.answers import show_sources
from ui.cli.search import _show_hits


@pytest.fixture(scope="module")
def retriever(tmp_path_factory):
    return metadata_retriever(tmp_path_factory.mktemp("cli-metadata"))


def test_search_text_shows_label_authors_and_link(retriever, capsys):
    _show_hits(retriever.search("adaptive moment estimation for stochastic optimization", 1))
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("1. Adam: A Method for Stochastic Optimization  [my-papers · #1 of metadata_papers.jsonl]")
    assert out[1] == "   Diederik P. Kingma and Jimmy Ba · ICLR · 2015"
    assert out[2] == "   https://arxiv.org/abs/1412.6980"


def test_ask_sources_and_api_citations_carry_metadata(retriever, capsys):
    answer = AnswerPipeline(retriever, FakeEmbedder(), None).answer("who wrote the Adam paper?")
    show_sources(answer)
    out = capsys.readouterr().out
    assert "[1] Adam: A Method for Stochastic Optimization  (my-papers · #1 of metadata_papers.jsonl)" in out
    assert "    Diederik P. Kingma and Jimmy Ba · ICLR · 2015" in out
    cited = citation_fields(answer)["citations"][0]
    assert cited["authors"] == ["Diederik P. Kingma", "Jimmy Ba"] and cited["year"] == 2015
    assert cited["venue"] == "ICLR" and cited["url"] == "https://arxiv.org/abs/1412.6980"
    assert cited["label"] == "my-papers · #1 of metadata_papers.jsonl"
    assert answer.to_dict()["sources"][0]["authors"] == ["Diederik P. Kingma", "Jimmy Ba"]  # ask --json


@pytest.mark.slow
def test_a_users_jsonl_corpus_as_the_cli_shows_it(tmp_path):
    from tests.ui.test_cli import run

    env = {"PAPERCHAT_COLLECTION": "my-papers"}
    ingest = run(["ingest", str(METADATA_CORPUS)], tmp_path, env_extra=env)
    assert ingest.returncode == 0, ingest.stderr
    found = run(["search", "adaptive moment estimation stochastic optimization", "--json", "--k", "1"], tmp_path,
                env_extra=env)
    assert found.returncode == 0, found.stderr
    top = json.loads(found.stdout)["hits"][0]
    assert (top["title"], top["authors"], top["year"]) == (
        "Adam: A Method for Stochastic Optimization", ["Diederik P. Kingma", "Jimmy Ba"], 2015)
    assert top["label"] == "my-papers · #1 of metadata_papers.jsonl"
    asked = run(["ask", "who wrote the Adam paper?", "--json", "--extractive"], tmp_path, env_extra=env)
    assert asked.returncode == 0, asked.stderr
    payload = json.loads(asked.stdout)
    assert "Diederik P. Kingma and Jimmy Ba" in payload["answer"]
    assert payload["citations"][0]["paper_id"].endswith("#adam")
    listed = run(["ask", "papers from 2024", "--extractive"], tmp_path, env_extra=env)
    assert "2 papers from 2024" in listed.stdout and "my-papers · #4 of metadata_papers.jsonl" in listed.stdout
