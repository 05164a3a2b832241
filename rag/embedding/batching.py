"""Embedding many texts at once with little waste: each distinct text once, the longest first.

A batch runs at the length of its longest text (the rest is padding), so texts of similar length are
embedded together (``length_batches`` says where to cut); a text that occurs twice (a paper's whole text
that is also its only chunk, a title repeated across papers) is embedded once. Rows come back in the
order of the texts given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from rag.embedding.models import Embedder

# What one more batch costs beyond its tokens, counted in tokens: a model call's fixed cost (a few
# milliseconds on CPU) at the speed of a full batch (bench/results/report.md, section 2).
BATCH_OVERHEAD_TOKENS = 64


def length_batches(lengths: Sequence[int], max_rows: int,
                   overhead: int = BATCH_OVERHEAD_TOKENS) -> list[tuple[int, int]]:
    """Cut texts of these token ``lengths``, longest first, into batches ``(start, end)`` of at most
    ``max_rows`` that cost the least: a batch costs its rows times its longest text (padding included)
    plus ``overhead``. A few hundred texts of mixed lengths (an ingest's window) are then about as cheap
    to embed as the same texts within a whole corpus sorted by length."""
    n = len(lengths)
    max_rows = max(1, max_rows)
    best = [0] + [0] * n
    cut = [0] * (n + 1)
    for end in range(1, n + 1):
        cost, at = None, 0
        for start in range(max(0, end - max_rows), end):
            c = best[start] + lengths[start] * (end - start) + overhead
            if cost is None or c < cost:
                cost, at = c, start
        best[end], cut[end] = cost, at
    batches, end = [], n
    while end > 0:
        batches.append((cut[end], end))
        end = cut[end]
    return batches[::-1]


def embed_distinct_by_length(embedder: Embedder, texts: Sequence[str]) -> tuple[np.ndarray, int]:
    """(one vector per text, in ``texts``' order; how many distinct texts were embedded)."""
    slot: dict[str, int] = {}
    rows = np.fromiter((slot.setdefault(t, len(slot)) for t in texts), dtype=np.int64, count=len(texts))
    distinct = list(slot)
    longest_first = sorted(range(len(distinct)), key=lambda i: -len(distinct[i]))
    vectors = np.asarray(embedder.embed([distinct[i] for i in longest_first]), dtype=np.float32)
    by_slot = np.empty_like(vectors)
    by_slot[longest_first] = vectors
    return by_slot[rows], len(distinct)
