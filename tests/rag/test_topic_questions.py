"""Questions about the whole collection ("what are the main topics?") answered from its topics, cited."""

from __future__ import annotations

import pytest

from rag.answers.pipeline import AnswerPipeline, PipelineConfig
from rag.answers.topic_questions import EVERY_PAPER_HINT, asks_for_topics
from rag.topics.model import Topic, TopicMap
from tests.conftest import FakeRetriever


class WholeIndexRetriever(FakeRetriever):
    def every_paper(self):
        return list(self.papers)


@pytest.mark.parametrize("question", ["What are the main topics?", "which research areas do these papers cover?",
                                      "What is this collection about?", "List the topics",
                                      # the collection's size: the topics' answer opens with it
                                      "how many papers are there?", "How many papers are in the index?",
                                      "how many abstracts do you have", "How many papers does the corpus contain?",
                                      "how many papers in total", "list all papers", "show me every paper"])
def test_topic_questions_are_recognised(question):
    assert asks_for_topics(question)


@pytest.mark.parametrize("question", ["Which papers cover topics like federated learning?",
                                      "What does FedSSM propose?", "How many papers are about routing?",
                                      "how many papers are there about RL?", "How many papers use ALFWorld?",
                                      "How many papers are in the index about agents?",
                                      "list all papers about reinforcement learning"])
def test_other_questions_are_not_topic_questions(question):
    assert not asks_for_topics(question)


def test_topics_are_answered_from_the_whole_collection_with_central_papers_cited(bundled_papers):
    papers = list(bundled_papers)
    first, second = papers[:50], papers[50:]
    topic_map = TopicMap(
        topics=(Topic(1, ("federated", "clients"), tuple(p.paper_id for p in first)),
                Topic(2, ("agents", "reasoning"), tuple(p.paper_id for p in second))),
        paper_topic={}, coordinates={}, idf={})
    asked = []

    def topics():
        asked.append(1)
        return topic_map

    retriever = WholeIndexRetriever(papers)
    pipeline = AnswerPipeline(retriever, retriever.embedder, None, config=PipelineConfig(min_relevance=0.0),
                              topics=topics)
    pipeline.answer("What does FedSSM propose?")
    assert not asked  # topics are computed only when a question asks for them
    answer = pipeline.answer("What are the main topics?")
    assert answer.answer.startswith(f"The {len(papers)} papers fall into 2 topics")
    assert "- federated, clients (50 papers), e.g. " in answer.answer and "(26 papers)" in answer.answer
    cited = [c.paper_id for c in answer.citations]
    assert cited == [first[0].paper_id, first[1].paper_id, second[0].paper_id, second[1].paper_id]
    assert all(c.evidence and c.evidence in papers[[p.paper_id for p in papers].index(c.paper_id)].abstract
               for c in answer.citations)
    assert [f"[{n}]" in answer.answer for n in (1, 2, 3, 4)] == [True] * 4 and not answer.refused
    assert EVERY_PAPER_HINT not in answer.answer
    # Asked for every paper: the same overview, and where the whole list is.
    every = pipeline.answer("List all papers")
    assert every.answer.startswith(f"The {len(papers)} papers fall into 2 topics")
    assert every.answer.endswith(EVERY_PAPER_HINT) and len(every.citations) == 4
    # Asked how many papers there are: the number first (the tester read "The 76 papers fall into 6 topics" as a
    # topic overview with the count hidden in it).
    for question in ("how many papers are there?", "How many papers are in the index?"):
        size = pipeline.answer(question)
        assert size.answer.startswith(f"There are {len(papers)} papers in the index. They fall into 2 topics")
