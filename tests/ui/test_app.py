"""End to end: ``python app.py`` as a process over an empty data dir (it builds the index from the bundled
corpus with the real embedding model), a scripted LLM endpoint as another process, and ``gradio_client``."""

from __future__ import annotations

import signal

import pytest

from tests.processes import free_port, stop_process
from tests.ui.conftest import clean_env, start_app, start_fake_llm, wait_for_app

pytestmark = pytest.mark.slow

REPLY = "FedSSM selects clients with state space models [1]."


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("app")
    llm, llm_url = start_fake_llm(REPLY)
    port = free_port()
    log = tmp / "app.log"
    env = clean_env(PAPERCHAT_LLM_BASE_URL=llm_url, PAPERCHAT_DATA_DIR=str(tmp / "data"))
    proc = start_app(env, port, log)
    try:
        url = f"http://127.0.0.1:{port}/"
        wait_for_app(proc, url, log)
        yield url, proc, log
    finally:
        stop_process(proc)
        stop_process(llm)


def test_chat_api_answers_with_sources(app):
    from gradio_client import Client

    url, _, _ = app
    text = Client(url, verbose=False).predict(
        "which papers use state-space models for client selection?", api_name="/chat"
    )
    assert text.startswith(REPLY)
    assert "Sources:\n[1] FedSSM — ICML 2026 · #1 of file 000" in text


def test_empty_index_was_built_on_startup_and_nothing_is_public(app):
    _, _, log = app
    text = log.read_text()
    assert "the index is empty: building it from" in text
    assert "open http://127.0.0.1:" in text
    assert "gradio.live" not in text and "warning" not in text  # loopback, no share link


def test_the_same_process_serves_the_openai_api_and_mcp(app):
    """``python app.py`` (what ``paperchat serve`` runs): /v1 and /mcp on the UI's port, open on loopback."""
    import asyncio

    from mcp import Client
    from openai import OpenAI

    url, _, log = app
    with OpenAI(base_url=url + "v1", api_key="unused", max_retries=0, timeout=120) as client:
        completion = client.chat.completions.create(
            model="paperchat", messages=[{"role": "user", "content": "which papers use state-space models for "
                                                                      "client selection?"}])
    assert completion.choices[0].message.content.startswith(REPLY + "\n\nSources:\n[1] FedSSM")
    assert completion.model_extra["citations"][0]["paper_id"] == "000_dcbf1b5d2daaeff5.txt#1"

    async def tools() -> set[str]:
        async with Client(url + "mcp") as mcp_client:
            return {tool.name for tool in (await mcp_client.list_tools()).tools}

    assert asyncio.run(tools()) >= {"search_papers", "ask", "get_paper", "list_papers"}
    assert "OpenAI-compatible API at /v1, MCP at /mcp (open on loopback, no key set)" in log.read_text()


def test_ctrl_c_stops_the_app_cleanly(app):
    _, proc, log = app
    proc.send_signal(signal.SIGINT)
    assert proc.wait(30) == 0
    assert log.read_text().rstrip().endswith("paperchat: stopped")
