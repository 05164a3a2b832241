"""Load: ``python app.py`` serving 20 sessions at once through the ``/chat`` API.

The data folder is built first by ``python -m ui.cli ingest`` (the real embedding model, the bundled
corpus). The LLM endpoint is the scripted server, run here in the test process so that its reply can be
computed per request: it streams slowly (4 characters every 20 ms) and writes the unique token of the
question it was asked into the answer. Every session must get its own answer (its own token, no other
session's) with the sources of its own question. Latencies go to tests/artifacts/load.txt.

Building the index and starting the app begin in the background with the first test of this folder
(``load_app`` in conftest.py), so they overlap with the other hardening tests.
"""

from __future__ import annotations

import re
import socket
import statistics
import threading
import time

import pytest

from tests.conftest import BUNDLED_CORPUS, PROJECT_ROOT
from tests.hardening.conftest import TOKEN

pytestmark = pytest.mark.slow

SESSIONS = 20
ARTIFACT = PROJECT_ROOT / "tests" / "artifacts" / "load.txt"


def questions() -> list[tuple[str, str, str]]:
    """(question, its token, the Sources line it must get): questions that name a paper, one per session."""
    from rag.corpus.load import load_corpus
    from rag.labels import place_label
    from rag.retrieval.hybrid import _name_pattern

    papers = [p for p in load_corpus([BUNDLED_CORPUS]).papers if _name_pattern(p.title)][:SESSIONS]
    assert len(papers) == SESSIONS
    out = []
    for i, paper in enumerate(papers):
        token = f"zq{i * 7919 + 0x1000:08x}"
        out.append((f"What does {paper.title} propose? (ref {token})", token,
                    f"[1] {paper.title} — {place_label(paper.source, paper.ordinal, venue=paper.venue)}"))
    return out


@pytest.fixture(scope="module")
def app(load_app):
    """The app over a data folder built by ``python -m ui.cli ingest`` (prepared in the background by conftest)."""
    return load_app.wait()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def test_twenty_sessions_at_once_each_get_their_own_answer_and_sources(app):
    from gradio_client import Client

    asked = questions()
    results: list[dict] = [{} for _ in asked]
    ready = threading.Barrier(SESSIONS)

    def session(i: int) -> None:
        question, _token, _sources = asked[i]
        try:
            client = Client(app.url, verbose=False)
            ready.wait(timeout=120)
            started = time.monotonic()
            text = client.submit(question, api_name="/chat").result(timeout=300)
            results[i] = {"text": text, "seconds": time.monotonic() - started}
        except Exception as error:  # reported below, per session
            results[i] = {"error": f"{type(error).__name__}: {error}"}
            ready.abort()

    threads = [threading.Thread(target=session, args=(i,)) for i in range(SESSIONS)]
    wall = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=400)
    wall = time.monotonic() - wall

    errors = [(i, r.get("error")) for i, r in enumerate(results) if "text" not in r]
    assert not errors, errors
    for (question, token, sources_line), result in zip(asked, results, strict=True):
        text = result["text"]
        assert text.startswith(f"Session {token}: "), (question, text)
        assert text.split("\n")[0].endswith(" [1]."), (question, text)  # the claim kept its citation
        assert TOKEN.findall(text) == [token], (question, text)  # its own token, and no other session's
        assert "Sources:\n" + sources_line in text, (question, text)
    requests = app.llm.chat_requests
    assert len(requests) == SESSIONS  # one endpoint call per question: no retries, no duplicates
    assert sorted(TOKEN.findall(r["json"]["messages"][-1]["content"])[0] for r in requests) == sorted(
        t for _, t, _ in asked)

    limit = int(re.search(r"^CONCURRENCY = (\d+)", (PROJECT_ROOT / "ui" / "web" / "app.py").read_text(), re.M).group(1))
    peak = app.llm.peak
    assert 1 <= peak <= limit  # the queue's limit holds: the rest wait their turn
    seconds = [r["seconds"] for r in results]
    report = {
        "sessions": SESSIONS,
        "answers concurrency limit (ui/web/app.py CONCURRENCY)": limit,
        "peak answers streaming at the endpoint": peak,
        "endpoint": "scripted, 4 characters every 20 ms (~0.3 s per answer)",
        "latency p50 (s)": round(statistics.median(seconds), 2),
        "latency p95 (s)": round(percentile(seconds, 0.95), 2),
        "latency min / max (s)": f"{min(seconds):.2f} / {max(seconds):.2f}",
        "wall time for all sessions (s)": round(wall, 2),
        "throughput (answers/s)": round(SESSIONS / wall, 2),
        "ingest with the real model (s)": round(app.timings["ingest"], 1),
        "app start to first page (s)": round(app.timings["start"], 1),
    }
    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    ARTIFACT.write_text("".join(f"{key}: {value}\n" for key, value in report.items()), encoding="utf-8")
    print("\nload:", report)


def test_the_app_listens_on_loopback_only(app):
    log = app.log.read_text()
    assert f"open http://127.0.0.1:{app.port}" in log and "warning" not in log
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))  # no packet is sent: this only picks the outward interface
            address = probe.getsockname()[0]
        except OSError:
            address = "127.0.0.1"
    if address.startswith("127."):
        pytest.skip("no non-loopback address on this machine")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(2)
        assert sock.connect_ex((address, app.port)) != 0, f"the app answers on {address}"
