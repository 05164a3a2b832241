"""Answers without an LLM: the abstract sentences that best answer the question, each cited.

Always grounded (every sentence is quoted from the paper it cites) and fast. It abstains when the
best paper's abstract does not mention what the question asks about: for a question about a paper's
details, the words that are not the paper's own name must appear in its abstract.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from rag.chunking import split_sentences
from rag.embedding import Embedder
from rag.lexical import Analyzer, LexicalParams
from rag.prompts import NOT_COVERED
from rag.types import Hit

# Words a question uses to ask, not to say what it is about.
_QUESTION_WORDS = (
    "paper papers work works method methods approach approaches author authors propose proposed use used using "
    "study studies describe described present presented introduce introduced evaluate evaluated evaluation what "
    "which how many much does do did is are was were there any kind type main key new novel model models result "
    "results show shows report reported achieve achieved define defines defined call called name named roughly "
    "approximately about them they it its their whose this that these those get gets give gives have has had"
)
_MULTI = re.compile(r"\b(which|what|any|are there|list|find)\b.{0,40}\b(papers|works|methods|approaches|abstracts)\b",
                    re.IGNORECASE)


@dataclass(frozen=True)
class ExtractiveParams:
    sentences_single: int = 3
    max_papers_multi: int = 4
    multi_relative_score: float = 0.6
    multi_sure_score: float = 0.85
    min_focus_coverage: float = 0.5
    lexical_weight: float = 0.5


def is_multi_paper_question(question: str) -> bool:
    return bool(_MULTI.search(question))


_PART_SPLIT = re.compile(r",?\s+and\s+(?=(?:which|what|how|on|in|where|when|who|whether|roughly)\b)|;\s*",
                         re.IGNORECASE)


def question_parts(question: str) -> list[str]:
    """The whole question first, then its parts when it asks several things at once."""
    parts = [p.strip() for p in _PART_SPLIT.split(question) if p and p.strip()]
    return [question, *parts] if len(parts) > 1 else [question]


def names_paper(question: str, hit: Hit) -> bool:
    """Does the question name the paper (its coined title, e.g. "FedSSM"), not just describe it?"""
    title = hit.title.strip()
    if not title or len(title.split()) > 2:
        return False
    return re.search(r"(?<![\w-])" + re.escape(title) + r"(?![\w-])", question, re.IGNORECASE) is not None


class ExtractiveAnswerer:
    label = "extractive (no LLM)"

    def __init__(
        self,
        embedder: Embedder,
        params: ExtractiveParams | None = None,
        idf: Callable[[str], float] | None = None,
    ) -> None:
        self.embedder = embedder
        self.params = params or ExtractiveParams()
        self.analyze = Analyzer(LexicalParams())
        self.idf = idf or (lambda _term: 1.0)
        self.question_words = frozenset(self.analyze.plain(_QUESTION_WORDS))

    def answer(self, question: str, hits: Sequence[Hit]) -> tuple[str, bool]:
        """(answer text citing [n] = hits[n-1], refused)."""
        if not hits:
            return NOT_COVERED, True
        multi = is_multi_paper_question(question)
        chosen = self._choose_papers(question, hits, multi)
        # A question that names the paper asks for a detail: the rest of its words must be in the abstract.
        if (
            not multi
            and names_paper(question, hits[0])
            and self.coverage(question, hits[0]) < self.params.min_focus_coverage
        ):
            return NOT_COVERED, True
        question_terms = set(self.analyze(question))
        per_paper = [self._best_sentences(question, question_terms, hits[i], 1 if multi else
                                          self.params.sentences_single) for i in chosen]
        if multi:
            lines = [f"- {hits[i].title}: {sentences[0]} [{i + 1}]" for i, sentences in zip(chosen, per_paper,
                                                                                            strict=True) if sentences]
            return "\n".join(lines), False
        sentences = per_paper[0]
        return " ".join(f"{s} [1]" for s in sentences), False

    def _choose_papers(self, question: str, hits: Sequence[Hit], multi: bool) -> list[int]:
        if not multi:
            return [0]
        top = hits[0].score
        chosen = [0]
        for i, h in enumerate(hits[1 : self.params.max_papers_multi], start=1):
            if h.score < self.params.multi_relative_score * top:
                continue
            # Weaker candidates must also mention what the question asks about.
            sure = h.score >= self.params.multi_sure_score * top
            if sure or self.coverage(question, h) >= self.params.min_focus_coverage:
                chosen.append(i)
        return chosen

    def focus_terms(self, question: str, hit: Hit) -> set[str]:
        name_terms = set(self.analyze(hit.title)) if len(hit.title.split()) <= 2 else set()
        return {t for t in self.analyze(question) if t not in self.question_words and t not in name_terms}

    def coverage(self, question: str, hit: Hit) -> float:
        """Share of the question's topic words (not its question words, not the paper's name) in the abstract."""
        focus = self.focus_terms(question, hit)
        if not focus:
            return 1.0
        present = set(self.analyze(hit.abstract))
        weights = {t: self.idf(t) for t in focus}
        return sum(w for t, w in weights.items() if t in present) / max(sum(weights.values()), 1e-9)

    def _best_sentences(self, question: str, question_terms: set[str], hit: Hit, n: int) -> list[str]:
        text = hit.abstract or hit.text
        spans = split_sentences(text)
        if not spans:
            return []
        sentences = [text[a:b] for a, b in spans]
        parts = question_parts(question) if n > 1 else [question]
        vectors = self.embedder.embed([*parts, *sentences])
        sentence_terms = [set(self.analyze(s)) for s in sentences]
        chosen: list[int] = []
        # One best sentence per part of a compound question ("which X ..., and how many Y ..."), then the rest.
        part_scores = []
        for index, part in enumerate(parts):
            terms = set(self.analyze(part))
            overlap = np.array([len(terms & st) / max(len(terms), 1) for st in sentence_terms])
            part_scores.append(vectors[len(parts):] @ vectors[index] + self.params.lexical_weight * overlap)
        for scores in part_scores[1:] if len(parts) > 1 else []:
            best = int(np.argmax(scores))
            if best not in chosen:
                chosen.append(best)
        overall = np.max(np.vstack(part_scores), axis=0)
        for i in np.argsort(-overall).tolist():
            if len(chosen) >= n:
                break
            if i not in chosen:
                chosen.append(i)
        return [sentences[i] for i in sorted(chosen[:max(n, len(parts) - 1)])]  # keep the abstract's order
