"""Post-hoc attribution: claims re-cited, cited, flagged or dropped, markers rewritten to match."""

from __future__ import annotations

import pytest

from rag.answers.attribution import UNSUPPORTED_TAG, Attributor, invented_terms, shown_text
from tests.conftest import FEDSSM, NRDE

SOURCES = {1: FEDSSM, 2: NRDE}


@pytest.fixture
def attributor(fake_embedder):
    return Attributor(fake_embedder)


def verdict_of(result, needle):
    return next(c for c in result.claims if needle in c.text)


def test_supported_claim_keeps_its_marker_and_text(attributor):
    text = "FedSSM predicts training dynamics with state space models [1]."
    result = attributor.attribute(text, SOURCES)
    assert result.text == text
    (claim,) = result.claims
    assert claim.supported and claim.markers == (1,) and not claim.recited
    assert claim.evidence == "We propose FedSSM, which predicts training dynamics with state space models."
    assert [c.marker for c in result.checks] == [1]


def test_uncited_true_claim_gets_the_source_that_supports_it(attributor):
    result = attributor.attribute("NRDE learns a normalizing flow that separates pure data from noise.", SOURCES)
    assert result.text == "NRDE learns a normalizing flow that separates pure data from noise [2]."
    claim = result.claims[0]
    assert claim.supported and claim.markers == (2,) and claim.paper_id == "nrde"


def test_mis_cited_claim_is_re_cited(attributor):
    text = "- FedSSM: the prediction error yields a surprise signal that sets participation budgets [2]\n- NRDE [2]"
    result = attributor.attribute(text, SOURCES)
    claim = verdict_of(result, "surprise")
    assert claim.recited and claim.cited == (2,) and claim.markers == (1,)
    assert result.text.splitlines()[0] == (
        "- FedSSM: the prediction error yields a surprise signal that sets participation budgets [1]"
    )
    assert claim.verdict == "re-cited"


def test_claim_with_an_invented_name_and_year_is_flagged_not_sourced(attributor):
    text = ("FedSSM predicts training dynamics [1]. "
            "Fed-LangFRA (2025) predicts training dynamics with state space models [1].")
    result = attributor.attribute(text, SOURCES, question="Which papers use state space models?")
    bad = verdict_of(result, "Fed-LangFRA")
    assert not bad.supported and bad.markers == () and set(bad.invented) == {"Fed-LangFRA", "2025"}
    assert bad.verdict == "invented"
    assert "~~Fed-LangFRA (2025) predicts training dynamics with state space models~~ " + UNSUPPORTED_TAG in result.text
    assert "Fed-LangFRA" not in shown_text(result.text)
    assert result.text.startswith("FedSSM predicts training dynamics [1].")


def test_unsupported_claim_loses_its_marker_and_is_struck(attributor):
    text = "FedSSM predicts training dynamics [1]. The weather in Paris is usually sunny in spring [1]."
    result = attributor.attribute(text, SOURCES)
    bad = verdict_of(result, "Paris")
    assert not bad.supported and bad.markers == () and bad.verdict == "unsupported"
    assert "~~The weather in Paris is usually sunny in spring~~ [unsupported]." in result.text
    assert [c.paper_id for c in result.checks] == ["fedssm"]  # no check (so no citation) for the flagged claim


def test_small_writers_unsupported_claims_are_removed(attributor):
    text = (
        "FedSSM predicts training dynamics [1]. The weather in Paris is usually sunny in spring [1].\n"
        "- Fed-LangFRA (2023) is also good [2]\n- NRDE learns a normalizing flow [2]"
    )
    result = attributor.attribute(text, SOURCES, drop_unsupported=True)
    assert result.text == "FedSSM predicts training dynamics [1].\n- NRDE learns a normalizing flow [2]"
    assert all(c.supported for c in result.claims) and len(result.claims) == 2


def test_lead_in_is_not_a_claim(attributor):
    result = attributor.attribute("Two papers qualify:\n- NRDE learns a normalizing flow [2]", SOURCES)
    assert [c.text for c in result.claims] == ["NRDE learns a normalizing flow"]
    assert result.text.startswith("Two papers qualify:\n")


def test_text_without_claims_or_sources_is_unchanged(attributor):
    assert attributor.attribute("", SOURCES).text == ""
    result = attributor.attribute("FedSSM predicts training dynamics.", {})
    assert not result.claims[0].supported


def test_evidence_vectors_are_embedded_once_per_paper(attributor, fake_embedder):
    attributor.attribute("FedSSM predicts training dynamics [1].", SOURCES)
    embedded = fake_embedder.texts_embedded
    attributor.attribute("NRDE learns a normalizing flow [2].", SOURCES)
    assert fake_embedder.texts_embedded == embedded + 1  # only the new claim


@pytest.mark.parametrize(
    ("claim", "expected"),
    [
        ("It is compared with 17 baselines on 47 datasets.", ()),
        ("It is compared with 18 baselines.", ("18",)),
        ("FedSSM (2023) improves accuracy by 12%.", ("2023", "12")),
        ("GPT-4o and Llama-3 were used.", ("GPT-4o", "Llama-3")),
        ("LLMs and RL agents are common.", ()),  # field acronyms are no invented names
        ("FedSSM selects clients.", ()),
    ],
)
def test_invented_terms(claim, expected):
    known = " ".join([FEDSSM.abstract, NRDE.abstract, "FedSSM", "NRDE"]).lower()
    assert invented_terms(claim, known) == expected
