"""Hybrid retrieval: dense (Chroma) plus lexical (BM25), fused and grouped by paper.

How a question is scored, and why (the measurements behind each choice: bench/results/tuning.md,
"Retrieval/answers"):

1. Candidates: the papers of the nearest chunks, the papers with the nearest profile vectors, and the
   BM25 hits of both lexical indexes (``candidates`` from each). Nearest neighbours come from a brute
   force over the vector table (store/vectors.py) up to ``exact_search_max_chunks``, from Chroma's HNSW
   above. Every candidate then gets its *exact* dense score from the vector table: a floor value for the
   papers one search missed ranked worse.
2. Dense: ``chunk_weight * best chunk similarity + q . profile``; the profile (rag/ingest.py) mixes the
   chunks' centroid, the whole text's vector and the title's vector, and a titled paper's chunks are
   embedded with their title. Untitled abstracts keep half best chunk, half centroid.
3. Lexical: BM25 over chunks with the title prepended, best chunk per paper, mixed half and half with
   BM25 over whole papers (title and abstract).
4. Each signal is min-max normalised over the candidates and the two are mixed with ``dense_weight``.
   Score fusion beats rank fusion: ranks throw away how far ahead the leader is.
5. A paper whose title (for untitled abstracts: the method name it introduces) appears verbatim in
   the question gets a bonus: "what did the MA-RAG authors evaluate on?" is about MA-RAG.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rag.corpus.titles import looks_coined, name_regex
from rag.corpus.vocabulary import Vocabulary, vocabulary_of
from rag.embedding.models import Embedder
from rag.retrieval.retriever import validate_question
from rag.types import Hit, Paper
from store.bm25 import LexicalIndex, lexical_heads, paper_max, rows_with_titles
from store.chroma import ChromaStore
from store.vectors import VectorTable

# What the fusion weighs, each min-max normalised over a question's candidates: the dense score, BM25's best
# chunk, BM25 over whole papers, and whether the paper's name-like title is in the question (0/1).
FEATURES = ("dense", "chunk_bm25", "paper_bm25", "title")


@dataclass(frozen=True)
class Candidates:
    """One question's candidate papers and what the fusion knows of each."""

    paper_ids: list[str]
    features: np.ndarray  # one row per paper, one column per FEATURES entry
    dense: dict[str, float]  # raw dense scores
    lexical_chunk: dict[str, tuple[float, int]]  # best BM25 chunk per paper: (score, row)


@dataclass(frozen=True)
class FusionParams:
    # Fitted by bench/fit_fusion.py on ICML dev2 + dev, exact lookups and SciFact train (bench/results/tuning.md)
    dense_weight: float = 0.65
    paper_lexical_weight: float = 0.3  # share of whole-paper BM25 in the lexical score (the rest: best chunk)
    title_bonus: float = 0.6  # a paper named in the question (coined title, an author's full name)
    candidates: int = 100
    exact_search_max_chunks: int = 250_000  # up to this size, nearest neighbours by brute force (exact)


def fusion_weights(dense_weight: float, paper_share: float, title_bonus: float) -> np.ndarray:
    """The weight of each of ``FEATURES``: dense, then the lexical rest split between best chunk and whole
    paper, then the title bonus."""
    lexical = 1 - dense_weight
    return np.array([dense_weight, lexical * (1 - paper_share), lexical * paper_share, title_bonus])


def _normalise(values: dict[str, float], floor: float | None = None) -> dict[str, float]:
    if not values:
        return {}
    low = min(values.values()) if floor is None else floor
    high = max(values.values())
    span = high - low
    if span <= 1e-12:
        return {key: (1.0 if high > 0 else 0.0) for key in values}
    return {key: max(0.0, (value - low) / span) for key, value in values.items()}


def _name_pattern(title: str) -> re.Pattern[str] | None:
    """A regex matching a short, name-like title as a whole word; None for descriptive titles."""
    title = title.strip()
    if not title or len(title.split()) > 2 or len(title) < 3:
        return None
    # Only coined names (mixed case, digits, hyphens): "FedSSM", "MA-RAG", "CogRouter", "PoLar"; not "Diffusion
    # models".
    if not (re.search(r"[A-Z].*[A-Z]|\d|-", title[1:]) or (title.isupper() and len(title) > 2)
            or any(looks_coined(word) for word in title.split())):
        return None
    return re.compile(name_regex(title), re.IGNORECASE)


def _author_pattern(name: str) -> re.Pattern[str] | None:
    """A regex matching an author's full name ("Tri Dao", "Diederik Kingma" for "Diederik P. Kingma") as whole
    words; None for a single-word name. Surnames alone are left to BM25: many are ordinary words ("Long")."""
    words = re.findall(r"[^\W\d_][\w'-]*", name)
    if len(words) < 2 or len(words[-1]) < 2:
        return None
    middle = r"(?:\s+[^\W\d_][\w'-]*\.?)*"  # optional middle names or initials
    return re.compile(r"(?<![\w-])" + re.escape(words[0]) + middle + r"\s+" + re.escape(words[-1]) + r"(?![\w-])",
                      re.IGNORECASE)


class HybridRetriever:
    """Implements ``Retriever`` (rag/retrieval/retriever.py) over a ``ChromaStore``, an ``Embedder`` and BM25."""

    def __init__(
        self,
        store: ChromaStore,
        embedder: Embedder,
        lexical: LexicalIndex,
        *,
        top_k: int = 5,
        max_question_chars: int = 4000,
        params: FusionParams | None = None,
        expected_manifest: dict | None = None,
        reranker=None,
    ) -> None:
        self.store = store
        self.reranker = reranker  # optional: rag.retrieval.rerank.CrossEncoderReranker
        self.embedder = embedder
        self.lexical = lexical
        self.top_k = top_k
        self.max_question_chars = max_question_chars
        self.params = params or FusionParams()
        self.expected_manifest = expected_manifest
        # Whole-paper BM25 beside the chunk index: long abstracts split into chunks still match as a whole.
        self.paper_lexical = (
            LexicalIndex(lexical.folder.with_name(lexical.folder.name + "@papers"), lexical.params)
            if self.params.paper_lexical_weight > 0 else None
        )
        self.vectors = VectorTable(lexical.folder.with_name(lexical.folder.name + "@vectors"))
        self._name_patterns: list[tuple[str, re.Pattern[str]]] = []
        self._author_patterns: list[tuple[str, re.Pattern[str]]] = []
        self._generation: int | None = None
        self._every_paper: tuple[int, list[Paper]] | None = None
        self._vocabulary: tuple[int, Vocabulary] | None = None

    @classmethod
    def from_settings(
        cls, settings, store: ChromaStore, embedder: Embedder, lexical: LexicalIndex, manifest: dict | None = None
    ) -> HybridRetriever:
        reranker = None
        if settings.reranker_model:
            from rag.retrieval.rerank import CrossEncoderReranker

            reranker = CrossEncoderReranker(settings.reranker_model, top=settings.rerank_top)
        return cls(
            store,
            embedder,
            lexical,
            top_k=settings.top_k,
            max_question_chars=settings.max_question_chars,
            params=FusionParams(
                dense_weight=settings.dense_weight, candidates=settings.candidates,
                exact_search_max_chunks=settings.exact_search_max_chunks,
            ),
            expected_manifest=manifest,
            reranker=reranker,
        )

    def refresh(self) -> None:
        """Bring the lexical index and title table in step with the store (cheap when nothing changed)."""
        generation = self.store.generation()
        if generation == self._generation:
            return
        if self.expected_manifest is not None:
            # Vectors from another model (or other chunking) would give silently wrong results.
            self.store.check_manifest(self.expected_manifest)
        titles, authors = self._load_or_build_lexical(generation)
        if not self.vectors.load(generation):
            self.vectors.build(self.store, generation)
        self._name_patterns = [(pid, pattern) for pid, title in titles.items() if (pattern := _name_pattern(title))]
        self._author_patterns = [(pid, pattern) for pid, names in authors.items() for name in names
                                 if (pattern := _author_pattern(name))]
        self._generation = generation

    def _load_or_build_lexical(self, generation: int) -> tuple[dict[str, str], dict[str, list[str]]]:
        """Load the lexical indexes saved for ``generation``, or build them from the store; the papers' titles and
        authors. A build reads the papers as it goes, twice where the papers' index is rebuilt, rather than
        holding them all: a million papers' abstracts, kept through both BM25 builds, were GBs of the peak."""
        chunks_current = self.lexical.load(generation)
        papers_current = self.paper_lexical is None or self.paper_lexical.load(generation)
        if chunks_current and papers_current:
            return self.lexical.titles, self.lexical.authors  # saved with the index: no paper read
        titles: dict[str, str] = {}
        authors: dict[str, list[str]] = {}
        heads: dict[str, str] = {}  # titles, and authors: "papers by Kingma" is searchable
        for paper in self.store.iter_papers():
            titles[paper.paper_id] = paper.title
            if paper.authors:
                authors[paper.paper_id] = list(paper.authors)
            heads.update(lexical_heads([paper]))
        if not chunks_current:
            self.lexical.build(rows_with_titles(self.store.iter_chunks(), heads), generation, titles=titles,
                               authors=authors)
        if not papers_current:
            rows = ((p.paper_id, p.paper_id, p.abstract) for p in self.store.iter_papers())
            self.paper_lexical.build(rows_with_titles(rows, heads), generation, titles=titles)
        return titles, authors

    def search(self, question: str, k: int | None = None) -> list[Hit]:
        return self.search_many([question], k)[0]

    def search_many(self, questions: Sequence[str], k: int | None = None) -> list[list[Hit]]:
        """Many questions at once: one embedding call, one nearest-neighbour pass, one read of the results."""
        cleaned = [validate_question(q, self.max_question_chars) for q in questions]
        self.refresh()
        if not cleaned:
            return []
        return self.search_with_vectors(cleaned, self.embedder.embed(cleaned), k or self.top_k)

    def search_with_vector(self, question: str, vector: np.ndarray, k: int) -> list[Hit]:
        return self.search_with_vectors([question], np.asarray(vector).reshape(1, -1), k)[0]

    def _lexical(self, question: str) -> tuple[dict[str, tuple[float, int]], dict[str, float]]:
        """Best BM25 chunk per paper (score, row) and, when there is a paper-level index, paper scores."""
        p = self.params
        chunk_best = paper_max(self.lexical.top(question, p.candidates), self.lexical.paper_ids)
        papers: dict[str, float] = {}
        if self.paper_lexical is not None:
            papers = {pid: score for pid, (score, _row) in
                      paper_max(self.paper_lexical.top(question, p.candidates), self.paper_lexical.paper_ids).items()}
        return chunk_best, papers

    def weights(self) -> np.ndarray:
        """The fusion's weight for each of ``FEATURES`` (fitted: bench/fit_fusion.py)."""
        p = self.params
        paper_share = p.paper_lexical_weight if self.paper_lexical is not None else 0.0
        return fusion_weights(p.dense_weight, paper_share, p.title_bonus)

    def features(self, questions: Sequence[str], vectors: np.ndarray) -> list[Candidates]:
        """Each question's candidate papers with their ``FEATURES`` (batched: one nearest-neighbour pass)."""
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(questions), -1)
        p = self.params
        if 0 < self.vectors.chunk_count <= p.exact_search_max_chunks:
            nearest = self.vectors.nearest(vectors, p.candidates)
        else:  # Chroma's HNSW: approximate, but its cost grows slowly with the corpus
            chunk_rows = self.store.query_chunks_many(vectors, p.candidates)
            paper_rows = self.store.query_papers_many(vectors, p.candidates)
            nearest = [{pid for _cid, pid, _s in chunks} | set(papers) if chunks else set()
                       for chunks, papers in zip(chunk_rows, paper_rows, strict=True)]
        return [self._candidates(q, v, found) for q, v, found in zip(questions, vectors, nearest, strict=True)]

    def _candidates(self, question: str, vector: np.ndarray, dense_found: set[str]) -> Candidates:
        if not dense_found:
            return Candidates([], np.zeros((0, len(FEATURES))), {}, {})
        # Candidates: papers of the nearest chunks, the nearest profiles and the BM25 hits; every one is then
        # scored exactly from the vector table (no floor for what one search missed).
        lexical_chunk, lexical_paper = self._lexical(question)
        candidates = sorted(dense_found | set(lexical_chunk) | set(lexical_paper))
        scores = self.vectors.score(candidates, vector)
        dense_raw = {pid: s for pid, s in zip(candidates, scores.tolist(), strict=True) if s > -math.inf}
        candidates = sorted(dense_raw)
        dense = _normalise(dense_raw)
        chunk_bm25 = _normalise({pid: lexical_chunk.get(pid, (0.0, -1))[0] for pid in candidates}, floor=0.0)
        paper_bm25 = _normalise({pid: lexical_paper.get(pid, 0.0) for pid in candidates}, floor=0.0)
        named = {pid for pid, pattern in (*self._name_patterns, *self._author_patterns)
                 if pid in dense_raw and pattern.search(question)}
        columns = [[dense[pid] for pid in candidates], [chunk_bm25[pid] for pid in candidates],
                   [paper_bm25[pid] for pid in candidates], [float(pid in named) for pid in candidates]]
        return Candidates(candidates, np.array(columns, dtype=np.float64).T, dense_raw, lexical_chunk)

    def search_with_vectors(self, questions: Sequence[str], vectors: np.ndarray, k: int) -> list[list[Hit]]:
        """Rank papers for each question given its vector; batched so that a question costs little more
        than its share of one nearest-neighbour pass and two reads."""
        if self.reranker is None:
            return self._rank(questions, vectors, k)
        ranked = self._rank(questions, vectors, max(k, self.reranker.top))
        return [self.reranker.rerank(q, hits)[:k] for q, hits in zip(questions, ranked, strict=True)]

    def _rank(self, questions: Sequence[str], vectors: np.ndarray, k: int) -> list[list[Hit]]:
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(questions), -1)
        weights = self.weights()
        plans = []
        for vector, found in zip(vectors, self.features(questions, vectors), strict=True):
            if not found.paper_ids:
                plans.append(None)
                continue
            fused = dict(zip(found.paper_ids, (found.features @ weights).tolist(), strict=True))
            lexical_chunk = found.lexical_chunk
            lexical_raw = {pid: lexical_chunk.get(pid, (0.0, -1))[0] for pid in found.paper_ids}
            dense_raw = found.dense
            ranked = sorted(fused, key=lambda pid: (-fused[pid], pid))[:k]
            # The chunk shown for a paper: its best dense chunk, else the chunk BM25 matched.
            shown = {}
            for pid in ranked:
                if best := self.vectors.best_chunk(pid, vector):
                    shown[pid] = best
                elif pid in lexical_chunk:
                    shown[pid] = self.lexical.chunk_ids[lexical_chunk[pid][1]]
            plans.append((ranked, fused, dense_raw, lexical_raw, shown))
        live = [plan for plan in plans if plan is not None]
        papers_read = self.store.get_papers([pid for plan in live for pid in plan[0]])
        texts = self.store.chunk_texts([cid for plan in live for cid in plan[4].values()])
        results: list[list[Hit]] = []
        for plan in plans:
            hits: list[Hit] = []
            if plan is not None:
                ranked, fused, dense_raw, lexical_raw, shown = plan
                for pid in ranked:
                    paper = papers_read.get(pid)
                    if paper is None:  # removed between the two reads
                        continue
                    text = texts.get(shown.get(pid, "")) or paper.abstract[:1000]
                    hits.append(Hit.of_paper(
                        paper, rank=len(hits) + 1, score=float(fused[pid]), text=text, collection=self.store.name,
                        dense_score=float(dense_raw[pid]), lexical_score=float(lexical_raw[pid]),
                    ))
            results.append(hits)
        return results

    def hits_for(self, paper_ids: Sequence[str]) -> list[Hit]:
        """Hits for papers named explicitly (a follow-up about "the second one"), in the given order."""
        papers = self.store.get_papers(list(paper_ids))
        return [
            Hit.of_paper(p, rank=i, score=1.0, collection=self.store.name, dense_score=1.0)
            for i, p in enumerate((papers[pid] for pid in paper_ids if pid in papers), start=1)
        ]

    def every_paper(self) -> list[Paper]:
        """Every paper in the index (for questions about metadata: "papers from 2024", "papers by Kingma");
        read again only when the index changed."""
        generation = self.store.generation()
        if self._every_paper is None or self._every_paper[0] != generation:
            self._every_paper = (generation, list(self.store.iter_papers()))
        return self._every_paper[1]

    def vocabulary(self) -> Vocabulary:
        """The words of every title and abstract: lowercased -> (count, most common spelling); for putting typos
        right (rag/answers/spelling.py). Built again only when the index changed."""
        generation = self.store.generation()
        if self._vocabulary is None or self._vocabulary[0] != generation:
            papers = self.every_paper()
            self._vocabulary = (generation, vocabulary_of(t for p in papers for t in (p.title, p.abstract)))
        return self._vocabulary[1]

    def titles_in(self, text: str) -> list[str]:
        """paper_ids whose name-like title appears in ``text``, in order of appearance."""
        self.refresh()
        found = [(m.start(), pid) for pid, pattern in self._name_patterns if (m := pattern.search(text))]
        return [pid for _, pid in sorted(found)]

    def idf(self, term: str) -> float:
        """BM25's inverse document frequency of an analysed term over the chunks (unknown terms: the largest)."""
        return self.lexical.idf(term)
