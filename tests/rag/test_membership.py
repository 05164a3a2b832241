"""Which papers a list answer names (rag/answers/membership.py): the question's topic without its framing, and
papers chosen by their chance of being about it, with the bundled MiniLM (meaning matters here)."""

from __future__ import annotations

import numpy as np
import pytest

from rag.answers.extractive import ExtractiveAnswerer
from rag.answers.membership import (
    FEATURES,
    MembershipParams,
    TopicEvidence,
    chances,
    likeness,
    list_topic,
    listed,
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
])
def test_list_topic_drops_the_framing(question, topic):
    assert list_topic(question) == topic


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
    evidence = membership_features("knowledge distillation", hits, hits, extractive.coverage, real_embedder.embed)
    features = evidence.features
    assert features.shape == (4, len(FEATURES))
    assert np.allclose(np.linalg.norm(evidence.vectors, axis=1), 1.0)
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


def _evidence(features, vectors) -> TopicEvidence:
    vectors = np.asarray(vectors, dtype=float)
    return TopicEvidence(np.asarray(features, dtype=float), vectors / np.linalg.norm(vectors, axis=1, keepdims=True))


def test_the_chance_rises_with_each_signal():
    params = MembershipParams()
    vectors = [[1.0, 0.0], [0.0, 1.0], [1.0, 0.2]]
    base = np.array([[0.9, 0.5, 0.5], [0.8, 0.4, 0.4], [0.5, 0.3, 0.3]])
    for column in range(len(FEATURES)):
        more = base.copy()
        more[2, column] += 0.3
        assert chances(_evidence(more, vectors), params)[2] > chances(_evidence(base, vectors), params)[2]
    assert chances(TopicEvidence(np.zeros((0, 3)), np.zeros((0, 0))), params).shape == (0,)


def test_a_paper_like_the_likeliest_ones_is_likelier():
    """Two candidates the first model cannot tell apart: the one whose abstract reads like the papers surely about
    the topic is likelier than the one that reads like neither."""
    first = np.array([[1.0, 0.6, 0.6], [0.9, 0.5, 0.6], [0.6, 0.3, 0.35], [0.6, 0.3, 0.35]])
    vectors = [[1.0, 0.1, 0.0], [0.9, 0.0, 0.1], [0.95, 0.05, 0.05], [0.0, 0.2, 1.0]]
    evidence = _evidence(first, vectors)
    params = MembershipParams()
    assert likeness(evidence, params.first.chances(first), 2)[2] > 0.99
    chance = chances(evidence, params)
    assert chance[2] > params.threshold > chance[3]


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
    # Similarity, a close sentence and the topic's words are all made not to pass.
    no_bar = PipelineConfig(min_relevance=1.0, relevance_margin=0.0, list_sentence_relevance=1.0,
                            words_relevance=1.01)
    pipeline = AnswerPipeline(retriever, real_embedder, None, config=no_bar)
    # Every word of the topic is one the abstracts use: the framing diluted the similarity, not a missing topic.
    answered = pipeline.answer("Are there papers on knowledge distillation? Which ones?")
    assert not answered.refused and "TinyTeacher" in {c.title for c in answered.citations}
    refused = pipeline.answer("Are there papers on knowledge distillation for weather radars? Which ones?")
    assert refused.refused and "No abstract uses the words 'weather', 'radars'." in refused.answer


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


@pytest.mark.parametrize(("closest", "refused"), [(0.3, True), (0.5, False)])
def test_an_existence_question_above_the_bars_is_refused_when_nothing_found_says_its_topic(
        answerer, real_embedder, monkeypatch, closest, refused):
    """"Is there work on the carbon footprint of training language models?" passes the relevance bar on the
    words it shares with a paper ("training language models"); what it asks about, no abstract uses. Refused when
    no sentence of the paper found comes close to the topic (``absent_topic_sentence``), naming the words."""
    from rag.answers.pipeline import AnswerPipeline

    _extractive, retriever = answerer
    pipeline = AnswerPipeline(retriever, real_embedder, None)
    question = "Is there work on measuring the carbon footprint of training language models?"
    monkeypatch.setattr(ExtractiveAnswerer, "closest_sentence", lambda self, topic, hit: closest)
    assert pipeline._relevant(question, retriever.search(question, 5), pinned=False)
    answer = pipeline.answer(question)
    assert answer.refused is refused
    if refused:
        assert "No abstract uses the words 'carbon', 'footprint'." in answer.answer
    else:
        assert answer.citations


def test_a_far_topic_made_of_the_corpus_words_is_answered(answerer, real_embedder, monkeypatch):
    """Nothing found close to the topic, but every word of it is one the abstracts use: answered (the words
    could not tell a missing topic from a loosely worded one)."""
    from rag.answers.pipeline import AnswerPipeline

    _extractive, retriever = answerer
    monkeypatch.setattr(ExtractiveAnswerer, "closest_sentence", lambda self, topic, hit: 0.1)
    answer = AnswerPipeline(retriever, real_embedder, None).answer("Is there work on pruning attention heads?")
    assert not answer.refused and answer.citations


def test_a_paper_with_half_the_topic_words_of_the_likeliest_is_not_listed():
    """"Which papers use state space models for client selection?": an abstract with "client selection" alone has
    half of what FedSSM's has, and is not listed beside it however close it sounds; with a topic the likeliest paper
    has none of the words of, the words decide nothing."""
    params = MembershipParams()
    chance = np.array([0.9, 0.8, 0.7, 0.1])
    assert listed(chance, np.array([1.0, 0.5, 0.6, 1.0]), params) == [0, 2]
    assert listed(chance, np.zeros(4), params) == [0, 1, 2]
    assert listed(np.array([0.2, 0.1]), np.array([1.0, 1.0]), params) == [0]  # the likeliest alone
