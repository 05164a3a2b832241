"""Which papers a list answer names (rag/answers/membership.py): the question's topic without its framing, and
papers chosen by their chance of being about it, with the bundled MiniLM (meaning matters here)."""

from __future__ import annotations

import numpy as np
import pytest

from rag.answers.extractive import ExtractiveAnswerer, is_multi_paper_question
from rag.answers.membership import (
    FEATURES,
    MembershipParams,
    as_list_question,
    chances,
    framing_typos_fixed,
    list_topic,
    membership_features,
)
from rag.types import Paper
from tests.conftest import FakeRetriever


@pytest.mark.parametrize(("question", "topic"), [
    ("How many papers are about federated learning, and which ones?", "federated learning"),
    ("How many of the papers are about federated learning?", "federated learning"),
    ("Which papers use knowledge distillation?", "use knowledge distillation"),
    ("Are there papers on world models? Which ones?", "world models"),
    ("Are there any papers about protein folding?", "protein folding"),
    ("List all papers that study graph neural networks.", "study graph neural networks"),
    ("How many papers work with sound? List them.", "work with sound"),
    ("What is FedSSM?", "What is FedSSM"),
    # What the question rules out is no part of its topic; a "not" that says what the topic is stays.
    ("Which papers train VLMs with RL (policy optimization, not offline preference pairs)?",
     "train VLMs with RL (policy optimization)"),
    ("Which papers use RL rather than supervised fine-tuning?", "use RL"),
    ("Which papers show that GNNs are not continuous?", "show that GNNs are not continuous"),
    ("Which papers pretrain on data other than text?", "pretrain on data other than text"),
    # Other ways people ask for every paper on a topic
    ("Any work on federated learning?", "federated learning"),
    ("Is there a paper about graph neural networks?", "graph neural networks"),
    ("Show me papers on federated learning", "federated learning"),
    ("papers on federated learning", "federated learning"),
    ("Does any paper use GNNs?", "use GNNs"),
    ("What work has been done on federated learning?", "federated learning"),
    ("List the work on federated learning.", "federated learning"),
    ("show me the research on graph neural networks", "graph neural networks"),
    # ... with the topic before "papers" ("List all the federated learning papers" was refused: no abstract says
    # "List"), but not where "the papers" points back.
    ("List all the federated learning papers in the collection.", "federated learning"),
    ("show me every anomaly detection paper", "anomaly detection"),
    ("Which federated learning papers are there?", "federated learning"),
    ("Which RL methods are used in the papers?", "Which RL methods are used in the papers"),
])
def test_list_topic_drops_the_framing(question, topic):
    assert list_topic(question) == topic


@pytest.mark.parametrize(("question", "lists"), [
    ("Any work on federated learning?", True), ("Is there a paper about GNNs?", True),
    ("Show me papers on federated learning", True), ("papers on federated learning", True),
    ("Does any paper use GNNs?", True), ("What work has been done on federated learning?", True),
    ("Tell me about papers on RL", True), ("Which papers use GNNs?", True), ("List the work on GNNs.", True),
    ("find research on federated learning", True), ("How does this work in practice?", False),
    ("What does this work propose?", False), ("What is the main idea of this work?", False),
    ("Is there a generative model that produces heart sounds?", False), ("What is FedSSM?", False),
])
def test_questions_asking_for_every_paper_on_a_topic_are_recognised(question, lists):
    assert is_multi_paper_question(question) is lists


def _paper(n: int, title: str, abstract: str) -> Paper:
    return Paper(paper_id=f"p{n}", source="s.txt", ordinal=n, title=title, abstract=abstract)


# Two papers distil a teacher into a student, one of them only in its last sentence; two others share words
# ("model", "training", "compress") and a general subject but not the topic.
PAPERS = [
    _paper(1, "Sparse Serving", "We compress large language models by pruning attention heads. Pruned models "
              "serve requests faster on GPUs while keeping accuracy on standard benchmarks."),
    _paper(2, "TinyTeacher", "We study how a small student network learns from a large teacher model. Knowledge "
              "distillation transfers the teacher's soft labels to the student, which keeps most of its accuracy."),
    _paper(3, "Robust Vision", "Image classifiers fail under distribution shift. We propose a training recipe with "
              "strong augmentations that improves robustness on corrupted images. We then use knowledge "
              "distillation to train a compact student from the robust teacher."),
    _paper(4, "Quantized Training", "We train language models with 4-bit weights and activations, reducing memory "
              "during training without losing accuracy at scale."),
]


@pytest.fixture(scope="module")
def answerer(real_embedder):
    retriever = FakeRetriever(PAPERS, real_embedder)
    return ExtractiveAnswerer(real_embedder, idf=retriever.idf, search=retriever.search), retriever


def test_closest_sentence_finds_a_paper_about_the_topic_in_one_sentence(answerer, real_embedder):
    extractive, retriever = answerer
    hits = retriever.search("knowledge distillation from a teacher into a student", 4)
    features = membership_features("knowledge distillation", hits, hits, extractive.coverage, real_embedder.embed)
    assert features.shape == (4, len(FEATURES))
    closest = {h.title: features[i, FEATURES.index("closest_sentence")] for i, h in enumerate(hits)}
    # Robust Vision is about robustness, but one of its sentences is about distillation.
    assert closest["Robust Vision"] > max(closest["Sparse Serving"], closest["Quantized Training"])
    assert closest["TinyTeacher"] > closest["Quantized Training"]


def test_a_list_names_every_paper_about_its_topic_and_no_other(answerer):
    extractive, retriever = answerer
    question = "How many papers use knowledge distillation, and which ones?"
    hits = retriever.search(question, 4)
    plan = extractive.plan(question, hits)
    assert plan.kind == "answer" and plan.multi and plan.count
    assert sorted(hits[p.index].title for p in plan.papers) == ["Robust Vision", "TinyTeacher"]
    assert extractive.write(plan, hits).splitlines()[0] == "2 papers are about this:"
    assert plan.closest > 0.5


def test_the_chance_rises_with_each_signal():
    params = MembershipParams()
    base = np.array([[0.5, 0.3, 0.3]])
    for column in range(len(FEATURES)):
        more = base.copy()
        more[0, column] += 0.3
        assert chances(more, params)[0] > chances(base, params)[0]
    assert chances(np.zeros((0, 3)), params).shape == (0,)


def test_a_list_question_on_a_topic_no_paper_covers_is_refused(answerer, real_embedder):
    from rag.answers.pipeline import AnswerPipeline

    _extractive, retriever = answerer
    pipeline = AnswerPipeline(retriever, real_embedder, None)
    assert pipeline.answer("Are there papers on watermarking generated text? Which ones?").refused
    answered = pipeline.answer("Which papers use knowledge distillation?")
    assert not answered.refused and {c.title for c in answered.citations} >= {"TinyTeacher"}


def test_a_list_asked_with_a_second_part_gives_each_paper_a_sentence_for_it(answerer):
    extractive, retriever = answerer
    question = "Which papers use knowledge distillation, and how much accuracy does the student keep?"
    hits = retriever.search(question, 4)
    plan = extractive.plan(question, hits)
    assert plan.multi
    teacher = next(p for p in plan.papers if hits[p.index].title == "TinyTeacher")
    assert len(teacher.sentences) == 2 and any("accuracy" in s for s in teacher.sentences)
    line = next(x for x in extractive.write(plan, hits).splitlines() if x.startswith("- TinyTeacher"))
    assert "keeps most of its accuracy" in line and line.endswith(f"[{teacher.index + 1}]")


def test_a_list_under_the_relevance_bar_is_answered_when_its_likeliest_paper_uses_the_topics_words(answerer,
                                                                                                 real_embedder):
    from rag.answers.pipeline import AnswerPipeline, PipelineConfig

    _extractive, retriever = answerer
    # Similarity alone and a close sentence alone are made not to pass: only the topic's words can.
    strict = PipelineConfig(min_relevance=1.0, relevance_margin=0.0, list_sentence_relevance=1.0)
    question = "Are there papers on knowledge distillation? Which ones?"
    answered = AnswerPipeline(retriever, real_embedder, None, config=strict).answer(question)
    assert not answered.refused and "TinyTeacher" in {c.title for c in answered.citations}
    assert AnswerPipeline(retriever, real_embedder, None, config=strict).answer(
        "Are there papers on watermarking generated text? Which ones?").refused


def test_below_every_bar_a_list_is_refused_only_for_words_no_abstract_uses(answerer, real_embedder):
    from rag.answers.pipeline import AnswerPipeline, PipelineConfig

    extractive, retriever = answerer
    assert extractive.unused_words("Which papers use watermarking in teacher-student networks?") == ["watermarking"]
    # Chat fillers name no missing topic: "No abstract uses the word 'anything'" refused "anything about X?".
    assert extractive.unused_words("anything here on watermarking? I'm looking for something") == ["watermarking"]
    # Similarity, a close sentence and the topic's words are all made not to pass.
    no_bar = PipelineConfig(min_relevance=1.0, relevance_margin=0.0, list_sentence_relevance=1.0,
                            words_relevance=1.01)
    pipeline = AnswerPipeline(retriever, real_embedder, None, config=no_bar)
    # Every word of the topic is one the abstracts use: the framing diluted the similarity, not a missing topic.
    answered = pipeline.answer("Are there papers on knowledge distillation? Which ones?")
    assert not answered.refused and "TinyTeacher" in {c.title for c in answered.citations}
    refused = pipeline.answer("Are there papers on knowledge distillation for weather radars? Which ones?")
    assert refused.refused and "No abstract uses the words 'weather', 'radars'." in refused.answer
    # Nor do the words that ask for the list: "No abstract uses the word 'List'" refused a list of papers.
    listed = pipeline.answer("List all the knowledge distillation papers in the collection.")
    assert not listed.refused and "TinyTeacher" in {c.title for c in listed.citations}


def test_a_list_under_the_relevance_bar_is_answered_when_its_papers_mention_a_name_the_topic_gives(real_embedder):
    from rag.answers.pipeline import AnswerPipeline, PipelineConfig

    papers = [*PAPERS, _paper(5, "Quantized Agents", "We train small language-model agents with 4-bit weights and "
                                 "evaluate them on ALFWorld, where they match full-precision agents.")]
    retriever = FakeRetriever(papers, real_embedder)
    # Similarity, a close sentence and the topic's words are all made not to pass: only the name can.
    strict = PipelineConfig(min_relevance=1.0, relevance_margin=0.0, list_sentence_relevance=1.0,
                            words_relevance=1.01)
    pipeline = AnswerPipeline(retriever, real_embedder, None, config=strict)
    answered = pipeline.answer("Which papers evaluate LLM agents on ALFWorld?")
    assert not answered.refused and {c.title for c in answered.citations} == {"Quantized Agents"}
    assert pipeline.answer("Which papers evaluate LLM agents on WebShop?").refused


@pytest.mark.parametrize(("message", "listed"), [
    ("knowledge distillation", "Which papers are about knowledge distillation?"),
    ("rag", "Which papers are about rag?"),
    ("state space models?", "Which papers are about state space models?"),
    ("graph neural networks and transformers", "Which papers are about graph neural networks and transformers?"),
    # Anything that asks, points back, compares or chats is not a bare topic; nor is a number or a long phrase.
    ("what is rag", None), ("explain TinyTeacher", None), ("the second one", None), ("and its results", None),
    ("TinyTeacher vs Robust Vision", None), ("thanks", None), ("2024", None), ("papers on rag", None),
    ("diffusion models for music generation today", None),
])
def test_a_topic_typed_alone_is_asked_as_a_list(message, listed):
    assert as_list_question(message) == listed


def test_a_topic_typed_alone_lists_its_papers_and_a_papers_name_alone_asks_about_it(answerer, real_embedder):
    from rag.answers.pipeline import AnswerPipeline

    _extractive, retriever = answerer
    pipeline = AnswerPipeline(retriever, real_embedder, None)
    listed = pipeline.answer("knowledge distillation")
    assert listed.question == "knowledge distillation"  # the answer keeps what was typed
    assert sorted({c.title for c in listed.citations}) == ["Robust Vision", "TinyTeacher"]
    named = pipeline.answer("TinyTeacher")
    assert {c.title for c in named.citations} == {"TinyTeacher"}
    # After an answer, a short message may point back at it: it is a follow-up, not a new topic.
    history = [{"role": "user", "content": "What is TinyTeacher?"}, {"role": "assistant", "content": named.answer}]
    assert {c.title for c in pipeline.answer("knowledge distillation", history).citations} == {"TinyTeacher"}


def test_a_topic_that_is_only_a_name_lists_every_paper_that_mentions_it(real_embedder):
    from rag.answers.extractive import names_alone

    assert names_alone("mention GRPO", ["GRPO"]) and names_alone("evaluate on ALFWorld", ["ALFWorld"])
    assert not names_alone("evaluate LLM agents on ALFWorld", ["ALFWorld"])
    # Quantization is all Sparse Serving is about; it names the kernel library in passing, and is listed for it.
    papers = [*PAPERS[:3], _paper(4, "Quantized Training", PAPERS[3].abstract + " Kernels come from FlashInfer."),
              _paper(5, "Serving Kernels", "We write attention kernels for FlashInfer that serve long contexts.")]
    retriever = FakeRetriever(papers, real_embedder)
    extractive = ExtractiveAnswerer(real_embedder, idf=retriever.idf, search=retriever.search)
    question = "Which papers mention FlashInfer?"
    hits = retriever.search(question, 5)
    plan = extractive.plan(question, hits)
    assert sorted(hits[p.index].title for p in plan.papers) == ["Quantized Training", "Serving Kernels"]


@pytest.mark.parametrize(("typed", "fixed"), [
    ("whcih paprs are abut knowledge distillation?", "which papers are about knowledge distillation?"),
    ("How mnay papers use RL?", "How many papers use RL?"),
    ("Are threre any papres on RL?", "Are there any papers on RL?"),
    # Words of their own are left as typed, and so is what the question is about.
    ("workers and working lists", "workers and working lists"), ("What did the authors evaluate?", None),
    ("distilation of a teachr", None),
])
def test_misspelt_framing_words_are_read_as_meant(typed, fixed):
    assert framing_typos_fixed(typed) == (fixed or typed)


def test_a_list_question_with_typos_lists_as_the_spelt_one_does(answerer, real_embedder):
    from rag.answers.pipeline import AnswerPipeline

    _extractive, retriever = answerer
    pipeline = AnswerPipeline(retriever, real_embedder, None)
    typed = pipeline.answer("whcih paprs are abut knowledge distilation?")
    assert typed.question == "whcih paprs are abut knowledge distilation?"
    assert sorted({c.title for c in typed.citations}) == ["Robust Vision", "TinyTeacher"]


def test_what_an_abstract_does_without_is_no_part_of_its_topic(real_embedder):
    # ConPress-like: it names knowledge distillation only to say it does without it.
    papers = [*PAPERS, _paper(5, "Self Compress", "We shorten a language model's reasoning traces by fine-tuning "
                                 "on its own shortest answers, without knowledge distillation from a teacher or a "
                                 "student network.")]
    retriever = FakeRetriever(papers, real_embedder)
    extractive = ExtractiveAnswerer(real_embedder, idf=retriever.idf, search=retriever.search)
    question = "Which papers use knowledge distillation from a teacher into a student network?"
    hits = retriever.search(question, 5)
    features = extractive.topic_features(extractive.list_topic(question), hits)
    coverage = {h.title: features[i, FEATURES.index("topic_coverage")] for i, h in enumerate(hits)}
    assert coverage["Self Compress"] < 0.5 * coverage["TinyTeacher"]
    # A topic about doing without something keeps the abstracts' own "without ...".
    without = "Which papers shorten reasoning without knowledge distillation?"
    kept = extractive.topic_features(extractive.list_topic(without), hits)
    by_title = {h.title: kept[i, FEATURES.index("topic_coverage")] for i, h in enumerate(hits)}
    assert by_title["Self Compress"] > 0.5
