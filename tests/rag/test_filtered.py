"""The filtered retriever (rag/exports/filtered.py): searches, named papers, titles and the paper list keep only
the papers that pass, and an answer pipeline handed one answers from those papers only."""

from __future__ import annotations

import pytest

from rag.answers.pipeline import AnswerPipeline
from rag.errors import QueryError
from rag.exports.filtered import FilteredRetriever, check_filters
from rag.exports.filters import parse_filters

SOURCE_002 = "002_735305cd7294d037.txt"


def narrowed(fake_retriever, *texts: str, source: str | None = None) -> FilteredRetriever:
    return FilteredRetriever(fake_retriever, parse_filters(texts, source), lambda: fake_retriever.papers)


def test_search_keeps_the_passing_papers_in_the_inner_ranking(fake_retriever):
    everything = fake_retriever.search("federated learning clients", 9)
    filtered = narrowed(fake_retriever, "title~fed").search("federated learning clients", 2)
    expected = [h.paper_id for h in everything if "fed" in h.title.lower()][:2]
    assert [h.paper_id for h in filtered] == expected and len(expected) == 2
    assert [h.rank for h in filtered] == [1, 2]
    assert fake_retriever.searches[-1][1] == len(fake_retriever.papers)  # read deeper than it keeps


def test_named_papers_titles_and_the_paper_list_are_filtered_too(fake_retriever):
    retriever = narrowed(fake_retriever, source=SOURCE_002)
    ids = {p.title: p.paper_id for p in fake_retriever.papers}
    assert [h.title for h in retriever.hits_for([ids["FedSSM"], ids["Fed-Kalter"]])] == ["Fed-Kalter"]
    assert retriever.titles_in("compare FedSSM with Fed-Kalter") == [ids["Fed-Kalter"]]
    assert {p.source for p in retriever.every_paper()} == {SOURCE_002}
    assert retriever.idf("federated") == fake_retriever.idf("federated")  # the corpus's, not the part's


def test_a_pipeline_given_the_filtered_retriever_answers_from_the_passing_papers(fake_retriever):
    question = "which papers work on federated learning?"
    whole = AnswerPipeline(fake_retriever, fake_retriever.embedder, None).answer(question)
    assert {c.source for c in whole.citations} - {SOURCE_002}
    part = AnswerPipeline(narrowed(fake_retriever, source=SOURCE_002), fake_retriever.embedder, None).answer(question)
    assert part.citations and {c.source for c in part.citations} == {SOURCE_002}
    assert {h.source for h in part.sources} == {SOURCE_002}


def test_a_list_no_passing_paper_is_close_to_is_refused_saying_the_filter(fake_retriever):
    # Before, title~SPARe and "which papers work on federated learning?" got SPARe's sentences as the answer: the
    # topic's words are the corpus's, so the refusal for words no abstract uses never came.
    answer = AnswerPipeline(narrowed(fake_retriever, "title~SPARe"), fake_retriever.embedder, None).answer(
        "which papers work on federated learning?")
    assert answer.refused and not answer.citations
    assert "No paper that passes the filter (title~SPARe) is close to it." in answer.answer


@pytest.mark.parametrize("question", ["How many papers are there?", "list all papers", "What are the main topics?"])
def test_the_collection_asked_for_under_filters_is_the_papers_that_pass(fake_retriever, question):
    # Before, "how many papers are there?" under title~fed was a list of the papers "about this": one of three.
    retriever = narrowed(fake_retriever, "title~fed")
    passing = [p.title for p in fake_retriever.papers if "fed" in p.title.lower()]
    answer = AnswerPipeline(retriever, fake_retriever.embedder, None).answer(question)
    assert answer.answer.startswith(f"{len(passing)} papers pass the filters (title~fed):")
    assert sorted(c.title for c in answer.citations) == sorted(passing) and len(passing) >= 2


@pytest.mark.parametrize(("where", "source", "says"), [
    ((), "nope.txt", "no paper in the index comes from 'nope.txt'; its files: 000_"),
    (("year>=2030",), None, "no paper of the 9 in the index passes year>=2030: loosen or remove the filter"),
    (("author~Kingma",), None, "(no paper in the index records authors)"),
])
def test_filters_that_leave_nothing_are_refused_in_one_line(fake_retriever, where, source, says):
    with pytest.raises(QueryError, match=None) as caught:
        check_filters(fake_retriever.papers, parse_filters(where, source))
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_filters_some_papers_pass_are_accepted(fake_retriever):
    check_filters(fake_retriever.papers, parse_filters(["year>=2024", "title~fed"]))


def test_the_filter_box_s_line_holds_filters_between_semicolons():
    from rag.exports.filtered import filters_in

    assert filters_in("") == () and filters_in(" ; ") == ()
    assert [str(f) for f in filters_in(" year>=2024 ; author~Bengio, Y. ")] == ["year>=2024", "author~Bengio, Y."]
    with pytest.raises(QueryError, match="unknown filter field 'yeer'"):
        filters_in("title~graph; yeer>=2024")


@pytest.mark.parametrize("value, passes", [
    ("bad.jsonl", True), ("files/bad.jsonl", True), ("./files/bad.jsonl", True), ("other.jsonl", False),
])
def test_a_source_is_named_by_its_file_or_by_the_path_given_to_ingest(value, passes):
    # `ingest files/bad.jsonl` gave ids "files/bad.jsonl#b", but `--source files/bad.jsonl` named no file.
    from rag.exports.filters import parse_filter
    from rag.types import Paper

    paper = Paper("files/bad.jsonl#b", "Ok", "An abstract.", "bad.jsonl", 2)
    assert parse_filter(f"source={value}").matches(paper) is passes
