"""Authors are searchable words (store/bm25.py ``lexical_heads``): in the lexical indexes only, so a corpus without
authors is indexed exactly as before; an index saved before that is rebuilt from the store once."""

from __future__ import annotations

import json

import pytest

from rag.types import Paper
from store.bm25 import LexicalIndex, lexical_heads, rows_with_titles
from tests.metadata_corpus import metadata_retriever
from ui.cli.search import _show_hits


@pytest.fixture(scope="module")
def retriever(tmp_path_factory):
    return metadata_retriever(tmp_path_factory.mktemp("lexical-authors"))


def _ids(hits) -> list[str]:
    return [h.paper_id.rsplit("#", 1)[-1] for h in hits]


def test_an_authors_name_finds_their_papers(retriever):
    hits = retriever.search("kingma", 5)
    by_words = {pid for pid, h in zip(_ids(hits), hits, strict=True) if h.lexical_score > 0}
    assert by_words == {"adam", "vae"}  # the two papers Kingma wrote, found by the name alone
    assert _ids(retriever.search("Tegmark", 1)) == ["kan"]
    assert _ids(retriever.search("Vaswani Shazeer", 1)) == ["transformer"]
    assert _ids(retriever.search("Tri Dao", 1)) == ["mamba2"]


def test_search_kingma_adam_shows_the_adam_paper_first(retriever, capsys):
    _show_hits(retriever.search("kingma adam", 3))
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("1. Adam: A Method for Stochastic Optimization")


def test_a_paper_without_authors_keeps_its_title_alone():
    bare = Paper("p", "FedSSM", "An abstract.", "000.txt", 1)
    written = Paper("q", "Adam", "We introduce Adam.", "a.jsonl", 1, authors=("D. Kingma", "J. Ba"))
    heads = lexical_heads([bare, written])
    assert heads == {"p": "FedSSM", "q": "Adam. D. Kingma, J. Ba"}
    rows = [("p::0", "p", "An abstract."), ("q::0", "q", "We introduce Adam.")]
    # The bundled corpus has no authors: its rows are what they were with titles only.
    assert list(rows_with_titles(rows[:1], heads)) == list(rows_with_titles(rows[:1], {"p": "FedSSM"}))
    assert list(rows_with_titles(rows[1:], heads)) == [("q::0", "q", "Adam. D. Kingma, J. Ba. We introduce Adam.")]


def test_an_index_saved_before_authors_were_searchable_is_rebuilt(retriever, tmp_path):
    from rag.retrieval.hybrid import HybridRetriever

    retriever.refresh()
    generation = retriever.store.generation()
    titles = dict(retriever.lexical.titles)
    # What the previous version saved: rows headed by titles only, and no "heads" in the index's state.
    retriever.lexical.build(rows_with_titles(retriever.store.iter_chunks(), titles), generation, titles=titles)
    papers = list(retriever.store.iter_papers())
    rows = ((p.paper_id, p.paper_id, p.abstract) for p in papers)
    retriever.paper_lexical.build(rows_with_titles(rows, titles), generation, titles=titles)
    for index in (retriever.lexical, retriever.paper_lexical):
        state_file = index.folder / "state.json"
        state = json.loads(state_file.read_text())
        state.pop("heads")
        state_file.write_text(json.dumps(state))
        assert not LexicalIndex(index.folder).load(generation)  # stale: it does not say what its rows hold
    fresh = HybridRetriever(retriever.store, retriever.embedder, LexicalIndex(retriever.lexical.folder))
    hits = fresh.search("kingma", 5)
    assert {pid for pid, h in zip(_ids(hits), hits, strict=True) if h.lexical_score > 0} == {"adam", "vae"}
    assert LexicalIndex(retriever.lexical.folder).load(generation)  # rebuilt and saved: loads next time
