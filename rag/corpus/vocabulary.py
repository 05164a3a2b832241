"""The corpus's own words, as its abstracts spell them: what a typo in a question is put right to
(rag/answers/spelling.py)."""

from __future__ import annotations

import re
from collections.abc import Iterable

WORD = re.compile(r"\b[A-Za-z][A-Za-z-]*[A-Za-z]\b")

Vocabulary = dict[str, tuple[int, str]]  # lowercased word -> (how often it is used, its most common spelling)


def vocabulary_of(texts: Iterable[str]) -> Vocabulary:
    """Every word of ``texts`` (titles and abstracts), lowercased, with its count and most common spelling."""
    counts: dict[str, dict[str, int]] = {}
    for text in texts:
        for word in WORD.findall(text or ""):
            spellings = counts.setdefault(word.lower(), {})
            spellings[word] = spellings.get(word, 0) + 1
    return {lower: (sum(s.values()), max(s, key=lambda w: (s[w], w))) for lower, s in counts.items()}
