"""Greetings, thanks and "what can you do?" (rag/answers/small_talk.py): how to use paperchat, not a search."""

from __future__ import annotations

import pytest

from rag.answers.pipeline import AnswerPipeline
from rag.answers.small_talk import small_talk_answer, without_chat_framing
from tests.conftest import FakeRetriever
from ui.shared.text import AnswerNotes


class CountingRetriever(FakeRetriever):  # FakeRetriever keeps its ``searches``
    def every_paper(self):
        return list(self.papers)


@pytest.mark.parametrize("question", ["hello", "Hi there!", "good morning", "help", "What can you do?",
                                      "how do I use this?", "what kind of questions can I ask?",
                                      "hello, what can you do?", "hi there! help", "hey what can you do"])
def test_greetings_and_help_say_how_to_use_it_with_an_example_from_the_index(bundled_papers, question):
    retriever = CountingRetriever(bundled_papers)
    answer = AnswerPipeline(retriever, retriever.embedder, None).answer(question)
    assert not retriever.searches and answer.about_paperchat and not answer.refused
    assert answer.answer.startswith(f"I answer questions about the {len(bundled_papers)} paper abstracts")
    short = [p.title for p in bundled_papers if len(p.title.split()) <= 2]
    assert f"What does {short[0]} propose" in answer.answer  # a paper this index holds, named as users name it
    assert not answer.citations and not answer.sources
    assert not AnswerNotes.of(answer).ungrounded  # no "not grounded" warning: it claims nothing about a paper


@pytest.mark.parametrize("question", ["thanks!", "Thank you so much", "ok thanks", "cheers"])
def test_thanks_get_a_short_reply(question):
    answer = small_talk_answer(question, None)
    assert answer is not None and answer.answer.startswith("You're welcome") and answer.about_paperchat


@pytest.mark.parametrize("question", ["hello world programs for LLM agents?", "Which papers help with routing?",
                                      "what can you do with state space models?", "thanks to what does FedSSM win?",
                                      "Is there any help for small models?", "hi, what is FedSSM?"])
def test_questions_about_papers_are_not_small_talk(question):
    assert small_talk_answer(question, None) is None


@pytest.mark.parametrize("question", ["¿Qué artículos tratan sobre aprendizaje federado?", "哪些论文研究联邦学习？",
                                      "Quels articles portent sur l'apprentissage fédéré ?",
                                      "Welche Arbeiten behandeln föderiertes Lernen?", "о чём FedSSM?"])
def test_a_question_in_another_language_is_told_to_ask_in_english_not_searched(bundled_papers, question):
    retriever = CountingRetriever(bundled_papers)
    answer = AnswerPipeline(retriever, retriever.embedder, None).answer(question)
    assert not retriever.searches and answer.refused and answer.about_paperchat and not answer.sources
    assert answer.answer.startswith("paperchat reads English abstracts") and "ask in English" in answer.answer


@pytest.mark.parametrize("question", ["Which papers use Schrödinger bridges?", "Métropolis–Hastings sampling",
                                      "Is there a paper on Kalman filters für GNNs?", "FedSSM"])
def test_english_with_foreign_names_or_accents_is_searched(question):
    assert small_talk_answer(question, None) is None


@pytest.mark.parametrize("question, asked", [
    ("tell me about the paper on warm-up", "the paper on warm-up"),
    ("Can you tell me more about FedSSM?", "FedSSM?"),
    ("hi, could you please give me an overview of diffusion models", "diffusion models"),
    ("What do you know about watermarking?", "watermarking?"),
    ("I'd like to know more about CalM", "CalM"),
    ("tell me about", "tell me about"),  # nothing left: as typed
    ("What does FedSSM tell us about clients?", "What does FedSSM tell us about clients?"),
])
def test_a_chatty_lead_that_only_asks_to_be_told_is_left_out(question, asked):
    assert without_chat_framing(question) == asked
