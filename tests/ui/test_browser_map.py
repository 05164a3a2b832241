"""In a real browser (Debian's Chromium, headless): the Papers tab's map draws one point per paper coloured
by topic, a click on a point opens that paper's card with its related papers, and the chat's last answer
downloads as Markdown. The app runs over the bundled corpus with extractive answers (no LLM)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.processes import free_port, stop_process
from tests.ui.conftest import clean_env, start_app, type_text, wait_for_app

pytestmark = [pytest.mark.slow, pytest.mark.browser]

CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def app(bundled_index, tmp_path_factory):
    if not Path(CHROMIUM).exists():
        pytest.skip("needs Debian's chromium: apt-get install chromium (never `playwright install`)")
    log = tmp_path_factory.mktemp("browser-map") / "app.log"
    port = free_port()
    proc = start_app(clean_env(PAPERCHAT_DATA_DIR=str(bundled_index), PAPERCHAT_LLM="extractive"), port, log)
    try:
        url = f"http://127.0.0.1:{port}/"
        wait_for_app(proc, url, log)
        yield url
    finally:
        stop_process(proc)


@pytest.fixture(scope="module")
def page(app):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                                          "--disable-component-update", "--disable-sync", "--no-first-run"])
        page = browser.new_page(viewport={"width": 1400, "height": 1100}, accept_downloads=True)
        page.goto(app)
        page.wait_for_selector("#pc-question textarea", timeout=60_000)
        yield page
        browser.close()


def test_the_map_renders_and_a_click_on_a_point_opens_its_card(page):
    from playwright.sync_api import expect

    page.get_by_role("tab", name="Papers").click()
    canvas = page.locator("#pc-map canvas")
    expect(canvas).to_have_attribute("data-points", "76", timeout=120_000)  # one point per paper, drawn
    legend = page.locator("#pc-map .pc-map-legend [role=button]")
    expect(legend.first).to_contain_text("1 · ")  # the legend names the topics
    assert legend.count() >= 2
    box = canvas.bounding_box()
    tip = page.locator("#pc-map .pc-map-tip")
    point = None
    for x, y in [(box["x"] + box["width"] * fx / 20, box["y"] + box["height"] * fy / 20)
                 for fy in range(2, 19) for fx in range(2, 19)]:
        page.mouse.move(x, y)
        if tip.is_visible():  # a point is under the mouse
            point = (x, y)
            break
    assert point is not None, "no point under the mouse anywhere on the map"
    expect(tip.locator("b")).not_to_have_text("…", timeout=30_000)  # the title comes from the server on demand
    title = tip.locator("b").inner_text()
    assert title and "topic " in tip.inner_text()  # hover: the title, the first sentence and the topic
    assert len(tip.inner_text()) > len(title) + len("topic ") + 10  # and the first sentence between them
    page.mouse.click(*point)
    card = page.locator("#pc-map-card .pc-map-card")
    expect(card).to_be_visible(timeout=60_000)
    expect(card.locator(".pc-card-title")).to_contain_text(title)  # the paper clicked, not another
    topic = tip.locator("div").inner_text()  # the point's topic, from the map's own rows
    expect(card.locator(".pc-card-title .pc-topic")).to_have_text(topic)  # the hover's paper is that point's
    expect(card.locator(".pc-related")).to_contain_text("Related:")
    expect(card.locator(".pc-related li").first).to_contain_text("similarity")
    expect(page.locator("#pc-papers")).to_contain_text("76 papers")
    legend.first.click()  # a topic highlighted: the others' entries dimmed
    expect(page.locator("#pc-map .pc-map-legend .pc-dim")).to_have_count(legend.count() - 1)


def test_the_last_answer_downloads_as_markdown(page):
    from playwright.sync_api import expect

    page.get_by_role("tab", name="Chat").click()
    type_text(page.locator("#pc-question textarea"), "Which papers use state-space models for client selection?")
    page.locator("#pc-ask").click()
    button = page.locator("#pc-download")
    expect(button).to_be_visible(timeout=120_000)
    with page.expect_download(timeout=30_000) as download:
        button.click()
    text = Path(download.value.path()).read_text(encoding="utf-8")
    assert text.startswith("# Which papers use state-space models for client selection?")
    assert "## References" in text and '<a id="ref-1"></a>' in text and "](#ref-1)" in text


def test_the_chat_s_filter_box_narrows_the_papers_and_says_what_is_wrong(page):
    from playwright.sync_api import expect

    page.get_by_role("tab", name="Chat").click()
    type_text(page.locator("#pc-where textarea, #pc-where input").first, "source=002_735305cd7294d037.txt")
    type_text(page.locator("#pc-question textarea"), "Which papers are about federated learning?")
    page.locator("#pc-ask").click()
    panel = page.locator("#pc-sources-panel")
    expect(panel).to_contain_text("Fed-Kalter", timeout=120_000)
    expect(page.locator("#pc-chat")).to_contain_text("Fed-Kalter", timeout=120_000)
    assert "FedSSM" not in panel.inner_text() and "FedVPA-GP" not in panel.inner_text()  # other files' papers
    type_text(page.locator("#pc-where textarea, #pc-where input").first, "yeer>=2024")
    type_text(page.locator("#pc-question textarea"), "Which papers are about anomaly detection?")
    page.locator("#pc-ask").click()
    expect(page.locator("#pc-notice")).to_contain_text("Unknown filter field 'yeer'", timeout=60_000)
    expect(page.locator("#pc-question textarea")).to_have_value("Which papers are about anomaly detection?")


def test_a_narrow_window_stacks_the_map_over_the_card_and_the_page_loads_at_its_top(app, page):
    """At 400x800 the map was a 124 px column beside a 148 px card, and the page loaded scrolled ~600 px down (the
    question box's autofocus scrolled to it, past the title, the intro and the tabs)."""
    from playwright.sync_api import expect

    narrow = page.context.browser.new_page(viewport={"width": 400, "height": 800})
    try:
        narrow.goto(app)
        expect(narrow.locator("#pc-question textarea")).to_be_focused(timeout=60_000)  # ready to type in, as before
        narrow.wait_for_timeout(500)
        assert narrow.evaluate("window.scrollY") == 0
        narrow.get_by_role("tab", name="Papers").click()
        expect(narrow.locator("#pc-map canvas")).to_have_attribute("data-points", "76", timeout=120_000)
        row = narrow.locator(".pc-map-row").bounding_box()
        map_box, card = narrow.locator("#pc-map").bounding_box(), narrow.locator("#pc-map-card").bounding_box()
        assert map_box["width"] >= row["width"] - 2 and card["width"] >= row["width"] - 2  # each the full width
        assert card["y"] >= map_box["y"] + map_box["height"] - 1  # the card under the map
    finally:
        narrow.close()


def test_the_legend_and_the_topic_filter_drive_each_other(page):
    """The legend promised "show this topic's papers" but only dimmed the map; the dropdown left the map as it was."""
    from playwright.sync_api import expect

    page.get_by_role("tab", name="Papers").click()
    expect(page.locator("#pc-map canvas")).to_have_attribute("data-points", "76", timeout=120_000)
    legend = page.locator("#pc-map .pc-map-legend [role=button]")
    head = page.locator("#pc-papers .pc-head")
    second = legend.nth(1)
    size = int(second.inner_text().rsplit("(", 1)[1].rstrip(")"))
    second.click()
    expect(head).to_contain_text(f"{size} of 76 papers", timeout=30_000)  # the list shows that topic's papers
    expect(page.locator("#pc-topic-filter input")).to_have_value(f"{second.inner_text()}")  # the filter says so
    second.click()  # again: every topic
    expect(head).to_contain_text("76 papers", timeout=30_000)
    expect(head).not_to_contain_text("of 76")
    expect(page.locator("#pc-topic-filter input")).to_have_value("All topics")
    # The dropdown's choice is highlighted on the map: the other topics' legend entries are dimmed.
    page.locator("#pc-topic-filter input").click()
    page.get_by_role("option", name=legend.nth(2).inner_text()).click()
    expect(legend.nth(2)).not_to_have_class("pc-dim")
    expect(legend.nth(0)).to_have_class("pc-dim", timeout=30_000)
