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

from rag.labels import metadata_line, place_label
from rag.plain_text import readable
from rag.types import Answer

_MARKER = re.compile(r"(?<![\[\\!])\[(\d{1,3})\](?!\()")
_MARKUP = re.compile(r"([\\`*_\[\]<>#|~])")
REFERENCE_ANCHOR = "ref-{}"


def escape_markdown(text: str) -> str:
    """``text`` shown as written in Markdown: its markup characters escaped, on one line."""
    return _MARKUP.sub(r"\\\1", " ".join(text.split()))


def linked_markers(text: str, markers: set[int]) -> str:
    """Each ``[n]`` of a cited marker as a link to its reference; other text as it is (``<`` escaped)."""
    text = text.replace("<", "&lt;")

    def link(match: re.Match) -> str:
        number = int(match.group(1))
        return f"[\\[{number}\\]](#{REFERENCE_ANCHOR.format(number)})" if number in markers else match.group(0)

    return _MARKER.sub(link, text)


def answer_markdown(answer: Answer, *, collection: str = "") -> str:
    """The answer and its references as one Markdown document."""
    hits = {h.paper_id: h for h in answer.sources}
    citations = sorted(answer.citations, key=lambda c: c.marker)
    lines = [f"# {escape_markdown(answer.question)}", "", linked_markers(answer.answer.strip(),
                                                                          {c.marker for c in citations}), ""]
    if citations:
        lines += ["## References", ""]
    for citation in citations:
        hit = hits.get(citation.paper_id)
        details = metadata_line(hit.authors, hit.year, hit.venue, source=hit.source) if hit else ""
        place = hit.label if hit else place_label(citation.source, citation.ordinal, collection=collection)
        entry = f'<a id="{REFERENCE_ANCHOR.format(citation.marker)}"></a>\\[{citation.marker}\\] ' \
                f"**{escape_markdown(citation.title)}**"
        if details:
            entry += f". {escape_markdown(details)}"
        entry += f". {escape_markdown(place)}"
        if hit is not None and hit.url.startswith(("http://", "https://")):
            entry += f". <{hit.url.replace('>', '%3E').replace(' ', '%20')}>"
        lines.append(entry)
        if citation.evidence:
            lines += ["", f"> {escape_markdown(readable(citation.evidence))}"]
        lines.append("")
    if answer.backend:
        source = "" if answer.about_paperchat else " from the papers' abstracts"  # a fixed reply read none
        lines += [f"*Answered by {escape_markdown(answer.backend)}{source}.*", ""]
    return "\n".join(lines)
