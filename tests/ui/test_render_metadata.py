"""Paper cards, hits and the Papers tab show a paper's label and metadata (browser-free: plain HTML), and
the header and examples come from the collection served (ui/web/intro.py)."""

from __future__ import annotations

import html

from rag.types import Answer, Citation, Hit
from tests.metadata_corpus import COLLECTION, metadata_papers
from ui.web import render
from ui.web.intro import filter_placeholder, intro_for


def _hits():
    papers = {p.paper_id: p for p in metadata_papers()}
    return [Hit.of_paper(papers[pid], rank=i, score=0.9, collection=COLLECTION)
            for i, pid in enumerate(["adam", "kan"], start=1)]


def test_a_cited_paper_card_shows_authors_venue_year_link_and_label():
    adam, kan = _hits()
    answer = Answer(question="q", answer="Adam [1].", sources=[adam, kan], grounded=True, citations=[
        Citation(1, adam.paper_id, adam.title, adam.source, adam.ordinal, evidence="", support=0.8)])
    panel = render.sources_html(answer)
    card = panel.split('<div class="pc-card">')[1].split("Retrieved but not cited")[0]
    assert "Diederik P. Kingma and Jimmy Ba · ICLR · 2015" in card
    assert '<a class="pc-link" href="https://arxiv.org/abs/1412.6980"' in card
    assert ">my-papers · #1 of metadata_papers.jsonl<" in card
    assert 'title="metadata_papers.jsonl #1"' in card  # the file name in the tooltip
    # The uncited hit: its metadata too; a javascript: URL from a record is never a link.
    uncited = panel.split("Retrieved but not cited")[1]
    assert "Ziming Liu and Max Tegmark · 2024" in uncited
    assert "javascript:" not in panel and 'href="javascript' not in panel


def test_bundled_papers_are_labelled_with_the_corpus_and_file_number(bundled_papers):
    paper = next(p for p in bundled_papers if p.source == "002_735305cd7294d037.txt" and p.ordinal == 5)
    item = render._hit_item(Hit.of_paper(paper, rank=1, score=0.5, collection="paperchat"))
    assert ">ICML 2026 · #5 of file 002<" in item
    assert 'title="002_735305cd7294d037.txt #5"' in item and "pc-authors" not in item  # no metadata: no line


def test_papers_tab_shows_metadata_escaped():
    papers = metadata_papers()
    evil = papers[0].__class__("x", "T", "abstract", "x.jsonl", 1, authors=("<img src=x onerror=alert(1)>",))
    page = render.papers_html([*papers, evil], len(papers) + 1)
    assert "Ashish Vaswani, Noam Shazeer, Niki Parmar, Jakob Uszkoreit et al. · NeurIPS · 2017" in page
    assert "<img" not in page and html.escape("<img src=x onerror=alert(1)>") in page


def test_the_header_and_examples_come_from_the_collection(bundled_papers):
    bundled = intro_for(bundled_papers, "paperchat")
    assert bundled.text == render.INTRO and bundled.examples == render.EXAMPLE_QUESTIONS
    assert bundled.markdown.startswith("# paperchat\n") and "ICML 2026" in bundled.markdown
    with_mine = intro_for([*bundled_papers, *metadata_papers()], "paperchat")  # the bundled corpus and more
    assert with_mine.examples == render.EXAMPLE_QUESTIONS and with_mine.markdown.startswith("# paperchat\n")
    one_file = intro_for([p for p in bundled_papers if p.source.startswith("004_")], "paperchat")
    assert one_file.markdown.startswith("# paperchat · ICML 2026\n")  # named by its header; its own examples
    assert not set(one_file.examples) & set(render.EXAMPLE_QUESTIONS)
    mine = intro_for(metadata_papers(), COLLECTION)
    assert mine.markdown.startswith("# paperchat · my-papers\n") and "ICML" not in mine.markdown
    assert "**my-papers** abstracts (5 papers)" in mine.text
    titles = {p.title for p in metadata_papers()}
    assert any(t in q for q in mine.examples for t in titles) and "Papers from 2024" in mine.examples
    assert any(q.startswith("Who wrote") for q in mine.examples)
    assert not set(mine.examples) & set(render.EXAMPLE_QUESTIONS)


def test_the_filter_box_examples_match_papers_of_the_collection(bundled_papers):
    # "author~Bengio" matched nothing in the bundled corpus, which records no authors.
    from rag.exports.filtered import filters_in
    from rag.exports.filters import keep

    for papers, author in ((bundled_papers, False), (metadata_papers(), True)):
        placeholder = filter_placeholder(papers)
        assert placeholder.startswith("blank: every paper; e.g. ") and placeholder.endswith("; source=FILE")
        examples = placeholder.removeprefix("blank: every paper; e.g. ").split("; ")[:-1]
        assert ("author~" in placeholder) is author and "author~Bengio" not in placeholder
        assert any(e.startswith("title~") for e in examples)
        for example in examples:
            assert keep(papers, filters_in(example)), example  # each one passes some paper
    assert filter_placeholder(bundled_papers).startswith("blank: every paper; e.g. year>=2026; title~")
