"""The API without a key on 127.0.0.1 (open), with one answer slot and no waiting line: saturation is 429,
and a client that leaves mid-stream gives its slot back. One served app for the module."""

from __future__ import annotations

import time

import httpx
import pytest

SERVED_SETTINGS = {"api_max_concurrent": 1, "api_max_waiting": 0}
QUESTION = "Which papers use state space models for client selection?"
REPLY = "FedSSM selects clients with decision-aware state space models and predicts training dynamics [1]."

pytestmark = [pytest.mark.filterwarnings("ignore:.*no_silent_downcasting"),
              pytest.mark.filterwarnings("ignore:The copy keyword is deprecated")]


@pytest.fixture
def slow_llm(served_app):
    """The scripted endpoint writing slowly (about 5 s for the whole answer), normal again afterwards."""
    server = served_app.llm
    server.reply, server.chunk_size, server.delay = REPLY, 2, 0.1
    yield server
    server.delay, server.chunk_size = 0.0, 8


def body(stream: bool = False) -> dict:
    return {"model": "paperchat", "stream": stream, "messages": [{"role": "user", "content": QUESTION}]}


def ask(served_app, **kwargs) -> httpx.Response:
    return httpx.post(served_app.api_url + "/chat/completions", json=body(**kwargs), timeout=60, trust_env=False)


def wait_until_served(served_app, seconds: float = 15.0) -> httpx.Response:
    """Ask until the one slot is free again (429 meanwhile); the last response."""
    deadline = time.monotonic() + seconds
    while True:
        response = ask(served_app)
        if response.status_code != 429 or time.monotonic() > deadline:
            return response
        time.sleep(0.1)


def test_open_without_a_key_on_loopback(served_app):
    from openai import OpenAI

    with OpenAI(base_url=served_app.api_url, api_key="anything", max_retries=0) as client:
        assert [m.id for m in client.models.list()] == ["paperchat", "paperchat-extractive"]
    assert httpx.get(served_app.api_url + "/models", trust_env=False).status_code == 200  # no header at all


def test_saturated_is_429_with_retry_after_then_served_again(served_app, slow_llm):
    slow_llm.delay = 0.03  # about 1.5 s: long enough to be busy for the second request
    with httpx.stream("POST", served_app.api_url + "/chat/completions", json=body(stream=True), timeout=60,
                      trust_env=False) as first:
        assert first.status_code == 200
        busy = ask(served_app)
        assert busy.status_code == 429 and busy.headers["retry-after"] == "2"
        error = busy.json()["error"]
        assert error["type"] == "rate_limit_error" and "retry" in error["message"]
        text = "".join(first.iter_text())
    assert text.rstrip().endswith("data: [DONE]")
    slow_llm.delay = 0.0
    assert wait_until_served(served_app).status_code == 200


def test_a_client_leaving_mid_stream_frees_its_slot_and_the_server_keeps_serving(served_app, slow_llm):
    slow_llm.reply = " ".join([REPLY] * 4)  # about 20 s to write in full
    streamed_before = len(slow_llm.requests)
    started = time.monotonic()
    with httpx.stream("POST", served_app.api_url + "/chat/completions", json=body(stream=True), timeout=60,
                      trust_env=False) as response:
        assert response.status_code == 200
        lines = response.iter_lines()
        got = [next(lines) for _ in range(8)]
        assert any('"content"' in line for line in got)
    # Gone after a few chunks: the answer is no longer written, the slot is free long before the 20 s.
    slow_llm.delay = 0.0
    served = wait_until_served(served_app)
    assert served.status_code == 200, served.text
    assert time.monotonic() - started < 10
    assert served.json()["citations"][0]["title"] == "FedSSM"
    assert len(slow_llm.requests) == streamed_before + 2
