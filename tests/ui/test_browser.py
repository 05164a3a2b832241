"""In a real browser (Debian's Chromium, headless, driven by Playwright): ask, watch the answer stream,
check its sources, stop an answer, keep two sessions apart, and make sure no markup from the corpus or the
model ever runs. Screenshots go to tests/artifacts/ (git-ignored)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import BUNDLED_CORPUS, PROJECT_ROOT
from tests.processes import free_port, stop_process
from tests.ui.conftest import (
    IMG_PAYLOAD,
    SCRIPT_PAYLOAD,
    clean_env,
    start_app,
    start_fake_llm,
    type_text,
    wait_for_app,
    write_extra_corpus,
)

pytestmark = [pytest.mark.slow, pytest.mark.browser]

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = PROJECT_ROOT / "tests" / "artifacts"
REPLY = f"FedSSM selects clients with state space models [1]. {IMG_PAYLOAD}"
SLOW_REPLY = "MA-RAG was evaluated on several question answering benchmarks, one after another. " * 4 + "[1]."
QUESTION = "Which papers use state-space models for client selection?"

BOT = '#pc-chat [data-testid="bot"]'
SOURCES = "#pc-sources-panel"


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    if not Path(CHROMIUM).exists():
        pytest.skip("needs Debian's chromium: apt-get install chromium (never `playwright install`)")
    tmp = tmp_path_factory.mktemp("browser")
    data = tmp / "data"
    extra = write_extra_corpus(tmp / "extra.jsonl")
    env = clean_env(PAPERCHAT_DATA_DIR=str(data))
    subprocess.run([sys.executable, "-m", "ui.cli", "ingest", str(BUNDLED_CORPUS), str(extra)],
                   cwd=PROJECT_ROOT, env=env, check=True, capture_output=True, timeout=300)
    fast, fast_url = start_fake_llm(REPLY, "--delay", "0.05", "--chunk-size", "4")
    slow, slow_url = start_fake_llm(SLOW_REPLY, "--delay", "0.25", "--chunk-size", "6")
    port = free_port()
    log = tmp / "app.log"
    proc = start_app({**env, "PAPERCHAT_LLM_BASE_URL": fast_url}, port, log)
    try:
        url = f"http://127.0.0.1:{port}/"
        wait_for_app(proc, url, log)
        yield {"url": url, "slow_url": slow_url, "log": log}
    finally:
        stop_process(proc)
        stop_process(fast)
        stop_process(slow)
        if log.exists():
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            shutil.copy(log, ARTIFACTS / "browser-app.log")


@pytest.fixture(scope="module")
def browser(app):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--disable-quic"],
        )
        yield browser
        browser.close()


@pytest.fixture
def dialogs():
    return []


def open_page(browser, app, dialogs):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(app["url"])
    page.wait_for_selector("#pc-question textarea", timeout=30_000)
    page.wait_for_function("document.querySelector('#pc-status').innerText.includes('papers')", timeout=30_000)
    return page


def ask(page, question: str) -> None:
    type_text(page.locator("#pc-question textarea"), question)
    page.locator("#pc-ask").click()


def last_bot_text(page) -> str:
    bots = page.locator(BOT)
    return bots.last.inner_text() if bots.count() else ""


def test_question_streams_an_answer_with_sources_and_no_markup_runs(browser, app, dialogs):
    from playwright.sync_api import expect

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page = open_page(browser, app, dialogs)
    expect(page.get_by_text("What did the MA-RAG authors evaluate on?")).to_be_visible()
    expect(page.locator("#pc-status")).to_contain_text("77 papers")
    expect(page.locator("#pc-status")).to_contain_text("reachable")
    expect(page.locator("#pc-status")).to_contain_text("Answers:")
    assert "Backend" not in page.locator("#pc-status").inner_text()
    expect(page.locator("#pc-stop")).to_be_hidden()  # nothing to stop yet
    page.screenshot(path=str(ARTIFACTS / "first_screen.png"))

    ask(page, QUESTION)
    seen = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        seen.append(last_bot_text(page))
        if page.locator(f"{SOURCES} .pc-card").count():
            break
        time.sleep(0.03)
    final = last_bot_text(page)
    assert final.startswith("FedSSM selects clients with state space models [1].")
    assert IMG_PAYLOAD in final  # the model's markup, shown as text
    partial = [t for t in seen if t.startswith("FedSSM") and "Sources" not in t and len(t) < len(REPLY)]
    assert partial, f"no partial answer was ever shown: {seen[-5:]}"  # it streamed

    panel = page.locator(SOURCES)
    # Only FedSSM uses state-space models for client selection, so the writer reads FedSSM alone (not the thirty
    # papers searched for the list): the payload claim, the probe abstract's own text, is flagged as in no source
    # it read, shown escaped, never run.
    expect(panel).to_contain_text("Cited papers (1)")
    expect(panel).to_contain_text("1 unsupported")
    expect(panel.locator(".pc-card-title").first).to_contain_text("FedSSM")
    expect(panel).to_contain_text("ICML 2026 · #1 of file 000")
    expect(panel.locator(".pc-card mark").first).to_be_visible()  # supporting sentence highlighted
    expect(panel).to_contain_text("Retrieved but not cited")
    page.screenshot(path=str(ARTIFACTS / "answer.png"))
    expect(page.locator("#pc-stop")).to_be_hidden()  # the answer is written: Stop goes away

    # [1] in the answer survives the Chatbot's sanitizer as a link; clicking it opens its card, in place.
    marker = page.locator(f'{BOT} a[href="#pc-source-1"]').first
    expect(marker).to_have_text("[1]")
    card = panel.locator("#pc-source-1")
    card.locator("details").evaluate("d => { d.open = false; }")
    pages_before, url_before = len(page.context.pages), page.url
    marker.click()
    expect(card.locator("details")).to_have_attribute("open", "")
    expect(card).to_be_in_viewport()
    assert len(page.context.pages) == pages_before and page.url == url_before

    probe = panel.locator(".pc-hit", has_text="ProbeXSS")
    if probe.count():  # retrieved for this question: its abstract opens as text
        probe.locator("summary").click()
        expect(probe.locator(".pc-abstract-text")).to_contain_text(SCRIPT_PAYLOAD)

    page.get_by_role("tab", name="Papers").click()
    type_text(page.locator("#pc-filter textarea"), "onerror")
    paper = page.locator("#pc-papers .pc-paper", has_text="ProbeXSS")
    expect(paper).to_have_count(1)
    expect(paper.locator(".pc-hit-title")).to_have_text("ProbeXSS <b>bold</b> injection")
    expect(paper.locator(".pc-abstract-text")).to_contain_text(SCRIPT_PAYLOAD)
    expect(paper.locator(".pc-abstract-text")).to_contain_text(IMG_PAYLOAD)
    page.screenshot(path=str(ARTIFACTS / "papers.png"))

    time.sleep(0.5)
    assert page.locator('img[src="x"]').count() == 0
    assert page.locator("#pc-papers script, #pc-sources-panel script, #pc-chat script").count() == 0
    assert page.locator("#pc-papers b, #pc-sources-panel b").count() == 0
    assert dialogs == []
    page.close()


def test_stop_new_chat_and_separate_sessions(browser, app, dialogs):
    from playwright.sync_api import expect

    alice = open_page(browser, app, dialogs)
    bob = open_page(browser, app, dialogs)

    # Bob points his session at the slow endpoint; Alice keeps the server's.
    bob.get_by_role("tab", name="Settings").click()
    type_text(bob.locator("#pc-endpoint textarea"), app["slow_url"])
    bob.locator("#pc-endpoint textarea").press("Enter")
    port = app["slow_url"].split(":")[-1].split("/")[0]
    expect(bob.locator("#pc-status")).to_contain_text(port)
    bob.get_by_role("tab", name="Chat").click()

    ask(bob, "What did the MA-RAG authors evaluate on?")
    expect(bob.locator(BOT).last).to_contain_text("MA-RAG was evaluated", timeout=20_000)
    expect(bob.locator("#pc-stop")).to_be_visible()  # while answering

    ask(alice, QUESTION)  # answered while Bob's answer is still being written
    expect(alice.locator(BOT).last).to_contain_text("Sources", timeout=20_000)
    assert "MA-RAG was evaluated" not in alice.locator("#pc-chat").inner_text()
    assert "FedSSM selects" not in bob.locator("#pc-chat").inner_text()

    bob.locator("#pc-stop").click()
    expect(bob.locator(BOT).last).to_contain_text("Stopped", timeout=10_000)
    expect(bob.locator(SOURCES)).to_contain_text("Retrieved papers (the answer was stopped)")
    expect(bob.locator("#pc-stop")).to_be_hidden()
    bob.screenshot(path=str(ARTIFACTS / "stopped.png"))
    # Gradio may deliver one late update of the cancelled stream; the app shows the stopped turn again once it
    # could have landed (STOP_SETTLE_SECONDS): read the turn after that, then check nothing more arrives.
    time.sleep(1.5)
    stopped = last_bot_text(bob)
    assert "MA-RAG was evaluated" in stopped and "Stopped" in stopped and len(stopped) < len(SLOW_REPLY) + 100
    time.sleep(1.0)
    assert last_bot_text(bob) == stopped  # nothing more arrives after Stop

    alice.locator("#pc-new").click()
    expect(alice.locator(BOT)).to_have_count(0)
    expect(alice.get_by_text("What did the MA-RAG authors evaluate on?")).to_be_visible()  # examples again
    expect(bob.locator(BOT)).to_have_count(1)  # Bob's chat is untouched
    assert dialogs == []
    alice.close()
    bob.close()


def test_rejected_question_stays_and_errors_are_said_once(browser, app, dialogs):
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 390, "height": 844})  # a phone: nothing about "the right"
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(app["url"])
    page.wait_for_selector("#pc-question textarea", timeout=30_000)
    assert "on the right" not in page.locator("body").inner_text()
    assert page.locator("#pc-chat label", has_text="Conversation").count() == 0  # no label over the messages

    long_question = "Which papers study routing? " + "x" * (10_000 - 28)
    ask(page, long_question)
    notice = page.locator("#pc-notice")
    expect(notice).to_contain_text("10,000 characters long", timeout=10_000)
    expect(notice).to_contain_text("shorten it")
    assert "PAPERCHAT_" not in notice.inner_text()
    assert page.locator("#pc-question textarea").input_value() == long_question  # the text is not lost
    expect(page.locator(BOT)).to_have_count(0)
    page.screenshot(path=str(ARTIFACTS / "long_question.png"), full_page=True)
    page.close()

    page = open_page(browser, app, dialogs)
    page.get_by_role("tab", name="Settings").click()
    dead = f"http://127.0.0.1:{free_port()}/v1"
    type_text(page.locator("#pc-endpoint textarea"), dead)
    page.locator("#pc-endpoint textarea").press("Enter")
    expect(page.locator("#pc-status")).to_contain_text("not reachable")
    page.get_by_role("tab", name="Chat").click()
    ask(page, QUESTION)
    expect(page.locator(BOT).last).to_contain_text("Could not answer", timeout=20_000)
    expect(page.locator(SOURCES)).to_contain_text("Retrieved papers (no answer was written)")
    expect(page.locator(SOURCES)).to_contain_text("FedSSM")  # the sources the search found are kept
    expect(page.locator("#pc-notice")).to_be_empty()
    body = page.locator("body").inner_text()
    assert body.count("cannot reach") + body.count("Cannot reach") == 1  # said once, in the answer
    assert "PAPERCHAT_" not in body and "--extractive" not in body
    page.screenshot(path=str(ARTIFACTS / "endpoint_down.png"), full_page=True)
    assert dialogs == []
    page.close()
