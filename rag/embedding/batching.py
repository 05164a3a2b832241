"""Embedding many texts at once with little waste: each distinct text once, the longest first.

A batch runs at the length of its longest text (the rest is padding), so texts of similar length are
embedded together; a text that occurs twice (a paper's whole text that is also its only chunk, a title
repeated across papers) is embedded once. Rows come back in the order of the texts given.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rag.embedding.models import Embedder


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
