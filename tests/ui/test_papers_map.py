"""The Papers tab's map, list and cards, and the chat's Markdown download, as plain functions (no browser):
over the tiny index with its markup probe, and over the bundled corpus (fake embedder)."""

from __future__ import annotations

import json
import re

import pytest

from rag.answers.pipeline import FinalEvent, TextEvent
from rag.exports.markdown import answer_markdown
from rag.plain_text import readable
from rag.types import Answer, Citation
from tests.ui.conftest import SCRIPT_PAYLOAD, XSS_TITLE
from ui.web import papers_map
from ui.web.takeaway import LastAnswer, markdown_file, recording


@pytest.fixture
def tiny(make_components):
    return make_components()


def _rows(points: dict) -> list[int]:
    """Each row's topic index, as the page reads it from the topics' row counts."""
    return [index for index, topic in enumerate(points["topics"]) for _ in range(topic["rows"])]


def _all_details(cache, version: int, rows: int) -> dict:
    """Every row's id, title and hover text, asked block by block as the page does."""
    found: dict[str, list] = {"id": [], "title": [], "about": []}
    for start in range(0, rows, papers_map.DETAIL_ROWS):
        block = cache.details({"version": version, "start": start})
        assert block["version"] == version and block["start"] == start
        for key in found:
            found[key] += block[key]
    return found


def test_the_map_has_one_point_per_paper_with_its_topic_and_first_sentence(tiny, monkeypatch):
    monkeypatch.setattr(papers_map, "DETAIL_ROWS", 4)  # the tiny index's 6 papers come in two blocks
    cache = papers_map.MapPoints(tiny)
    version = tiny.store.generation()
    points = json.loads(cache.current())
    papers = {p.paper_id: p for p in tiny.papers()}
    assert points["version"] == version and len(points["x"]) == len(points["y"]) == len(papers)
    detail = _all_details(cache, version, len(papers))
    assert sorted(detail["id"]) == sorted(papers)
    topics = tiny.topics()
    assert [{k: t[k] for k in ("number", "name", "size")} for t in points["topics"]] == [
        {"number": t.number, "name": f"{t.number} · {t.label}", "size": t.size} for t in topics.topics]
    rows = _rows(points)
    assert len(rows) == len(papers) and rows == sorted(rows)  # grouped by topic: the page draws one topic at a time
    xs = [topics.coordinates[pid][0] for pid in detail["id"]]
    ys = [topics.coordinates[pid][1] for pid in detail["id"]]
    for i, pid in enumerate(detail["id"]):
        assert points["topics"][rows[i]]["number"] == topics.paper_topic[pid]
        for grid, values in ((points["x"], xs), (points["y"], ys)):  # the grid keeps every position to half a step
            low, span = min(values), max(values) - min(values)
            assert abs(low + grid[i] / papers_map.MAP_GRID * span - values[i]) <= span / papers_map.MAP_GRID / 2 + 1e-9
        shown = " ".join(readable(papers[pid].abstract).split())  # as the UI shows abstracts
        about, title = detail["about"][i], detail["title"][i]
        assert shown.startswith(about.rstrip("…")) and title == papers[pid].title
        assert about.endswith((".", "…")) and len(about) <= papers_map.HOVER_CHARS
    assert min(points["x"]) == 0 and max(points["x"]) == papers_map.MAP_GRID
    assert papers_map.first_sentence("One. Two.") == "One."
    assert papers_map.topic_choices(tiny) == [("All topics", 0)] + [
        (f"{t.number} · {t.label} ({t.size})", t.number) for t in topics.topics]


def test_the_page_s_map_data_holds_positions_and_topics_only(tiny):
    layout = papers_map.MapLayout(tiny, 7)
    assert json.loads(layout.points) == papers_map.map_points(tiny, 7)  # the text round-trips to the data
    assert set(json.loads(layout.points)) == {"version", "x", "y", "topics"}
    assert all(isinstance(v, int) and 0 <= v <= papers_map.MAP_GRID for v in json.loads(layout.points)["x"])
    for p in tiny.papers():  # titles, hover texts and ids are asked for later, not sent with the points
        assert p.paper_id not in layout.points and p.title not in layout.points
    assert papers_map._grid([2.0, 2.0]) == [0, 0] and papers_map._grid([]) == []


def test_hover_texts_asked_for_are_those_rows_papers(tiny, monkeypatch):
    monkeypatch.setattr(papers_map, "DETAIL_ROWS", 4)
    cache = papers_map.MapPoints(tiny)
    version = tiny.store.generation()
    order = cache.layout().papers
    second = cache.details({"version": version, "start": 4})
    assert second["id"] == [p.paper_id for p in order[4:8]] and len(second["id"]) == 2  # rows 4 and 5 of 6
    assert second["title"] == [p.title for p in order[4:6]]
    assert second["about"] == [papers_map.first_sentence(p.abstract, papers_map.HOVER_CHARS) for p in order[4:6]]
    assert cache.details({"version": version, "start": 4}) is second  # made once
    assert cache.details({"version": version + 1, "start": 0}) == {"version": version, "stale": True}
    for wrong in ({"version": version, "start": 3}, {"version": version, "start": 8}, {"version": version,
                  "start": -4}, {"start": 0}, None, {"version": "x", "start": 0}):
        assert "error" in cache.details(wrong)


def test_the_map_data_is_made_once_per_index_generation(tiny):
    from rag.types import Paper

    cache = papers_map.MapPoints(tiny)
    first = cache.current()
    assert cache.current() is first
    before = tiny.store.generation()
    added = Paper("added", "Added paper", "A new abstract about federated clients.", "added.jsonl", 1)
    tiny.ingestor(show_progress=False).ingest([added])
    again = cache.current()
    now = tiny.store.generation()
    assert again is not first and json.loads(again) == papers_map.map_points(tiny, now)
    assert len(json.loads(again)["x"]) == len(json.loads(first)["x"]) + 1
    assert "added" in _all_details(cache, now, len(json.loads(again)["x"]))["id"]
    assert cache.details({"version": before, "start": 0}) == {"version": now, "stale": True}  # the old page's map


def test_the_list_filters_by_topic_and_keyword_and_names_related_papers(tiny):
    topics = tiny.topics()
    everything = papers_map.papers_list_html(tiny)
    assert "6 papers (click one for its abstract)" in everything and everything.count('class="pc-paper"') == 6
    assert everything.count('class="pc-related">Related: ') == 6
    first = topics.topics[0]
    listed = papers_map.papers_list_html(tiny, "", first.number)
    assert f"{first.size} of 6 papers" in listed and listed.count('class="pc-paper"') == first.size
    assert listed.count(f'<span class="pc-badge pc-topic">topic {first.number}</span>') == first.size
    fed = papers_map.papers_list_html(tiny, "federated", 0)
    assert fed.count('class="pc-paper"') == len([p for p in tiny.papers() if "federated" in
                                                 f"{p.title} {p.abstract} {p.source}".lower()])
    assert "<mark>" in fed
    assert "No paper matches “zzzz” (of 6)." in papers_map.papers_list_html(tiny, "zzzz", 0)


def test_corpus_text_is_escaped_in_the_list_and_the_card(tiny):
    html = papers_map.papers_list_html(tiny) + papers_map.paper_card_html(tiny, "probe-xss")
    assert SCRIPT_PAYLOAD not in html and "<b>bold</b>" not in html
    assert "&lt;script&gt;" in html and "ProbeXSS &lt;b&gt;bold&lt;/b&gt;" in html


def test_a_card_shows_the_paper_and_its_related_papers(tiny):
    card = papers_map.paper_card_html(tiny, "000_dcbf1b5d2daaeff5.txt#1")
    assert '<div class="pc-card-title">FedSSM' in card and "ICML 2026 · #1 of file 000" in card
    related = re.findall(r"<li>(.*?) <span class=\"pc-authors\">— (similarity [^<]*)</span></li>", card)
    assert len(related) == 5 and all("topic" in shares for _title, shares in related)
    assert {title for title, _ in related} <= {p.title.replace("<", "&lt;").replace(">", "&gt;") for p in tiny.papers()}
    assert "FedSSM" not in {title for title, _ in related}
    assert "no paper with id" in papers_map.paper_card_html(tiny, "nope")


def test_a_click_on_the_map_opens_that_paper_s_card(tiny):
    card = papers_map.select_on_map(tiny, "000_dcbf1b5d2daaeff5.txt#1")
    assert '<div class="pc-card-title">FedSSM' in card
    assert papers_map.select_on_map(tiny, None) == papers_map.CARD_PLACEHOLDER
    assert papers_map.select_on_map(tiny, ["not", "an id"]) == papers_map.CARD_PLACEHOLDER
    assert "no paper with id" in papers_map.select_on_map(tiny, "nope")


def test_an_empty_index_says_how_to_fill_it(settings_factory, fake_embedder):
    from rag.components import Components

    components = Components(settings_factory(), embedder=fake_embedder)
    assert "The index is empty: run `paperchat ingest`." in papers_map.papers_list_html(components)


class ScriptedPipeline:
    def __init__(self, answer: Answer) -> None:
        self.answer_ = answer

    def stream(self, question, history, k=None):
        yield TextEvent("FedSSM [1].")
        yield FinalEvent(self.answer_)


class ScriptedComponents:
    def __init__(self, answer: Answer) -> None:
        self.pipeline = ScriptedPipeline(answer)
        self.settings = "the settings"

    def pipeline_for(self, session):
        return self.pipeline


def test_the_last_finished_answer_downloads_as_markdown(tmp_path):
    answer = Answer("which papers?", "FedSSM selects clients [1].", citations=[Citation(1, "p", "FedSSM", "f.txt", 1)])
    last = LastAnswer()
    assert markdown_file(last, folder=tmp_path) is None  # no answer yet: nothing to download
    components = recording(ScriptedComponents(answer), last)
    assert components.settings == "the settings"  # everything else is the components' own
    events = list(components.pipeline_for(None).stream("which papers?", []))
    assert isinstance(events[-1], FinalEvent) and last.answer is answer
    path = markdown_file(last, folder=tmp_path)
    assert path.read_text(encoding="utf-8") == answer_markdown(answer)
    assert markdown_file(last, folder=tmp_path) == path  # the same answer, the same file
    assert XSS_TITLE not in path.read_text(encoding="utf-8")


def test_a_conversation_downloads_whole_each_answer_with_its_own_references(tmp_path):
    # "Download Markdown" saved only the last answer of a conversation.
    import re

    from rag.exports.markdown import conversation_markdown

    cited = [Citation(1, "p", "FedSSM", "f.txt", 1)]
    first = Answer("which papers?", "FedSSM selects clients [1].", citations=cited)
    second = Answer("and its results?", "It cuts rounds by 30% [1].", citations=cited)
    last = LastAnswer()
    components = recording(ScriptedComponents(first), last)
    list(components.pipeline_for(None).stream("which papers?", []))
    components = recording(ScriptedComponents(second), last)
    list(components.pipeline_for(None).stream("and its results?", []))
    path = markdown_file(last, folder=tmp_path)
    text = path.read_text(encoding="utf-8")
    assert path.name == "paperchat-conversation.md" and text == conversation_markdown([first, second])
    assert text.index("## which papers?") < text.index("## and its results?")
    links = re.findall(r"\]\(#([\w-]+)\)", text)
    anchors = re.findall(r'<a id="([\w-]+)"></a>', text)
    assert links == ["ref-1-1", "ref-2-1"] and sorted(anchors) == sorted(set(anchors)) == links  # each resolves
    last.clear()  # "New chat"
    assert markdown_file(last, folder=tmp_path) is None


def test_a_legend_click_names_a_topic_and_a_point_a_paper():
    from ui.web.papers_map import ALL_TOPICS, TOPIC_PREFIX, legend_topic

    assert legend_topic(f"{TOPIC_PREFIX}3") == 3 and legend_topic(f"{TOPIC_PREFIX}0") == ALL_TOPICS
    assert legend_topic("000_dcbf1b5d2daaeff5.txt#1") is None  # a paper's id opens its card
    assert legend_topic("topic:x") is None and legend_topic(None) is None and legend_topic(3) is None
