"""Typos in what a question is about, put right from the corpus's own words: "federated lerning" searched and
checked as typed found no abstract that uses 'lerning' and was refused; "summarize Caracl" named no paper.

A word is changed only when it is no word of the corpus and no English word (pyspellchecker's dictionary, shipped
inside its wheel) and one edit (a letter dropped, added, changed or two swapped) makes it a word the abstracts
use: "lawyer" stays (an English word, though one letter from "layer"), "GPTQ" stays (an acronym), "watermarking"
stays (no corpus word is one edit away).
"""

from __future__ import annotations

import re
from functools import cache
from string import ascii_lowercase

from rag.corpus.vocabulary import WORD, Vocabulary

MIN_LETTERS = 5  # shorter words have too many neighbours one edit away ("cars": "card", "cats", "bars")


@cache
def _english():
    from spellchecker import SpellChecker  # its dictionary loads in ~0.2 s: once, when first needed

    return SpellChecker(distance=1)


def is_english(word: str) -> bool:
    """Is ``word`` (or every part of a hyphenated one) an English word?"""
    parts = [p for p in word.lower().split("-") if p]
    return bool(parts) and not _english().unknown(parts)


def one_edit_away(word: str) -> set[str]:
    """Every string one deletion, transposition, replacement or insertion away from ``word``."""
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    deletes = {a + b[1:] for a, b in splits if b}
    swaps = {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    replaces = {a + c + b[1:] for a, b in splits if b for c in ascii_lowercase}
    inserts = {a + c + b for a, b in splits for c in ascii_lowercase}
    return deletes | swaps | replaces | inserts


def corrected(word: str, vocabulary: Vocabulary) -> str | None:
    """The corpus word ``word`` is a typo of (as the abstracts write it), or None. ``vocabulary``: lowercased word
    -> (how often the abstracts use it, its most common spelling there)."""
    lower = word.lower()
    if len(lower) < MIN_LETTERS or word.isupper() or _a_form_of(lower, vocabulary) or is_english(lower):
        return None
    near = [w for w in one_edit_away(lower) if len(w) >= MIN_LETTERS and w in vocabulary]
    if not near:
        return None
    best = max(near, key=lambda w: (vocabulary[w][0], w))
    spelling = vocabulary[best][1]
    if spelling[1:].islower():  # a plain word ("Reinforcement" opening a sentence): as typed
        return (spelling[0].upper() if word[0].isupper() else spelling[0].lower()) + spelling[1:]
    return spelling  # a name as its paper writes it ("FedSSM", "Fed-Kalter")


_SUFFIXES = ("s", "es", "ed", "d", "ing", "er", "ers", "ion", "ions", "al", "ly")


def _a_form_of(lower: str, vocabulary: Vocabulary) -> bool:
    """Is ``lower`` a corpus word, or another form of one ("codec" where the abstracts say "codecs")?"""
    if lower in vocabulary or any(lower + s in vocabulary for s in _SUFFIXES):
        return True
    return any(lower.endswith(s) and len(lower) - len(s) >= MIN_LETTERS - 1 and lower[: -len(s)] in vocabulary
               for s in _SUFFIXES)


def typos_fixed(question: str, vocabulary: Vocabulary | None) -> str:
    """``question`` with each typo of a corpus word put right (``corrected``); as typed without a vocabulary."""
    if not vocabulary:
        return question

    def fix(match: re.Match[str]) -> str:
        return corrected(match.group(0), vocabulary) or match.group(0)

    return WORD.sub(fix, question)
