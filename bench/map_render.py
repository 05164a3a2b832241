"""How long the Papers tab's map takes: topics and map for N synthetic papers (k-means, PCA, labels), the map's
data (``ui.web.papers_map.map_points``) and its size (and that of the hover texts the page asks for as the mouse
moves), and the map drawn in Chromium (Debian's, headless), for SciFact's size (5,183 papers) and for the bundled
corpus's (76) as the baseline in the same process.

Synthetic papers: 384-dimensional unit vectors around 30 random centres, abstracts of 60 words drawn from a
vocabulary of 3,000 (each centre prefers its own 100). Nothing is downloaded; the map is the app's widget
(``ui.web.map_canvas``) in a one-widget Gradio app on 127.0.0.1.

``--data-dir DIR`` measures the whole app instead, over the index in DIR (its collection from
PAPERCHAT_COLLECTION): page opened, Papers tab clicked, every point drawn; then a hover on a point until its
title shows (asked of the server) and a click until the paper's card shows. The topics are built first if the
index has none yet (timed apart).

    python bench/map_render.py [--papers 5183] [--runs 3]
    PAPERCHAT_COLLECTION=scifact python bench/map_render.py --data-dir /tmp/scifact [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from dataclasses import dataclass

import numpy as np

DIMENSION = 384
CENTRES = 30
CHROMIUM = "/usr/bin/chromium"
BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-quic"]
DRAWN = "Number((document.querySelector('#pc-map canvas') || {dataset: {}}).dataset.points || 0) >= %d"


def synthetic_papers(n: int, seed: int = 0):
    from rag.types import Paper

    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(CENTRES, DIMENSION))
    owner = rng.integers(0, CENTRES, n)
    vectors = centres[owner] + rng.normal(scale=1.2, size=(n, DIMENSION))
    words = [f"w{chr(97 + i % 26)}{i}" for i in range(3000)]
    papers = []
    for i, c in enumerate(owner):
        own = rng.integers(c * 100, c * 100 + 100, 30)
        common = rng.integers(0, 3000, 30)
        text = " ".join(words[j] for j in np.concatenate([own, common])) + "."
        papers.append(Paper(f"paper-{i:05d}", f"Synthetic paper {i}", text, "synthetic.jsonl", i + 1))
    return papers, vectors.astype(np.float32)


@dataclass
class _Corpus:
    """What ``MapLayout`` reads of the components: the papers and their topics."""

    papers_: list
    topic_map: object

    def papers(self):
        return self.papers_

    def topics(self):
        return self.topic_map


def map_data(n: int):
    """(seconds to build the topics and map, seconds to build the map's data, the map (``MapLayout``), topics)."""
    from rag.topics.model import build_topic_map
    from ui.web.papers_map import MapLayout

    papers, vectors = synthetic_papers(n)
    started = time.perf_counter()
    topic_map = build_topic_map([p.paper_id for p in papers], vectors, [p.abstract for p in papers])
    topics_seconds = time.perf_counter() - started
    started = time.perf_counter()
    layout = MapLayout(_Corpus(papers, topic_map))
    return topics_seconds, time.perf_counter() - started, layout, len(topic_map.topics)


def details_bytes(layout) -> int:
    """The size of every row's id, title and hover text as the page would ask for them, block by block."""
    from ui.web.papers_map import DETAIL_ROWS

    return sum(len(json.dumps(layout.details(start))) for start in range(0, len(layout.papers), DETAIL_ROWS))


def _browser(p):
    return p.chromium.launch(executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS)


def render_seconds(datasets: dict, runs: int) -> dict[int, list[tuple[float, float, float]]]:
    """Per size, ``runs`` page loads, each as seconds (page up to the map's element, element to every point
    drawn, the whole)."""
    import gradio as gr
    from playwright.sync_api import sync_playwright

    from ui.web import map_canvas

    timings: dict[int, list] = {n: [] for n in datasets}
    urls = {}
    for n, layout in datasets.items():
        def map_details(asked, layout=layout):
            return layout.details(int(asked["start"]))
        map_details.__name__ = map_canvas.DETAILS_FUNCTION
        with gr.Blocks(analytics_enabled=False) as demo:
            gr.HTML(layout.points, html_template=map_canvas.MAP_TEMPLATE, js_on_load=map_canvas.MAP_SCRIPT,
                    elem_id=map_canvas.MAP_ELEMENT_ID, container=True, server_functions=[map_details])
        urls[n] = demo.launch(prevent_thread_lock=True, quiet=True, server_name="127.0.0.1", ssr_mode=False,
                              css=map_canvas.MAP_CSS)[1]
    try:
        with sync_playwright() as p:
            browser = _browser(p)
            for _ in range(runs):
                for n, url in urls.items():
                    page = browser.new_page(viewport={"width": 1400, "height": 1000})
                    started = time.perf_counter()
                    page.goto(url)
                    page.wait_for_selector("#pc-map canvas", timeout=120_000)
                    ready = time.perf_counter()
                    page.wait_for_function(DRAWN % n, timeout=120_000, polling=20)
                    drawn = time.perf_counter()
                    timings[n].append((ready - started, drawn - ready, drawn - started))
                    page.close()
            browser.close()
    finally:
        gr.close_all()
    return timings


def synthetic(args) -> dict:
    sizes = [args.baseline, args.papers]
    built = {n: map_data(n) for n in sizes}
    rendered = render_seconds({n: built[n][2] for n in sizes}, args.runs)
    result = {}
    for n in sizes:
        topics_s, data_s, layout, topics = built[n]
        page_s, draw_s, total_s = (statistics.median(run[i] for run in rendered[n]) for i in range(3))
        result[n] = {"papers": n, "topics": topics, "topics_and_map_s": round(topics_s, 3),
                     "map_data_s": round(data_s, 3), "map_data_bytes": len(layout.points),
                     "hover_texts_bytes": details_bytes(layout),
                     "page_to_map_s_median": round(page_s, 3), "map_to_all_points_s_median": round(draw_s, 3),
                     "open_to_all_points_s_median": round(total_s, 3),
                     "open_to_all_points_s_all": [round(run[2], 3) for run in rendered[n]]}
    base, big = result[args.baseline], result[args.papers]
    ratio = big["open_to_all_points_s_median"] / base["open_to_all_points_s_median"]
    return {"bench": "map_render", "baseline": base, "measured": big,
            "open_to_all_points_ratio_vs_baseline": round(ratio, 2)}


def whole_app(args, components=None) -> dict:
    """The app over a real index: open, Papers tab, every point drawn; a click on a point, its card shown.
    ``components``: the app's parts (default: built from the settings, over ``args.data_dir``)."""
    from playwright.sync_api import sync_playwright

    from rag.components import Components
    from rag.settings import load_settings
    from ui.web.app import build_app, launch
    from ui.web.papers_map import MapLayout

    if components is None:
        components = Components(load_settings(data_dir=args.data_dir, llm="extractive"), show_progress=False)
    started = time.perf_counter()
    papers = len(components.topics().paper_topic)
    topics_s = time.perf_counter() - started  # ~0 when the index's topics were saved already
    started = time.perf_counter()
    layout = MapLayout(components)  # apart from the app's own, which its first page load makes
    data_s = time.perf_counter() - started
    size, hover_size = len(layout.points), details_bytes(layout)
    import gradio as gr

    url = launch(build_app(components), components.settings, port=args.port)
    runs = []
    with sync_playwright() as p:
        browser = _browser(p)
        for _ in range(args.runs):
            page = browser.new_page(viewport={"width": 1500, "height": 1200})
            opened = time.perf_counter()
            page.goto(url)
            page.get_by_role("tab", name="Papers").click()
            page.wait_for_function(DRAWN % papers, timeout=120_000, polling=20)
            drawn = time.perf_counter()
            hover, clicked = _click_a_point(page, page.locator("#pc-map canvas").bounding_box())
            card = time.perf_counter() - clicked if clicked else None
            runs.append((drawn - opened, card, hover))
            page.close()
        browser.close()
    gr.close_all()
    totals = [r[0] for r in runs]
    cards = [r[1] for r in runs if r[1] is not None]
    hovers = [r[2] for r in runs if r[2] is not None]
    return {"bench": "map_render_app", "data_dir": str(args.data_dir), "papers": papers,
            "topics_built_s": round(topics_s, 3), "map_data_s": round(data_s, 3), "map_data_bytes": size,
            "hover_texts_bytes": hover_size,
            "open_to_all_points_s_median": round(statistics.median(totals), 3),
            "open_to_all_points_s_all": [round(t, 3) for t in totals],
            "hover_to_text_s_median": round(statistics.median(hovers), 3) if hovers else None,
            "click_to_card_s_median": round(statistics.median(cards), 3) if cards else None}


def _click_a_point(page, box) -> tuple[float | None, float | None]:
    """Hover across the canvas until the tooltip shows (a point is there), wait for its title (asked of the
    server on the first hover), click it: (seconds from the hover to the title, the time of the click)."""
    for fy in (0.5, 0.4, 0.6, 0.3, 0.7):
        for fx in (0.5, 0.4, 0.6, 0.3, 0.7, 0.2, 0.8):
            x, y = box["x"] + box["width"] * fx, box["y"] + box["height"] * fy
            hovered = time.perf_counter()
            page.mouse.move(x, y)
            if page.locator("#pc-map .pc-map-tip").is_visible():
                page.wait_for_function("(document.querySelector('#pc-map .pc-map-tip b') || {}).textContent"
                                       " !== '…'", timeout=60_000, polling=10)
                titled = time.perf_counter() - hovered
                clicked = time.perf_counter()
                page.mouse.click(x, y)
                page.wait_for_selector("#pc-map-card .pc-map-card", timeout=60_000)
                return titled, clicked
    return None, None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--papers", type=int, default=5183)
    parser.add_argument("--baseline", type=int, default=76)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--data-dir", help="measure the whole app over the index in this folder")
    parser.add_argument("--port", type=int, default=7931, help="with --data-dir: the app's port")
    args = parser.parse_args()
    result = whole_app(args) if args.data_dir else synthetic(args)
    print(json.dumps({**result, "load_average_1min": round(os.getloadavg()[0], 2), "cpus": os.cpu_count()},
                     indent=2))


if __name__ == "__main__":
    main()
