"""The Papers tab's map and cards, as plain functions (no Gradio here): the papers as points of a 2-D map
coloured by topic, the list under it filtered by topic and keywords, and a paper's card with its related
papers. Everything from the corpus is escaped before it reaches HTML.

The map is drawn on a canvas in the browser (ui/web/map_canvas.py) from ``map_points`` (positions and topics);
the page asks for the papers' titles, hover texts and ids as the mouse reaches them (``MapPoints.details``); a
click on a point sends that paper's id, and its card is shown.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from collections.abc import Sequence

import numpy as np

from rag.errors import PaperchatError
from rag.labels import metadata_line, place_label
from rag.plain_text import readable
from rag.topics.related import related_papers
from rag.types import Paper
from ui.shared.text import filter_papers, query_words
from ui.web.render import esc, highlighted_abstract, message_html, word_spans

ALL_TOPICS = 0  # the topic filter's "every topic"
TOPIC_PREFIX = "topic:"  # a map ``select`` of a legend entry ("topic:3"; "topic:0": every topic), not of a paper
LIST_LIMIT = 200  # papers listed at once
RELATED_IN_LIST = 3
RELATED_ON_CARD = 5
FIRST_SENTENCE_CHARS = 180
HOVER_CHARS = 120  # of the first sentence in the map's hover
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(])")
_WEB_LINK = re.compile(r"^https?://", re.IGNORECASE)
CARD_PLACEHOLDER = '<div class="pc-empty">Click a point of the map to open that paper here.</div>'

NARROW_PX = 320  # the map and the card side by side only when each gets this much width, else the card wraps under

CSS = f"""
.pc-map-row > * {{ min-width: min({NARROW_PX}px, 100%) !important; }}
.pc-topic {{ background: var(--color-accent-soft); color: var(--body-text-color); }}
.pc-related {{ font-size: 0.82rem; color: var(--body-text-color-subdued); margin-top: 0.25rem; }}
.pc-related ul {{ margin: 0.2rem 0 0 1rem; padding: 0; }}
"""


def first_sentence(abstract: str, limit: int = FIRST_SENTENCE_CHARS) -> str:
    text = " ".join(readable(abstract).split())
    sentence = _SENTENCE_END.split(text, maxsplit=1)[0]
    return sentence if len(sentence) <= limit else sentence[:limit - 1] + "…"


def topic_name(topic) -> str:
    return f"{topic.number} · {topic.label}"


MAP_GRID = 9999  # each axis sent as whole numbers 0..MAP_GRID: finer than any screen's pixels, at most 4 digits
DETAIL_ROWS = 256  # rows of hover text (and paper ids) the page asks for at once, as the mouse reaches them


def _grid(values: Sequence[float]) -> list[int]:
    """``values`` scaled to whole numbers 0..MAP_GRID (the page scales each axis to its canvas anyway)."""
    if not values:
        return []
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    return [round((v - low) / span * MAP_GRID) for v in values]


class MapLayout:
    """One index generation's map: the points as the page's compact JSON text (``points``, from ``map_points``),
    and each row's paper id, title and hover text, asked for in blocks of ``DETAIL_ROWS`` (``details``) as the
    mouse reaches them. The page's first message carries only what drawing needs: SciFact's 5,183 papers with
    their hover texts and ids made a ~1.5 MB message that every step from the server to the canvas handled
    (serialized, sent, parsed twice, compared by Gradio's HTML component); their positions alone are ~55 KB."""

    def __init__(self, components, version: int = 0) -> None:
        topic_map, self.papers = _map_rows(components)
        self.version = version
        self.points = json.dumps(_compact_points(topic_map, self.papers, version), ensure_ascii=False,
                                 separators=(",", ":"))
        self._details: dict[int, dict] = {}

    def details(self, start: int) -> dict:
        """Rows ``start`` to ``start + DETAIL_ROWS`` (``start`` is a multiple of it): their ids, titles and hover
        texts (first sentences, cut at ``HOVER_CHARS``), made once."""
        if start not in self._details:
            rows = self.papers[start:start + DETAIL_ROWS]
            self._details[start] = {
                "version": self.version, "start": start, "id": [p.paper_id for p in rows],
                "title": [p.title for p in rows], "about": [first_sentence(p.abstract, HOVER_CHARS) for p in rows],
            }
        return self._details[start]


class MapPoints:
    """The map of the current index generation (``MapLayout``), made once per generation and shared by every
    session: a page load does not rebuild it for thousands of papers. Its points go out as one JSON string, not
    nested lists: Gradio handles each element of a nested output (SciFact's map took ~2.4 s that way, ~0.45 s
    as text; measured on this 2-core machine, loaded)."""

    def __init__(self, components) -> None:
        self.components = components
        self._current: MapLayout | None = None
        self._lock = threading.Lock()

    def layout(self) -> MapLayout:
        generation = self.components.store.generation()
        with self._lock:
            if self._current is None or self._current.version != generation:
                self._current = MapLayout(self.components, generation)
            return self._current

    def current(self) -> str:
        """The page's map data (``map_points``) as JSON text."""
        return self.layout().points

    def details(self, asked) -> dict:
        """What the page asks for as the mouse moves (``{"version": V, "start": S}``): rows S.. of the map drawn at
        generation V (``MapLayout.details``); ``{"version": now, "stale": true}`` when the index has changed since
        (the page says to reload it), ``{"error": ...}`` for a request that is not one."""
        try:
            version, start = int(asked["version"]), int(asked["start"])
        except (TypeError, KeyError, ValueError):
            return {"error": "expected {version, start}"}
        layout = self.layout()
        if version != layout.version:
            return {"version": layout.version, "stale": True}
        if start < 0 or start % DETAIL_ROWS or start >= max(len(layout.papers), 1):
            return {"error": f"start must be a multiple of {DETAIL_ROWS} below {len(layout.papers)}"}
        return layout.details(start)


def _map_rows(components) -> tuple:
    """(the topic map, the papers on the map in its row order: grouped by topic in the topics' order)."""
    topic_map = components.topics()
    order = {t.number: index for index, t in enumerate(topic_map.topics)}
    rows = sorted(
        ((order[topic_map.paper_topic[p.paper_id]], p.paper_id, p) for p in components.papers()
         if p.paper_id in topic_map.paper_topic),
        key=lambda row: row[:2],
    )
    return topic_map, [p for _, _, p in rows]


def _compact_points(topic_map, papers: Sequence[Paper], version: int) -> dict:
    points = [topic_map.coordinates[p.paper_id] for p in papers]
    drawn = Counter(topic_map.paper_topic[p.paper_id] for p in papers)
    return {
        "version": version, "x": _grid([x for x, _ in points]), "y": _grid([y for _, y in points]),
        "topics": [{"number": t.number, "name": topic_name(t), "size": t.size, "rows": drawn[t.number]}
                   for t in topic_map.topics],
    }


def map_points(components, version: int = 0) -> dict:
    """The page's map data, what drawing needs and no more: each paper's position on a 0..``MAP_GRID`` grid per
    axis (``x``, ``y``), the rows grouped by topic in the order of ``topics``, each topic with its name, size and
    ``rows`` (its points, in order: row i's topic follows from them); ``version``, the index generation, to ask
    for rows' ids and hover texts with (``MapLayout.details``)."""
    topic_map, papers = _map_rows(components)
    return _compact_points(topic_map, papers, version)


def topic_choices(components) -> list[tuple[str, int]]:
    """The topic filter's choices: every topic, then each topic with its size."""
    topics = components.topics().topics
    return [("All topics", ALL_TOPICS)] + [(f"{topic_name(t)} ({t.size})", t.number) for t in topics]


def _neighbours(components, paper_ids: Sequence[str], n: int) -> dict[str, list[str]]:
    """The ``n`` nearest papers of each of ``paper_ids`` by profile vector, in one matrix product."""
    retriever = components.retriever
    retriever.refresh()
    vectors = retriever.vectors
    rows = [vectors.paper_rows[pid] for pid in paper_ids if pid in vectors.paper_rows]
    if not rows or len(vectors.paper_ids) < 2:
        return {}
    profiles = np.asarray(vectors.profiles, dtype=np.float64)
    unit = profiles / np.maximum(np.linalg.norm(profiles, axis=1, keepdims=True), 1e-12)
    sims = unit[rows] @ unit.T
    sims[np.arange(len(rows)), rows] = -np.inf  # a paper is not its own neighbour
    top = np.argsort(-sims, axis=1, kind="stable")[:, :n]
    return {vectors.paper_ids[r]: [vectors.paper_ids[c] for c in cols] for r, cols in zip(rows, top, strict=True)}


def _meta(paper: Paper, collection: str) -> str:
    parts = [f'<span class="pc-where" title="{esc(paper.source)} #{paper.ordinal}">'
             f"{esc(place_label(paper.source, paper.ordinal, venue=paper.venue, collection=collection))}</span>"]
    if details := metadata_line(paper.authors, paper.year, paper.venue, source=paper.source):
        parts.append(f'<span class="pc-authors">{esc(details)}</span>')
    url = paper.urls[0] if paper.urls else ""
    if _WEB_LINK.match(url):  # only http(s): a javascript: "url" from a record is not a link
        parts.append(f'<a class="pc-link" href="{esc(url)}" target="_blank" rel="noopener noreferrer">link</a>')
    return " ".join(parts)


def papers_list_html(components, query: str = "", topic: int | None = ALL_TOPICS) -> str:
    """The papers of ``topic`` (all: ``ALL_TOPICS``) matching ``query``, each with its topic and related papers."""
    try:
        papers = components.papers()
        topic_map = components.topics() if papers else None
    except PaperchatError as error:
        return message_html(str(error))
    if not papers:
        return message_html("The index is empty: run `paperchat ingest`.")
    query = query or ""
    chosen = papers
    if topic and topic_map is not None and (picked := topic_map.topic(int(topic))) is not None:
        members = set(picked.paper_ids)
        chosen = [p for p in papers if p.paper_id in members]
    found = filter_papers(chosen, query)
    if not found:
        return message_html(f"No paper matches “{query.strip()}” (of {len(chosen)}).")
    words = query_words(query)
    shown = found[:LIST_LIMIT]
    head = f"{len(found)} of {len(papers)} papers" if len(found) != len(papers) else f"{len(papers)} papers"
    head += " (click one for its abstract)"
    if len(found) > LIST_LIMIT:
        head += f"; showing the first {LIST_LIMIT}, refine the filter"
    by_id = {p.paper_id: p for p in papers}
    near = _neighbours(components, [p.paper_id for p in shown], RELATED_IN_LIST)
    collection = components.settings.collection
    items = []
    for p in shown:
        number = topic_map.paper_topic.get(p.paper_id) if topic_map else None
        tag = f' <span class="pc-badge pc-topic">topic {number}</span>' if number else ""
        related = " · ".join(esc(by_id[pid].title) for pid in near.get(p.paper_id, []) if pid in by_id)
        items.append(
            f'<li class="pc-paper"><details{" open" if words else ""}><summary><span class="pc-hit-title">'
            f"{highlighted_abstract(p.title, word_spans(p.title, words))}</span>{tag} {_meta(p, collection)}"
            f'</summary><p class="pc-abstract-text">{highlighted_abstract(p.abstract, word_spans(p.abstract, words))}'
            f"</p></details>" + (f'<div class="pc-related">Related: {related}</div>' if related else "") + "</li>"
        )
    items_html = "".join(items)
    return f'<div class="pc-papers"><div class="pc-head">{esc(head)}</div><ul class="pc-hits">{items_html}</ul></div>'


def paper_card_html(components, paper_id: str) -> str:
    """A paper's card: title, topic, metadata, its related papers with what they share, and its abstract."""
    try:
        papers = components.papers()
        topic_map = components.topics()
        components.retriever.refresh()
        related = related_papers(paper_id, papers, components.retriever.vectors, topic_map, RELATED_ON_CARD)
    except PaperchatError as error:
        return message_html(str(error))
    paper = next(p for p in papers if p.paper_id == paper_id)
    topic = topic_map.topic(topic_map.paper_topic.get(paper_id, -1))
    tag = f' <span class="pc-badge pc-topic">topic {esc(topic_name(topic))}</span>' if topic else ""
    items = "".join(f'<li>{esc(r.paper.title)} <span class="pc-authors">— {esc(r.shares)}</span></li>'
                    for r in related)
    return (
        f'<div class="pc-card pc-map-card"><div class="pc-card-title">{esc(paper.title)}{tag}</div>'
        f'<div class="pc-meta">{_meta(paper, components.settings.collection)}</div>'
        + (f'<div class="pc-related"><b>Related:</b><ul>{items}</ul></div>' if items else "")
        + f'<p class="pc-abstract-text">{esc(readable(paper.abstract))}</p></div>'
    )


def legend_topic(value) -> int | None:
    """The topic a click on the map's legend chose (``ALL_TOPICS`` when it was clicked off); None for a paper's
    point (or anything else)."""
    if isinstance(value, str) and value.startswith(TOPIC_PREFIX):
        number = value[len(TOPIC_PREFIX):]
        return int(number) if number.isdigit() else None
    return None


def select_on_map(components, paper_id) -> str:
    """The card for the paper clicked on the map (a placeholder when the click named none)."""
    if not isinstance(paper_id, str) or not paper_id:
        return CARD_PLACEHOLDER
    return paper_card_html(components, paper_id)
