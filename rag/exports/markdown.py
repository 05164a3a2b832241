"""An answer as a Markdown document: the question, the answer with each ``[n]`` a link to its entry in the
reference list, then the references (title, authors, venue, year, link, where in the corpus, the sentence
that supports the claim).

Each ``[n]`` becomes an inline link ``[\\[n\\]](#ref-n)`` rather than staying a bare ``[n]``: CommonMark
would read ``[1][2]`` as one link labelled "2". Each reference starts with an ``<a id="ref-n">`` anchor.
Corpus and model text is untrusted: ``<`` is escaped so no HTML from it renders, and Markdown markup in
titles and evidence is escaped so it shows as written.
"""

from __future__ import annotations

import re

from rag.labels import corpus_name, metadata_line
from rag.plain_text import readable
from rag.types import Answer

_MARKER = re.compile(r"(?<![\[\\!])\[(\d{1,3})\](?!\()")
_MARKUP = re.compile(r"([\\`*_\[\]<>#|~])")
REFERENCE_ANCHOR = "ref-{}"
_BACKTICKS = re.compile(r"`+")


def escape_markdown(text: str) -> str:
    """``text`` shown as written in Markdown: its markup characters escaped, on one line."""
    return _MARKUP.sub(r"\\\1", " ".join(text.split()))


def linked_markers(text: str, markers: set[int], anchor: str = REFERENCE_ANCHOR) -> str:
    """Each ``[n]`` of a cited marker as a link to its reference; other text as it is (``<`` escaped)."""
    text = text.replace("<", "&lt;")

    def link(match: re.Match) -> str:
        number = int(match.group(1))
        return f"[\\[{number}\\]](#{anchor.format(number)})" if number in markers else match.group(0)

    return _MARKER.sub(link, text)


def code_span(text: str) -> str:
    """``text`` as one inline code span (shown as written, no escapes to read in the raw file)."""
    text = " ".join(text.split())
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def found_in(source: str, ordinal: int, venue: str = "", collection: str = "") -> str:
    """Where in the corpus a reference is, for a reader of the file: "ICML 2026, paper 8 of `000_….txt`" (the file's
    whole name: "#8 of file 000", the labels' short form, named nothing a reader of the document could find)."""
    name = corpus_name(source, venue, collection)
    place = f"paper {ordinal} of {code_span(source)}"
    return f"{escape_markdown(name)}, {place}" if name else place


def about_line(answer: Answer, citations) -> str:
    """For an answer whose question was resolved in the conversation ("what did the second one evaluate on?"),
    the cited papers the question does not name: its heading alone said nothing of what it was about."""
    if not answer.search_query or " ".join(answer.search_query.split()) == " ".join(answer.question.split()):
        return ""
    asked = answer.question.lower()
    titles = [t for t in dict.fromkeys(c.title for c in citations) if t and t.lower() not in asked]
    return "*About:* " + "; ".join(f"**{escape_markdown(t)}**" for t in titles) if titles else ""


def answer_markdown(answer: Answer, *, collection: str = "", level: int = 1,
                    anchor: str = REFERENCE_ANCHOR) -> str:
    """The answer and its references as one Markdown document (its question a heading of ``level``; each
    reference anchored as ``anchor`` says, so that several answers in one document keep theirs apart)."""
    hits = {h.paper_id: h for h in answer.sources}
    citations = sorted(answer.citations, key=lambda c: c.marker)
    lines = [f"{'#' * level} {escape_markdown(answer.question)}", ""]
    if about := about_line(answer, citations):
        lines += [about, ""]
    lines += [linked_markers(answer.answer.strip(), {c.marker for c in citations}, anchor), ""]
    if citations:
        lines += [f"{'#' * (level + 1)} References", ""]
    for citation in citations:
        hit = hits.get(citation.paper_id)
        details = metadata_line(hit.authors, hit.year, hit.venue, source=hit.source) if hit else ""
        place = found_in(citation.source, citation.ordinal, hit.venue if hit else "",
                         (hit.collection or collection) if hit else collection)
        entry = f'<a id="{anchor.format(citation.marker)}"></a>\\[{citation.marker}\\] ' \
                f"**{escape_markdown(citation.title)}**"
        if details:
            entry += f". {escape_markdown(details)}"
        if hit is not None and hit.url.startswith(("http://", "https://")):
            entry += f". <{hit.url.replace('>', '%3E').replace(' ', '%20')}>"
        entry += f". {place}"  # the title and what is known of the paper first, where it sits in the corpus last
        lines.append(entry)
        if citation.evidence:
            lines += ["", f"> {escape_markdown(readable(citation.evidence))}"]
        lines.append("")
    if answer.backend:
        source = "" if answer.about_paperchat else " from the papers' abstracts"  # a fixed reply read none
        lines += [f"*Answered by {escape_markdown(answer.backend)}{source}.*", ""]
    return "\n".join(lines)


def conversation_markdown(answers: list[Answer], *, collection: str = "") -> str:
    """A conversation's answers in the order asked, each with its own references (anchored "ref-2-1": the
    first reference of the second answer), as one Markdown document."""
    parts = ["# paperchat conversation", ""]
    for number, answer in enumerate(answers, start=1):
        parts.append(answer_markdown(answer, collection=collection, level=2, anchor=f"ref-{number}-{{}}"))
    return "\n".join(parts)
