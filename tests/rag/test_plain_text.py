"""Text as people read it (rag/plain_text.py): markup of abstracts left out for display, words never lost."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag.plain_text import readable
from tests.conftest import BUNDLED_CORPUS


@pytest.mark.parametrize(("raw", "shown"), [
    (r"\textsc{RepCore} improves", "RepCore improves"),
    (r"We propose $\texttt{(CTDG-SSM)}$.", "We propose (CTDG-SSM)."),
    (r"Q\&A with 95.95\% accuracy", "Q&A with 95.95% accuracy"),
    (r"a Pearson correlation of 0.910$\pm$0.008", "a Pearson correlation of 0.910±0.008"),
    ("**consensus** and __MA-RAG__", "consensus and MA-RAG"),
    (r"a model's {\em behavioral robustness}", "a model's behavioral robustness"),
    (r"pipelined $\text{ASR}\rightarrow\text{LLM}\rightarrow\text{tools}$", "pipelined ASR→LLM→tools"),
    (r"with $17$ baselines on $47$ datasets", "with 17 baselines on 47 datasets"),
    (r"$100\mathrm{k}+$ GPUs", "100k+ GPUs"),
    (r"$O(n^{2})$ time and $\epsilon$-DP", "O(n^2) time and ε-DP"),
    (r"dense in C(M) on compact M$\subset\mathbb R^N$", "dense in C(M) on compact M⊂R^N"),
    (r"overhead of only $2\sim3\times$", "overhead of only 2~3×"),  # not "2 3×": a "~" before a digit is no tie
    (r"about $\sim$5\% and see Fig.~3", "about ~5% and see Fig. 3"),
    (r"We propose $\textit{Spherical $\mathrm{SO}(3)$-Equivariant Local Attention}$ (SoLA)",
     "We propose Spherical SO(3)-Equivariant Local Attention (SoLA)"),  # math inside math
])
def test_markup_is_left_out(raw, shown):
    assert readable(raw) == shown


@pytest.mark.parametrize("text", [
    "costs $5-$10 per run", "snake_case_name and file_name.txt", "2 * 3 * 4", "Plain text, nothing to do.",
    "a lone $ sign", "C++ and C#",
])
def test_text_without_markup_is_unchanged(text):
    assert readable(text) == text


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200))
def test_never_fails_and_keeps_every_letter_run_of_plain_words(text):
    shown = readable(text)
    assert isinstance(shown, str)
    plain_words = {w for w in re.findall(r"(?<![\\\w])[A-Za-z]{4,}(?!\w)", text) if "\\" not in text}
    assert all(w in shown for w in plain_words)


def test_no_command_is_left_in_the_bundled_abstracts():
    left = []
    for path in sorted(BUNDLED_CORPUS.glob("*.txt")):
        for abstract in path.read_text("utf-8").split("\n\n")[1:]:
            shown = readable(abstract)
            left += re.findall(r"\\[A-Za-z]+|\$", shown)  # nested math too ($\textit{... $\mathrm{SO}(3)$ ...}$)
    assert left == []


@pytest.mark.parametrize("text, shown", [
    ("MA-RAG extends the *self-consistency* principle", "MA-RAG extends the self-consistency principle"),
    ("a ***M***FM for multim***o***dal learning", "a MFM for multimodal learning"),
    ("significant at p < 0.05* and 0.01**", "significant at p < 0.05* and 0.01**"),  # footnote marks stay
    ("two stars * apart *", "two stars * apart *"),
])
def test_single_star_emphasis_is_dropped_as_bold_is(text, shown):
    assert readable(text) == shown
