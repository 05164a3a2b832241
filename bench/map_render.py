"""How long the Papers tab's map takes: topics and map for N synthetic papers (k-means, PCA, labels), the
plot's data, and the plot drawn in Chromium (Debian's, headless), for SciFact's size (5,183 papers) and for
the bundled corpus's (76) as the baseline in the same process.

Synthetic papers: 384-dimensional unit vectors around 30 random centres, abstracts of 60 words drawn from a
vocabulary of 3,000 (each centre prefers its own 100). Nothing is downloaded; the plot is the app's
(``ui.web.papers_map.MAP_PLOT``) in a one-plot Gradio app on 127.0.0.1.

    python bench/map_render.py [--papers 5183] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np

DIMENSION = 384
CENTRES = 30
CHROMIUM = "/usr/bin/chromium"


def synthetic_papers(n: int, seed: int = 0) -> tuple[list[str], np.ndarray, list[str], list[str]]:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(CENTRES, DIMENSION))
    owner = rng.integers(0, CENTRES, n)
    vectors = centres[owner] + rng.normal(scale=1.2, size=(n, DIMENSION))
    words = [f"w{chr(97 + i % 26)}{i}" for i in range(3000)]
    texts = []
    for c in owner:
        own = rng.integers(c * 100, c * 100 + 100, 30)
        common = rng.integers(0, 3000, 30)
        texts.append(" ".join(words[i] for i in np.concatenate([own, common])) + ".")
    ids = [f"paper-{i:05d}" for i in range(n)]
    titles = [f"Synthetic paper {i}" for i in range(n)]
    return ids, vectors.astype(np.float32), texts, titles


def plot_frame(n: int):
    """(seconds to build the topics and map, seconds to build the plot's data, the data)."""
    import pandas as pd

    from rag.topics.model import build_topic_map
    from ui.web.papers_map import first_sentence

    ids, vectors, texts, titles = synthetic_papers(n)
    started = time.perf_counter()
    topic_map = build_topic_map(ids, vectors, texts)
    topics_seconds = time.perf_counter() - started
    started = time.perf_counter()
    names = {t.number: f"{t.number} · {t.label}" for t in topic_map.topics}
    rows = [(*topic_map.coordinates[pid], names[topic_map.paper_topic[pid]], title, first_sentence(text), pid)
            for pid, title, text in zip(ids, titles, texts, strict=True)]
    frame = pd.DataFrame(rows, columns=["x", "y", "topic", "title", "about", "paper_id"])
    return topics_seconds, time.perf_counter() - started, frame, len(topic_map.topics)


def render_seconds(frames: dict[int, object], runs: int) -> dict[int, list[tuple[float, float, float]]]:
    """Per size, ``runs`` page loads, each as seconds (page up to the plot's element, plot element to every
    point drawn, the whole)."""
    import gradio as gr
    from playwright.sync_api import sync_playwright

    from ui.web.papers_map import MAP_PLOT

    timings: dict[int, list] = {n: [] for n in frames}
    demos = {}
    for n, frame in frames.items():
        with gr.Blocks(analytics_enabled=False) as demo:
            gr.ScatterPlot(value=frame, elem_id="pc-map", **MAP_PLOT)
        demos[n] = demo.launch(prevent_thread_lock=True, quiet=True, server_name="127.0.0.1", ssr_mode=False)[1]
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                        args=["--no-sandbox", "--disable-gpu", "--no-first-run"])
            for _ in range(runs):
                for n, url in demos.items():
                    page = browser.new_page(viewport={"width": 1400, "height": 1000})
                    started = time.perf_counter()
                    page.goto(url)
                    page.wait_for_selector("#pc-map", timeout=120_000)
                    ready = time.perf_counter()
                    page.wait_for_function(
                        f"document.querySelectorAll('#pc-map .mark-symbol path').length >= {n}",
                        timeout=120_000, polling=50)
                    drawn = time.perf_counter()
                    timings[n].append((ready - started, drawn - ready, drawn - started))
                    page.close()
            browser.close()
    finally:
        gr.close_all()
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--papers", type=int, default=5183)
    parser.add_argument("--baseline", type=int, default=76)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    sizes = [args.baseline, args.papers]
    built = {n: plot_frame(n) for n in sizes}
    rendered = render_seconds({n: built[n][2] for n in sizes}, args.runs)
    result = {}
    for n in sizes:
        topics_s, frame_s, _frame, topics = built[n]
        page_s, draw_s, total_s = (statistics.median(run[i] for run in rendered[n]) for i in range(3))
        result[n] = {"papers": n, "topics": topics, "topics_and_map_s": round(topics_s, 3),
                     "plot_data_s": round(frame_s, 3), "page_to_plot_s_median": round(page_s, 3),
                     "plot_to_all_points_s_median": round(draw_s, 3), "open_to_all_points_s_median": round(total_s, 3),
                     "open_to_all_points_s_all": [round(run[2], 3) for run in rendered[n]]}
    base, big = result[args.baseline], result[args.papers]
    ratio = big["open_to_all_points_s_median"] / base["open_to_all_points_s_median"]
    print(json.dumps({"bench": "map_render", "load_average_1min": round(os.getloadavg()[0], 2),
                      "cpus": os.cpu_count(), "baseline": base, "measured": big,
                      "open_to_all_points_ratio_vs_baseline": round(ratio, 2)}, indent=2))


if __name__ == "__main__":
    main()
