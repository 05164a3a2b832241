"""Topics: the papers clustered on their profile vectors, each cluster labelled and its papers ordered.

How, and why:

- Vectors: each paper's profile vector (store/vectors.py; the chunks' centroid mixed with the whole text's
  and the title's vectors), unit length, so k-means on them clusters by cosine similarity.
- Number of topics: ``k = round(sqrt(n / 2))`` papers' worth, at least 2 and at most ``MAX_TOPICS``
  (6 topics for 76 papers). The silhouette score, tried first, was low for every k on the bundled corpus
  (0.03-0.10 for k = 2..15: abstracts from one conference overlap) and so always chose 2 topics.
- Clustering: k-means, ``random_state=0`` and ``n_init=10`` over the papers sorted by id: the same index
  always gives the same topics.
- Labels: the topic's most distinctive words (rag/topics/terms.py, c-TF-IDF).
- Papers: by cosine similarity to the topic's centroid, the most central first.
- Map: the first two principal components of the same vectors (deterministic: scikit-learn fixes the
  components' signs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rag.topics.terms import WordCounter, distinctive_terms, stem_idf

MAX_TOPICS = 40
LABEL_TERMS = 4
RANDOM_STATE = 0
N_INIT = 10


@dataclass(frozen=True)
class Topic:
    number: int  # 1.. in order of size (largest first)
    terms: tuple[str, ...]  # its distinctive words, best first
    paper_ids: tuple[str, ...]  # the most central first

    @property
    def label(self) -> str:
        return ", ".join(self.terms)

    @property
    def size(self) -> int:
        return len(self.paper_ids)


@dataclass(frozen=True)
class TopicMap:
    """Every paper's topic and place on the 2-D map, and what the nearest-paper lines need."""

    topics: tuple[Topic, ...]
    paper_topic: dict[str, int]  # paper_id -> topic number
    coordinates: dict[str, tuple[float, float]]  # paper_id -> (x, y)
    idf: dict[str, float]  # word stem -> inverse document frequency over the papers

    def topic(self, number: int) -> Topic | None:
        return next((t for t in self.topics if t.number == number), None)


def topic_count(papers: int) -> int:
    """How many topics ``papers`` papers get (see the module's docstring)."""
    if papers < 4:
        return 1 if papers else 0
    return max(2, min(MAX_TOPICS, round(math.sqrt(papers / 2))))


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def build_topic_map(paper_ids: Sequence[str], vectors: np.ndarray, texts: Sequence[str],
                    words: WordCounter | None = None) -> TopicMap:
    """Topics of the papers ``paper_ids`` (rows of ``vectors``; ``texts``: title and abstract of each)."""
    order = sorted(range(len(paper_ids)), key=lambda i: paper_ids[i])  # the store's order must not matter
    ids = [paper_ids[i] for i in order]
    x = unit_rows(np.asarray(vectors)[order]) if len(ids) else np.zeros((0, 0))
    vocabulary = (words or WordCounter()).count(texts[i] for i in order)
    assignment, centroids = _cluster(x, topic_count(len(ids)))
    groups = [np.flatnonzero(assignment == c) for c in range(len(centroids))]
    # Largest first; equal sizes by their most central paper's id, so numbering never depends on k-means' own.
    closeness = x @ unit_rows(centroids).T if len(ids) else np.zeros((0, 0))
    ranked = [sorted(rows, key=lambda r, c=c: (-closeness[r, c], ids[r])) for c, rows in enumerate(groups)]
    ranked = sorted((rows for rows in ranked if rows), key=lambda rows: (-len(rows), ids[rows[0]]))
    labels = distinctive_terms(vocabulary, ranked, LABEL_TERMS)
    topics = tuple(
        Topic(number, tuple(terms), tuple(ids[r] for r in rows))
        for number, (rows, terms) in enumerate(zip(ranked, labels, strict=True), start=1)
    )
    paper_topic = {pid: t.number for t in topics for pid in t.paper_ids}
    points = _project(x)
    coordinates = {pid: (round(float(px), 5), round(float(py), 5)) for pid, (px, py) in zip(ids, points, strict=True)}
    return TopicMap(topics, paper_topic, coordinates, stem_idf(vocabulary))


def _cluster(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's cluster and the clusters' centroids."""
    if k <= 1 or len(x) <= 1:
        return np.zeros(len(x), dtype=np.int64), x.mean(axis=0, keepdims=True) if len(x) else np.zeros((0, 0))
    from sklearn.cluster import KMeans

    model = KMeans(n_clusters=k, n_init=N_INIT, random_state=RANDOM_STATE).fit(x)
    return model.labels_.astype(np.int64), model.cluster_centers_


def _project(x: np.ndarray) -> np.ndarray:
    """Two coordinates per row: the first two principal components (zeros when there are too few rows)."""
    if len(x) < 3:
        return np.zeros((len(x), 2))
    from sklearn.decomposition import PCA

    return PCA(n_components=2, svd_solver="full").fit_transform(x)
