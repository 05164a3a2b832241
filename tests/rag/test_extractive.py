"""The extractive answerer on bundled abstracts (fake embedder): which sentences answer, and when a question
about a named paper is declined."""

from __future__ import annotations

import numpy as np
import pytest

from rag.answers.extractive import (
    ExtractiveAnswerer,
    ExtractiveParams,
    asks_for_figure,
    is_multi_paper_question,
    mentions,
    required_names,
)
from rag.types import Hit, Paper
from tests.conftest import FakeRetriever

# PRM-BiasBench "quantifies" what it measures; the others use words it never does ("measure", "address", "goal",
# "federated"), so the corpus knows them (idf) and their absence from its abstract counts.
TITLES = ("PRM-BiasBench", "FedSSM", "SPARe", "CogRouter", "CaliDist", "MADQA")


@pytest.fixture
def retriever(bundled_papers) -> FakeRetriever:
    papers = [p for p in bundled_papers if p.title in TITLES]
    assert len(papers) == len(TITLES)
    return FakeRetriever(papers)


def answerer(retriever: FakeRetriever) -> ExtractiveAnswerer:
    return ExtractiveAnswerer(retriever.embedder, idf=retriever.idf)


def plan_for(retriever: FakeRetriever, question: str, title: str):
    hits = [h for h in retriever.search(question, len(TITLES)) if h.title == title]
    return answerer(retriever).plan(question, hits), hits


@pytest.mark.parametrize("question", [
    "What does PRM-BiasBench measure?",
    "What problem does PRM-BiasBench address?",
    "What is the goal of PRM-BiasBench?",
])
def test_asking_what_a_named_paper_does_is_answered_in_its_own_words(retriever, question):
    # The abstract says "quantify", never "measure": the asking word is not a detail it must state.
    plan, _ = plan_for(retriever, question, "PRM-BiasBench")
    assert plan.kind == "answer", plan.missing


def test_a_detail_the_named_abstract_never_mentions_is_still_declined(retriever):
    plan, _ = plan_for(retriever, "What does PRM-BiasBench measure on federated clients?", "PRM-BiasBench")
    assert plan.kind == "not_stated" and "federated" in plan.missing


def _hit(abstract: str) -> Hit:
    return Hit(rank=1, paper_id="p", title="Sockets", score=1.0, source="s.txt", ordinal=1, text=abstract,
               abstract=abstract)


BACKGROUND = "However, existing packet routers have long relied on fixed time slices."
RESULT = "Adaptive time slices cut packet routing latency by 40% on real traces."
CODE = "Code for adaptive time slices in packet routing is available at https://github.com/someone/sockets."
ABSTRACT = f"{BACKGROUND} We propose adaptive slices. {RESULT} {CODE}"


def best_sentence(retriever: FakeRetriever, question: str) -> str:
    one = ExtractiveAnswerer(retriever.embedder, ExtractiveParams(sentences_single=1), idf=retriever.idf)
    return one.plan(question, [_hit(ABSTRACT)]).papers[0].sentences[0]


@pytest.mark.parametrize("question", ["time slices packet routers latency",
                                      "How do time slices affect packet routing?"])
def test_results_are_preferred_over_background_and_code_links(retriever, question):
    # Without the penalties the background (first question) or the code link (second) is the closest sentence.
    assert best_sentence(retriever, question) == RESULT


@pytest.mark.parametrize(("question", "expected"), [
    ("Where is the code for time slices in packet routing?", CODE),
    ("What did existing packet routers rely on?", BACKGROUND),
])
def test_a_question_about_code_or_the_problem_gets_that_sentence(retriever, question, expected):
    assert best_sentence(retriever, question) == expected


def _listed_hit(rank: int, title: str, abstract: str, score: float) -> Hit:
    return Hit(rank=rank, paper_id=title, title=title, score=score, source="s.txt", ordinal=rank, text=abstract,
               abstract=abstract)


AGENT_HITS = [
    _listed_hit(1, "Agents", "We train language agents with reinforcement learning on web shopping tasks.", 1.0),
    _listed_hit(2, "Memo", "Our memory agent is evaluated on ALFWorld household tasks and improves success.", 0.97),
    _listed_hit(3, "Plan", "Planning agents reach 90% success on ALFWorld household environments.", 0.95),
]


def test_how_many_papers_is_answered_with_the_count_and_each_paper_cited(retriever):
    question = "How many papers evaluate agents on ALFWorld household tasks?"
    assert is_multi_paper_question(question) and not asks_for_figure(question)
    plan = answerer(retriever).plan(question, AGENT_HITS)
    assert plan.kind == "answer" and plan.count
    text = answerer(retriever).write(plan, AGENT_HITS)
    assert text.splitlines()[0] == "2 papers are about this:"
    assert "Memo" in text and "[2]" in text and "Plan" in text and "[3]" in text and "Agents" not in text
    # A figure asked of a paper is still a figure question.
    assert asks_for_figure("How many GPUs did the SPARe authors use?")


def test_which_papers_lists_those_that_mention_the_topic_not_the_top_ranked_one(retriever):
    """A paper ranked first on a flat list of scores is not listed when it never mentions what is asked."""
    hits = AGENT_HITS
    chosen, _closest, _covered, named = answerer(retriever)._choose_papers(
        "Which papers evaluate agents on ALFWorld household tasks?", hits, multi=True)
    assert sorted(hits[i].title for i in chosen) == ["Memo", "Plan"] and named
    # When no paper qualifies, the likeliest one still answers (the relevance gate found it close enough).
    chosen, _closest, _covered, named = answerer(retriever)._choose_papers(
        "Which papers study quantum error correction codes?", hits, multi=True)
    assert len(chosen) == 1 and not named


@pytest.mark.parametrize(("name", "mentioned"), [
    ("ALFWorld", True), ("alfworld tasks", False), ("WebShops", True), ("GNNs", True), ("GNN", True),
    ("MiniGrid", False),
])
def test_a_name_is_mentioned_as_written_in_the_singular_or_spelled_out(name, mentioned):
    paper = Paper(paper_id="p", source="s.txt", ordinal=1, title="Agents",
                  abstract="We evaluate graph neural networks as agents on ALFWorld and WebShop.")
    assert mentions(Hit.of_paper(paper, rank=1, score=1.0, text=paper.abstract), name) is mentioned


@pytest.mark.parametrize(("abstract", "mentioned"), [
    ("We predict the effect of each action on classification tasks.", False),  # "ct" inside words, "c... t..."
    ("Confidence regions for computed tomography (CT) reconstructions.", True),
    ("Scans from CT-based screening.", True),
    ("CTs of the chest.", True),
    ("Reconstructions from CT2 scanners.", True),
])
def test_a_short_name_is_mentioned_only_as_a_whole_word(abstract, mentioned):
    paper = Paper(paper_id="p", source="s.txt", ordinal=1, title="A paper", abstract=abstract)
    assert mentions(Hit.of_paper(paper, rank=1, score=1.0, text=abstract), "CT") is mentioned


@pytest.mark.parametrize("written", ["Metropolis--Hastings", "Metropolis\u2013Hastings", "Metropolis-Hastings"])
def test_a_hyphenated_name_is_mentioned_however_the_abstract_writes_its_dash(written):
    abstract = f"We study independence {written} samplers."
    paper = Paper(paper_id="p", source="s.txt", ordinal=1, title="A paper", abstract=abstract)
    assert mentions(Hit.of_paper(paper, rank=1, score=1.0, text=abstract), "Metropolis-Hastings")


@pytest.mark.parametrize(("topic", "required"), [
    ("evaluate LLM agents on ALFWorld", ["ALFWorld"]),
    ("work with medical pictures such as X-rays, CT scans or photos of the eye", []),
    ("use retinal images (e.g. OCT scans)", []),
    ("use retinal images, e.g. OCT scans", []),
    ("model brain-like learning rules in Hebbian networks", ["Hebbian"]),
    ("evaluate on WebShop, for example with memory agents like AdaMEM", ["WebShop"]),
])
def test_a_list_requires_the_names_of_its_main_clause_not_those_of_its_examples(topic, required):
    assert required_names(topic) == required


@pytest.mark.parametrize("question", [
    "summarize CogRouter in one sentence", "ELI5 CogRouter", "TL;DR of CogRouter", "tl;dr CogRouter",
    "explain CogRouter to me briefly", "What's the main idea of CogRouter?",
])
def test_asking_for_a_named_paper_in_brief_is_answered_from_its_abstract(retriever, question):
    # Before: "does not state this: it never mentions one" (or ELI5), and an IndexError when the words the
    # abstract lacked were all too short to name ("tl", "dr", "s").
    plan, hits = plan_for(retriever, question, "CogRouter")
    assert plan.kind == "answer", plan.missing
    assert "CogRouter" in answerer(retriever).write(plan, hits)


@pytest.mark.parametrize("question", ["What accuracy does MA-RAG reach?", "What accuracy gain does MA-RAG obtain?",
                                      "How well does MA-RAG perform?"])
def test_the_verb_that_asks_for_a_figure_is_not_a_detail_the_abstract_must_state(bundled_papers, question):
    # Before: "The abstract of MA-RAG does not state this: it never mentions reach" (it says "delivering +6.8").
    retriever = FakeRetriever(bundled_papers)  # the whole corpus: some abstract uses "reach", so it counted
    hits = [h for h in retriever.search(question, len(bundled_papers)) if h.title == "MA-RAG"]
    plan = ExtractiveAnswerer(retriever.embedder, idf=retriever.idf).plan(question, hits)
    assert plan.kind == "answer", plan.missing


@pytest.mark.parametrize("question", ["what is Fed SSM?", "fed ssm", "what does fed-ssm do"])
def test_a_paper_named_with_its_parts_apart_is_the_one_answered_and_its_name_is_no_missing_detail(retriever, question):
    # Before: "The abstract of FedSSM does not state this: it never mentions fed or ssm".
    hits = retriever.search(question, len(TITLES))
    others = [h for h in hits if h.title != "FedSSM"]
    fedssm = next(h for h in hits if h.title == "FedSSM")
    hits = [others[0], fedssm, *others[1:]]  # ranked second: named, it is still the paper asked about
    plan = answerer(retriever).plan(question, hits)
    assert plan.kind == "answer", plan.missing
    assert [hits[p.index].title for p in plan.papers] == ["FedSSM"]


@pytest.mark.parametrize("question", ["Compare SPARe and FedSSM", "How does SPARe differ from FedSSM?",
                                      "SPARe vs FedSSM: which needs more GPUs?"])
def test_a_comparison_of_named_papers_answers_from_each_in_the_order_named(retriever, question):
    hits = retriever.search(question, len(TITLES))
    plan = answerer(retriever).plan(question, hits)
    assert plan.kind == "answer" and plan.multi and not plan.count
    assert [hits[p.index].title for p in plan.papers] == ["SPARe", "FedSSM"]
    text = answerer(retriever).write(plan, hits)
    first, second = text.splitlines()
    assert first.startswith("- SPARe: ") and second.startswith("- FedSSM: ")
    # every sentence carries its paper's marker, as the claim check would put it
    for line, paper in zip((first, second), plan.papers, strict=True):
        assert line.count(f"[{paper.index + 1}]") == len(paper.sentences) >= 2


def _sockets(abstract: str, title: str = "Sockets") -> Hit:
    return Hit(rank=1, paper_id="p", title=title, score=1.0, source="s.txt", ordinal=1, text=abstract,
               abstract=abstract)


SLICES = ("Large Language Models (LLMs) serve requests on shared packet routers in Adaptive Packet Routing (APR). "
          "We propose Sockets, adaptive "
          "time slices for packet routing in half the memory. Sockets runs on 2D meshes of routers.")


@pytest.mark.parametrize("question, missing", [
    # The abstract's figures ("half", "2D") are no speed-up, and it names no model besides its own.
    ("In the adaptive time slice paper, what wall-clock speed-up does packet routing get?", "speed-up"),
    ("What learning rate and batch size were used to train the packet router?", "learning rate"),
    ("Which base LLM does the adaptive time slice router use?", "base LLM"),
    ("What throughput does the adaptive time slice router reach?", "throughput"),
    # Asked outright for names, a description does not answer ("28 datasets of routing traces" below does
    # answer "which datasets"); "Adaptive Packet Routing (APR)" spells out a field, not a dataset's name.
    ("What are the names of the datasets the adaptive time slice router was tested on?", "datasets"),
])
def test_a_detail_of_a_described_paper_that_its_abstract_lacks_is_declined(retriever, question, missing):
    plan = answerer(retriever).plan(question, [_sockets(SLICES)])
    assert plan.kind == "not_stated" and missing in plan.missing, plan


@pytest.mark.parametrize("question, abstract", [
    ("In the adaptive time slice paper, what wall-clock speed-up does packet routing get?",
     SLICES + " Routing runs 3.1x faster than fixed slices."),
    ("What accuracy does the adaptive time slice router reach?",
     SLICES + " It routes 97% of packets on time."),
    ("Which base LLM does the adaptive time slice router use?",
     SLICES + " We serve Llama-3-8B behind the routers."),
    # Datasets are often described rather than named: the description answers.
    ("Which datasets does the adaptive time slice router use?",
     SLICES + " We replay 28 datasets of routing traces from campus networks."),
    ("What are the names of the datasets the adaptive time slice router was tested on?",
     SLICES + " We replay the CampusNet and MAWI datasets of routing traces."),
])
def test_the_same_detail_is_answered_where_the_abstract_gives_it(retriever, question, abstract):
    plan = answerer(retriever).plan(question, [_sockets(abstract)])
    assert plan.kind == "answer", plan.missing


POISSON = "Sockets models each queue as a Poisson process with adaptive time slices for packet routing."


@pytest.mark.parametrize("evaluation, stated", [
    ("Experiments on five benchmarks show that Sockets cuts latency.", False),
    ("Experiments on CampusNet and MAWI show that Sockets cuts latency.", True),
])
def test_names_asked_for_must_be_named_where_the_abstract_speaks_of_experiments(retriever, evaluation, stated):
    # "Poisson" names no benchmark: it is in the method's sentence, not in one about what was evaluated.
    plan = answerer(retriever).plan("Name the benchmarks the adaptive time slice router was evaluated on.",
                                    [_sockets(f"{POISSON} {evaluation}")])
    assert (plan.kind == "answer") is stated, plan.missing
    assert stated or plan.missing == "names no benchmarks"


ENUMERATED = ("Sockets routes packets with adaptive time slices and a small parameter count. Our contributions are "
              "twofold: (1) adaptive time slices for the packet router and (2) a queue model for the packet router.")


@pytest.mark.parametrize("abstract, stated", [
    (ENUMERATED, False),  # "(1)" and "(2)" number the items of a list: no figure
    (ENUMERATED + " The parameter count of the packet router is 7 per queue.", True),
])
def test_a_figure_asked_with_whats_needs_a_figure_and_list_items_are_none(retriever, abstract, stated):
    question = "What's the parameter count of the adaptive time slice packet router?"
    plan = answerer(retriever).plan(question, [_sockets(abstract)])
    assert (plan.kind == "answer") is stated, plan.missing
    assert stated or plan.missing == "gives no figure for the parameter count"  # says what is missing


COUNTING = ("Packet routers buffer bursts of traffic in queues and pick the one queue with the shortest wait. We "
            "propose Sockets, adaptive time slices for packet routers.")


@pytest.mark.parametrize("evaluation, stated", [
    ("", False),  # "the one queue" counts no routers
    (" Sockets was tested on 12 packet routers.", True),
    (" Sockets cuts the number of packet routers needed by 30%.", True),  # the figure follows what it counts
    (" Sockets was tested on 12 campus networks.", False),  # a figure, for something else
])
def test_how_many_needs_a_figure_near_what_is_counted(retriever, evaluation, stated):
    plan = answerer(retriever).plan("How many packet routers was Sockets tested on?", [_sockets(COUNTING + evaluation)])
    assert (plan.kind == "answer") is stated, plan.missing
    assert stated or plan.missing == "gives no figure for packet routers"


def test_each_count_asked_for_needs_its_own_figure(retriever):
    question = "How many packet routers and how many campus networks was Sockets tested on?"
    plans = {evaluation: answerer(retriever).plan(question, [_sockets(COUNTING + evaluation)]) for evaluation in [
        " Sockets was tested on 12 packet routers.", " It spans 3 campus networks.",
        " Sockets was tested on 12 packet routers. It spans 3 campus networks."]}
    assert [(p.kind == "answer", p.missing) for p in plans.values()] == [
        (False, "gives no figure for campus networks"), (False, "gives no figure for packet routers"), (True, "")]


SCALE = ("Sockets routes packets with adaptive time slices. Experiments on four campus benchmarks with 100k+ GPUs "
         "show that Sockets cuts latency by 40%.")


@pytest.mark.parametrize("question, evaluation, missing", [
    # The count is known already, or the exact one is wanted: "four campus benchmarks" does not answer.
    ("Which four campus benchmarks was Sockets tested on?", "", "names no benchmarks"),
    ("Which four campus benchmarks was Sockets tested on?", " The benchmarks are CampusNet, MAWI, CAIDA and UNSW.",
     ""),
    ("For Sockets, which specific model predicts the queue lengths?", "", "names no model"),
    ("What were the four campus benchmarks Sockets was tested on?", "", "names no benchmarks"),
    ("Can you list the four campus benchmarks Sockets reports?", "", "names no benchmarks"),
    # A question may start after the sentence that sets it up.
    ("Sockets cuts latency by 40%. Which base model predicts the queue lengths?", "", "names no base model"),
    # Asked for hardware, only a chip's name answers: "100k+ GPUs" and "SimGrid" name none.
    ("What GPU was Sockets run on?", " Simulations in SimGrid confirm it.", "names no GPU"),
    ("What GPU was Sockets run on?", " Training takes 2 hours on one A100 GPU.", ""),
    # Asked for language models, only a model's name answers: a metric's or a task's name is none ("which six LLMs
    # did CaliDist test?" was answered with "six distinct LLMs ... Brier Score").
    ("Which six LLMs was Sockets tested with?", " Six distinct LLMs lower the Brier Score on Natural Language "
     "Understanding tasks.", "names no LLMs"),
    ("Which six LLMs was Sockets tested with?", " Six distinct LLMs, Qwen2.5-7B and Llama-3 among them, confirm it.",
     ""),
    # A question may start after a dash that sets it up.
    ("The adaptive time slices paper — which base LLM did they apply Sockets to?", "", "names no base LLM"),
    # A count known, the names asked after a colon; what was run asked by name (agents: only models' names answer).
    ("Sockets is evaluated on four campus benchmarks: which ones are they?", "", "names no benchmarks"),
    ("Which agents or models were evaluated with Sockets?", " Guided by Classical Test Theory, agentic routers "
     "were evaluated.", "names no agents"),
    ("Which agents or models were evaluated with Sockets?", " Agents built on GPT-4o were evaluated.", ""),
])
def test_a_count_known_or_an_exact_one_asked_needs_names(retriever, question, evaluation, missing):
    plan = answerer(retriever).plan(question, [_sockets(SCALE + evaluation)])
    assert (plan.kind == "answer", plan.missing) == (not missing, missing)


@pytest.mark.parametrize("question", ["By how much did it beat the version that conditions on explicit actions?",
                                      "how much does Sockets outperform the static slices by?"])
def test_how_much_it_beats_something_asks_for_an_improvement(question):
    # "LAC-WM improves downstream performance over EAC-WM by up to 46.7%" was declined: "gives no figure".
    from rag.answers.extractive import asked_figure_kind

    kind = asked_figure_kind(question)
    assert kind is not None and kind[0] == "improvement"


@pytest.mark.parametrize("question", [
    "By what factor does Sockets speed up routing?",
    "What Gumbel-Softmax temperature does Sockets use?",
    "In the Sockets paper, what acceptance rate do they actually reach?",
    "sockets (the adaptive time slices thing) — how many times faster does it make routing?",
])
def test_a_hyperparameter_a_rate_or_a_figure_after_a_dash_is_a_figure_asked(question):
    # Each was answered with sentences that give no figure: not taken for a question asking for one.
    assert asks_for_figure(question)


def test_a_name_in_a_sentence_does_not_make_it_one_about_experiments(retriever):
    # "Test" of "Classical Test Theory" is part of a name, not a test: the sentence names no benchmark.
    abstract = ("Sockets routes packets with adaptive time slices. Guided by Classical Test Theory, we weight each "
                "queue by its difficulty.")
    plan = answerer(retriever).plan("Which specific benchmarks was Sockets evaluated on?", [_sockets(abstract)])
    assert plan.kind != "answer" and plan.missing == "names no benchmarks"


NAMED = ("Packet routers drop packets under bursts. We propose R2-Sock, adaptive time slices for packet routers "
         "(R2-Sock), trained on campus traces. Slices are scored by the Mahalanobis distance of their queue lengths.")


def test_a_threshold_or_value_asked_for_needs_a_figure_and_a_bracketed_name_is_none(retriever):
    # "(R2-Sock)" is the paper's name in brackets, not a figure: nothing here gives the value asked for.
    plan = answerer(retriever).plan("What threshold value does R2-Sock use to score the time slices?",
                                    [_sockets(NAMED, title="R2-Sock")])
    assert plan.kind == "not_stated" and "no figure" in plan.missing, plan
    given = NAMED + " A slice is dropped above a threshold of 3.5 standard deviations."
    plan = answerer(retriever).plan("What threshold value does R2-Sock use to score the time slices?",
                                    [_sockets(given, title="R2-Sock")])
    assert plan.kind == "answer", plan.missing


def test_the_papers_own_name_does_not_pick_the_sentence(retriever):
    # "R2-Sock" matches the sentence that names the paper better than the one that answers.
    one = ExtractiveAnswerer(retriever.embedder, ExtractiveParams(sentences_single=1, lexical_weight=2.0),
                             idf=retriever.idf)
    abstract = "We propose R2-Sock (R2-Sock) for R2-Sock routers. Slices are scored by their Mahalanobis distance."
    plan = one.plan("How does R2-Sock score slices?", [_sockets(abstract, title="R2-Sock")])
    assert plan.papers[0].sentences == ["Slices are scored by their Mahalanobis distance."]


@pytest.mark.parametrize("question", ["How was adaptive slicing for packet routers evaluated?",
                                      "What results does adaptive slicing report for packet routers?",
                                      "Which benchmarks did adaptive slicing for packet routers use?"])
def test_asked_what_a_paper_found_the_finding_leads_the_answer(retriever, question):
    # The opening that introduces the paper used to come first (the abstract's order), the answer after it.
    plan = answerer(retriever).plan(question, [_hit(ABSTRACT)])
    sentences = plan.papers[0].sentences
    assert sentences[0] == RESULT and len(sentences) > 1


def test_asked_what_a_paper_does_the_sentences_keep_the_abstracts_order(retriever):
    plan = answerer(retriever).plan("What do adaptive slices do for packet routers?", [_hit(ABSTRACT)])
    sentences = plan.papers[0].sentences
    assert len(sentences) > 1 and sentences == sorted(sentences, key=ABSTRACT.index)


def test_a_name_typed_alone_lists_the_papers_that_mention_it_leading_with_that_sentence(bundled_papers):
    # "Mamba" alone (read as "Which papers are about Mamba?") was answered with MA-RAG, which never mentions it;
    # Caracal names it, if only to set itself apart.
    papers = [p for p in bundled_papers if p.title in ("MA-RAG", "Caracal")]
    retriever = FakeRetriever(papers)
    hits = sorted(retriever.search("Which papers are about Mamba?", 2), key=lambda h: h.title != "MA-RAG")
    plan = answerer(retriever).plan("Which papers are about Mamba?", hits)
    assert plan.kind == "answer" and [hits[p.index].title for p in plan.papers] == ["Caracal"]
    assert "Mamba" in plan.papers[0].sentences[0]


def test_a_leading_clause_naming_the_study_does_not_pick_the_sentence(retriever):
    # "In the ... study," says which paper; its words match the sentence that describes the study, not the answer.
    one = ExtractiveAnswerer(retriever.embedder, ExtractiveParams(sentences_single=1, lexical_weight=2.0),
                             idf=retriever.idf)
    abstract = ("This study of adaptive packet routers is the first of its kind. "
                "Slices are scored by their Mahalanobis distance.")
    plan = one.plan("In the adaptive packet routers study, how are slices scored?", [_sockets(abstract)])
    assert plan.papers[0].sentences == ["Slices are scored by their Mahalanobis distance."]


def test_the_name_asked_for_is_read_from_the_question():
    from rag.answers.extractive import asked_figure_kind, asks_for_name

    assert asks_for_name("Which backbone LLM does it improve?") == "backbone LLM"
    assert asks_for_name("Which papers evaluate LLM agents on ALFWorld?") == ""
    assert asks_for_name("What are the names of the four benchmarks it was evaluated on?") == "benchmarks"
    assert asks_for_name("Name the datasets it uses.") == "datasets"
    assert asks_for_name("Which datasets does it use?") == ""  # described datasets answer this
    assert asked_figure_kind("For the VMC paper, what wall-clock speed-up does it give?")[0] == "speed-up"
    assert asked_figure_kind("How many clients does FedSSM select?") is None


def _fl_hit(n: int, title: str, abstract: str) -> Hit:
    return Hit(rank=n, paper_id=f"fl{n}", title=title, score=1.0, source="s.txt", ordinal=n, text=abstract,
               abstract=abstract)


FL_HITS = [
    _fl_hit(1, "FedSpace", "We pick clients in federated learning with state space models of training dynamics."),
    _fl_hit(2, "FedPrior", "Federated learning clients share a mixture prior for personalised preferences."),
    _fl_hit(3, "FedGraph", "Federated graph learning trains across clients without sharing raw graph data."),
    _fl_hit(4, "SpaceFed", "A state-space view of client drift in federated learning."),
]


def _rare_words_answerer() -> ExtractiveAnswerer:
    # "state", "space", "smooth", "curvatur" as rare as a word two abstracts use; the rest common.
    rare = {"state-space": 4.0, "state": 4.0, "space": 4.0, "smooth": 4.0, "curvatur": 4.0, "stale": 4.0}
    return ExtractiveAnswerer(lambda texts: np.zeros((len(texts), 4)),
                              idf=lambda t: 6.0 if t.startswith("\x00") else rare.get(t, 1.0))


def test_a_list_keeps_only_papers_with_the_rare_words_of_its_topic():
    answerer = _rare_words_answerer()
    topic = "use state-space models to pick clients in federated learning"
    assert answerer.key_terms(topic, FL_HITS[0]) == {"state-space", "state", "space"}
    # FedPrior and FedGraph are about federated learning, not state-space models; SpaceFed uses the words.
    assert answerer._with_key_terms(topic, FL_HITS, [0, 1, 2, 3]) == [0, 3]


@pytest.mark.parametrize("topic", [
    "use a generalized smoothness or curvature condition",  # alternatives: a paper uses one of them
    "deal with pipeline training, where passes can see stale weights",  # a relative clause's words
    "federated learning (e.g. with state-space models)",  # an aside's examples
])
def test_words_a_paper_about_the_topic_need_not_use_are_no_key_terms(topic):
    hit = _fl_hit(1, "X", "Smoothness, curvature, stale weights and state space models in federated learning.")
    assert _rare_words_answerer().key_terms(topic, hit) == set()


def test_a_code_link_is_the_last_thing_quoted_unless_the_code_is_asked_for(real_embedder):
    # A short abstract: its three best sentences for the question would include where the code is.
    abstract = ("We propose Sockets, adaptive time slices for packet routers. Sockets predicts each queue's burst "
                "length from its recent arrivals. Evaluated on campus traces, Sockets cuts latency by 40%. "
                "Code for Sockets is available at https://github.com/someone/sockets.")
    three = ExtractiveAnswerer(real_embedder)
    evaluated = three.plan("What did the Sockets authors evaluate on?", [_sockets(abstract)]).papers[0].sentences
    assert len(evaluated) == 3 and not any("github" in s for s in evaluated)
    code = three.plan("Where is the code for Sockets?", [_sockets(abstract)]).papers[0].sentences
    assert any("github" in s for s in code)


CORTEX = ("Sockets is a foundation model of widefield cortical recordings, pretrained across many animals and "
          "sessions; it decodes behaviour in held-out animals.")


@pytest.mark.parametrize("question, evaluation, missing", [
    # Asked which organism the data came from, "many animals" or the class the question names does not answer.
    ("What animal species were the Sockets recordings collected from?", "", "names no species"),
    ("Sockets - were the recordings from mice or some other species?", "", "names no species"),
    ("Which Sockets decoder reads out what the animal is doing?", "", ""),
    ("Which monkey species did Sockets compare against?", " It is compared with monkey recordings.",
     "names no species"),
    ("What animal species were the Sockets recordings collected from?", " All recordings are from mice.", ""),
    ("Were the Sockets recordings from mice or another species?", " All recordings are from mice.", ""),
    ("Which monkey species did Sockets compare against?", " It is compared with macaque recordings.", ""),
])
def test_a_species_asked_for_needs_an_organism_named(retriever, question, evaluation, missing):
    plan = answerer(retriever).plan(question, [_sockets(CORTEX + evaluation)])
    assert (plan.kind == "answer", plan.missing) == (not missing, missing)


def test_a_figure_asked_after_a_sentence_that_sets_it_up(retriever):
    question = "Sockets cuts the tail latency of busy campus networks by 40%. How many packet routers was it tested on?"
    plan = answerer(retriever).plan(question, [_sockets(COUNTING)])
    assert plan.kind != "answer" and plan.missing == "gives no figure for packet routers"


@pytest.mark.parametrize("question", [
    "What R^2 does Sockets reach for zero-shot decoding?", "what r² does it get on unseen subjects?",
    "What NDCG@10 does Sockets reach?", "What pass@1 does it get on HumanEval?", "What WER does the codec reach?"])
def test_a_metric_asked_for_is_a_figure_question(retriever, question):
    assert not asks_for_figure("What does R2-Router propose?")  # a name that begins like a metric is none
    assert asks_for_figure(question)
    # The abstract names the metrics and the benchmark but gives no figure.
    abstract = COUNTING + " We report R^2, NDCG, pass@1 and WER on zero-shot decoding and on HumanEval."
    plan = answerer(retriever).plan(question, [_sockets(abstract)])
    assert plan.kind != "answer" and plan.missing.startswith("gives no figure")


def test_a_word_in_another_form_is_no_missing_detail(retriever):
    # The stemmer keeps "reduce" and "reduction" apart ("reduc", "reduct"): the abstract says what is asked.
    abstract = "Sockets is a queue reduction framework for packet routers: it drops idle queues at run time."
    plan = answerer(retriever).plan("What does Sockets reduce?", [_sockets(abstract)])
    assert plan.kind == "answer", plan.missing


@pytest.mark.parametrize("evaluation, missing", [
    (" Sockets cuts latency by 40% over the best routers.", ""),
    (" Sockets was tested on 12 packet routers.", "gives no figure for the improvement"),
])
def test_how_much_better_is_answered_by_a_figure_of_improvement(retriever, evaluation, missing):
    # "than the baselines": the abstract says "over the best routers", and that answers.
    plan = answerer(retriever).plan("And how much better is Sockets than the baselines?",
                                    [_sockets(COUNTING + evaluation)])
    assert (plan.kind == "answer", plan.missing) == (not missing, missing)


def test_a_name_an_abstract_sets_itself_apart_from_is_no_name_it_uses(retriever):
    abstract = ("Unlike efficient models relying on hardware-specific kernels (e.g., Mamba), Sockets uses standard "
                "operators for packet routers.")
    hits = [_sockets(abstract)]
    assert answerer(retriever).plan("Which papers use Mamba?", hits).kind == "not_covered"
    mentioned = answerer(retriever).plan("Which papers mention Mamba?", hits)
    assert mentioned.kind == "answer" and [p.index for p in mentioned.papers] == [0]


@pytest.mark.parametrize("question", ["Which datasets did Sockets use?",
                                      "which metrics does Sockets improve over the baselines?"])
def test_the_kind_of_thing_asked_for_need_not_be_said_by_that_word(retriever, question):
    # "it never mentions datasets" / "metrics or over": the abstract names them (CampusNet, latency) instead.
    abstract = COUNTING + " We evaluate Sockets in campus environments, including CampusNet and MAWI, cutting latency."
    plan = answerer(retriever).plan(question, [_sockets(abstract)])
    assert plan.kind == "answer", plan.missing


@pytest.mark.parametrize("question, evaluation, missing", [
    ("Sockets zero-shot accuracy?", "", "gives no figure for the accuracy"),
    ("Sockets zero-shot accuracy?", " Sockets reaches 91% zero-shot accuracy.", ""),
])
def test_a_metric_typed_as_a_search_asks_for_its_figure(retriever, question, evaluation, missing):
    plan = answerer(retriever).plan(question, [_sockets(COUNTING + " Sockets is judged by zero-shot accuracy."
                                                        + evaluation)])
    assert (plan.kind == "answer", plan.missing) == (not missing, missing)


def test_what_x_for_y_applies_must_be_used_by_every_listed_paper(retriever):
    # "Which papers study reinforcement learning for LLM reasoning?" listed papers about LLM reasoning without RL.
    hits = [
        _listed_hit(1, "Agents", "We train language agents with reinforcement learning to improve LLM reasoning.", 1.0),
        _listed_hit(2, "Layers", "We skip and repeat layers at inference to improve LLM reasoning.", 0.9),
        _listed_hit(3, "Plan", "Planning agents trained by reinforcement learning reason over web tasks.", 0.8),
    ]
    chosen = answerer(retriever)._with_key_terms("reinforcement learning for LLM reasoning", hits, [0, 1, 2])
    assert [hits[i].title for i in chosen] == ["Agents", "Plan"]
    # Without "for", the topic is itself the phrase a listed paper says: Plan's agents "reason", of no LLM.
    assert answerer(retriever)._with_key_terms("LLM reasoning", hits, [0, 1, 2]) == [0, 1]


def test_the_method_after_with_must_be_used_by_every_listed_paper(retriever):
    # "Which papers train vision-language models with reinforcement learning?" listed VLM papers without RL.
    hits = [
        _listed_hit(1, "Verify", "We train vision-language models with reinforcement learning and rewards.", 1.0),
        _listed_hit(2, "Halluc", "Vision-language models hallucinate; we contrast visual evidence to curb it.", 0.9),
        _listed_hit(3, "Cursor", "Our GUI vision-language agent is trained by online reinforcement learning.", 0.8),
    ]
    chosen = answerer(retriever)._with_key_terms("train vision-language models with reinforcement learning", hits,
                                                 [0, 1, 2])
    assert [hits[i].title for i in chosen] == ["Verify", "Cursor"]
    # A method named in words must be said as such, or by its acronym: "structure-reinforced learning" is no RL.
    said = [*hits[:2], _listed_hit(4, "Quant", "Vision-language models learn a structure-reinforced codebook.", 0.85),
            _listed_hit(5, "Tuned", "We tune vision-language models by reinforcement learning.", 0.8)]
    chosen = answerer(retriever)._with_key_terms("train vision-language models with reinforcement learning", said,
                                                 [0, 2, 3])
    assert [said[i].title for i in chosen] == ["Verify", "Tuned"]
    # A phrasal verb's "with", and a "with" inside a "where" clause, name no method.
    assert answerer(retriever)._with_key_terms("deal with vision-language models", hits, [0, 1, 2]) == [0, 1, 2]
    assert answerer(retriever)._with_key_terms(
        "vision-language models, where agents with reinforcement learning act", hits, [0, 1, 2]) == [0, 1, 2]


def test_a_new_benchmark_asked_for_lists_the_papers_that_build_one(retriever):
    # "Which papers propose a new benchmark?" listed every paper evaluated on a benchmark.
    hits = [
        _listed_hit(1, "Bencher", "We introduce RouteBench, a benchmark of 2,000 routing tasks.", 1.0),
        _listed_hit(2, "Sockets", "Sockets cuts latency by 40% on four routing benchmarks.", 0.95),
        _listed_hit(3, "Slices", "Experiments on newly released benchmarks show adaptive slices help.", 0.9),
        _listed_hit(4, "Queues", "This work constructs QueueBench to test packet routers.", 0.85),
    ]
    chosen, *_ = answerer(retriever)._choose_papers("Which papers propose a new benchmark?", hits, multi=True)
    assert sorted(hits[i].title for i in chosen) == ["Bencher", "Queues"]


@pytest.mark.parametrize("abstract, artifact, builds", [
    ("We release PRM-BiasBench and a diagnostic toolkit.", "benchmark", True),
    ("Together with the router, we construct R2-Bench, the first routing dataset.", "benchmark", True),
    ("We introduce MADQA, a benchmark of 2,250 questions.", "dataset", True),
    # Asked for a benchmark, a dataset built to study something else is none.
    ("We first construct a controlled dataset, SEV, to elicit internal states.", "benchmark", False),
    ("We first construct a controlled dataset, SEV, to elicit internal states.", "dataset", True),
    ("Experiments on five benchmarks show consistent gains.", "benchmark", False),
])
def test_what_an_abstract_says_it_builds(abstract, artifact, builds):
    from rag.answers.extractive import says_it_builds

    assert says_it_builds(abstract, artifact) is builds


def test_a_paper_that_builds_a_benchmark_is_listed_with_the_sentence_that_says_so(retriever):
    # R2-Router was listed with "This work opens a new direction ..." beside "we construct R2-Bench ...".
    hits = [
        _listed_hit(1, "Router", "Routing picks a model per query. We construct R2-Bench, the first routing "
                                 "dataset of its kind. This work opens a new direction for routing benchmarks.", 1.0),
        _listed_hit(2, "Queues", "This work constructs QueueBench to test packet routers.", 0.9),
    ]
    plan = answerer(retriever).plan("Which papers propose a new benchmark?", hits)
    assert {hits[p.index].title: p.sentences for p in plan.papers} == {
        "Router": ["We construct R2-Bench, the first routing dataset of its kind."],
        "Queues": ["This work constructs QueueBench to test packet routers."]}


def test_the_size_asked_of_a_named_paper_is_no_detail_it_must_mention(retriever):
    # "BFCL Audio size? number of tasks" was declined: "never mentions size" (it says "6.2K ... tasks").
    abstract = ("Routers drop packets under bursts. We introduce Sockets Audio, a large-scale benchmark for packet "
                "routing with 6.2K expert-verified tasks across two suites.")
    plan = answerer(retriever).plan("Sockets Audio size? number of tasks", [_sockets(abstract, "Sockets Audio")])
    assert plan.kind == "answer", plan.missing


@pytest.mark.parametrize("question, abstract_end, declined", [
    # The problem an abstract starts from is earlier work's ("the limitations of positional encodings"), not its own.
    ("What is the main limitation of Sockets?", " Routers are limited by the limitations of static slices.", True),
    ("Any weaknesses of Sockets?", "", True),
    ("What are the limitations of Sockets?", " Our method is limited to campus networks; wide-area routing is "
     "future work.", False),
    # The limitation of earlier work it addresses is answered from the problem it starts from.
    ("What limitation of existing routers does Sockets address?", " Existing routers pick queues poorly, which "
     "Sockets addresses.", False),
])
def test_a_papers_own_limitations_are_answered_only_where_it_states_them(retriever, question, abstract_end,
                                                                         declined):
    plan = answerer(retriever).plan(question, [_sockets(COUNTING + abstract_end)])
    assert (plan.kind == "not_stated") is declined, plan.missing
    if declined:
        assert plan.missing == "says nothing of its own limitations"


@pytest.mark.parametrize(("question", "words", "phrases"), [
    ("What learning rate did CaliDist use?", ["rate", "learning"], ["learning rate"]),  # was "rate or learning"
    ("What batch size and optimizer did FedSSM use?", ["optimizer", "batch"], ["batch", "optimizer"]),
    ("Which GPU?", ["TPU"], ["TPU"]),
])
def test_missing_words_that_stand_together_in_the_question_are_named_together(question, words, phrases):
    from rag.answers.extractive import _phrases

    assert _phrases(question, words) == phrases


@pytest.mark.parametrize(("topic", "abstracts", "listed"), [
    # RepCore's "hidden states into a unified latent space" was listed for state-space models.
    ("use state-space models", ["We predict dynamics with state space models.", "We align hidden states into one "
     "latent space of models.", "Our SSMs scan sequences."], ["A", "C"]),
    # NMNC's "neural manifold in trained networks" for graph neural networks.
    ("graph neural networks", ["Graph neural networks over-smooth.", "The neural manifold of trained networks "
     "on graph data.", "We regularise GNNs."], ["A", "C"]),
    # A word between: "Federated Graph Learning" is federated learning.
    ("federated learning", ["Federated learning across clients.", "Federated graph learning on clients.",
     "Learning federated clients."], ["A", "B"]),
    ("build a world model", ["We build robot world models.", "ORBIT, a prognostic World Model of the eye.",
     "A model of the world."], ["A", "B"]),
])
def test_a_short_topic_is_said_as_a_phrase_or_its_acronym_by_every_listed_paper(retriever, topic, abstracts, listed):
    hits = [_listed_hit(i + 1, "ABC"[i], text, 1.0 - i / 10) for i, text in enumerate(abstracts)]
    chosen = answerer(retriever)._with_key_terms(topic, hits, [0, 1, 2])
    assert [hits[i].title for i in chosen] == listed


def test_each_part_of_a_compound_question_is_answered_in_the_order_asked(retriever):
    # The abstract's order put the latency figure before the code link asked for first.
    question = "Where is the code for adaptive time slices, and how much do they cut packet routing latency?"
    sentences = answerer(retriever).plan(question, [_hit(ABSTRACT)]).papers[0].sentences
    assert sentences[:2] == [CODE, RESULT]


def test_asked_what_two_named_papers_both_use_each_answer_leads_with_what_they_share(bundled_papers):
    # "Which environments do AdaMEM and CogRouter both use?" quoted AdaMEM's method, never ALFWorld.
    papers = [p for p in bundled_papers if p.title in ("AdaMEM", "CogRouter")]
    retriever = FakeRetriever(papers)
    question = "Which environments do AdaMEM and CogRouter both use?"
    plan = answerer(retriever).plan(question, retriever.search(question, 2))
    assert len(plan.papers) == 2 and all("ALFWorld" in p.sentences[0] for p in plan.papers)
    from rag.answers.extractive import shared_names

    assert "ALFWorld" in shared_names(retriever.search(question, 2))
