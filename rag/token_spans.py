"""Counting the word pieces of many spans of one text with a single tokenisation.

The chunker asks how many tokens ``text[start:end]`` has for many spans of the same abstract (each
sentence, then growing runs of sentences): tokenising every span again costs most of a chunking. For a
BERT-style tokenizer (``BertNormalizer`` or none, ``BertPreTokenizer``, ``WordPiece``) a word never
continues across whitespace, so the pieces of a span whose two ends touch whitespace (or the text's ends)
are exactly the pieces of the whole text that start inside it. ``token_starts`` gives where those
pieces start; ``SpanCounter`` counts with them where that holds, and tokenises the span itself
everywhere else (a cut inside a word). Other tokenizers (byte-level BPE, SentencePiece) mark word
starts, so they always take the exact path: ``token_starts`` returns None for them.
"""

from __future__ import annotations

import json
import unicodedata
from bisect import bisect_left
from collections.abc import Callable, Sequence


def splits_at_whitespace(tokenizer) -> bool:
    """Whether ``tokenizer`` (a ``tokenizers.Tokenizer``) tokenises whitespace-separated words independently."""
    try:
        spec = json.loads(tokenizer.to_str())
    except (AttributeError, ValueError):
        return False
    normalizer = (spec.get("normalizer") or {}).get("type")
    pre_tokenizer = (spec.get("pre_tokenizer") or {}).get("type")
    model = (spec.get("model") or {}).get("type")
    return normalizer in (None, "BertNormalizer") and pre_tokenizer == "BertPreTokenizer" and model == "WordPiece"


def token_starts(tokenizer, text: str) -> tuple[list[int], int]:
    """(start offset of each word piece of ``text``, in order; how many special tokens are added)."""
    encoding = tokenizer.encode(text)
    starts, specials = [], 0
    for (start, _end), special in zip(encoding.offsets, encoding.special_tokens_mask, strict=True):
        if special:
            specials += 1
        else:
            starts.append(start)
    return starts, specials


def _is_bert_space(char: str) -> bool:
    # BertNormalizer's whitespace: these four and the Zs category (Python's isspace() also takes \x1c-\x1f,
    # which BERT drops as control characters: the word goes on across them).
    return char in " \t\n\r" or unicodedata.category(char) == "Zs"


class SpanCounter:
    """``count(start, end)``: tokens of ``text[start:end]`` (special tokens included), as ``count_tokens``
    gives them, with one tokenisation of ``text`` when ``starts`` (``token_starts``) is given."""

    def __init__(self, text: str, count_tokens: Callable[[str], int],
                 starts: tuple[Sequence[int], int] | None = None) -> None:
        self.text = text
        self._count_tokens = count_tokens
        self._starts = starts

    def _clean(self, at: int) -> bool:
        text = self.text
        return at <= 0 or at >= len(text) or _is_bert_space(text[at - 1]) or _is_bert_space(text[at])

    def __call__(self, start: int, end: int) -> int:
        if self._starts is not None and self._clean(start) and self._clean(end):
            offsets, specials = self._starts
            return bisect_left(offsets, end) - bisect_left(offsets, start) + specials
        return self._count_tokens(self.text[start:end])
