"""The data that flows between stages: papers, their chunks, search hits, answers, citations and the turns of
a conversation."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from rag.labels import place_label


@dataclass(frozen=True)
class Paper:
    """One abstract with its metadata.

    ``paper_id`` is stable across re-ingests: the record's own id where it has one, else derived from
    the file name and the 1-based position (``ordinal``) of the abstract in that file.
    """

    paper_id: str
    title: str
    abstract: str
    source: str
    ordinal: int
    authors: tuple[str, ...] = ()
    urls: tuple[str, ...] = ()
    venue: str = ""
    year: int | None = None
    title_given: bool = False

    @property
    def content_hash(self) -> str:
        """Changes whenever anything we store about the paper changes."""
        payload = json.dumps(asdict(self), sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]

    def to_dict(self) -> dict:
        data = asdict(self)
        data["authors"] = list(self.authors)
        data["urls"] = list(self.urls)
        return data


@dataclass(frozen=True)
class Chunk:
    """A piece of one paper's abstract that fits the embedding model's window."""

    paper_id: str
    index: int
    text: str
    start: int  # character offsets of the chunk in the abstract
    end: int

    @property
    def chunk_id(self) -> str:
        return f"{self.paper_id}::{self.index}"


@dataclass(frozen=True)
class Hit:
    """A paper found for a question, with the chunk that matched it best."""

    rank: int
    paper_id: str
    title: str
    score: float
    source: str
    ordinal: int
    text: str
    abstract: str = ""
    dense_score: float = 0.0
    lexical_score: float = 0.0
    authors: tuple[str, ...] = ()
    year: int | None = None
    venue: str = ""
    url: str = ""
    collection: str = ""  # the index collection it was found in: names the corpus in labels

    @classmethod
    def of_paper(cls, paper: Paper, *, rank: int, score: float, text: str = "", collection: str = "",
                 **scores: float) -> Hit:
        """A hit for ``paper`` carrying its metadata (authors, year, venue, first URL) for display."""
        return cls(
            rank=rank, paper_id=paper.paper_id, title=paper.title, score=score, source=paper.source,
            ordinal=paper.ordinal, text=text or paper.abstract[:1000], abstract=paper.abstract,
            authors=paper.authors, year=paper.year, venue=paper.venue, url=paper.urls[0] if paper.urls else "",
            collection=collection, **scores,
        )

    @property
    def label(self) -> str:
        """"ICML 2026 · #5 of file 002": where a reader finds the paper (rag/labels.py)."""
        return place_label(self.source, self.ordinal, venue=self.venue, collection=self.collection)

    def metadata(self) -> dict:
        """Authors, year, venue and URL, as JSON clients read them (empty values included: a stable shape)."""
        return {"authors": list(self.authors), "year": self.year, "venue": self.venue, "url": self.url}

    def to_dict(self, *, with_abstract: bool = False) -> dict:
        data = {
            "rank": self.rank,
            "paper_id": self.paper_id,
            "title": self.title,
            "score": round(self.score, 6),
            "source": self.source,
            "ordinal": self.ordinal,
            "text": self.text,
            "label": self.label,
            **self.metadata(),
        }
        if with_abstract:
            data["abstract"] = self.abstract
        return data


@dataclass(frozen=True)
class Citation:
    """A source marker in an answer, mapped to a paper and checked against its abstract."""

    marker: int
    paper_id: str
    title: str
    source: str
    ordinal: int
    evidence: str = ""  # the abstract sentence that best supports the claim
    support: float = 0.0  # similarity of the claim to ``evidence``, 0..1
    claim: str = ""
    weak: bool = False

    def to_dict(self) -> dict:
        return {
            "marker": self.marker,
            "paper_id": self.paper_id,
            "title": self.title,
            "source": self.source,
            "ordinal": self.ordinal,
            "evidence": self.evidence,
            "support": round(self.support, 4),
            "claim": self.claim,
            "weak": self.weak,
        }


@dataclass(frozen=True)
class ClaimVerdict:
    """One claim of an answer after post-hoc attribution (rag/answers/attribution.py).

    ``cited`` are the markers the writer gave it, ``markers`` the ones it carries after the check (empty
    when no source supports it). ``evidence`` is the best sentence of the source shown (the cited one, or
    the nearest when unsupported) and ``support`` its similarity to the claim. ``invented`` lists names
    and figures the claim states that occur in no source and not in the question.
    """

    text: str
    cited: tuple[int, ...]
    markers: tuple[int, ...]
    paper_id: str
    title: str
    evidence: str
    support: float
    supported: bool
    recited: bool = False
    invented: tuple[str, ...] = ()

    @property
    def verdict(self) -> str:
        if self.invented:
            return "invented"
        if not self.supported:
            return "unsupported"
        return "re-cited" if self.recited else "supported"

    def to_dict(self) -> dict:
        return {
            "claim": self.text,
            "markers": list(self.markers),
            "cited_by_writer": list(self.cited),
            "paper_id": self.paper_id,
            "title": self.title,
            "evidence": self.evidence,
            "support": round(self.support, 4),
            "supported": self.supported,
            "verdict": self.verdict,
            "invented": list(self.invented),
        }


@dataclass
class Answer:
    """What the pipeline returns for one question."""

    question: str
    answer: str
    citations: list[Citation] = field(default_factory=list)
    sources: list[Hit] = field(default_factory=list)
    backend: str = ""
    grounded: bool = False
    refused: bool = False
    reasoning: str = ""
    search_query: str = ""
    invalid_markers: int = 0
    interrupted: bool = False
    checks: list = field(default_factory=list)  # per (claim, marker) support (rag.answers.citations.ClaimCheck)
    claims: list[ClaimVerdict] = field(default_factory=list)  # every claim's verdict (rag.answers.attribution)
    not_stated: bool = False  # refused because the nearest paper's abstract does not state the detail asked
    about_paperchat: bool = False  # on using paperchat ("hello") or the whole collection: no claim about a paper
    seconds: float = 0.0  # time to write and check the answer

    def to_dict(self) -> dict:
        return {
            "question": self.question,
            "answer": self.answer,
            "citations": [c.to_dict() for c in self.citations],
            "sources": [h.to_dict(with_abstract=False) for h in self.sources],
            "backend": self.backend,
            "grounded": self.grounded,
            "refused": self.refused,
            "reasoning": self.reasoning,
            "search_query": self.search_query,
            "invalid_markers": self.invalid_markers,
            "interrupted": self.interrupted,
            "claims": [c.to_dict() for c in self.claims],
            "not_stated": self.not_stated,
            "about_paperchat": self.about_paperchat,
            "seconds": round(self.seconds, 3),
        }


@dataclass(frozen=True)
class Turn:
    """One turn of a conversation, as the pipeline reads it back for a follow-up.

    An assistant turn carries the ids of the papers it cited, so that "the second one" resolves against
    them. The terminal chat, the web UI's sessions and the API's conversations all keep their history as turns.
    """

    role: str  # "user" or "assistant"
    content: str
    papers: tuple[str, ...] = ()

    @classmethod
    def asked(cls, question: str) -> Turn:
        return cls("user", question)

    @classmethod
    def answered(cls, answer: Answer) -> Turn:
        return cls("assistant", answer.answer, tuple(c.paper_id for c in answer.citations))

    @classmethod
    def cut_short(cls, partial: str) -> Turn:
        """An answer stopped or failed mid-way: what was written, citing nothing (it was never checked)."""
        return cls("assistant", partial.strip())

    def to_dict(self) -> dict:
        """The chat message the pipeline and JSON clients read; an assistant's has its cited ``papers``."""
        data: dict = {"role": self.role, "content": self.content}
        if self.role == "assistant":
            data["papers"] = list(self.papers)
        return data


def as_messages(turns: Iterable[Turn]) -> list[dict]:
    """Turns -> the chat messages ``AnswerPipeline.stream`` reads."""
    return [turn.to_dict() for turn in turns]
