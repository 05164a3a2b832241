"""The retriever seam: what the answer pipeline asks of a retriever, and the question check every one applies.

``Retriever`` lists exactly what ``rag.answers`` uses: a ranked search, hits for papers named by id (a
follow-up about "the second one"), the papers whose name-like title a text mentions, and the corpus's
inverse document frequency of a term (how telling a question's word is). ``HybridRetriever``
(rag/retrieval/hybrid.py) implements it over the index; tests use an in-memory one (tests/conftest.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from rag.errors import QueryError
from rag.types import Hit


@runtime_checkable
class Retriever(Protocol):
    """What the answer pipeline needs from a retriever."""

    @property
    def max_question_chars(self) -> int:
        """The longest question accepted (``validate_question``)."""
        ...

    def search(self, question: str, k: int | None = None) -> list[Hit]:
        """The ``k`` best papers for ``question``, best first, ranked from 1."""
        ...

    def hits_for(self, paper_ids: Sequence[str]) -> list[Hit]:
        """Hits for papers named explicitly, in the given order (unknown ids are left out)."""
        ...

    def titles_in(self, text: str) -> list[str]:
        """paper_ids whose name-like title appears in ``text``, in order of appearance."""
        ...

    def idf(self, term: str) -> float:
        """Inverse document frequency of an analysed term over the corpus; largest for a term no paper uses."""
        ...


def validate_question(question: str, max_chars: int) -> str:
    """The question with its spaces collapsed; a ``QueryError`` saying what to do when it is empty or too long."""
    if not isinstance(question, str) or not question.strip():
        raise QueryError("the question is empty: type a question about the papers")
    if len(question) > max_chars:
        raise QueryError(
            f"the question is {len(question):,} characters long; the limit is {max_chars:,}: shorten it "
            "(or raise PAPERCHAT_MAX_QUESTION_CHARS)"
        )
    return " ".join(question.split())
