"""The OpenAI-compatible chat client, over real HTTP against the scripted server in tests/fake_llm.py.

Each test plays one thing a real server does (or fails to do) and checks what the user would get:
the answer text, the reasoning kept apart, or exactly one ``LLMError`` whose message says what to do.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag.errors import (
    LLMAuthError,
    LLMError,
    LLMInterrupted,
    LLMModelNotFound,
    LLMProtocolError,
    LLMRateLimited,
    LLMServerError,
    LLMTimeout,
    LLMUnavailable,
)
from rag.llm.client import ChatModel, OpenAIChatModel
from rag.llm.replies import Delta
from rag.llm.retries import backoff_delay, retry_after_delay
from rag.llm.think import ThinkSplitter
from tests.fake_llm import DEFAULT_REASONING, ScriptedLLMServer, free_port

SECRET = "sk-test-SECRET-123"
MESSAGES = [{"role": "system", "content": "Answer from the sources."}, {"role": "user", "content": "What is new?"}]
REPLY = "Sparse attention halves the cost [1]; the ablation confirms it [2]."


def make_model(url: str, **kwargs) -> OpenAIChatModel:
    kwargs.setdefault("model", "scripted-model")
    kwargs.setdefault("backoff", 0.01)
    kwargs.setdefault("timeout", 5.0)
    return OpenAIChatModel(url, **kwargs)


@pytest.fixture
def server(llm_server: ScriptedLLMServer) -> ScriptedLLMServer:
    llm_server.reply = REPLY
    return llm_server


# --- the happy path ----------------------------------------------------------------------------


def test_a_streamed_answer_is_reassembled_and_the_request_is_openai_shaped(server):
    with make_model(server.base_url, temperature=0.3, max_tokens=100) as model:
        deltas = list(model.stream(MESSAGES))
    assert "".join(d.content for d in deltas) == REPLY
    assert len(deltas) > 1  # it really streamed, piece by piece
    assert all(isinstance(d, Delta) and d.reasoning == "" for d in deltas)
    (request,) = server.chat_requests
    assert request["method"] == "POST"
    assert request["path"] == "/v1/chat/completions"
    assert request["json"] == {
        "model": "scripted-model",
        "messages": MESSAGES,
        "stream": True,
        "temperature": 0.3,
        "max_tokens": 100,
    }


def test_per_call_temperature_and_max_tokens_override_the_defaults(server):
    with make_model(server.base_url) as model:
        assert model.complete(MESSAGES, temperature=0.0, max_tokens=64) == (REPLY, "")
    body = server.chat_requests[0]["json"]
    assert (body["temperature"], body["max_tokens"]) == (0.0, 64)


def test_the_bearer_key_is_sent_when_set(server):
    server.api_key = SECRET
    with make_model(server.base_url, api_key=SECRET) as model:
        assert model.complete(MESSAGES)[0] == REPLY
    assert server.requests[0]["headers"]["Authorization"] == f"Bearer {SECRET}"


def test_no_authorization_header_without_a_key(server):
    with make_model(server.base_url) as model:
        model.complete(MESSAGES)
    assert "Authorization" not in server.requests[0]["headers"]


def test_the_model_is_the_first_one_listed_when_none_is_configured(server):
    server.models = ["first-model", "second-model"]
    with make_model(server.base_url, model=None) as model:
        assert model.list_models() == ["first-model", "second-model"]
        assert model.resolve_model() == "first-model"
        assert model.complete(MESSAGES)[0] == REPLY
        assert model.label == f"endpoint: first-model @ {server.base_url}"
    assert server.chat_requests[0]["json"]["model"] == "first-model"


def test_a_server_without_models_needs_llm_model(server):
    server.models = []
    with make_model(server.base_url, model=None) as model, pytest.raises(LLMModelNotFound) as caught:
        model.complete(MESSAGES)
    assert "PAPERCHAT_LLM_MODEL" in str(caught.value)


def test_a_usage_only_chunk_is_ignored(server):
    server.mode = "usage_only"
    with make_model(server.base_url) as model:
        assert model.complete(MESSAGES) == (REPLY, "")


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_fields_are_kept_apart_from_the_answer(server, field):
    server.mode = "reasoning"
    server.reasoning_field = field
    with make_model(server.base_url) as model:
        deltas = list(model.stream(MESSAGES))
    assert "".join(d.content for d in deltas) == REPLY
    assert "".join(d.reasoning for d in deltas) == DEFAULT_REASONING
    first_content = next(i for i, d in enumerate(deltas) if d.content)
    assert all(not d.reasoning for d in deltas[first_content:])  # thinking came first


def test_think_tags_split_across_chunks_go_to_reasoning(server):
    server.mode = "think"  # "<th" + "ink" + ">..." in 3-character chunks
    with make_model(server.base_url) as model:
        content, reasoning = model.complete(MESSAGES)
    assert content == REPLY
    assert reasoning == DEFAULT_REASONING
    assert "think>" not in content and "think>" not in reasoning


def test_keep_alive_comments_are_skipped(server):
    server.mode = "keepalive"
    with make_model(server.base_url) as model:
        assert model.complete(MESSAGES) == (REPLY, "")


@pytest.mark.parametrize("line_ending", ["\n", "\r\n", "\r"])
def test_events_split_into_tiny_writes_are_reassembled(server, line_ending):
    server.mode = "split"  # 3-byte writes: also splits the multi-byte characters below
    server.line_ending = line_ending
    server.reply = "Überraschung → naïve 注意 [1]."
    with make_model(server.base_url) as model:
        assert model.complete(MESSAGES) == ("Überraschung → naïve 注意 [1].", "")


def test_a_slow_stream_is_fine_within_the_timeout(server):
    server.delay = 0.02
    server.chunk_size = 20
    with make_model(server.base_url, timeout=1.0) as model:
        assert model.complete(MESSAGES)[0] == REPLY


def test_a_server_that_ignores_stream_true_is_read_as_one_completion(server):
    server.mode = "no_stream"
    with make_model(server.base_url) as model:
        assert model.complete(MESSAGES) == (REPLY, "")
    assert len(server.chat_requests) == 1


def test_a_server_that_refuses_streaming_is_asked_again_without_it(server):
    server.mode = "reject_stream"
    with make_model(server.base_url) as model:
        assert model.complete(MESSAGES) == (REPLY, "")
    assert [r["json"]["stream"] for r in server.chat_requests] == [True, False]


def test_the_client_is_lazy_and_the_model_is_a_chat_model(server):
    model = make_model(server.base_url)
    assert isinstance(model, ChatModel)
    assert not model._endpoint.is_open  # nothing is opened by constructing
    stream = model.stream(MESSAGES)
    assert server.requests == []  # nor by asking for the generator
    assert next(stream).content
    stream.close()  # the consumer may stop early
    model.close()
    model.close()  # idempotent


def test_from_settings_carries_every_llm_setting(server, settings_factory):
    settings = settings_factory(
        llm_base_url=server.base_url,
        llm_api_key=SECRET,
        llm_model="scripted-model",
        llm_temperature=0.7,
        llm_max_tokens=99,
        llm_timeout=3.0,
        llm_retries=4,
    )
    server.api_key = SECRET
    with OpenAIChatModel.from_settings(settings) as model:
        assert (model.timeout, model.retries) == (3.0, 4)
        assert model.complete(MESSAGES)[0] == REPLY
        assert model.label == f"endpoint: scripted-model @ {server.base_url}"
    body = server.chat_requests[0]["json"]
    assert (body["temperature"], body["max_tokens"]) == (0.7, 99)


# --- failures ----------------------------------------------------------------------------------


def test_connection_refused_says_where_and_how_to_start_a_server():
    url = f"http://127.0.0.1:{free_port()}/v1"
    with make_model(url) as model, pytest.raises(LLMUnavailable) as caught:
        model.complete(MESSAGES)
    message = str(caught.value)
    assert url in message and "connection refused" in message
    assert "ollama serve" in message and "PAPERCHAT_LLM_BASE_URL" in message and "--extractive" in message
    assert isinstance(caught.value.__cause__, httpx.ConnectError)


def test_a_hanging_server_times_out_quickly(server):
    server.mode = "hang"
    start = time.monotonic()
    with make_model(server.base_url, timeout=0.5) as model, pytest.raises(LLMTimeout) as caught:
        model.complete(MESSAGES)
    assert time.monotonic() - start < 3  # no retry of timeouts
    assert "PAPERCHAT_LLM_TIMEOUT=0.5" in str(caught.value)
    assert len(server.chat_requests) == 1


def test_a_missing_key_is_an_auth_error(server):
    server.api_key = "the-right-key"
    with make_model(server.base_url) as model, pytest.raises(LLMAuthError) as caught:
        model.complete(MESSAGES)
    assert "requires an API key" in str(caught.value) and "PAPERCHAT_LLM_API_KEY" in str(caught.value)
    assert len(server.chat_requests) == 1  # 401 is never retried


def test_a_rejected_key_is_an_auth_error(server):
    server.mode = "status"
    server.status_code = 403
    with make_model(server.base_url, api_key="sk-wrong") as model, pytest.raises(LLMAuthError) as caught:
        model.complete(MESSAGES)
    assert "rejected the API key" in str(caught.value) and "HTTP 403" in str(caught.value)


def test_an_unknown_model_lists_the_models_the_server_offers(server):
    server.strict_model = True
    server.models = ["llama3.2:1b", "qwen2.5:0.5b"]
    with make_model(server.base_url, model="gpt-4o") as model, pytest.raises(LLMModelNotFound) as caught:
        model.complete(MESSAGES)
    message = str(caught.value)
    assert "'gpt-4o'" in message
    assert "the server offers: llama3.2:1b, qwen2.5:0.5b" in message
    assert "PAPERCHAT_LLM_MODEL" in message


def test_a_base_url_without_v1_is_pointed_out(server):
    with make_model(server.root_url) as model, pytest.raises(LLMUnavailable) as caught:
        model.complete(MESSAGES)
    assert "/v1" in str(caught.value) and "HTTP 404" in str(caught.value)
    assert f"PAPERCHAT_LLM_BASE_URL={server.root_url}/v1" in str(caught.value)


def test_429_with_retry_after_is_retried_after_that_wait(server):
    server.mode = "status"
    server.status_code = 429
    server.retry_after = "1"
    server.fail_times = 1
    start = time.monotonic()
    with make_model(server.base_url) as model:
        assert model.complete(MESSAGES)[0] == REPLY
    assert time.monotonic() - start >= 0.9  # the server's Retry-After, not the 0.01 s backoff
    assert len(server.chat_requests) == 2


def test_429_forever_is_rate_limited_after_all_retries(server):
    server.mode = "status"
    server.status_code = 429
    with make_model(server.base_url, retries=2) as model, pytest.raises(LLMRateLimited) as caught:
        model.complete(MESSAGES)
    assert len(server.chat_requests) == 3
    assert "429" in str(caught.value) and "3 attempts" in str(caught.value)


def test_500_twice_then_success(server):
    server.mode = "status"
    server.status_code = 500
    server.fail_times = 2
    with make_model(server.base_url, retries=2) as model:
        assert model.complete(MESSAGES)[0] == REPLY
    assert len(server.chat_requests) == 3


def test_500_forever_is_a_server_error_with_a_short_excerpt(server):
    server.mode = "status"
    server.status_code = 503
    server.error_message = "CUDA out of memory\nwhile loading the model " + "x" * 1000
    with make_model(server.base_url, retries=1) as model, pytest.raises(LLMServerError) as caught:
        model.complete(MESSAGES)
    message = str(caught.value)
    assert "HTTP 503" in message and "CUDA out of memory while loading the model" in message
    assert "\n" not in message and "x" * 201 not in message
    assert len(server.chat_requests) == 2


def test_other_4xx_errors_are_not_retried(server):
    server.mode = "status"
    server.status_code = 400
    server.error_message = "This model's maximum context length is 2048 tokens"
    with make_model(server.base_url) as model, pytest.raises(LLMError) as caught:
        model.complete(MESSAGES)
    assert len(server.chat_requests) == 1
    assert "HTTP 400" in str(caught.value) and "PAPERCHAT_TOP_K" in str(caught.value)


def test_a_line_that_is_not_json_is_a_protocol_error(server):
    server.mode = "malformed"
    with make_model(server.base_url) as model, pytest.raises(LLMProtocolError) as caught:
        model.complete(MESSAGES)
    assert "not JSON" in str(caught.value) and server.base_url in str(caught.value)


def test_a_bad_line_after_part_of_the_answer_keeps_that_part(server):
    server.mode = "malformed"
    server.malformed_after = 2
    server.chunk_size = 8
    with make_model(server.base_url) as model, pytest.raises(LLMInterrupted) as caught:
        model.complete(MESSAGES)
    assert caught.value.partial == REPLY[:16]


def test_a_cut_connection_keeps_the_partial_answer_and_is_not_retried(server):
    server.mode = "cut"
    server.chunk_size = 10
    server.cut_after = 3
    received = []
    with make_model(server.base_url, retries=3) as model, pytest.raises(LLMInterrupted) as caught:
        for delta in model.stream(MESSAGES):
            received.append(delta.content)
    assert caught.value.partial == REPLY[:30] == "".join(received)
    assert "broke off" in str(caught.value)
    assert len(server.chat_requests) == 1  # content was shown: no retry


FAULTS = {
    "refused": lambda s: f"http://127.0.0.1:{free_port()}/v1",
    "hang": lambda s: setattr(s, "mode", "hang"),
    "401 echoing the key": lambda s: setattr(s, "api_key", "another-key"),
    "404 model": lambda s: (setattr(s, "strict_model", True), setattr(s, "models", ["a", "b"])),
    "404 path": lambda s: s.root_url,
    "429": lambda s: (setattr(s, "mode", "status"), setattr(s, "status_code", 429)),
    "500 echoing the key": lambda s: (
        setattr(s, "mode", "status"),
        setattr(s, "status_code", 500),
        setattr(s, "error_message", f"upstream said: bad key {SECRET} for org"),
    ),
    "400 echoing the key": lambda s: (
        setattr(s, "mode", "status"),
        setattr(s, "status_code", 400),
        setattr(s, "error_message", f"invalid parameter near {SECRET}"),
    ),
    "malformed": lambda s: setattr(s, "mode", "malformed"),
    "cut": lambda s: setattr(s, "mode", "cut"),
    "no models": lambda s: setattr(s, "models", []),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_the_api_key_never_shows(server, fault, caplog):
    url = FAULTS[fault](server)
    url = url if isinstance(url, str) else server.base_url
    name = {"404 model": "gpt-x", "no models": None}.get(fault, "scripted-model")
    model = make_model(url, api_key=SECRET, timeout=0.5, model=name)
    caplog.set_level(logging.DEBUG)
    with model, pytest.raises(LLMError) as caught:
        model.complete(MESSAGES)
    error = caught.value
    texts = [str(error), repr(error), repr(model), model.label, caplog.text, str(error.__cause__ or "")]
    assert all(SECRET not in text for text in texts), texts
    assert "\n" not in str(error)


def test_the_key_is_not_in_repr_or_label():
    model = OpenAIChatModel("http://user:pw@127.0.0.1:9/v1", api_key=SECRET, model="m")
    assert SECRET not in repr(model) and SECRET not in model.label
    assert "pw" not in model.label and "***" in repr(model)


# --- quirks the scripted server does not play (an httpx transport stands in for the network) ----


def quirk(body: str | bytes, content_type: str = "text/event-stream", status: int = 200) -> OpenAIChatModel:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, headers={"Content-Type": content_type}, content=body)

    return make_model("http://llm.test/v1", transport=httpx.MockTransport(handler))


def sse(*chunks: dict | str) -> str:
    return "".join(f"data: {c if isinstance(c, str) else json.dumps(c)}\n\n" for c in chunks)


def test_null_content_and_a_finish_reason_without_done_are_accepted():
    body = sse(
        {"choices": [{"delta": {"role": "assistant", "content": None}}]},
        {"choices": [{"delta": {"content": "All"}, "finish_reason": None}]},
        {"choices": [{"delta": {"content": " done."}, "finish_reason": "length"}]},
    )
    assert quirk(body).complete(MESSAGES) == ("All done.", "")


def test_a_stream_that_just_stops_without_finish_reason_is_interrupted():
    body = sse({"choices": [{"delta": {"content": "Half an ans"}}]})
    with pytest.raises(LLMInterrupted) as caught:
        quirk(body).complete(MESSAGES)
    assert caught.value.partial == "Half an ans"


def test_an_error_object_in_the_stream_is_reported():
    body = sse({"error": {"message": "model crashed"}})
    with pytest.raises(LLMServerError, match="model crashed"):
        quirk(body).complete(MESSAGES)


def test_a_web_page_instead_of_the_api_is_a_protocol_error():
    with pytest.raises(LLMProtocolError, match="web page"):
        quirk("<html><body>Welcome</body></html>", "text/html").complete(MESSAGES)


@pytest.mark.parametrize(
    "body",
    ['{"choices": "nope"}', '{"object": "list"}', "[1, 2]", "Internal error, not JSON"],
)
def test_wrong_shaped_completions_are_protocol_errors(body):
    with pytest.raises(LLMProtocolError):
        quirk(body, "application/json").complete(MESSAGES)


def test_a_non_streamed_reply_with_think_tags_and_reasoning_content():
    body = json.dumps(
        {"choices": [{"message": {"content": "<think>hmm</think>\nYes [1].", "reasoning_content": "first "}}]}
    )
    assert quirk(body, "application/json").complete(MESSAGES) == ("Yes [1].", "first hmm")


def test_waits_between_retries():
    assert [backoff_delay(0.5, attempt) for attempt in range(6)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    assert retry_after_delay("2") == 2.0
    assert retry_after_delay("3600") == 30.0
    assert retry_after_delay("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past
    assert retry_after_delay(None) is None and retry_after_delay("soon") is None


# --- the <think> splitter ----------------------------------------------------------------------


def split_run(text: str, cuts: list[int]) -> tuple[str, str]:
    bounds = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    splitter = ThinkSplitter()
    content, reasoning = "", ""
    for a, b in zip(bounds, bounds[1:], strict=False):
        c, r = splitter.feed(text[a:b])
        content, reasoning = content + c, reasoning + r
    c, r = splitter.flush()
    return content + c, reasoning + r


_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=40).filter(lambda t: "think>" not in t)


@settings(max_examples=200, deadline=None)
@given(_text, _text.map(str.strip), st.lists(st.integers(min_value=0), max_size=12))
def test_any_split_of_a_think_block_separates_reasoning_from_answer(thought, answer, cuts):
    assert split_run(f"<think>{thought}</think>\n\n{answer}", cuts) == (answer, thought)


@settings(max_examples=200, deadline=None)
@given(_text, st.lists(st.integers(min_value=0), max_size=12))
def test_an_answer_without_think_is_untouched(answer, cuts):
    assert split_run(answer, cuts) == (answer, "")


def test_a_think_tag_later_in_the_answer_is_just_text():
    assert split_run("Models emit <think> tags.", [13, 15]) == ("Models emit <think> tags.", "")


# --- the scripted server as a process (what CLI and UI tests point a real app at) ---------------


def test_the_scripted_server_runs_as_a_process():
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.fake_llm", "--port", "0", "--reply", "From a process [1].", "--mode", "think"],
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        base_url = process.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        with make_model(base_url, model=None) as model:
            assert model.complete(MESSAGES) == ("From a process [1].", DEFAULT_REASONING)
    finally:
        process.terminate()
        process.wait(timeout=5)
        process.stdout.close()
