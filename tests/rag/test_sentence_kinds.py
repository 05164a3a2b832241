"""Which abstract sentences give way in an answer (rag/answers/sentence_kinds.py)."""

from __future__ import annotations

import pytest

from rag.answers.sentence_kinds import sentence_penalties

SENTENCES = [
    "Federated learning across hospitals is hard because clients differ.",  # what the paper is about
    "We propose FedX, which selects clients with a learned model.",  # what it does
    "Experiments on four benchmarks show 3% higher accuracy than prior methods.",  # what it finds
    "Code is available at https://github.com/x/fedx.",  # where the code is
]


@pytest.mark.parametrize("question", ["What were FedX's results?", "How well does FedX perform?",
                                      "How was FedX evaluated?", "what about its results?"])
def test_asked_for_results_sentences_that_report_none_give_way(question):
    penalties = sentence_penalties(question, SENTENCES, links=0.3, background=0.15)
    # the finding (set against "prior methods", it is no background either), then what the paper does, the code
    assert penalties.tolist() == pytest.approx([0.15, 0.15, 0.0, 0.3])


@pytest.mark.parametrize("question", ["What does FedX propose?", "How does FedX select clients?"])
def test_other_questions_weigh_what_the_paper_does_and_finds_alike(question):
    penalties = sentence_penalties(question, SENTENCES, links=0.3, background=0.15)
    assert penalties.tolist() == pytest.approx([0.0, 0.0, 0.0, 0.3])
