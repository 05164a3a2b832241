"""The Papers tab's filter (and MCP ``list_papers``) matches authors, venue and year as well as title and abstract."""

from __future__ import annotations

from tests.metadata_corpus import metadata_papers
from ui.shared.text import filter_papers
from ui.web import render


def _ids(papers) -> set[str]:
    return {p.paper_id.rsplit("#", 1)[-1] for p in papers}


def test_the_filter_finds_papers_by_their_authors():
    papers = metadata_papers()
    assert _ids(filter_papers(papers, "Kingma")) == {"adam", "vae"}
    assert _ids(filter_papers(papers, "kingma adam")) == {"adam"}  # an author and a title word
    assert _ids(filter_papers(papers, "tegmark")) == {"kan"}
    assert _ids(filter_papers(papers, "ICLR")) == {"adam", "vae"}
    assert _ids(filter_papers(papers, "2024")) == {"mamba2", "kan"}
    assert _ids(filter_papers(papers, "kingma tegmark")) == set()  # every word must match


def test_the_papers_tab_shows_an_authors_papers_with_their_names():
    papers = metadata_papers()
    shown = render.papers_html(filter_papers(papers, "kingma"), len(papers), "kingma")
    assert "2 of 5 papers match" in shown and "Diederik P. Kingma" in shown and "Max Welling" in shown


def test_a_paper_is_found_by_its_id_or_the_place_its_label_gives(bundled_papers):
    # The filter box said "No paper matches" for a paper's id, and "file 002" (as the list labels papers) found
    # two papers whose abstracts happen to say "file" and "002", not that file's 19.
    def ids(query: str) -> set[str]:
        return {p.paper_id for p in filter_papers(bundled_papers, query)}

    in_002 = {p.paper_id for p in bundled_papers if p.source.startswith("002_")}
    assert ids("file 002") >= in_002 and len(in_002) == 19
    eighth = next(p for p in bundled_papers if p.source.startswith("000_") and p.ordinal == 8)
    assert ids(eighth.paper_id) == {eighth.paper_id}
    assert ids("#8 of file 000") == {eighth.paper_id}
