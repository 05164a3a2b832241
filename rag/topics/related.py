"""The papers nearest to a paper, by the cosine similarity of their profile vectors, each with what it
shares with the paper: the rarest words both abstracts use, and whether it is in the same topic."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rag.errors import QueryError
from rag.topics.model import TopicMap, unit_rows
from rag.topics.terms import WordCounter, shared_terms
from rag.types import Paper

SHARED_TERMS = 4
HOW_TO_FIND_IDS = "`paperchat search QUESTION --json` prints each paper's paper_id"


@dataclass(frozen=True)
class RelatedPaper:
    paper: Paper
    similarity: float  # cosine similarity of the two profile vectors
    shared: tuple[str, ...]  # words both abstracts use, the rarer in the corpus first
    same_topic: bool

    @property
    def shares(self) -> str:
        """One line on what the two papers share."""
        parts = ["same topic" if self.same_topic else "another topic"]
        if self.shared:
            parts.append("shared words: " + ", ".join(self.shared))
        return f"similarity {self.similarity:.2f}; " + "; ".join(parts)

    def to_dict(self) -> dict:
        p = self.paper
        return {"paper_id": p.paper_id, "title": p.title, "source": p.source, "ordinal": p.ordinal,
                "similarity": round(self.similarity, 4), "shared_terms": list(self.shared),
                "same_topic": self.same_topic, "shares": self.shares}


def related_papers(paper_id: str, papers: Sequence[Paper], vectors, topic_map: TopicMap, k: int,
                   words: WordCounter | None = None) -> list[RelatedPaper]:
    """The ``k`` papers nearest to ``paper_id`` (``vectors``: the index's vector table). Raises ``QueryError``
    for an id the index does not hold."""
    rows = vectors.paper_rows
    by_id = {p.paper_id: p for p in papers if p.paper_id in rows}
    if paper_id not in by_id:
        raise QueryError(f"no paper with id {paper_id!r} in the index; {HOW_TO_FIND_IDS}")
    others = [pid for pid in sorted(by_id) if pid != paper_id]
    if not others or k < 1:
        return []
    profiles = np.asarray(vectors.profiles)
    target = unit_rows(profiles[[rows[paper_id]]])[0]
    similarity = unit_rows(profiles[[rows[pid] for pid in others]]) @ target
    # Ties by id: the same index always lists the same papers.
    nearest = sorted(range(len(others)), key=lambda i: (-similarity[i], others[i]))[:k]
    chosen = [by_id[others[i]] for i in nearest]
    vocabulary = (words or WordCounter()).count([by_id[paper_id].abstract, *(p.abstract for p in chosen)])
    topic = topic_map.paper_topic.get(paper_id)
    return [
        RelatedPaper(paper, float(similarity[i]), tuple(shared_terms(vocabulary, 0, n, topic_map.idf, SHARED_TERMS)),
                     topic is not None and topic_map.paper_topic.get(paper.paper_id) == topic)
        for n, (i, paper) in enumerate(zip(nearest, chosen, strict=True), start=1)
    ]
