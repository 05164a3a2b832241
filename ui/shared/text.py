"""Answers, papers and the answer writer as plain text: what the API (``/v1``, MCP) and the web UI's ``/chat``
endpoint return, the papers filter both offer, and the notes every surface shows under an answer.

Nothing here escapes anything: HTML and Markdown escaping is the web UI's (``ui.web.render``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rag.components import Components, SessionSettings
from rag.labels import place_label
from rag.redact import redact_url
from rag.types import Answer, Citation, Paper


def place(item, collection: str = "") -> str:
    """Where a paper is, as a reader reads it: "ICML 2026 · #5 of file 002" (rag/labels.py), for a ``Hit`` (it
    knows the collection it was found in), a ``Paper`` (``collection``: the index's) or a ``Citation``."""
    found_in = getattr(item, "collection", "") or collection
    return place_label(item.source, item.ordinal, venue=getattr(item, "venue", ""), collection=found_in)


def cited_place(answer: Answer, citation: Citation) -> str:
    """The place of a cited paper, from the source it cites (which carries the venue and collection)."""
    hit = next((h for h in answer.sources if h.paper_id == citation.paper_id), None)
    return place(hit if hit is not None else citation)


def answer_text(answer: Answer) -> str:
    """The answer with its ``[n]`` markers, then a readable sources block (what any chat client shows)."""
    lines = [answer.answer.strip()]
    if answer.interrupted:
        lines.append("(interrupted: the endpoint stopped mid-answer; the answer is partial)")
    if answer.citations:
        lines.append("")
        lines.append("Sources:")
        for c in answer.citations:
            weak = " (weakly supported)" if c.weak else ""
            lines.append(f"[{c.marker}] {c.title} — {cited_place(answer, c)}{weak}")
    elif answer.sources:
        lines.append("")
        lines.append("Nearest papers:")
        lines.extend(f"- {h.title} — {place(h)}" for h in answer.sources[:3])
    return "\n".join(lines)


@dataclass(frozen=True)
class AnswerNotes:
    """What a reader should know about an answer beyond its text (each surface words it its own way)."""

    removed_markers: int  # citations that matched no source, removed
    unsupported: int  # claims no source supports (struck through)
    recited: int  # claims moved to the source that says them
    ungrounded: bool  # an answer (not a refusal) that cites no source

    @classmethod
    def of(cls, answer: Answer) -> AnswerNotes:
        return cls(
            removed_markers=answer.invalid_markers,
            unsupported=sum(not c.supported for c in answer.claims),
            recited=sum(c.recited for c in answer.claims),
            ungrounded=not answer.grounded and not answer.refused and not answer.about_paperchat,
        )


# --- papers -------------------------------------------------------------------------------------------------


def query_words(query: str) -> list[str]:
    return [w for w in query.lower().split() if w]


def filter_papers(papers: Iterable[Paper], query: str) -> list[Paper]:
    """Papers whose title, abstract, authors, venue, year, source, id or place label contain every word of
    ``query`` (case-insensitive): "kingma adam" finds the Adam paper by its author and title, "file 002" the
    papers of that file, "000_dcbf1b5d2daaeff5.txt#8" or "#8 of file 000" one paper."""
    words = query_words(query)
    if not words:
        return list(papers)
    found = []
    for paper in papers:
        year = "" if paper.year is None else str(paper.year)
        haystack = "\n".join([paper.title, paper.abstract, *paper.authors, paper.venue, year, paper.source,
                              paper.paper_id, place_label(paper.source, paper.ordinal)]).lower()
        if all(word in haystack for word in words):
            found.append(paper)
    return found


# --- the answer writer --------------------------------------------------------------------------------------


def describe_answer_writer(components: Components, settings: SessionSettings, listed: list[str] | None = None) -> str:
    """Who answers for these settings; ``listed``: the endpoint's models, if known (names the default one)."""
    if settings.extractive:
        return "extractive: quoted sentences from the abstracts, no LLM"
    kind = "endpoint" if settings.base_url else components.answer_writer()
    if kind == "endpoint":
        url = settings.base_url or components.settings.llm_base_url or ""
        model = settings.model if settings.base_url else (components.settings.llm_model or "")
        if not model:
            model = f"{listed[0]} (first listed)" if listed else "the first listed model"
        return f"endpoint {model} @ {redact_url(url)}"
    if kind == "embedded":
        chat_model = components.built_chat_model
        if chat_model is not None:
            return chat_model.label + " (embedded, a tiny model; connect an endpoint for better answers)"
        return ("embedded llama.cpp model (starts with the first question; a tiny model, "
                "connect an endpoint for better answers)")
    return "extractive: quoted sentences from the abstracts, no LLM"
