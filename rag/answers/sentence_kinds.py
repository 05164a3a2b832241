"""Kinds of abstract sentences an answer should not quote first: code links and background.

A sentence saying where the code is, or the problem a paper starts from ("X has long relied on ...",
"However, existing methods ..."), answers little: it gives way to what the paper does and finds, unless the
question asks for the code, a link or the problem. Asked for results ("what were its results?", "how well does
X perform?"), a sentence that reports no experiment or finding gives way to those that do.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

# Boilerplate that answers nothing: where the code is, what the paper is.
_BOILERPLATE = re.compile(r"\b(?:code|data|models?|implementation)s? (?:is|are|will be) (?:publicly )?"
                          r"(?:available|released)"
                          r"|https?://|github\.com|\bavailable at\b", re.IGNORECASE)
# Background that answers nothing the question asks: the problem a paper starts from ("X has long relied on
# ...", "However, existing methods ..."), not what it does or finds. A sentence that says what "we" do stays.
_BACKGROUND = re.compile(
    r"^(?:however|yet|unfortunately|despite|although|while|recent(?:ly)?)\b.{0,100}?\b(?:existing|current|prior|"
    r"previous|conventional|traditional|standard|most|many)\b"
    r"|\b(?:has|have) long (?:been|relied)\b"
    r"|\b(?:existing|current|prior|previous|conventional|traditional) (?:\w+ )?(?:methods|approaches|works?|"
    r"techniques|models|systems|solutions|benchmarks)\b"
    r"|\bremains? (?:poorly understood|unclear|challenging|opaque|an open|largely unexplored|underexplored|"
    r"limited|elusive|incomplete|unknown)",
    re.IGNORECASE,
)
_SAYS_WHAT_WE_DO = re.compile(r"\b(?:we|our|this (?:paper|work|study))\b", re.IGNORECASE)
# Questions that do ask for the code, a link or the problem: then those sentences are the answer.
_ASKS_FOR_LINKS = re.compile(r"\b(?:code|github|gitlab|links?|urls?|repositor(?:y|ies)|website|download|"
                             r"open[- ]?source[ds]?|released?|available|availability)\b", re.IGNORECASE)
_ASKS_FOR_PROBLEM = re.compile(r"\b(?:problems?|limitations?|challenges?|motivat\w*|why|gaps?|shortcomings?|"
                               r"drawbacks?|weakness(?:es)?|issues?|bottlenecks?|existing|prior|previous|"
                               r"background|before)\b", re.IGNORECASE)


_ASKS_FOR_RESULTS = re.compile(r"\b(?:results?|perform(?:s|ed|ance)?|how (?:well|good)|findings?|outcomes?|"
                               r"evaluat\w*|experiments?|empirical\w*|does it (?:work|do)|gains?)\b", re.IGNORECASE)
_REPORTS_RESULTS = re.compile(r"\b(?:experiment\w*|evaluat\w*|benchmarks?|datasets?|outperform\w*|achiev\w*|"
                              r"improv\w*|state-of-the-art|demonstrat\w*|show(?:s|n|ed)?|surpass\w*|gains?|"
                              r"reduc\w*|speed-?ups?|faster|accura\w*|results?|empirical\w*|find(?:s|ings)?)\b|\d",
                              re.IGNORECASE)


# A finding set against earlier work ("Experiments on four benchmarks show 3% higher accuracy than prior methods")
# is no background, though it names "prior methods".
_REPORTS_FINDING = re.compile(r"\b(?:outperform\w*|surpass\w*|experiments?|evaluations?)\b|\d+(?:\.\d+)?\s*(?:%|x\b|×)",
                              re.IGNORECASE)


def sentence_penalties(question: str, sentences: Sequence[str], *, links: float, background: float) -> np.ndarray:
    """How much less each sentence is worth as an answer: code links and background (the problem a paper starts
    from) give way to what the paper does and finds, unless the question asks for links or for the problem;
    asked for results, a sentence that reports none weighs as background does."""
    links = 0.0 if _ASKS_FOR_LINKS.search(question) else links
    no_results = background if _ASKS_FOR_RESULTS.search(question) else 0.0
    background = 0.0 if _ASKS_FOR_PROBLEM.search(question) else background
    return np.array([links if _BOILERPLATE.search(s) else
                     background if (_BACKGROUND.search(s) and not _SAYS_WHAT_WE_DO.search(s)
                                    and not _REPORTS_FINDING.search(s)) else
                     no_results if not _REPORTS_RESULTS.search(s) else 0.0
                     for s in sentences], dtype=np.float32)
