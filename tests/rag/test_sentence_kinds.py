"""Which abstract sentences give way in an answer (rag/answers/sentence_kinds.py)."""

from __future__ import annotations

import pytest

from rag.answers.sentence_kinds import asks_for_findings, can_lead_with_finding, sentence_penalties

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


def test_a_numbered_contribution_is_no_figure_reported():
    # "(3)" numbers a contribution; asked for results, it gives way as any sentence that reports none does.
    sentences = ["(3) Unlike models relying on hardware kernels, Caracal uses standard operators.",
                 "Caracal reaches 3% lower perplexity."]
    assert sentence_penalties("What results does Caracal report?", sentences, links=0.3,
                              background=0.15).tolist() == pytest.approx([0.15, 0.0])


@pytest.mark.parametrize(("question", "asks"), [
    ("What did the MA-RAG authors evaluate on?", True), ("Which datasets does FedSSM use?", True),
    ("How well does CogRouter perform?", True), ("How was CogRouter evaluated?", True),
    ("How many LLMs and benchmarks did they test it on?", True), ("What results does Caracal report?", True),
    ("What is FedSSM?", False), ("How does Caracal mix tokens?", False),
    # a word of the kind used to describe what is wanted, not to ask what was found
    ("Running every LLM through a full benchmark is too expensive, so I want to pick a few items.", False),
    ("I have pass/fail results from test-takers and want to estimate item difficulty.", False),
])
def test_questions_that_ask_what_a_paper_found(question, asks):
    assert asks_for_findings(question) is asks


@pytest.mark.parametrize(("sentence", "leads"), [
    ("Experiments on ALFWorld and ScienceWorld show that CogRouter reaches state-of-the-art success.", True),
    ("Across benchmarks on link prediction, CTDG-SSM achieves state-of-the-art performance.", True),
    ("To address this, we introduce MADQA, a benchmark of 2,250 questions.", False),  # "this": the sentence before
    ("Using these subsets, RepCore achieves precise estimates with ten source models.", False),
    ("Furthermore, we scale training across 12 tasks.", False),
    ("We propose FedX, which selects clients with a learned model.", False),  # reports no finding
])
def test_a_finding_that_opens_an_answer_reads_on_its_own(sentence, leads):
    assert can_lead_with_finding(sentence) is leads
