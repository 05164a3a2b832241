"""Sentence-aware chunking that keeps every chunk inside the embedding model's window.

A chunk is always a verbatim slice ``abstract[start:end]``, so nothing is rewritten and a reader can
find it in the abstract. Chunks follow sentence boundaries; a long abstract is cut into chunks that
repeat the last ``overlap`` sentences of the previous chunk, so a claim that spans a boundary is still
embedded whole somewhere. A sentence longer than the window is cut at word (or, failing that,
character) boundaries.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rag.token_spans import SpanCounter
from rag.types import Chunk, Paper

# Bumped whenever chunk boundaries change for the same settings: the index records it.
CHUNKER_VERSION = 1

# Abbreviations after which a period does not end a sentence.
_ABBREVIATIONS = {
    "e.g", "i.e", "et al", "al", "vs", "cf", "fig", "figs", "eq", "eqs", "sec", "no", "approx", "resp", "etc",
    "dr", "mr", "ms", "prof", "st", "ref", "refs", "tab", "ca", "viz",
}
# A sentence ends at . ! or ? (optionally followed by closing quotes/brackets) and whitespace.
_BOUNDARY = re.compile(r"(?<=[.!?])[\"')\]]*\s+")


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Spans ``(start, end)`` of the sentences of ``text``; together they cover all of it but whitespace."""
    spans: list[tuple[int, int]] = []
    start = _skip_space(text, 0)
    for match in _BOUNDARY.finditer(text):
        end = match.start()
        # Keep the closing quote/bracket with the sentence that it closes.
        end += len(match.group(0)) - len(match.group(0).lstrip("\"')]"))
        # Only the tail matters, and slicing the whole growing sentence would be quadratic.
        if end <= start or _ends_with_abbreviation(text[max(start, end - 40) : end]):
            continue
        following = text[match.end() : match.end() + 1]
        if following and following.islower():
            continue  # "approx. ten" or a lower-case continuation: not a new sentence
        spans.append((start, end))
        start = _skip_space(text, match.end())
    if start < len(text.rstrip()):
        spans.append((start, len(text.rstrip())))
    return spans


def first_sentence(text: str) -> str:
    """The first sentence of ``text`` (its first 300 characters when it has no sentence): a paper's own words
    quoted as evidence where a claim is about the paper, not about a sentence of it."""
    spans = split_sentences(text)
    return text[spans[0][0]:spans[0][1]] if spans else text[:300]


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _ends_with_abbreviation(sentence: str) -> bool:
    words = sentence[:-1].rsplit(None, 1)
    if not words:
        return False
    last = words[-1].lower().lstrip("(\"'[")
    if last in _ABBREVIATIONS or sentence.lower().endswith("et al."):
        return True
    # Single letters and decimals ("A. Smith", "3.") rarely end a sentence in an abstract.
    return len(last) == 1 and last.isalpha()


@dataclass(frozen=True)
class Chunker:
    """Cuts abstracts into chunks of at most ``max_tokens`` as counted by ``count_tokens``.

    ``token_starts`` (optional, the embedder's): where the word pieces of a text start, or None, which lets
    one tokenisation of an abstract count the tokens of its spans (rag.token_spans); the
    chunks are the same with it or without it, only cheaper to find.
    """

    count_tokens: Callable[[str], int]
    max_tokens: int
    overlap_sentences: int = 1
    token_starts: Callable[[str], tuple[Sequence[int], int] | None] | None = None

    def chunk(self, paper: Paper) -> list[Chunk]:
        text = paper.abstract
        if not text.strip():
            return []
        count = SpanCounter(text, self.count_tokens, self.token_starts(text) if self.token_starts else None)
        if count(0, len(text)) <= self.max_tokens:
            end = len(text.rstrip())
            start = _skip_space(text, 0)
            return [Chunk(paper.paper_id, 0, text[start:end], start, end)]
        pieces = [piece for span in split_sentences(text) for piece in self._fit(count, *span)]
        return [
            Chunk(paper.paper_id, index, text[start:end], start, end)
            for index, (start, end) in enumerate(self._group(count, pieces))
        ]

    def _fits(self, count: SpanCounter, start: int, end: int) -> bool:
        return count(start, end) <= self.max_tokens

    def _group(self, count: SpanCounter, pieces: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Greedily pack consecutive pieces into windows; each new window restarts ``overlap`` pieces back."""
        windows: list[tuple[int, int]] = []
        first = 0
        while first < len(pieces):
            last = first
            while last + 1 < len(pieces) and self._fits(count, pieces[first][0], pieces[last + 1][1]):
                last += 1
            windows.append((pieces[first][0], pieces[last][1]))
            if last + 1 >= len(pieces):
                break
            # Overlap, but always move forward by at least one piece.
            first = max(first + 1, last + 1 - self.overlap_sentences)
            # The overlapped pieces plus the next one must fit; otherwise drop overlap.
            if not self._fits(count, pieces[first][0], pieces[last + 1][1]):
                first = last + 1
        return windows

    def _fit(self, count: SpanCounter, start: int, end: int) -> list[tuple[int, int]]:
        """Split one sentence span into spans that each fit the window (words first, then characters)."""
        if self._fits(count, start, end):
            return [(start, end)]
        words = [(m.start() + start, m.end() + start) for m in re.finditer(r"\S+", count.text[start:end])]
        if len(words) > 1:
            return self._pack(count, words)
        return self._pack(count, [(i, i + 1) for i in range(start, end)])

    def _pack(self, count: SpanCounter, units: list[tuple[int, int]]) -> list[tuple[int, int]]:
        spans: list[tuple[int, int]] = []
        first = 0
        while first < len(units):
            last = first
            # Exponential then binary search: counting tokens of every prefix would be quadratic.
            step = 1
            while last + step < len(units) and self._fits(count, units[first][0], units[last + step][1]):
                last += step
                step *= 2
            while step > 1:
                step //= 2
                if last + step < len(units) and self._fits(count, units[first][0], units[last + step][1]):
                    last += step
            if len(units[first : last + 1]) == 1 and not self._fits(count, *units[first]):
                # A single unit that cannot fit (one huge "word"): split it by characters.
                if units[first][1] - units[first][0] > 1:
                    spans.extend(self._pack(count, [(i, i + 1) for i in range(*units[first])]))
                else:
                    spans.append(units[first])
            else:
                spans.append((units[first][0], units[last][1]))
            first = last + 1
        return spans
