"""Evidence for a claim in an abstract: the candidate spans, their support, and the bar below which it is weak.

A claim's evidence in a source is the span of its abstract (a sentence, or two adjacent sentences) most
similar to the claim, a verbatim slice with its offsets; that similarity (0..1) is the source's support.
``check_claims`` does it for each (claim, cited source) pair; ``rag.answers.attribution`` does it for
every source and rewrites the markers.

A support below ``WEAK_BELOW`` marks a claim as weakly supported. The default was calibrated on
all-MiniLM-L6-v2 with paraphrased supported claims and off-topic claims about bundled abstracts: see
``test_calibrated_threshold_separates_supported_from_unsupported`` in tests/rag/test_citations.py.
"""

from __future__ import annotations

import numpy as np

from rag.answers.citations import Claim, ClaimCheck
from rag.corpus.chunking import split_sentences
from rag.embedding.models import Embedder
from rag.types import Paper

# Supports below this are weak. Calibrated with all-MiniLM-L6-v2 (see the module docstring).
WEAK_BELOW = 0.45


def evidence_spans(abstract: str) -> list[tuple[int, int]]:
    """Candidate evidence: each sentence of ``abstract`` and each pair of adjacent sentences."""
    sentences = split_sentences(abstract)
    pairs = [(a[0], b[1]) for a, b in zip(sentences, sentences[1:], strict=False)]
    return sentences + pairs


def check_claims(
    claims: list[Claim], sources: dict[int, Paper], embedder: Embedder, *, weak_below: float = WEAK_BELOW
) -> list[ClaimCheck]:
    """Check every (claim, cited source) pair whose marker is in ``sources``, in claim then marker order.

    Uses at most two ``embed`` calls: one for the claims, one for the candidate evidence of every cited
    abstract (each abstract once, however many claims cite it).
    """
    pairs = [(claim, n) for claim in claims for n in dict.fromkeys(claim.markers) if n in sources]
    if not pairs:
        return []
    claim_texts = list(dict.fromkeys(claim.text for claim, _ in pairs))
    papers = {sources[n].paper_id: sources[n] for _, n in pairs}
    spans = {paper_id: evidence_spans(paper.abstract) for paper_id, paper in papers.items()}
    candidates = [paper.abstract[s:e] for paper_id, paper in papers.items() for s, e in spans[paper_id]]

    claim_vectors = unit_rows(embedder.embed(claim_texts))
    claim_row = {text: row for row, text in enumerate(claim_texts)}
    sentence_vectors = unit_rows(embedder.embed(candidates)) if candidates else np.zeros((0, claim_vectors.shape[1]))
    rows: dict[str, np.ndarray] = {}
    first = 0
    for paper_id in papers:
        rows[paper_id] = sentence_vectors[first : first + len(spans[paper_id])]
        first += len(spans[paper_id])

    checks = []
    for claim, number in pairs:
        paper = sources[number]
        evidence, start, end, support = "", 0, 0, 0.0
        if len(spans[paper.paper_id]):
            similarities = rows[paper.paper_id] @ claim_vectors[claim_row[claim.text]]
            best = int(np.argmax(similarities))
            start, end = spans[paper.paper_id][best]
            evidence = paper.abstract[start:end]
            support = float(np.clip(similarities[best], 0.0, 1.0))
        checks.append(
            ClaimCheck(claim.text, number, paper.paper_id, evidence, start, end, support, support < weak_below)
        )
    return checks


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Each row scaled to unit length (a zero row stays zero), so that dot products are cosines."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)
