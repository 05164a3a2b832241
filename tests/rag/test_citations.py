from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag.answers.citations import (
    MARKER,
    Claim,
    ClaimCheck,
    citations_from_checks,
    clean_markers,
    find_markers,
    highlight_spans,
    split_claims,
)
from rag.answers.evidence import WEAK_BELOW, check_claims
from rag.corpus.chunking import split_sentences
from rag.types import Paper
from tests.conftest import BUNDLED_CORPUS, FEDSSM, NRDE

# --- find_markers -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[1]", [("[1]", (1,))]),
        ("as shown [1, 3].", [("[1, 3]", (1, 3))]),
        ("[1-3]", [("[1-3]", (1, 2, 3))]),
        ("[1\u20133]", [("[1\u20133]", (1, 2, 3))]),  # en dash
        ("[1 \u2014 2]", [("[1 \u2014 2]", (1, 2))]),  # em dash with spaces
        ("[1][2]", [("[1]", (1,)), ("[2]", (2,))]),
        ("[1,2-4]", [("[1,2-4]", (1, 2, 3, 4))]),
        ("[ 2 ]", [("[ 2 ]", (2,))]),
        ("[1; 4]", [("[1; 4]", (1, 4))]),
        ("[3-1]", [("[3-1]", (1, 2, 3))]),  # reversed range
        ("[1, 1, 2-3, 2]", [("[1, 1, 2-3, 2]", (1, 2, 3))]),  # repeats dropped, order kept
        ("[3, 1]", [("[3, 1]", (3, 1))]),
        ("[01]", [("[01]", (1,))]),
        ("a [1] b [2, 5] c", [("[1]", (1,)), ("[2, 5]", (2, 5))]),
        ("[[1]]", [("[1]", (1,))]),
        # not markers
        ("[a]", []),
        ("[12.5]", []),
        ("[Note]", []),
        ("[]", []),
        ("[1,]", []),
        ("[-1]", []),
        ("[1 2]", []),
        ("[x1]", []),
        ("[2024]", []),  # four digits: a year, not a source
        ("[1\n2]", []),
        ("[\uff11]", []),  # full-width digit
        ("[\u0661]", []),  # Arabic-Indic digit
        ("(1)", []),
        ("{1}", []),
    ],
)
def test_find_markers(text, expected):
    markers = find_markers(text)
    assert [(text[m.start : m.end], m.numbers) for m in markers] == expected


def test_ranges_are_capped_at_50_numbers():
    (marker,) = find_markers("[1-900]")
    assert marker.numbers == tuple(range(1, 51))
    (marker,) = find_markers("[5-1, 900-999]")
    assert marker.numbers == (1, 2, 3, 4, 5, *range(900, 950))


# --- clean_markers ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "valid", "expected", "removed"),
    [
        (
            "FedSSM selects clients [1]. It uses surprise [2] and [99].",
            {1, 2},
            "FedSSM selects clients [1]. It uses surprise [2] and.",
            1,
        ),
        ("as shown [1, 99].", {1}, "as shown [1].", 1),
        ("shown [99].", {1}, "shown.", 1),
        ("see [99] for more", {1}, "see for more", 1),
        ("see [99][1] now", {1}, "see [1] now", 1),
        ("see [1][99] now", {1}, "see [1] now", 1),
        ("word[99] next", {1}, "word next", 1),
        ("(see [99])", {1}, "(see)", 1),
        ("[99] Results improve.", {1}, "Results improve.", 1),
        ("[99] [98] Results.", {1}, "Results.", 2),
        ("x [99] [98].", {1}, "x.", 2),
        ("One [99].\nTwo [1].\n[7] Three.", {1}, "One.\nTwo [1].\nThree.", 2),
        ("- item [99]\n- next [1]", {1}, "- item\n- next [1]", 1),
        ("[1-3] and [1,3]", {1, 2, 3}, "[1, 2, 3] and [1, 3]", 0),
        ("[1-3]", {2}, "[2]", 2),
        ("[1,2-4]", {1, 4}, "[1, 4]", 2),
        ("[ 1 ;2 ]", {1, 2}, "[1, 2]", 0),
        ("[1, 1]", {1}, "[1]", 0),
        ("[[99]1]", {1}, "[1]", 1),  # removing one marker makes another: cleaned too
        ("[[99]99]", {1}, "", 2),
        ("odd  spacing ,  kept [a] [12.5] [Note] [2024]", {1}, "odd  spacing ,  kept [a] [12.5] [Note] [2024]", 0),
        ("", {1}, "", 0),
        ("[99]", set(), "", 1),
    ],
)
def test_clean_markers(text, valid, expected, removed):
    assert clean_markers(text, valid) == (expected, removed)


def test_clean_markers_drops_every_trace_of_an_invalid_number():
    text, removed = clean_markers("FedSSM selects clients [1]. It uses surprise [2] and [99].", {1, 2})
    assert "99" not in text
    assert removed == 1
    assert "[1]" in text and "[2]" in text


def test_text_without_markers_is_returned_unchanged():
    text = "  A claim with [brackets], (1) and trailing space \n\n"
    assert clean_markers(text, {1}) == (text, 0)


# --- split_claims -----------------------------------------------------------------------------------------------------


def claims_of(answer: str) -> list[tuple[str, tuple[int, ...]]]:
    return [(c.text, c.markers) for c in split_claims(answer)]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (
            "FedSSM selects clients [1]. It improves accuracy. [2] It also cuts rounds [1, 3].",
            [("FedSSM selects clients.", (1,)), ("It improves accuracy.", (2,)), ("It also cuts rounds.", (1, 3))],
        ),
        ("It improves.[2] Next one [1].", [("It improves.", (2,)), ("Next one.", (1,))]),
        ("It improves. [2][3]", [("It improves.", (2, 3))]),
        ("It improves [1]. [2]", [("It improves.", (1, 2))]),
        ("[1] FedSSM predicts dynamics.", [("FedSSM predicts dynamics.", (1,))]),
        ("Uses e.g. state space models [1-2].", [("Uses e.g. state space models.", (1, 2))]),
        ("X holds [1] and Y holds [1, 2].", [("X holds and Y holds.", (1, 2))]),
        ("No citations here. None at all!", [("No citations here.", ()), ("None at all!", ())]),
        ("", []),
        ("   \n\n", []),
        ("[1]", []),  # no claim to attach to
        ("...", []),
    ],
)
def test_split_claims_sentences(answer, expected):
    assert claims_of(answer) == expected


def test_split_claims_list_items():
    answer = (
        "Two papers address this:\n"
        "- FedSSM predicts training dynamics [1]\n"
        "- It cuts communication rounds by 30% [1][2]\n"
        "* Starred item [3]\n"
        "  + nested item [2]\n"
        "\u2022 Unicode bullet [1]\n"
        "1. Numbered item [2]\n"
        "2) Other numbering [1].\n"
    )
    assert claims_of(answer) == [
        ("Two papers address this:", ()),
        ("FedSSM predicts training dynamics", (1,)),
        ("It cuts communication rounds by 30%", (1, 2)),
        ("Starred item", (3,)),
        ("nested item", (2,)),
        ("Unicode bullet", (1,)),
        ("Numbered item", (2,)),
        ("Other numbering.", (1,)),
    ]


def test_split_claims_structure():
    answer = (
        "## Summary\n"
        "A paragraph that is\n"
        "wrapped over lines [1].\n"
        "[2]\n"
        "\n"
        "- An item that\n"
        "  continues here [3]\n"
        "\n"
        "[4]\n"
        "### Sources [5]\n"
    )
    assert claims_of(answer) == [
        ("A paragraph that is wrapped over lines.", (1, 2)),  # markers on their own line go to the claim before
        ("An item that continues here", (3, 4)),
        ("Sources", (5,)),  # a heading is a claim only when it cites something
    ]


def test_split_claims_multi_sentence_item_is_split_into_sentences():
    assert claims_of("- First point [1]. Second point [2].\n- Third [3]") == [
        ("First point.", (1,)),
        ("Second point.", (2,)),
        ("Third", (3,)),
    ]


def test_claims_are_frozen():
    claim = split_claims("A [1].")[0]
    with pytest.raises(AttributeError):
        claim.text = "B"  # type: ignore[misc]


# --- check_claims -----------------------------------------------------------------------------------------------------

SOURCES = {1: FEDSSM, 2: NRDE}


def sentences_of(abstract: str) -> list[str]:
    return [abstract[s:e] for s, e in split_sentences(abstract)]


def test_check_claims_finds_verbatim_evidence(fake_embedder):
    claims = [
        Claim("FedSSM predicts training dynamics with state space models.", (1,)),
        Claim("NRDE separates pure data from noise sources with a normalizing flow.", (2,)),
    ]
    checks = check_claims(claims, SOURCES, fake_embedder)
    assert [(c.claim, c.marker, c.paper_id) for c in checks] == [
        (claims[0].text, 1, "fedssm"),
        (claims[1].text, 2, "nrde"),
    ]
    for check, paper in zip(checks, (FEDSSM, NRDE), strict=True):
        assert check.evidence == paper.abstract[check.evidence_start : check.evidence_end]
        assert check.evidence in sentences_of(paper.abstract)
        assert 0.0 <= check.support <= 1.0
        assert check.support > 0.8 and not check.weak
    assert checks[0].evidence == "We propose FedSSM, which predicts training dynamics with state space models."
    assert checks[1].evidence == "NRDE learns a normalizing flow that separates pure data from noise sources."


def test_check_claims_skips_uncited_and_unknown_markers(fake_embedder):
    claims = [
        Claim("An uncited sentence.", ()),
        Claim("A claim citing a source that was never retrieved.", (7,)),
        Claim("Experiments show fewer communication rounds.", (7, 1)),
    ]
    checks = check_claims(claims, SOURCES, fake_embedder)
    assert [(c.claim, c.marker) for c in checks] == [("Experiments show fewer communication rounds.", 1)]


def test_check_claims_without_citable_pairs_embeds_nothing(fake_embedder):
    assert check_claims([Claim("Nothing cited.", ()), Claim("Unknown.", (9,))], SOURCES, fake_embedder) == []
    assert check_claims([], SOURCES, fake_embedder) == []
    assert fake_embedder.calls == 0


def test_check_claims_batches_embeddings(fake_embedder):
    claims = [
        Claim("FedSSM predicts training dynamics.", (1, 2)),
        Claim("The surprise signal sets participation budgets.", (1,)),
        Claim("FedSSM predicts training dynamics.", (1,)),  # same text again: embedded once
        Claim("NRDE is compared with 17 baselines.", (2,)),
    ]
    checks = check_claims(claims, SOURCES, fake_embedder)
    assert len(checks) == 5
    assert fake_embedder.calls == 2  # one for the claims, one for all abstract sentences
    candidates = sum(2 * len(split_sentences(p.abstract)) - 1 for p in SOURCES.values())  # sentences + pairs
    assert fake_embedder.texts_embedded == 3 + candidates  # each abstract once, however often it is cited


def test_check_claims_matches_a_claim_summarising_two_sentences(fake_embedder):
    claim = Claim(
        "The prediction error yields a surprise signal that sets participation budgets, "
        "and experiments show accuracy gains and fewer communication rounds.",
        (1,),
    )
    (check,) = check_claims([claim], SOURCES, fake_embedder)
    third, fourth = sentences_of(FEDSSM.abstract)[2:]
    assert check.evidence == FEDSSM.abstract[check.evidence_start : check.evidence_end]
    assert check.evidence.startswith(third) and check.evidence.endswith(fourth)


def test_check_claims_flags_weak_support(fake_embedder):
    claims = [Claim("Quantum chemistry uses coupled cluster theory.", (1,)), Claim("FedSSM predicts dynamics.", (1,))]
    off_topic, on_topic = check_claims(claims, SOURCES, fake_embedder)
    assert off_topic.weak and off_topic.support < WEAK_BELOW
    assert not on_topic.weak
    # the threshold is a parameter
    strict = check_claims(claims, SOURCES, fake_embedder, weak_below=1.01)
    assert all(check.weak for check in strict)
    assert [c.support for c in strict] == [off_topic.support, on_topic.support]


def test_check_claims_clips_negative_similarity():
    class Opposite:
        """Claims and abstract sentences point in opposite directions."""

        def embed(self, texts):
            sign = -1.0 if any(text.startswith("Claim") for text in texts) else 1.0
            return np.tile(np.array([[sign, 0.0]], dtype=np.float32), (len(texts), 1))

    (check,) = check_claims([Claim("Claim about it.", (1,))], SOURCES, Opposite())
    assert check.support == 0.0 and check.weak


def test_check_claims_on_an_empty_abstract(fake_embedder):
    empty = Paper("empty", "Empty", "", "x.txt", 1)
    (check,) = check_claims([Claim("Anything.", (1,))], {1: empty}, fake_embedder)
    assert (check.evidence, check.evidence_start, check.evidence_end) == ("", 0, 0)
    assert check.support == 0.0 and check.weak


# --- citations_from_checks and highlight_spans ------------------------------------------------------------------------


def make_check(marker: int, support: float, claim: str = "c", paper: Paper = FEDSSM, span=(0, 10)) -> ClaimCheck:
    return ClaimCheck(
        claim, marker, paper.paper_id, paper.abstract[span[0] : span[1]], span[0], span[1], support, support < 0.45
    )


def test_citations_follow_first_appearance_and_dedupe():
    checks = [
        make_check(2, 0.30, "weak claim", NRDE),
        make_check(1, 0.90, "strong claim"),
        make_check(2, 0.70, "best claim for 2", NRDE, (10, 30)),
        make_check(1, 0.20, "weak claim for 1"),
        make_check(9, 0.99, "source not given"),
    ]
    citations = citations_from_checks(checks, SOURCES)
    assert [c.marker for c in citations] == [2, 1]
    second, first = citations
    assert (second.paper_id, second.title, second.source, second.ordinal) == ("nrde", "NRDE", "002.txt", 3)
    assert (second.claim, second.support, second.evidence) == ("best claim for 2", 0.70, NRDE.abstract[10:30])
    assert not second.weak  # one of its claims is well supported
    assert (first.claim, first.support, first.weak) == ("strong claim", 0.90, False)


def test_among_equally_supported_claims_the_one_that_answers_the_question_is_the_evidence():
    # An extractive answer quotes three sentences of one paper, each verbatim (support 1.0): the evidence shown
    # is the one with the question's words, not the background it opens with, and the paper's name picks none.
    checks = [make_check(1, 1.0, "FedSSM selects clients for federated learning."),
              make_check(1, 1.0, "FedSSM is evaluated on four multimodal benchmarks.", span=(10, 20)),
              make_check(1, 0.99, "FedSSM reduces communication rounds by over 30%.", span=(20, 30))]
    picked = citations_from_checks(checks, SOURCES, "By how much does FedSSM reduce communication rounds?")
    assert [c.claim for c in picked] == ["FedSSM reduces communication rounds by over 30%."]
    assert citations_from_checks(checks, SOURCES)[0].claim == checks[0].claim  # no question: the first of equals
    weaker = [*checks[:2], make_check(1, 0.8, checks[2].claim, span=(20, 30))]
    # Much less supported: not chosen for its words; of the equals, one that reports a result (asked "by how
    # much"), not the opening.
    assert citations_from_checks(weaker, SOURCES, "By how much does FedSSM reduce communication rounds?")[0].claim \
        == checks[1].claim


def test_asked_for_results_the_evidence_is_a_sentence_that_reports_them():
    # "How well does FedSSM perform?" shares no word with any sentence: the evidence shown was the background it
    # opens with, not "... achieves 2.5-4.5% accuracy improvements".
    checks = [make_check(1, 1.0, "Multimodal federated learning addresses collaborative training across clients."),
              make_check(1, 1.0, "Experiments on four benchmarks show 4.5% accuracy improvements.", span=(10, 20))]
    assert citations_from_checks(checks, SOURCES, "How well does FedSSM perform?")[0].claim == checks[1].claim


def test_citation_is_weak_only_when_every_claim_is():
    citations = citations_from_checks([make_check(1, 0.1, "a"), make_check(1, 0.3, "b")], SOURCES)
    assert [(c.marker, c.claim, c.weak) for c in citations] == [(1, "b", True)]
    assert citations_from_checks([], SOURCES) == []


def test_end_to_end_with_fake_embedder(fake_embedder):
    answer = "FedSSM predicts training dynamics with state space models [1]. NRDE uses a normalizing flow [2][5]."
    text, removed = clean_markers(answer, SOURCES)
    assert removed == 1
    checks = check_claims(split_claims(text), SOURCES, fake_embedder)
    citations = citations_from_checks(checks, SOURCES)
    assert [(c.marker, c.paper_id) for c in citations] == [(1, "fedssm"), (2, "nrde")]
    assert all(c.evidence in sentences_of(SOURCES[c.marker].abstract) for c in citations)


def test_highlight_spans_are_sorted_and_merged():
    checks = [
        make_check(1, 0.9, span=(50, 80)),
        make_check(1, 0.9, span=(0, 20)),
        make_check(1, 0.9, span=(10, 30)),  # overlaps (0, 20)
        make_check(1, 0.9, span=(30, 40)),  # touches (10, 30)
        make_check(1, 0.9, span=(60, 70)),  # inside (50, 80)
        make_check(2, 0.9, paper=NRDE, span=(100, 120)),  # another paper
        make_check(1, 0.0, span=(0, 0)),  # no evidence
    ]
    assert highlight_spans(FEDSSM.abstract, checks, "fedssm") == [(0, 40), (50, 80)]
    assert highlight_spans(NRDE.abstract, checks, "nrde") == [(100, 120)]
    assert highlight_spans(FEDSSM.abstract, checks, "other") == []
    assert highlight_spans("short", checks, "fedssm") == []  # spans past the end are not highlighted


# --- properties -------------------------------------------------------------------------------------------------------

# Text that is mostly marker material, so the properties meet markers, near-markers and nested brackets.
markerish = st.text(alphabet="[]0123456789-\u2013,; \n.Aa-*#", max_size=200)
any_text = st.one_of(st.text(max_size=500), markerish)
valid_sets = st.frozensets(st.integers(0, 60), max_size=8)


@settings(max_examples=200, deadline=None)
@given(any_text)
def test_find_markers_never_raises_and_spans_are_markers(text):
    for marker in find_markers(text):
        assert MARKER.fullmatch(text[marker.start : marker.end])
        assert marker.numbers and len(set(marker.numbers)) == len(marker.numbers)


@settings(max_examples=200, deadline=None)
@given(any_text, valid_sets)
def test_clean_markers_keeps_only_valid_numbers_and_is_idempotent(text, valid):
    cleaned, removed = clean_markers(text, valid)
    assert removed >= 0
    for marker in find_markers(cleaned):
        assert set(marker.numbers) <= valid
    assert clean_markers(cleaned, valid) == (cleaned, 0)
    if not find_markers(text):
        assert (cleaned, removed) == (text, 0)


@settings(max_examples=200, deadline=None)
@given(any_text)
def test_split_claims_never_raises_and_claims_are_clean(text):
    for claim in split_claims(text):
        assert claim.text and claim.text == claim.text.strip()
        assert find_markers(claim.text) == []
        assert len(set(claim.markers)) == len(claim.markers)


# Huge inputs: a random fragment repeated thousands of times.
huge = st.tuples(st.one_of(st.text(min_size=1, max_size=12), markerish.filter(bool)), st.integers(500, 3000)).map(
    lambda pair: (pair[0] * pair[1])[:30_000]
)


@settings(max_examples=15, deadline=None)
@given(huge, valid_sets)
def test_huge_random_strings_never_raise(text, valid):
    find_markers(text)
    cleaned, _ = clean_markers(text, valid)
    assert all(set(m.numbers) <= valid for m in find_markers(cleaned))
    split_claims(text)


@pytest.mark.parametrize(
    "text",
    [
        "Claim [1]. Other [99] claim. " * 5_000,
        "[" * 100_000 + "1" + "]" * 100_000,
        "[1, " * 50_000,
        "[1-999]" * 5_000,
        "- item [2]\n" * 10_000,
        "x" * 500_000,
    ],
)
def test_huge_strings_are_handled_quickly(text):
    started = time.monotonic()
    assert find_markers(text) is not None
    cleaned, _ = clean_markers(text, {1, 2})
    assert all(set(m.numbers) <= {1, 2} for m in find_markers(cleaned))
    split_claims(text)
    # A hang guard, not a speed target: catastrophic regex backtracking on these inputs takes minutes or more,
    # so the bound is wide enough for a loaded machine (speed is for benchmarks).
    assert time.monotonic() - started < 60


# --- calibration with the real model ----------------------------------------------------------------------------------


def bundled_abstract(file: str, index: int) -> str:
    """The ``index``-th (0-based) abstract of a bundled corpus file: a header line, then one per paragraph."""
    paragraphs = [p.strip() for p in (BUNDLED_CORPUS / file).read_text("utf-8").split("\n\n")[1:] if p.strip()]
    return paragraphs[index]


# Per abstract: claims an answer could honestly make from it (paraphrased), and claims about other topics.
CALIBRATION = {
    ("000_dcbf1b5d2daaeff5.txt", 1): (
        [
            "Ill-conditioning can make the parameter dynamics of Dirac-Frenkel residual minimization non-unique.",
            "The method adds a momentum-like history variable only along nullspace directions, following "
            "Onsager's minimum-dissipation principle.",
            "The approach is more robust in singular and near-singular regimes.",
        ],
        [
            "The model generates photorealistic images from text prompts using a diffusion transformer.",
            "Customer churn in telecom can be predicted from call records with gradient boosting.",
            "The benchmark measures how well chatbots answer medical questions.",
        ],
    ),
    ("000_dcbf1b5d2daaeff5.txt", 2): (
        [
            "Sampling the quantum state in variational Monte Carlo can run in half precision without losing accuracy.",
            "The authors bound the error that reduced precision introduces into Metropolis-Hastings sampling.",
            "Mixed-precision arithmetic makes simulations of quantum many-body systems more scalable and energy "
            "efficient.",
        ],
        [
            "A federated learning scheme selects clients using a reputation score.",
            "The paper proposes a new loss for fine-grained image retrieval of fashion products.",
            "Large language models can be jailbroken with role-play prompts.",
        ],
    ),
    ("002_735305cd7294d037.txt", 2): (
        [
            "NRDE estimates the density of clean data with noise isolated to detect anomalies in tabular data.",
            "It uses a Jacobian-regularized normalizing flow to separate sources that generate clean data from "
            "noise sources.",
            "NRDE was compared against 17 baselines on 47 benchmark datasets.",
        ],
        [
            "The agent learns to play Atari games from pixels with a world model.",
            "A speech recognition model is trained on thousands of hours of multilingual audio.",
            "Protein structures are predicted with an equivariant graph network.",
        ],
    ),
    ("002_735305cd7294d037.txt", 4): (
        [
            "RepCore builds representative coresets by aligning the hidden states of different LLMs in a shared "
            "latent space.",
            "Existing coreset methods for cheap LLM evaluation become unstable when only a few source models are "
            "available.",
            "RepCore estimates benchmark performance accurately using as few as ten source models.",
        ],
        [
            "The robot grasps unseen objects using tactile feedback.",
            "A new graph neural network predicts traffic flow in cities.",
            "Wildfire spread is forecast from satellite imagery.",
        ],
    ),
    ("003_8199ee2742a631b5.txt", 4): (
        [
            "The paper proposes an EM algorithm with Polya-Gamma latent variables to jointly estimate item and user "
            "parameters in the Rasch model.",
            "Joint maximum likelihood estimation for item response theory works poorly on small datasets.",
            "The EM-based method outperforms existing approaches on synthetic and real-world data.",
        ],
        [
            "Vision transformers are pruned to speed up inference on mobile phones.",
            "The paper studies adversarial robustness of speech recognition systems.",
            "A reinforcement learning agent controls plasma in a fusion reactor.",
        ],
    ),
    ("004_3065573700565eaa.txt", 1): (
        [
            "Reward-Shaping Control Variates are unbiased off-policy estimators built from potential-based reward "
            "shaping.",
            "Importance sampling and doubly robust estimators have very high variance when rewards are sparse.",
            "Shaping-based off-policy evaluation beats doubly robust estimation in sparse-reward settings.",
        ],
        [
            "Diffusion models are distilled into a single-step image generator.",
            "The paper introduces a dataset of annotated legal contracts.",
            "Knowledge graphs are completed with a new tensor factorisation.",
        ],
    ),
    ("004_3065573700565eaa.txt", 3): (
        [
            "Instead of hand-designed negative sampling, the method approximates the true negative distribution "
            "for graph-based recommendation.",
            "The analysis covers both unbiased observed graphs and graphs with only partially observed positive edges.",
            "The new negative sampling methods reach state-of-the-art results on real-world recommendation datasets.",
        ],
        [
            "Quantum circuits are compiled with fewer gates using reinforcement learning.",
            "A language model is trained to write poetry in the style of famous authors.",
            "Climate models are downscaled with a generative adversarial network.",
        ],
    ),
    ("004_3065573700565eaa.txt", 5): (
        [
            "Model merging is highly vulnerable to backdoor attacks.",
            "LFPM adds an anti-backdoor task vector to the merged model to suppress backdoors while keeping "
            "clean-task accuracy.",
            "LFPM is robust to backdoor attacks under both full fine-tuning and parameter-efficient fine-tuning.",
        ],
        [
            "The method segments tumours in MRI scans with a U-Net.",
            "A new optimizer adapts learning rates per layer for faster convergence.",
            "Autonomous cars detect pedestrians at night with thermal cameras.",
        ],
    ),
}


@pytest.mark.slow
def test_calibrated_threshold_separates_supported_from_unsupported(real_embedder):
    """With all-MiniLM-L6-v2, supported paraphrases score 0.56-0.94 and off-topic claims 0.00-0.37 (WEAK_BELOW=0.45)."""
    sources = {}
    claims, supported = [], []
    for number, ((file, index), (good, bad)) in enumerate(CALIBRATION.items(), start=1):
        sources[number] = Paper(f"{file}#{index + 1}", "", bundled_abstract(file, index), file, index + 1)
        for text in good + bad:
            claims.append(Claim(text, (number,)))
            supported.append(text in good)
    checks = check_claims(claims, sources, real_embedder)
    assert len(checks) == len(claims)
    good_scores = sorted(c.support for c, ok in zip(checks, supported, strict=True) if ok)
    bad_scores = sorted(c.support for c, ok in zip(checks, supported, strict=True) if not ok)
    too_low = [(c.claim, round(c.support, 3)) for c, ok in zip(checks, supported, strict=True) if ok and c.weak]
    too_high = [
        (c.claim, round(c.support, 3)) for c, ok in zip(checks, supported, strict=True) if not ok and not c.weak
    ]
    assert not too_low, f"supported claims flagged weak: {too_low}"
    assert not too_high, f"unsupported claims not flagged: {too_high}"
    # The threshold sits in a real gap, not on the edge of either group.
    assert good_scores[0] - WEAK_BELOW > 0.05 and WEAK_BELOW - bad_scores[-1] > 0.05, (good_scores, bad_scores)
    for c in checks:
        abstract = next(p.abstract for p in sources.values() if p.paper_id == c.paper_id)
        assert c.evidence and c.evidence == abstract[c.evidence_start : c.evidence_end]
