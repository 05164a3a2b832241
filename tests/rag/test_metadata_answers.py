"""Questions about metadata answered from it (rag/answers/metadata.py), over a real index of the JSONL
metadata corpus (tests/data/metadata_papers.jsonl), and labels (rag/labels.py)."""

from __future__ import annotations

import pytest

from rag.answers.metadata import metadata_answer
from rag.answers.pipeline import AnswerPipeline
from rag.labels import authors_text, file_label, metadata_line, place_label
from tests.conftest import FakeEmbedder
from tests.metadata_corpus import COLLECTION, metadata_retriever


@pytest.fixture(scope="module")
def retriever(tmp_path_factory):
    return metadata_retriever(tmp_path_factory.mktemp("metadata-index"))


@pytest.fixture(scope="module")
def pipeline(retriever):
    return AnswerPipeline(retriever, FakeEmbedder(), None)  # the extractive writer


def test_hits_carry_the_records_metadata_and_a_label(retriever):
    top = retriever.search("adaptive moment estimation for stochastic optimization", 3)[0]
    assert top.paper_id == "adam"
    assert top.authors == ("Diederik P. Kingma", "Jimmy Ba") and top.year == 2015 and top.venue == "ICLR"
    assert top.url == "https://arxiv.org/abs/1412.6980" and top.collection == COLLECTION
    assert top.label == "my-papers · #1 of metadata_papers.jsonl"
    data = top.to_dict()
    assert data["authors"] == ["Diederik P. Kingma", "Jimmy Ba"] and data["year"] == 2015
    assert data["venue"] == "ICLR" and data["url"] == top.url and data["label"] == top.label
    pinned = retriever.hits_for(["vae"])[0]  # a follow-up's pinned paper too
    assert pinned.authors == ("Diederik P. Kingma", "Max Welling") and pinned.year == 2014


def test_who_wrote_a_named_paper_is_answered_from_its_authors_and_cites_it(pipeline):
    answer = pipeline.answer("Who wrote the Adam paper?")
    assert "Diederik P. Kingma and Jimmy Ba" in answer.answer
    assert [(c.marker, c.paper_id) for c in answer.citations] == [(1, "adam")]
    assert answer.sources[0].paper_id == "adam" and answer.grounded and not answer.refused
    assert "[1]" in answer.answer and "Jimmy Ba" in answer.citations[0].evidence


def test_papers_from_a_year_lists_exactly_that_years_papers_cited(pipeline):
    answer = pipeline.answer("papers from 2024")
    assert {c.paper_id for c in answer.citations} == {"mamba2", "kan"}
    assert [h.paper_id for h in answer.sources] == [c.paper_id for c in answer.citations]
    assert answer.answer.startswith("2 papers from 2024")
    assert "Transformers are SSMs" in answer.answer and "[1]" in answer.answer and "[2]" in answer.answer
    assert "Adam" not in answer.answer
    assert pipeline.answer("Which papers are from 2014?").citations[0].paper_id == "vae"


def test_papers_by_an_author_lists_theirs(pipeline):
    answer = pipeline.answer("papers by Kingma")
    assert {c.paper_id for c in answer.citations} == {"adam", "vae"}
    assert {c.paper_id for c in pipeline.answer("papers by Max Welling").citations} == {"vae"}


def test_other_questions_and_missing_metadata_take_the_usual_path(pipeline, retriever):
    usual = pipeline.answer("What does Adam propose for stochastic optimization?")
    assert "was written by" not in usual.answer and "adam" in {c.paper_id for c in usual.citations}
    # No paper of that year, no such author: said so, with what the index does hold (not a search that would
    # name "the nearest papers" as if they were close).
    none = metadata_answer("papers from 1999", [], retriever.every_paper)
    assert none.refused and not none.citations and none.answer.startswith("No paper in the index is from 1999. ")
    assert "2024 (2)" in none.answer
    nobody = metadata_answer("papers by Nobody", [], retriever.every_paper)
    assert nobody.refused and nobody.answer == (
        "No paper in the index lists an author named 'Nobody'. 5 of the 5 papers record their authors.")
    # A named paper without recorded authors: said so, the paper cited (its abstract's sentences would answer
    # something else), counted as declined.
    hits_without_authors = [h.__class__(**{**h.__dict__, "authors": ()}) for h in retriever.search("Adam", 3)]
    missing = metadata_answer("who wrote the Adam paper?", hits_without_authors, None)
    assert missing.refused and missing.not_stated and not missing.grounded
    title = "Adam: A Method for Stochastic Optimization"
    assert missing.answer.startswith(f'The index records no authors for "{title}" [1]. ')
    assert "'authors' field" in missing.answer
    assert [(c.marker, c.paper_id, c.support) for c in missing.citations] == [(1, "adam", 0.0)]
    assert missing.citations[0].evidence in hits_without_authors[0].abstract
    # A question about what the authors did is about the abstract, even for the paper a follow-up points at.
    adam_first = retriever.search("Adam", 3)
    assert metadata_answer("what did the authors of it evaluate on?", adam_first, None, pinned=True) is None
    assert metadata_answer("who wrote it?", adam_first, None, pinned=True).citations[0].paper_id == "adam"
    assert metadata_answer("Authors of the Adam paper", adam_first, None) is not None
    # A paper the question does not name is not answered for (the top hit is not "the BERT paper").
    assert metadata_answer("who wrote the BERT paper?", retriever.search("BERT", 3), None) is None


@pytest.mark.parametrize("question", ["what conference is this?", "Which venue are these papers from?",
                                      "where were these papers published?", "what conference are the abstracts from?"])
def test_the_collections_venues_are_answered_from_its_records(pipeline, question):
    answer = pipeline.answer(question)
    assert answer.answer == "The 5 papers are from ICLR (2), ICML (1), NeurIPS (1); 1 records no venue."
    assert not answer.refused and answer.about_paperchat and not answer.citations


def test_one_papers_venue_or_year_is_answered_from_its_record_and_cited(pipeline):
    venue = pipeline.answer("what venue is the Adam paper from?")
    assert venue.answer.startswith("Adam: A Method for Stochastic Optimization is from ICLR [1]")
    assert [c.paper_id for c in venue.citations] == ["adam"] and venue.citations[0].evidence == "Venue: ICLR"
    year = pipeline.answer("When was Auto-Encoding Variational Bayes published?")
    assert [c.paper_id for c in year.citations] == ["vae"] and "is from 2014 [1]" in year.answer


def test_who_the_authors_are_and_the_newest_paper_are_answered_for_the_collection(pipeline):
    authors = pipeline.answer("who are the authors?")
    assert authors.answer.startswith("5 of the 5 papers record their authors: ask about one paper")
    newest = pipeline.answer("what's the newest paper?")
    assert newest.answer == 'The newest papers are from 2024: 2 of them (ask "papers from 2024" for the list).'
    assert pipeline.answer("Which is the oldest paper?").answer.startswith("The oldest papers are from 2014: 1 ")


def test_an_index_without_metadata_says_what_it_does_not_record(bundled_papers):
    bare = [p.__class__(**{**p.__dict__, "authors": (), "venue": "", "year": None}) for p in bundled_papers[:3]]
    said = {q: metadata_answer(q, [], lambda: bare).answer for q in (
        "what conference is this?", "who are the authors?", "what's the latest paper?", "papers from 2024")}
    assert said["what conference is this?"] == ("The index records no venue for its 3 papers (ingest a JSONL or CSV "
                                                 "file with 'venue' fields to record them).")
    assert "records no authors for its 3 papers" in said["who are the authors?"]
    assert "records no year for its 3 papers" in said["what's the latest paper?"]
    assert said["papers from 2024"].startswith("No paper in the index is from 2024. The index records no year")


def test_labels_name_the_corpus_and_the_place():
    assert file_label("002_735305cd7294d037.txt") == "file 002"
    assert file_label("papers.jsonl") == "papers.jsonl"
    assert place_label("002_735305cd7294d037.txt", 5, venue="ICML 2026", collection="paperchat") == (
        "ICML 2026 · #5 of file 002")
    # A record's venue is not the corpus: a JSONL paper is labelled with its collection.
    assert place_label("mine.jsonl", 3, venue="ICLR", collection="my-papers") == "my-papers · #3 of mine.jsonl"
    assert place_label("mine.jsonl", 3) == "#3 of mine.jsonl"
    # The default collection's name is no corpus: "paperchat · #3 of bad.jsonl" read as a venue.
    assert place_label("mine.jsonl", 3, venue="ICLR", collection="paperchat") == "#3 of mine.jsonl"
    assert authors_text(["A", "B", "C"]) == "A, B and C"
    assert authors_text(["A", "B", "C", "D", "E"]) == "A, B, C, D et al."
    assert metadata_line(["A"], 2015, "ICLR") == "A · ICLR · 2015"
    assert metadata_line([], 2026, "ICML 2026", source="000_dcbf1b5d2daaeff5.txt") == ""  # all in the label


def test_a_paper_added_later_is_listed(tmp_path):
    from rag.ingest import Ingestor, make_chunker
    from rag.types import Paper

    retriever = metadata_retriever(tmp_path)
    assert len(retriever.every_paper()) == 5
    added = Paper("new", "A New Paper", "An abstract about sparse attention for long documents.", "more.jsonl", 1,
                  authors=("Ada Lovelace",), year=2024)
    embedder = retriever.embedder
    Ingestor(retriever.store, embedder, make_chunker(embedder, 256, 1)).ingest([added])
    answer = metadata_answer("papers from 2024", [], retriever.every_paper)
    assert {c.paper_id for c in answer.citations} == {"mamba2", "kan", "new"}
