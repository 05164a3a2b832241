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
                               r"evaluat\w*|experiments?|empirical\w*|does it (?:work|do)|gains?|"
                               # "how much did it improve on LIBERO?", "by how much does it beat X?"
                               r"how much\b.{0,60}?\b(?:improv\w*|better|faster|gain\w*|reduc\w*|beat\w*|"
                               r"speed\w*|help\w*|outperform\w*|cut\w*|save\w*))\b", re.IGNORECASE)
_REPORTS_RESULTS = re.compile(r"\b(?:experiment\w*|evaluat\w*|benchmarks?|datasets?|outperform\w*|achiev\w*|"
                              r"improv\w*|state-of-the-art|demonstrat\w*|show(?:s|n|ed)?|surpass\w*|gains?|"
                              r"reduc\w*|speed-?ups?|faster|accura\w*|results?|empirical\w*|find(?:s|ings)?)\b|"
                              r"\d(?!\d*\))",  # a figure, not the "(3)" that numbers a contribution
                              re.IGNORECASE)
# Asked what a paper found or where it was tested ("What did X evaluate on?", "How was X evaluated?", "Which
# datasets ...?", "what were its results?"): the answer leads with the sentence that says it. Not a question that
# merely uses such a word ("a full benchmark is too expensive, so I want ...", "pass/fail results from ...").
_ASKS_WHAT_IT_FOUND = re.compile(
    r"\b(?:what|which|how many)\s+(?:[\w'-]+\s+){0,3}?(?:results?|findings?|outcomes?|benchmarks?|datasets?|tasks|"
    r"baselines|metrics|experiments?|improvements?|gains?|accuracy|performance|speed-?ups?)\b"
    r"|\bhow\s+(?:well|good|much better|(?:does|did|do)\s.{0,40}?\bperform|(?:was|were|is|are)\s.{0,40}?\b"
    r"(?:evaluated|tested|validated|benchmarked))\b"
    r"|\b(?:evaluat(?:e|ed|ing)|test(?:ed)?|benchmark(?:ed)?|validat(?:e|ed)|experiment(?:s|ed)?)\s+(?:it\s+|them\s+)?"
    r"(?:on|against|across)\b"
    r"|\bwhat\s+(?:did|does|do)\s.{0,40}?\b(?:find|show|achieve|report)\b"
    r"|\bhow much\b.{0,60}?\b(?:improv\w*|better|faster|gain\w*|reduc\w*|beat\w*|speed\w*|help\w*|"
    r"outperform\w*|cut\w*|save\w*)\b",
    re.IGNORECASE)
# A sentence that leans on the one before it ("To address this, ...", "Using these subsets, ...", "Furthermore,
# ...") cannot open an answer: out of its place it points at nothing.
_LEANS_ON_PREVIOUS = re.compile(
    r"^\W*(?:this|these|those|such|it|its|they|their|there|furthermore|moreover|additionally|also|in addition|"
    r"further|then|thus|hence|therefore|consequently|as a result|however|yet|instead|finally|"
    r"(?:to|we)\s+(?:address|tackle|solve|overcome|mitigate|fill)\s+(?:this|these|that|them|it)|to this end|"
    r"(?:using|with|given|building on|based on|through)\s+(?:this|these|that|those|such|it|them))\b",
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


def asks_for_findings(question: str) -> bool:
    """Does the question ask what a paper found or where it was tested? Its answer then leads with a finding."""
    return bool(_ASKS_WHAT_IT_FOUND.search(question))


def reads_alone(sentence: str) -> bool:
    """Can this sentence open an answer: it does not lean on the one before it ("To address this, ...")?"""
    return not _LEANS_ON_PREVIOUS.search(sentence)


def can_lead_with_finding(sentence: str) -> bool:
    """Can this sentence open an answer about what a paper found: it reports a finding and reads on its own?"""
    return bool(_REPORTS_RESULTS.search(sentence)) and reads_alone(sentence)
