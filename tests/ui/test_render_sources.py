"""The sources panel (ui.web.render.sources_html): what each cited paper's card says of the claims citing it."""

from __future__ import annotations

import pytest

from rag.answers.citations import ClaimCheck
from rag.types import Answer, Citation, Hit

ABSTRACT = "We propose FedSSM for client selection. Experiments on four multimodal benchmarks show gains."


@pytest.mark.parametrize("not_stated, badge", [(True, "not stated"), (False, "supported 0.90")])
def test_a_nearest_paper_cited_for_a_detail_it_does_not_state_is_not_called_supported(not_stated, badge):
    from ui.web.render import sources_html

    hit = Hit(1, "f#1", "FedSSM", 0.5, "f.txt", 1, ABSTRACT, abstract=ABSTRACT)
    evidence = "We propose FedSSM for client selection."
    claim = "nearest paper; its abstract names no benchmarks" if not_stated else "FedSSM selects clients."
    support = 0.0 if not_stated else 0.9
    answer = Answer(question="q", answer="...", sources=[hit], not_stated=not_stated, refused=not_stated,
                    citations=[Citation(1, "f#1", "FedSSM", "f.txt", 1, evidence=evidence, support=support,
                                        claim=claim)],
                    checks=[ClaimCheck(claim, 1, "f#1", evidence, 0, len(evidence), support, False)])
    panel = sources_html(answer)
    assert badge in panel
    assert "supported 0.00" not in panel
    assert ("Abstract (its closest sentence highlighted)" in panel) is not_stated


@pytest.mark.parametrize("about_paperchat", [True, False])
def test_a_reply_about_paperchat_says_why_it_has_no_sources(about_paperchat):
    from ui.web.render import answer_markdown, sources_html

    answer = Answer(question="hello", answer="I answer questions about the 3 paper abstracts in this index.",
                    about_paperchat=about_paperchat, backend="paperchat")
    panel = sources_html(answer)
    assert ("this reply is about using paperchat" in panel) is about_paperchat
    assert ("No papers in the index are close" in panel) is not about_paperchat
    # and no "not grounded" warning under a greeting's reply: it claims nothing about a paper
    assert ("not grounded" in answer_markdown(answer)) is not about_paperchat


def test_a_notice_shows_its_text_as_written_not_as_markdown():
    from ui.web.render import plain_markdown

    # The filter box's example, "author~Bengio", was struck through by the "~" of the example before it.
    said = plain_markdown("unknown filter 'foo bar'; use FIELD OP VALUE (~: contains), e.g. author~Bengio *or* a_b")
    assert "\\~" in said and "\\*or\\*" in said and "a\\_b" in said and "<" not in plain_markdown("<b>")


def test_a_stop_before_any_word_says_so_once():
    from ui.web.render import interrupted_markdown

    assert interrupted_markdown("", "Stopped") == "*⚠ Stopped before anything was written.*"
    assert interrupted_markdown("FedSSM selects", "Stopped").endswith("*⚠ Stopped: the answer is partial.*")
