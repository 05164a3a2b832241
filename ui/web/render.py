"""Turn answers, hits and papers into what the web UI shows: chat text and HTML panels.

Everything that comes from the corpus or from a model is untrusted: it goes through ``html.escape``
before it reaches an HTML component, and through :func:`chat_text` before it reaches the Chatbot (whose
Markdown renderer would otherwise pass raw HTML through). Nothing here imports Gradio, so it is tested
as plain functions.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

from rag.answers.citations import highlight_spans
from rag.labels import metadata_line, place_label
from rag.plain_text import readable
from rag.types import Answer, Hit, Paper
from ui.shared.text import AnswerNotes, cited_place, query_words

EXAMPLE_QUESTIONS = [
    "Which papers use state-space models for client selection?",
    "What did the MA-RAG authors evaluate on?",
    "Which papers work on heart sound synthesis?",
    "Are there papers on anomaly detection in tabular data?",
]

INTRO = (
    "Ask about the **ICML 2026** paper abstracts. Every answer cites its sources as [1], [2], …; "
    "click one to open it in the **Sources** panel, which shows each cited abstract with the supporting "
    "sentences highlighted, so you can check every claim."
)

SOURCES_PLACEHOLDER = (
    '<div class="pc-empty">Sources of the latest answer appear here: the cited papers, '
    "their abstracts with the supporting sentences highlighted, and how well each claim is supported.</div>"
)

_MD_IMAGE = re.compile(r"!\[")
_MARKER = re.compile(r"(?<![\[\\!])\[(\d{1,3})\](?!\()")
SOURCE_ANCHOR = "pc-source-{}"  # the id of a cited paper's card in the sources panel; [n] links to it
_WEB_LINK = re.compile(r"^https?://", re.IGNORECASE)
_BACKTICKS = re.compile(r"`+")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def esc(text: object) -> str:
    """HTML-escape anything for an HTML component (quotes too: safe inside attributes)."""
    return html.escape(str(text), quote=True)


def chat_text(text: str) -> str:
    """Untrusted text for the Chatbot's Markdown: HTML shows as text, Markdown images load nothing.

    Only ``<`` can open HTML in Markdown: it becomes ``&lt;``, which Markdown renders as the character, so
    ``<img src=x onerror=...>`` is displayed, never parsed (``>`` and ``&`` stay, so the copy button copies
    "p > 0.05" and "R&D" as written). ``![alt](url)`` would fetch a remote image (a tracking pixel from a
    prompt-injected answer): its ``[`` is escaped so it stays text. Links are left to the Chatbot's
    sanitizer (``sanitize_html=True``), which drops ``javascript:`` URLs.
    """
    return _MD_IMAGE.sub(r"!\\[", text.replace("<", "&lt;"))


def plain_markdown(text: str) -> str:
    """``text`` shown as written in Markdown: "author~Bengio" is no strikethrough, "*" no emphasis."""
    return re.sub(r"([\\`*_~\[\]#|])", r"\\\1", text.replace("<", "&lt;"))


def code_span(text: str) -> str:
    """``text`` as one Markdown code span, whatever backticks it holds (a fence longer than any run in it)."""
    text = " ".join(text.split())  # a code span is one line here
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def close_fences(text: str) -> str:
    """``text`` with a code block it leaves open closed, so that what follows it is not swallowed."""
    open_fence: str | None = None
    for line in text.split("\n"):
        match = _FENCE.match(line)
        if match is None:
            continue
        fence = match.group(1)
        if open_fence is None:
            open_fence = fence
        elif fence[0] == open_fence[0] and len(fence) >= len(open_fence) and not line.strip()[len(fence):].strip():
            open_fence = None
    return text if open_fence is None else f"{text}\n{open_fence}"


# --- chat messages ---------------------------------------------------------------------------------------------


def link_markers(text: str, markers: Sequence[int]) -> str:
    """``[n]`` in (escaped) answer text as a Markdown link to its card in the sources panel, for the cited ``n``."""
    known = {str(n) for n in markers}

    def link(match: re.Match) -> str:
        n = match.group(1)
        return f"[[{n}]](#{SOURCE_ANCHOR.format(n)})" if n in known else match.group(0)

    return _MARKER.sub(link, text)


def answer_markdown(answer: Answer) -> str:
    """The assistant message for a finished answer: the answer, notes, and a compact list of its sources."""
    markers = [c.marker for c in answer.citations]
    parts = [close_fences(link_markers(chat_text(answer.answer), markers)) or "*(empty answer)*"]
    if answer.interrupted:
        parts.append("*⚠ Interrupted: the endpoint stopped mid-answer; the text above is partial.*")
    facts = AnswerNotes.of(answer)
    notes = []
    if facts.removed_markers:
        notes.append(f"{facts.removed_markers} citation(s) that matched no source were removed")
    if facts.unsupported:
        one = facts.unsupported == 1
        verb = "claim that no abstract supports is" if one else "claims that no abstract supports are"
        notes.append(f"{facts.unsupported} {verb} struck through")
    if facts.recited:
        notes.append(f"{facts.recited} claim(s) re-cited to the paper that says it")
    if facts.ungrounded and answer.answer and not facts.unsupported:
        notes.append("not grounded: the answer cites no source, check it against the abstracts")
    if notes:
        parts.append("*Note: " + "; ".join(notes) + ".*")
    if answer.citations:
        lines = ["**Sources**"]
        for c in answer.citations:
            weak = " · ⚠ weakly supported" if c.weak else ""
            lines.append(f"[{c.marker}] {chat_text(c.title)} — {code_span(cited_place(answer, c))}{weak}")
        parts.append("  \n".join(lines))
    return "\n\n".join(parts)


def interrupted_markdown(partial: str, reason: str) -> str:
    if not partial.strip():
        return f"*⚠ {chat_text(reason)} before anything was written.*"
    return f"{close_fences(chat_text(partial.strip()))}\n\n*⚠ {chat_text(reason)}: the answer is partial.*"


def error_markdown(message: str) -> str:
    return f"⚠ **Could not answer.** {chat_text(message)}"


# --- the sources panel -----------------------------------------------------------------------------------------


def highlighted_abstract(abstract: str, spans: Sequence[tuple[int, int]]) -> str:
    """The abstract as HTML, the given character spans wrapped in ``<mark>``; every piece escaped."""
    out: list[str] = []
    pos = 0
    for start, end in spans:
        out.append(esc(readable(abstract[pos:start])))
        out.append(f"<mark>{esc(readable(abstract[start:end]))}</mark>")
        pos = end
    out.append(esc(readable(abstract[pos:])))
    return "".join(out)


_NOT_STATED_BADGE = ('<span class="pc-badge pc-weak" title="the nearest paper: its abstract does not state what is '
                     'asked">not stated</span>')


def _support_badge(support: float, weak: bool) -> str:
    kind = "weak" if weak else "ok"
    label = "weak" if weak else "supported"
    tip = "similarity of the claim to its evidence"
    return f'<span class="pc-badge pc-{kind}" title="{tip}">{label} {support:.2f}</span>'


def _paper_meta(source: str, ordinal: int, *, venue: str = "", collection: str = "", authors: Sequence[str] = (),
                year: int | None = None, url: str = "") -> str:
    """Where the paper is ("ICML 2026 · #5 of file 002"; the file's full name in the tooltip), then its authors,
    venue and year, and a link to it, when the records gave them."""
    label = place_label(source, ordinal, venue=venue, collection=collection)
    parts = [f'<span class="pc-where" title="{esc(source)} #{ordinal}">{esc(label)}</span>']
    if details := metadata_line(authors, year, venue, source=source):
        parts.append(f'<span class="pc-authors">{esc(details)}</span>')
    if _WEB_LINK.match(url):  # only http(s): a javascript: or data: "url" from a record is not a link
        parts.append(f'<a class="pc-link" href="{esc(url)}" target="_blank" rel="noopener noreferrer">link</a>')
    return " ".join(parts)


def _meta_of(item) -> str:
    """``_paper_meta`` for a Hit or a Paper (a paper's first URL is its link)."""
    url = getattr(item, "url", "") or next(iter(getattr(item, "urls", ())), "")
    return _paper_meta(item.source, item.ordinal, venue=item.venue, collection=getattr(item, "collection", ""),
                       authors=item.authors, year=item.year, url=url)


def _cited_card(answer: Answer, citation) -> str:
    hit = next((h for h in answer.sources if h.paper_id == citation.paper_id), None)
    abstract = (hit.abstract or hit.text) if hit is not None else citation.evidence
    checks = [c for c in answer.checks if c.paper_id == citation.paper_id and c.marker == citation.marker]
    # A paper cited as the nearest one whose abstract does not state what is asked: its sentence supports nothing.
    badge = _NOT_STATED_BADGE if answer.not_stated else None
    highlighted = "its closest sentence" if answer.not_stated else "supporting sentences"
    claims = "".join(
        f'<li class="{"pc-claim-weak" if c.weak else "pc-claim"}">{badge or _support_badge(c.support, c.weak)} '
        f"{esc(readable(c.claim))}</li>"
        for c in checks
    )
    spans = highlight_spans(abstract, answer.checks, citation.paper_id)
    weak_class = " pc-card-weak" if citation.weak else ""
    meta = _meta_of(hit) if hit is not None else _paper_meta(citation.source, citation.ordinal)
    weak_label = ' <span class="pc-badge pc-weak">weakly supported</span>' if citation.weak else ""
    return (
        f'<div class="pc-card{weak_class}">'
        f'<div class="pc-card-title"><span class="pc-marker">[{citation.marker}]</span> {esc(citation.title)}'
        f"{weak_label}</div>"
        f'<div class="pc-meta">{meta}</div>'
        + (f'<div class="pc-sub">Claims citing it</div><ul class="pc-claims">{claims}</ul>' if claims else "")
        + f'<details class="pc-abstract" open><summary>Abstract ({highlighted} highlighted)</summary>'
        f"<p>{highlighted_abstract(abstract, spans)}</p></details></div>"
    )


def _hit_item(hit: Hit, *, open_: bool = False) -> str:
    abstract = hit.abstract or hit.text
    return (
        f'<li class="pc-hit"><details{" open" if open_ else ""}><summary><span class="pc-hit-title">'
        f"{esc(hit.title)}</span> {_meta_of(hit)}</summary>"
        f'<p class="pc-abstract-text">{esc(readable(abstract))}</p></details></li>'
    )


_VERDICT_LABELS = {
    "supported": ("ok", "supported"),
    "re-cited": ("ok", "re-cited"),
    "unsupported": ("bad", "unsupported"),
    "invented": ("bad", "invented"),
}


def _claim_item(claim) -> str:
    kind, label = _VERDICT_LABELS[claim.verdict]
    tip = {
        "supported": "a cited abstract says this",
        "re-cited": "the writer cited another paper; this one says it",
        "unsupported": "no retrieved abstract says this",
        "invented": "names or figures that are in no abstract: " + ", ".join(claim.invented),
    }[claim.verdict]
    badge = f'<span class="pc-badge pc-{kind}" title="{esc(tip)}">{label} {claim.support:.2f}</span>'
    target = ""
    if claim.markers:
        numbers = ", ".join(str(n) for n in claim.markers)
        target = f' <span class="pc-where">→ [{numbers}] {esc(claim.title)}</span>'
    elif claim.invented:
        target = f' <span class="pc-where">in no abstract: {esc(", ".join(claim.invented))}</span>'
    evidence = ""
    if claim.evidence:
        lead = "evidence" if claim.supported else f"nearest sentence ({esc(claim.title)})"
        evidence = f'<div class="pc-evidence">{lead}: “{esc(readable(claim.evidence))}”</div>'
    text = esc(claim.text) if claim.supported else f"<s>{esc(claim.text)}</s>"
    return f'<li class="pc-claim pc-claim-{kind}">{badge} {text}{target}{evidence}</li>'


def sources_html(answer: Answer, filters: str = "") -> str:
    """The panel for a finished answer: each claim's verdict, cited papers, retrieved-but-uncited ones, notes
    (``filters``: the filter box's line, said so that an answer from part of the papers never looks like one from
    all of them)."""
    parts = ['<div class="pc-sources">']
    if answer.claims:
        unsupported = sum(not c.supported for c in answer.claims)
        summary = f", {unsupported} unsupported" if unsupported else ", all supported"
        parts.append(f'<div class="pc-head">Claims checked ({len(answer.claims)}{summary})</div>'
                     f'<ul class="pc-claims pc-verdicts">{"".join(_claim_item(c) for c in answer.claims)}</ul>')
    cited_ids = {c.paper_id for c in answer.citations}
    if answer.citations:
        parts.append(f'<div class="pc-head">Cited papers ({len(answer.citations)})</div>')
        parts.extend(f'<div id="{SOURCE_ANCHOR.format(c.marker)}" class="pc-anchor">{_cited_card(answer, c)}</div>'
                     for c in answer.citations)
    others = [h for h in answer.sources if h.paper_id not in cited_ids]
    if others:
        heading = "Nearest papers" if answer.refused or not answer.citations else "Retrieved but not cited"
        parts.append(f'<div class="pc-head">{heading} ({len(others)})</div><ul class="pc-hits">')
        parts.extend(_hit_item(h) for h in others)
        parts.append("</ul>")
    if answer.about_paperchat:
        parts.append('<div class="pc-empty">No sources: this reply is about using paperchat or about the '
                     'collection as a whole, not about one paper.</div>')
    elif not answer.sources:
        parts.append('<div class="pc-empty">No papers in the index are close to this question.</div>')
    notes = [f"answered by {esc(answer.backend)}"] if answer.backend else []
    if filters:
        notes.append(f"only papers where {esc(filters)}")
    if answer.search_query and answer.search_query != answer.question:
        notes.append(f"searched for “{esc(answer.search_query)}”")
    if answer.interrupted:
        notes.append("the answer was interrupted")
    if notes:
        parts.append(f'<div class="pc-notes">{" · ".join(notes)}</div>')
    parts.append("</div>")
    return "".join(parts)


def retrieved_html(hits: Sequence[Hit], note: str = "the answer is being written…") -> str:
    """The panel while the answer is being written (or after it failed or was stopped): what the search found."""
    if not hits:
        return '<div class="pc-sources"><div class="pc-empty">No matching papers.</div></div>'
    items = "".join(_hit_item(h) for h in hits)
    return (
        f'<div class="pc-sources"><div class="pc-head">Retrieved papers ({esc(note)})</div>'
        f'<ul class="pc-hits">{items}</ul></div>'
    )


def message_html(message: str) -> str:
    return f'<div class="pc-sources"><div class="pc-empty">{esc(message)}</div></div>'


# --- the papers tab --------------------------------------------------------------------------------------------


def word_spans(text: str, words: Sequence[str]) -> list[tuple[int, int]]:
    """Where the (lower-case) ``words`` occur in ``text``, sorted, overlaps merged."""
    lowered = text.lower()
    spans = []
    for word in words:
        start = lowered.find(word)
        while start != -1:
            spans.append((start, start + len(word)))
            start = lowered.find(word, start + len(word))
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def papers_html(papers: Sequence[Paper], total: int, query: str = "", limit: int = 200) -> str:
    """The papers (title, source, position, abstract), escaped; with a filter, open and matches marked."""
    if total == 0:
        return message_html("The index is empty: run `paperchat ingest`.")
    if not papers:
        return message_html(f"No paper matches “{query.strip()}” (of {total}).")
    words = query_words(query)
    shown = papers[:limit]
    count = f"{len(papers)} of {total} papers match" if words else f"{total} papers (click one for its abstract)"
    if len(papers) > limit:
        count += f"; showing the first {limit}, refine the filter"
    items = "".join(
        f'<li class="pc-paper"><details{" open" if words else ""}><summary><span class="pc-hit-title">'
        f"{highlighted_abstract(p.title, word_spans(p.title, words))}</span> {_meta_of(p)}"
        f'</summary><p class="pc-abstract-text">{highlighted_abstract(p.abstract, word_spans(p.abstract, words))}'
        "</p></details></li>"
        for p in shown
    )
    return f'<div class="pc-papers"><div class="pc-head">{esc(count)}</div><ul class="pc-hits">{items}</ul></div>'


CSS = """
.pc-sources, .pc-papers { font-size: 0.92rem; line-height: 1.45; }
.pc-head { font-weight: 600; margin: 0.6rem 0 0.4rem; color: var(--body-text-color); }
.pc-empty { color: var(--body-text-color-subdued); padding: 0.8rem; border: 1px dashed var(--border-color-primary);
  border-radius: 8px; }
.pc-card { border: 1px solid var(--border-color-primary); border-left: 4px solid #16a34a; border-radius: 8px;
  padding: 0.6rem 0.75rem; margin-bottom: 0.6rem; background: var(--block-background-fill); }
.pc-card-weak { border-left-color: #d97706; }
.pc-card-title { font-weight: 600; }
.pc-marker { color: var(--color-accent); margin-right: 0.2rem; }
.pc-meta { margin: 0.2rem 0 0.3rem; display: flex; gap: 0.5rem; align-items: center; flex-wrap: wrap; }
.pc-authors { color: var(--body-text-color-subdued); font-size: 0.8rem; }
.pc-link { font-size: 0.8rem; }
.pc-where { color: var(--body-text-color-subdued); font-family: var(--font-mono); font-size: 0.8rem; }
.pc-badge { font-size: 0.72rem; padding: 0.05rem 0.4rem; border-radius: 999px; white-space: nowrap; }
.pc-ok { background: #dcfce7; color: #166534; }
.pc-weak { background: #fef3c7; color: #92400e; }
.pc-bad { background: #fee2e2; color: #991b1b; }
.pc-evidence { font-size: 0.8rem; color: var(--body-text-color-subdued); margin: 0.1rem 0 0.2rem; }
.pc-verdicts { list-style: none; margin-left: 0; }
.pc-claims { margin: 0.2rem 0 0.4rem 1rem; padding: 0; }
.pc-claims li { margin: 0.15rem 0; }
.pc-abstract summary, .pc-hit summary { cursor: pointer; }
.pc-abstract p, .pc-abstract-text { margin: 0.35rem 0 0; color: var(--body-text-color); white-space: pre-wrap; }
.pc-sub { font-size: 0.78rem; color: var(--body-text-color-subdued); margin-top: 0.3rem; }
.pc-sources mark, .pc-papers mark { background: #fde68a; color: #111827; padding: 0 1px; border-radius: 2px; }
.pc-hits { list-style: none; padding: 0; margin: 0; }
.pc-hit, .pc-paper { border-bottom: 1px solid var(--border-color-primary); padding: 0.35rem 0; }
.pc-hit-title { font-weight: 500; }
.pc-notes { color: var(--body-text-color-subdued); font-size: 0.8rem; margin-top: 0.6rem; }
.pc-status { font-size: 0.85rem; }
.pc-anchor { scroll-margin-top: 0.5rem; }
.pc-flash > .pc-card { outline: 2px solid var(--color-accent); }
#pc-notice:empty, #pc-notice .prose:empty { display: none; }
#pc-notice { color: #b91c1c; font-size: 0.9rem; }
#pc-question textarea { font-size: 1rem; }
"""
