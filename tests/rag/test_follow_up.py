"""Follow-ups (rag/answers/follow_up.py): which earlier paper a question points at, from recorded ids or from
an answer's text alone (what a chat client sends back), and when a chat model may rewrite the question."""

from __future__ import annotations

import pytest

from rag.answers.follow_up import mention_units, papers_of, resolve_follow_up
from rag.answers.pipeline import AnswerPipeline, PipelineConfig
from tests.conftest import FakeChatModel


def ids(retriever, *titles):
    by_title = {p.title: p.paper_id for p in retriever.papers}
    return [by_title[t] for t in titles]


def turn(answer: str, question: str = "which papers?", **extra) -> list[dict]:
    return [{"role": "user", "content": question}, {"role": "assistant", "content": answer, **extra}]


LIST_ANSWER = ("- FedSSM: selects clients by predicting training dynamics [1]\n"
               "- Fed-Kalter: federated graph learning across clients [2]\n"
               "- FedVPA-GP: aligns language models with federated preference data [3]")


def test_recorded_ids_come_first(fake_retriever):
    recorded = ids(fake_retriever, "NRDE", "MA-RAG")
    history = turn("FedSSM and T2PO.", papers=recorded)  # the recorded ids win over what the text names
    assert resolve_follow_up("what did the second one use?", history, fake_retriever, None).pinned == recorded[1:]


@pytest.mark.parametrize(("question", "title"), [
    ("What did the second one evaluate on?", "Fed-Kalter"),
    ("and the 3rd paper?", "FedVPA-GP"),
    ("Tell me more about the latter.", "FedVPA-GP"),
    ("What problem does the former address?", "FedSSM"),
    ("What about the last one?", "FedVPA-GP"),
    ("Is source 2 open source?", "Fed-Kalter"),
])
def test_places_in_a_listed_answer_without_ids(fake_retriever, question, title):
    follow = resolve_follow_up(question, turn(LIST_ANSWER), fake_retriever, None)
    assert follow.pinned == ids(fake_retriever, title)
    assert title in follow.query


def test_a_reference_to_an_earlier_answer_skips_the_last_one(fake_retriever):
    history = turn(LIST_ANSWER) + turn("FedSSM predicts training dynamics with state space models [1].",
                                       "What did the first one find?")
    for question in ("The third one from your first answer: what data?", "What about the third one?"):
        assert resolve_follow_up(question, history, fake_retriever, None).pinned == ids(fake_retriever, "FedVPA-GP")
    # "the second one" fits the last answer too only if it named two papers: here it named one.
    assert resolve_follow_up("and the second one?", history, fake_retriever, None).pinned == ids(
        fake_retriever, "Fed-Kalter")


def test_papers_named_in_prose_in_their_order(fake_retriever):
    history = turn("T2PO trains agents with turn-level rewards, while FedSSM selects clients [2][1].")
    assert [h.title for h in papers_of(history[-1], fake_retriever)] == ["T2PO", "FedSSM"]


def test_a_coined_name_from_an_abstract_finds_its_paper(fake_retriever):
    # CoPO is no paper's title: it is a name only CogRouter's abstract uses.
    history = turn("One work trains agents with CoPO; another, T2PO, controls exploration per turn.")
    assert [h.title for h in papers_of(history[-1], fake_retriever)] == ["CogRouter", "T2PO"]


def test_papers_described_without_names(fake_retriever):
    by_title = {p.title: p for p in fake_retriever.papers}
    answer = (f"Two examples: one says that {by_title['NRDE'].abstract.split('. ')[0].lower()}, and another "
              f"says that {by_title['MA-RAG'].abstract.split('. ')[0].lower()}.")
    assert len(mention_units(answer)) == 2
    follow = resolve_follow_up("For the second one, what was evaluated?", turn(answer), fake_retriever, None)
    assert follow.pinned == ids(fake_retriever, "MA-RAG")


def test_a_pronoun_after_an_answer_about_one_paper_pins_it(fake_retriever):
    history = turn("FedSSM predicts training dynamics with state space models [1].")
    assert resolve_follow_up("What did they evaluate on?", history, fake_retriever, None).pinned == ids(
        fake_retriever, "FedSSM")


def test_after_a_declined_follow_up_a_pronoun_still_means_the_paper_before(fake_retriever):
    fedssm = ids(fake_retriever, "FedSSM")
    history = [*turn("FedSSM predicts training dynamics with state space models [1].", "what is FedSSM?",
                     papers=fedssm),
               *turn("The abstracts do not answer this. The nearest papers: MA-RAG; NRDE; T2PO.", "the second one?",
                     papers=[])]
    assert resolve_follow_up("and its results?", history, fake_retriever, None).pinned == fedssm


@pytest.mark.parametrize("question", ["Which papers use reinforcement learning?", "summarize FedSMM",
                                      "how many papers use RL?", "What is the capital of France?",
                                      "summarize Caracl", "explain knowledge distillation"])
def test_a_short_question_that_stands_on_its_own_is_not_read_as_a_follow_up(fake_retriever, question):
    # Before, the last answer's titles were added to its search: "summarize FedSMM MA-RAG" summarized MA-RAG.
    history = turn("MA-RAG evaluates on seven medical QA benchmarks [1].", "What did MA-RAG evaluate on?",
                   papers=ids(fake_retriever, "MA-RAG"))
    follow = resolve_follow_up(question, history, fake_retriever, None)
    assert follow.query == question and not follow.pinned
    # Short messages that continue the conversation, or ask only about an aspect of the paper, lean on it.
    for leaning in ("and the datasets?", "what about the results?", "evaluation metrics?", "datasets?"):
        assert resolve_follow_up(leaning, history, fake_retriever, None).query == f"{leaning} MA-RAG"


def test_a_refusal_names_no_paper(fake_retriever):
    history = turn("No abstract here covers this. The nearest papers are listed below.")
    assert papers_of(history[-1], fake_retriever) == []


def test_standalone_question_is_unchanged(fake_retriever):
    question = "Which papers evaluate retrieval augmented generation on medical benchmarks?"
    assert resolve_follow_up(question, turn("y"), fake_retriever, FakeChatModel("x y z")).query == question


TWO_PAPERS = turn("FedSSM selects clients [1]. MA-RAG answers medical questions [2].")


def test_a_capable_model_rewrites_a_question_that_points_at_no_paper(fake_retriever):
    model = FakeChatModel("FedSSM and MA-RAG evaluation datasets")
    follow = resolve_follow_up("what about their datasets?", TWO_PAPERS, fake_retriever, model)
    assert follow.query == "FedSSM and MA-RAG evaluation datasets" and not follow.pinned
    (request,) = model.requests
    assert "what about their datasets?" in request["messages"][-1]["content"] and request["max_tokens"] == 64


def test_a_rewrite_that_drops_the_questions_words_is_not_used(fake_retriever):
    model = FakeChatModel("The proposed FedV")
    follow = resolve_follow_up("what about their datasets?", TWO_PAPERS, fake_retriever, model)
    assert "datasets" in follow.query and "FedV" not in follow.query
    assert "FedSSM" in follow.query and "MA-RAG" in follow.query  # the deterministic query: the papers named


def test_the_embedded_small_model_never_rewrites(fake_retriever):
    model = FakeChatModel("The proposed FedV")
    pipeline = AnswerPipeline(fake_retriever, fake_retriever.embedder, model,
                              config=PipelineConfig(min_relevance=0.0, small_model=True))
    follow = pipeline.follow_up("what about their datasets?", TWO_PAPERS)
    assert model.requests == [] and "FedV" not in follow.query


def test_an_answered_follow_up_cites_the_pinned_paper(fake_retriever):
    pipeline = AnswerPipeline(fake_retriever, fake_retriever.embedder, None, config=PipelineConfig(min_relevance=0.0))
    answer = pipeline.answer("What did the second one evaluate on?", turn(LIST_ANSWER))
    assert answer.sources[0].title == "Fed-Kalter" and not answer.refused
    assert {c.title for c in answer.citations} == {"Fed-Kalter"}


@pytest.mark.parametrize("question", ["the second one?", "and the last paper?", "[2]", "what about the first one?",
                                      # ... or asks about it: it was searched, and answered about unrelated papers.
                                      "what did the second one evaluate on?", "summarize [2]",
                                      "is the latter better?"])
def test_pointing_back_in_a_new_conversation_says_there_is_nothing_before(fake_retriever, question):
    answer = AnswerPipeline(fake_retriever, fake_retriever.embedder, None).answer(question)
    assert answer.refused and answer.about_paperchat and not answer.sources
    assert answer.answer.startswith("There is no earlier answer in this conversation to point back to")
    # After an answer, the same message is a follow-up.
    history = turn(LIST_ANSWER, papers=ids(fake_retriever, "FedSSM", "Fed-Kalter", "FedVPA-GP"))
    assert not AnswerPipeline(fake_retriever, fake_retriever.embedder, None).answer(question, history).about_paperchat


def test_a_place_in_a_list_means_the_last_list_not_a_later_answer_about_one_paper(fake_retriever):
    # After "what did the second one evaluate on?" (answered about Fed-Kalter alone), "and the first one?" is the
    # list's first paper, not the one-paper answer's.
    history = (turn(LIST_ANSWER, papers=ids(fake_retriever, "FedSSM", "Fed-Kalter", "FedVPA-GP"))
               + turn("Fed-Kalter evaluates on graph benchmarks [1].", "what did the second one evaluate on?",
                      papers=ids(fake_retriever, "Fed-Kalter")))
    assert resolve_follow_up("and the first one?", history, fake_retriever, None).pinned == ids(
        fake_retriever, "FedSSM")
    # With no list before it, an answer about one paper is the first one.
    alone = turn("Fed-Kalter evaluates on graph benchmarks [1].", papers=ids(fake_retriever, "Fed-Kalter"))
    assert resolve_follow_up("and the first one?", alone, fake_retriever, None).pinned == ids(fake_retriever,
                                                                                              "Fed-Kalter")


def test_a_place_beyond_every_earlier_answer_is_said_not_searched(fake_retriever):
    # "what did the second one evaluate on?" after an answer about FedSSM alone answered about unrelated papers.
    history = turn("FedSSM selects clients with state-space models [1].", papers=ids(fake_retriever, "FedSSM"))
    answer = AnswerPipeline(fake_retriever, fake_retriever.embedder, None).answer(
        "what did the second one evaluate on?", history)
    assert answer.refused and not answer.sources and not answer.citations
    assert answer.answer.startswith('The last answer named only one paper (FedSSM): there is no "second one"')
    # A place the list has is answered as before.
    listed = turn(LIST_ANSWER, papers=ids(fake_retriever, "FedSSM", "Fed-Kalter", "FedVPA-GP"))
    assert resolve_follow_up("what did the second one evaluate on?", listed, fake_retriever, None).pinned == ids(
        fake_retriever, "Fed-Kalter")


@pytest.mark.parametrize("question", ["What was the first method to use state space models for clients?",
                                      "Which papers study the second-order optimizers?"])
def test_a_first_question_that_mentions_an_order_is_answered(fake_retriever, question):
    assert not AnswerPipeline(fake_retriever, fake_retriever.embedder, None).answer(question).about_paperchat
