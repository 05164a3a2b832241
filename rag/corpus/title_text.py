"""Text clean-up and word lists shared by the title finder (rag.corpus.titles) and its fallback phrase
(rag.corpus.title_phrase): LaTeX and Markdown markup dropped so names read plainly, sentence ends,
token trimming, and the small function-word sets both use.
"""

from __future__ import annotations

import re

# ``\textbf{X}``, ``\emph{X}``, ``\mathrm{X}``...: keep X (applied repeatedly for nesting).
_LATEX_ARG = re.compile(r"\\[A-Za-z]+\s*\{([^{}]*)\}")
# ``{\em X}`` and ``{\bf X}``.
_LATEX_GROUP = re.compile(r"\{\\[A-Za-z]+\s+([^{}]*)\}")
_LATEX_CMD = re.compile(r"\\([A-Za-z]+)")
_LATEX_ESCAPE = re.compile(r"\\([%&#$_{}])")
# Markdown emphasis and code marks, quotes: dropped, the words stay.
_MARKS = re.compile(r"[*`$^{}\"“”„‘’]+")
_UNDERSCORE_EMPHASIS = re.compile(r"(?<![A-Za-z0-9])_+|_+(?![A-Za-z0-9])")
# On cleaned text (single spaces): the punctuation that ends a sentence.
SENTENCE_END = re.compile(r"[.!?] (?=[A-Z0-9\"'(])")
_TOKEN_TRIM = ".,;:!?()[]'\"“”‘’"


def word_set(text: str) -> frozenset[str]:
    return frozenset(text.split())


ARTICLES = word_set("the a an")
PREPOSITIONS = word_set(
    "for in on of to with from via across under over between against into by at through within without "
    "towards toward beyond about among during upon"
)
AUXILIARIES = word_set("is are was were has have had can could may might will would should must")


def clean_markup(text: str) -> str:
    """Drop LaTeX and Markdown markup so ``\\textbf{Fed-Kalter}`` and ``**MA-RAG**`` read as plain names."""
    text = _LATEX_ESCAPE.sub(r"\1", text)
    for _ in range(5):
        new = _LATEX_GROUP.sub(r"\1", _LATEX_ARG.sub(r"\1", text))
        if new == text:
            break
        text = new
    text = _LATEX_CMD.sub(r"\1", text)
    text = _MARKS.sub("", text.replace("''", ""))
    if "_" in text:
        text = _UNDERSCORE_EMPHASIS.sub("", text)
    for dash in ("---", "--", "–"):
        text = text.replace(dash, "—")
    return " ".join(text.replace("—", " — ").split())


def capitalise(phrase: str) -> str:
    return phrase[:1].upper() + phrase[1:] if phrase else phrase


def trim_token(token: str) -> str:
    return token.strip(_TOKEN_TRIM)
