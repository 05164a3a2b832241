"""Derived titles: the introduced name when there is one, else a short readable phrase."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag.corpus.titles import derive_title, is_generic, looks_coined, name_regex

CORPUS = Path(__file__).resolve().parents[2] / "data" / "icml2026"


def _bundled_abstracts() -> list[tuple[str, int, str]]:
    """(file name, ordinal, abstract) for the bundled corpus, parsed independently of rag.corpus.load."""
    found = []
    for path in sorted(CORPUS.glob("*.txt")):
        paragraphs = [" ".join(p.split()) for p in path.read_text(encoding="utf-8").split("\n\n") if p.strip()]
        found += [(path.name, i, text) for i, text in enumerate(paragraphs[1:], start=1)]
    return found


BUNDLED = _bundled_abstracts()


def _abstract_mentioning(word: str) -> str:
    return next(text for _, _, text in BUNDLED if word in text)


def test_bundled_corpus_has_76_abstracts() -> None:
    assert len(BUNDLED) == 76


def test_fedssm_is_the_title_of_the_first_abstract() -> None:
    name, ordinal, text = BUNDLED[0]
    assert (name, ordinal) == ("000_dcbf1b5d2daaeff5.txt", 1)
    assert derive_title(text) == "FedSSM"


@pytest.mark.parametrize("name", ["MA-RAG", "MoDEX"])
def test_introduced_names_in_the_bundled_corpus(name: str) -> None:
    assert derive_title(_abstract_mentioning(name)) == name


@pytest.mark.parametrize(("file_name", "ordinal", "abstract"), BUNDLED, ids=[f"{f[:3]}#{i}" for f, i, _ in BUNDLED])
def test_every_bundled_title_is_a_readable_label(file_name: str, ordinal: int, abstract: str) -> None:
    title = derive_title(abstract)
    assert title and title == title.strip()
    assert len(title.split()) <= 8
    assert title[0].isupper() or title[0].isdigit()
    assert not re.search(r"[\\$*{}`]", title), "markup left in the title"
    assert not title.endswith((".", ",", ";", ":")), "trailing punctuation"
    assert title.split()[-1].lower() not in {"the", "a", "an", "of", "in", "for", "and", "with", "to", "on"}
    assert not is_generic(title), "a generic acronym is not a name"
    assert title.lower() not in {"we", "this", "a", "in", "llms", "llm"}


@pytest.mark.parametrize(
    ("abstract", "expected"),
    [
        ("Graphs are hard. We propose GraFormer, which reads graphs as text.", "GraFormer"),
        ("Models fail. In this paper, we introduce ZK-SNARKet, a prover for models.", "ZK-SNARKet"),
        ("We present Quokka, a novel architecture for long sequences.", "Quokka"),
        ("We present Quokka Audio, a benchmark of spoken tasks.", "Quokka Audio"),
        ("Agents forget. We design a memory module called MemWeave for agents.", "MemWeave"),
        ("Agents forget. We build a memory module named Tessellate to fix it.", "Tessellate"),
        ("Agents forget. We release a toolkit, dubbed PlanKit, for planning.", "PlanKit"),
        ("A phenomenon termed HyperDrift appears in training. We analyse it.", "HyperDrift"),
        ("We propose a hierarchical retrieval framework (HIRAX) for long documents.", "HIRAX"),
        ("We propose the Sparse Mixture Router (SMR), a routing layer for experts.", "SMR"),
        ("To fix this, we propose Gradient Echo Cancellation (GEC-2) for deep nets.", "GEC-2"),
        ("We introduce Spectral Shift Estimators, a new family of estimators.", "Spectral Shift Estimators"),
        ("VortexNet is a compact network for fluid flows. It is fast.", "VortexNet"),
        ("We study memory. We evaluate our tracing method, Probe-Lens, on many models.", "Probe-Lens"),
        ("An approach we term Neural Sand Dispersion avoids fitting. It works.", "Neural Sand Dispersion"),
        ("Code is available at https://github.com/someone/RoboLoop.", "RoboLoop"),
        ("Models drift. We bridge this gap via the *Latent Persona Vector*, a differentiable proxy.",
         "Latent Persona Vector"),
        ("We propose **Bold-Net** (**B**old **Net**), a network.", "Bold-Net"),
        (r"We introduce \textsc{TexName}, a method.", "TexName"),
    ],
)
def test_introduced_name_patterns(abstract: str, expected: str) -> None:
    assert derive_title(abstract) == expected


@pytest.mark.parametrize(
    ("abstract", "wrong"),
    [
        ("We propose LLMs, a class of models that reason well.", "LLMs"),
        ("Recent progress in reinforcement learning (RL) is fast. We study RL in games.", "RL"),
        ("We present a principled framework for estimation in computed tomography (CT) scans.", "CT"),
        ("We propose a benchmark for visual question answering (VQA) across many domains.", "VQA"),
        ("We propose an EM-based algorithm for joint estimation of parameters.", "EM-based"),
        ("Solvers for PDE systems are slow. We propose a faster PDE solver.", "PDE"),
        ("Many GNN models oversmooth. We show why.", "GNN"),
        ("This beats SOTA methods. We show how.", "SOTA"),
    ],
)
def test_generic_acronyms_and_ordinary_words_are_not_names(abstract: str, wrong: str) -> None:
    assert derive_title(abstract) != wrong


def test_fallback_is_a_short_phrase_from_the_first_sentence() -> None:
    abstract = (
        "Item response theory is widely used in areas such as recommender systems, education and psychology. "
        "A popular model is the Rasch model."
    )
    # The opening is background: its subject names the topic, its predicate ("is widely used") says nothing.
    assert derive_title(abstract) == "Item response theory"


@pytest.mark.parametrize(
    ("abstract", "expected"),
    [
        ("Scientific computing has long relied on double precision arithmetic. However, GPUs made low precision "
         "attractive. In this work, we investigate the role of mixed-precision arithmetic in quantum Monte Carlo.",
         "Mixed-precision arithmetic in quantum Monte Carlo"),
        ("This paper presents a theoretical investigation into the generalization of cross-domain distillation.",
         "Generalization of cross-domain distillation"),
        ("The Edge of Stability is a phenomenon of gradient descent. We provide an interpretation of sharpness "
         "through the lens of directional smoothness.", "Interpretation of sharpness"),
        ("Sockets are hard. Existing methods fail. We propose an EM-based algorithm for joint estimation of item "
         "and user parameters by sampling.", "EM-based algorithm for joint estimation"),
        ("While the emerging field of agentic coding has spurred research, gaps remain. In this paper, we instead "
         "investigate agentic mid-training as a scalable complementary approach.", "Agentic mid-training"),
    ],
)
def test_background_opening_gives_way_to_what_the_paper_does(abstract: str, expected: str) -> None:
    assert derive_title(abstract) == expected


@pytest.mark.parametrize(
    ("abstract", "not_expected"),
    [
        # Background whose predicate is a sentence's opening words, not a label.
        ("Scientific computing has long relied on double precision. We show GPUs help.",
         "Scientific computing has long relied"),
        ("Negative sampling is an important yet challenging component in graph learning. Methods vary.",
         "Negative sampling is an important yet challenging component"),
        # A contribution sentence that points elsewhere ("such problems") or names no topic gives no label.
        ("Markov noise is everywhere. We present a novel derivative-free method for solving such problems.",
         "Novel derivative-free method for solving such problems"),
        ("Speed matters. We provide the first comprehensive empirical analysis showing that Adam degrades.",
         "First comprehensive empirical analysis showing"),
    ],
)
def test_labels_are_never_a_sentence_opening_or_a_pointer(abstract: str, not_expected: str) -> None:
    title = derive_title(abstract)
    assert title != not_expected and title.split()[-1].lower() not in {"is", "has", "are", "relied", "showing"}


def test_fallback_drops_lead_ins_and_subordinate_openers() -> None:
    assert derive_title("In this paper, we study the problem of sorting socks in linear time.") == (
        "Sorting socks in linear time"
    )
    assert derive_title("As the demand for clean energy in large cities grows, grids strain.") == (
        "Demand for clean energy"
    )


@pytest.mark.parametrize("max_words", [1, 3, 5, 8, 12])
def test_fallback_respects_max_words(max_words: int) -> None:
    abstract = "Ever larger language models trained on ever larger corpora keep improving on many benchmarks today."
    title = derive_title(abstract, max_words=max_words)
    assert 1 <= len(title.split()) <= max_words
    assert title[0].isupper()


def test_empty_or_wordless_abstracts_get_a_placeholder() -> None:
    assert derive_title("") == "Untitled abstract"
    assert derive_title("  \n ") == "Untitled abstract"
    assert derive_title("!!! ... ???") == "Untitled abstract"


def test_endless_tokens_are_cut_to_a_readable_length() -> None:
    assert len(derive_title("x" * 100_000)) <= 100
    assert len(derive_title("We propose " + "Ab" * 50_000)) <= 100


@pytest.mark.parametrize(
    ("token", "coined"),
    [
        ("FedSSM", True),
        ("MoDEX", True),
        ("CogRouter", True),
        ("MA-RAG", True),
        ("Agent0-VL", True),
        ("SPARe", True),
        ("T2PO", True),
        ("We", False),
        ("This", False),
        ("A", False),
        ("In", False),
        ("LLMs", False),
        ("GNN", False),
        ("CoT", False),
        ("EM-based", False),
        ("GRPO-style", False),
        ("3D", False),
    ],
)
def test_looks_coined(token: str, coined: bool) -> None:
    assert looks_coined(token) is coined


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=600))
def test_derive_title_never_fails_and_stays_one_short_line(text: str) -> None:
    title = derive_title(text)
    assert title and len(title) <= 100
    assert len(title.splitlines()) == 1


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "We",
                "propose",
                "introduce",
                "(",
                ")",
                "FedX",
                "LLM",
                ",",
                "a",
                "called",
                "termed",
                "**",
                "$",
                "—",
                "the",
                "Model",
                "of",
                ".",
                "\\textbf{",
                "}",
                "https://github.com/a/BeeZ",
                "our",
                "method",
                "we",
                "term",
            ]
        ),
        max_size=40,
    ),
    st.integers(min_value=1, max_value=10),
)
def test_derive_title_on_pattern_soup(words: list[str], max_words: int) -> None:
    title = derive_title(" ".join(words), max_words=max_words)
    assert title and "\n" not in title


@pytest.mark.parametrize(
    ("abstract", "expected"),
    [
        # What answers the stated problem is the contribution, whatever the verb ("employ").
        ("Flows assume flat space. Linear paths cut through the manifold. To resolve this, we employ Curved Path "
         "Matching, adapting transport to the sphere.", "Curved Path Matching"),
        # A name the abstract arrives at: proper names with the noun they qualify, or a coined name.
        ("Residual minimization evolves parametrizations in time. We add a momentum term. The resulting "
         "Gauss-Newton-Onsager flow preserves accuracy.", "Gauss-Newton-Onsager flow"),
        ("Caching is slow. We cache keys. The proposed KeyCacher halves latency.", "KeyCacher"),
        # "This is the first study to uncover X": the topic is X.
        ("As the demand for empathy in chat models grows, control is hard. We build a dataset. To our knowledge, "
         "this is the first systematic study to uncover and validate empathy circuits in chat models, offering "
         "insight.", "Empathy circuits in chat models"),
        # "Using a paradigm from X, we demonstrate that Y": the finding Y, not the background opening.
        ("As chat models are adopted into products that make decisions, fairness matters. Using a paradigm from "
         "psychology, we demonstrate that chat models can develop novel biases about groups even without cause.",
         "Chat models can develop novel biases"),
    ],
)
def test_the_contribution_is_found_past_a_background_opening(abstract: str, expected: str) -> None:
    assert derive_title(abstract) == expected


def test_no_bundled_title_is_the_opening_of_a_background_sentence() -> None:
    titles = {derive_title(text) for _, _, text in BUNDLED}
    for opening in ("Demand for emotional intelligence", "Large language models are adopted into frameworks",
                    "Vector Symbolic Algebras enable robust neurosymbolic reasoning",
                    "Dirac-Frenkel instantaneous residual minimization evolves nonlinear parametrizations"):
        assert opening not in titles
    assert {"Emotion circuits in LLMs", "Geodesic Flow Matching", "Dirac-Frenkel-Onsager dynamics"} <= titles


@pytest.mark.parametrize(
    "abstract",
    ["Models are slow. The proposed method halves latency.",  # ordinary words: no name
     "Models are slow. To address this, we study a series of interventions on inputs."],
)
def test_ordinary_words_after_the_new_markers_are_no_name(abstract: str) -> None:
    assert derive_title(abstract) not in {"Method halves", "Series", "Method"}


@pytest.mark.parametrize(("title", "typed", "matches"), [
    ("FedSSM", "what is Fed SSM?", True), ("FedSSM", "fed ssm", True), ("FedSSM", "fed-ssm results", True),
    ("MA-RAG", "what did the ma rag authors do", True), ("MA-RAG", "MARAG", True),
    ("CogRouter", "cog router results", True), ("BFCL Audio", "bfcl audio", True),
    ("FedSSM", "federated SSM layers", False), ("CogRouter", "cognitive routers", False),
    ("PoLar", "bipolar data", False),
])
def test_a_short_title_is_found_however_its_parts_are_typed(title, typed, matches):
    assert bool(re.search(name_regex(title), typed, re.IGNORECASE)) is matches
