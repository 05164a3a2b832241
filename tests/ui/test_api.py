"""The OpenAI-compatible API of ``paperchat serve`` driven by the real ``openai`` SDK (and raw HTTP for what
the SDK will not send): one app in this process for the module, on 127.0.0.1, with an API key."""

from __future__ import annotations

import json
import threading

import httpx
import pytest

from tests.ui.conftest import API_KEY

SERVED_SETTINGS = {"api_key": API_KEY, "api_max_concurrent": 4, "api_max_waiting": 64}
FEDSSM = "000_dcbf1b5d2daaeff5.txt#1"
QUESTION = "Which papers use state space models for client selection?"
FEDSSM_REPLY = "FedSSM selects clients with decision-aware state space models [1]."

pytestmark = [pytest.mark.filterwarnings("ignore:.*no_silent_downcasting"),
              pytest.mark.filterwarnings("ignore:The copy keyword is deprecated")]


@pytest.fixture(scope="module")
def client(served_app):
    from openai import OpenAI

    with OpenAI(base_url=served_app.api_url, api_key=API_KEY, max_retries=0, timeout=60) as openai_client:
        yield openai_client


@pytest.fixture
def llm(served_app):
    """The scripted endpoint, reset to a normal stream after each test."""
    server = served_app.llm
    server.reply = FEDSSM_REPLY
    yield server
    server.mode, server.delay, server.reply = "stream", 0.0, FEDSSM_REPLY


def post(served_app, body=None, *, key=API_KEY, content=None, headers=None, timeout=30.0) -> httpx.Response:
    auth = {"Authorization": f"Bearer {key}"} if key is not None else {}
    return httpx.post(served_app.api_url + "/chat/completions", json=body, content=content,
                      headers={**auth, **(headers or {})}, timeout=timeout, trust_env=False)


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


# --- models and answers ----------------------------------------------------------------------------------------------


def test_models_lists_the_default_and_the_extractive_writer(client):
    models = {m.id: m for m in client.models.list()}
    assert list(models) == ["paperchat", "paperchat-extractive"]
    assert "endpoint" in models["paperchat"].model_extra["description"]
    assert client.models.retrieve("paperchat-extractive").id == "paperchat-extractive"


def test_a_cited_answer_names_the_right_paper(client, llm):
    completion = client.chat.completions.create(model="paperchat", messages=user(QUESTION), temperature=0.2,
                                                max_tokens=200)
    text = completion.choices[0].message.content
    assert text.startswith(FEDSSM_REPLY + "\n\nSources:\n[1] FedSSM — ICML 2026 · #1 of file 000")
    assert completion.choices[0].finish_reason == "stop" and completion.model == "paperchat"
    citations = completion.model_extra["citations"]
    assert [(c["marker"], c["paper_id"], c["title"]) for c in citations] == [(1, FEDSSM, "FedSSM")]
    assert citations[0]["evidence"] and 0 < citations[0]["support"] <= 1
    # The cited paper's label and metadata (the bundled files give the venue and year, no authors or URL).
    assert citations[0]["label"] == "ICML 2026 · #1 of file 000"
    assert (citations[0]["venue"], citations[0]["year"], citations[0]["authors"]) == ("ICML 2026", 2026, [])
    meta = completion.model_extra["paperchat"]
    assert meta["grounded"] is True and meta["sources"][0]["paper_id"] == FEDSSM
    sent = llm.requests[-1]["json"]
    assert sent["temperature"] == 0.2 and sent["max_tokens"] == 200  # the request's settings reached the LLM


def test_a_streamed_answer_is_the_same_answer_in_openai_chunks(client, llm):
    llm.chunk_size = 5
    stream = client.chat.completions.create(model="paperchat", messages=user(QUESTION), stream=True)
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text.startswith(FEDSSM_REPLY + "\n\nSources:\n[1] FedSSM — ICML 2026 · #1 of file 000")
    assert len(chunks) > 5  # really streamed, not one piece
    assert chunks[0].choices[0].delta.role == "assistant"
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop" and not last.choices[0].delta.content
    assert [c["paper_id"] for c in last.model_extra["citations"]] == [FEDSSM]
    assert all(not (c.model_extra or {}).get("citations") for c in chunks[:-1])
    plain = client.chat.completions.create(model="paperchat", messages=user(QUESTION))
    assert plain.choices[0].message.content == text


def test_raw_stream_ends_with_done(served_app, llm):
    with httpx.stream("POST", served_app.api_url + "/chat/completions", timeout=30, trust_env=False,
                      headers={"Authorization": f"Bearer {API_KEY}"},
                      json={"model": "paperchat", "stream": True, "messages": user(QUESTION)}) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line]
    assert lines[-1] == "data: [DONE]" and all(line.startswith("data: ") for line in lines)
    assert json.loads(lines[-2][6:])["choices"][0]["finish_reason"] == "stop"


def test_a_follow_up_in_messages_resolves_as_in_the_ui(client, served_app):
    from rag.components import SessionSettings
    from rag.types import Turn

    first_question = "Which papers are about large language models?"
    first = client.chat.completions.create(model="paperchat-extractive", messages=user(first_question))
    first_text = first.choices[0].message.content
    cited = [c["paper_id"] for c in first.model_extra["citations"]]
    assert len(cited) >= 2, first_text
    follow_up = "Does the second one calibrate the model's confidence?"
    messages = [*user(first_question), {"role": "assistant", "content": first_text}, *user(follow_up)]
    answer = client.chat.completions.create(model="paperchat-extractive", messages=messages)

    # The UI's session keeps the previous answer's cited papers; the API reads them back from the text.
    pipeline = served_app.components.pipeline_for(SessionSettings(extractive=True))
    previous = pipeline.answer(first_question)
    expected = pipeline.answer(follow_up, [Turn.asked(first_question).to_dict(), Turn.answered(previous).to_dict()])
    meta = answer.model_extra["paperchat"]
    assert meta["search_query"] == expected.search_query != follow_up  # the second paper's title was added
    assert meta["sources"][0]["paper_id"] == cited[1]  # "the second one" is pinned first, as in the UI
    assert [c["paper_id"] for c in answer.model_extra["citations"]] == [c.paper_id for c in expected.citations]
    assert answer.model_extra["citations"][0]["paper_id"] == cited[1]


# --- bad requests ----------------------------------------------------------------------------------------------------

LONG_QUESTION = "why " * 1200  # 4,800 characters: over the 4,000 limit

BAD_REQUESTS = [
    ("no messages", {"model": "paperchat"}, 400, "'messages' is required"),
    ("empty messages", {"model": "paperchat", "messages": []}, 400, "non-empty list"),
    ("messages not a list", {"model": "paperchat", "messages": "hello"}, 400, "non-empty list"),
    ("message not an object", {"model": "paperchat", "messages": ["hello"]}, 400, "must be an object"),
    ("unknown role", {"model": "paperchat", "messages": [{"role": "robot", "content": "hi"}]}, 400, "'role'"),
    ("content a number", {"model": "paperchat", "messages": [{"role": "user", "content": 42}]}, 400, "'content'"),
    ("image content", {"model": "paperchat", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "http://127.0.0.1/x.png"}}]}]}, 400, "only text"),
    ("last turn not the user's", {"model": "paperchat", "messages": [{"role": "assistant", "content": "hi"}]},
     400, "last message"),
    ("stream not a boolean", {"model": "paperchat", "messages": user(QUESTION), "stream": "yes"}, 400, "'stream'"),
    ("temperature a string", {"model": "paperchat", "messages": user(QUESTION), "temperature": "hot"}, 400,
     "'temperature'"),
    ("temperature too high", {"model": "paperchat", "messages": user(QUESTION), "temperature": 7}, 400,
     "'temperature'"),
    ("max_tokens negative", {"model": "paperchat", "messages": user(QUESTION), "max_tokens": -1}, 400,
     "'max_tokens'"),
    ("n of 3", {"model": "paperchat", "messages": user(QUESTION), "n": 3}, 400, "'n'"),
    ("model a number", {"model": 4, "messages": user(QUESTION)}, 400, "'model'"),
    ("unknown model", {"model": "gpt-4o", "messages": user(QUESTION)}, 404, "does not exist"),
    ("question over the limit", {"model": "paperchat", "messages": user(LONG_QUESTION)}, 400, "the limit is 4,000"),
    ("body an array", [1, 2], 400, "JSON object"),
]


@pytest.mark.parametrize(("body", "status", "words"), [case[1:] for case in BAD_REQUESTS],
                         ids=[case[0] for case in BAD_REQUESTS])
def test_bad_requests_get_the_right_status_and_an_openai_error(served_app, body, status, words):
    response = post(served_app, body)
    assert response.status_code == status
    error = response.json()["error"]
    assert words in error["message"] and isinstance(error["type"], str) and set(error) >= {"code", "param"}
    assert "Traceback" not in response.text and "File \"" not in response.text


def test_the_sdk_raises_its_own_errors_for_them(client):
    import openai

    with pytest.raises(openai.NotFoundError, match="does not exist") as caught:
        client.chat.completions.create(model="gpt-4o", messages=user(QUESTION))
    assert caught.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError, match="the limit is 4,000"):
        client.chat.completions.create(model="paperchat", messages=user(LONG_QUESTION), stream=True)


def test_malformed_and_oversized_bodies(served_app):
    response = post(served_app, content=b'{"model": "paperchat", "messages": [', headers={
        "Content-Type": "application/json"})
    assert response.status_code == 400 and "not valid JSON" in response.json()["error"]["message"]
    megabyte = json.dumps({"model": "paperchat", "messages": user("x" * 1_000_000)}).encode()
    response = post(served_app, content=megabyte, headers={"Content-Type": "application/json"})
    assert response.status_code == 413 and response.json()["error"]["code"] == "request_too_large"

    def chunked():  # no Content-Length: the limit holds while reading
        for _ in range(20):
            yield b" " * 65536

    response = post(served_app, content=chunked(), headers={"Content-Type": "application/json"})
    assert response.status_code == 413


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-key", f"Bearer {API_KEY}x", f"Basic {API_KEY}",
                                           API_KEY])
def test_a_missing_or_wrong_key_is_401(served_app, authorization):
    headers = {"Authorization": authorization} if authorization else {}
    response = post(served_app, {"model": "paperchat", "messages": user(QUESTION)}, key=None, headers=headers)
    assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer"
    assert response.json()["error"]["type"] == "authentication_error"
    assert "PAPERCHAT_API_KEY" in response.json()["error"]["message"]
    assert API_KEY not in response.text
    assert httpx.get(served_app.api_url + "/models", headers=headers, trust_env=False).status_code == 401


def test_wrong_method_and_unknown_path(served_app):
    headers = {"Authorization": f"Bearer {API_KEY}"}
    response = httpx.get(served_app.api_url + "/chat/completions", headers=headers, trust_env=False)
    assert response.status_code == 405 and "error" in response.json()
    response = httpx.post(served_app.api_url + "/embeddings", headers=headers, json={}, trust_env=False)
    assert response.status_code == 404 and "/v1/chat/completions" in response.json()["error"]["message"]


def test_an_endpoint_failure_is_503_without_a_traceback(client, llm):
    import openai

    llm.mode, llm.status_code, llm.error_message = "status", 500, "boom in the model server"
    with pytest.raises(openai.InternalServerError) as caught:
        client.chat.completions.create(model="paperchat", messages=user(QUESTION))
    assert caught.value.status_code == 503
    assert "paperchat-extractive" in str(caught.value) and "Traceback" not in str(caught.value)
    with pytest.raises(openai.InternalServerError):  # streaming: still a status, nothing was written yet
        list(client.chat.completions.create(model="paperchat", messages=user(QUESTION), stream=True))
    extractive = client.chat.completions.create(model="paperchat-extractive", messages=user(QUESTION))
    assert extractive.model_extra["citations"][0]["paper_id"] == FEDSSM


def test_twenty_streaming_clients_at_once_each_get_their_own_answer(served_app):
    from openai import OpenAI

    topics = {
        "000_dcbf1b5d2daaeff5.txt#1": "state space models for client selection in federated learning",
        "000_dcbf1b5d2daaeff5.txt#8": "causal anomaly detection with causal graphs",
        "002_735305cd7294d037.txt#1": "medical question answering with retrieval agents MA-RAG",
        "000_dcbf1b5d2daaeff5.txt#5": "phonocardiogram synthesis from electrocardiograms",
        "000_dcbf1b5d2daaeff5.txt#7": "calibration of LLMs behavioral robustness CaliDist",
    }
    plan = [(paper, f"{question} (client {i})") for i, (paper, question) in
            enumerate((p, q) for _ in range(4) for p, q in topics.items())]
    results: dict[int, tuple] = {}
    barrier = threading.Barrier(len(plan))

    def run(number: int, question: str) -> None:
        try:
            with OpenAI(base_url=served_app.api_url, api_key=API_KEY, max_retries=0, timeout=120) as openai_client:
                barrier.wait(30)
                chunks = list(openai_client.chat.completions.create(
                    model="paperchat-extractive", messages=user(question), stream=True))
            text = "".join(c.choices[0].delta.content or "" for c in chunks)
            last = chunks[-1].model_extra
            results[number] = (text, last["paperchat"]["search_query"], [c["paper_id"] for c in last["citations"]])
        except Exception as error:  # reported below, with the client's number
            results[number] = (error,)

    threads = [threading.Thread(target=run, args=(i, q)) for i, (_, q) in enumerate(plan)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(180)
    assert len(results) == len(plan)
    for number, (paper, question) in enumerate(plan):
        result = results[number]
        assert len(result) == 3, f"client {number}: {result[0]!r}"
        text, search_query, cited = result
        assert search_query == question  # its own question was answered...
        assert cited and cited[0] == paper, (number, cited)  # ...citing its own paper first
        assert "Sources:\n[1]" in text


# --- bugs: 500 without a traceback, and the server keeps serving -----------------------------------------------------


class BrokenPipeline:
    """Fails as a bug would: before answering, or after part of a streamed answer."""

    def __init__(self, after_text: bool) -> None:
        self.after_text = after_text

    def answer(self, question, history=(), *, k=None):
        raise RuntimeError("secret internal detail")

    def stream(self, question, history=(), *, k=None):
        from rag.answers.pipeline import SourcesEvent, TextEvent

        yield SourcesEvent([], question)
        if self.after_text:
            yield TextEvent(content="A partial answer")
        raise RuntimeError("secret internal detail")


def test_a_bug_is_a_500_in_openai_shape_and_the_server_keeps_serving(served_app, client, llm, monkeypatch):
    import openai

    from ui.api import answers

    monkeypatch.setattr(answers, "pipeline_for", lambda *a, **k: BrokenPipeline(after_text=False))
    for stream in (False, True):
        response = post(served_app, {"model": "paperchat", "messages": user(QUESTION), "stream": stream})
        assert response.status_code == 500
        error = response.json()["error"]
        assert error["type"] == "server_error" and "internal error: RuntimeError" in error["message"]
        assert "secret internal detail" not in response.text and "Traceback" not in response.text

    monkeypatch.setattr(answers, "pipeline_for", lambda *a, **k: BrokenPipeline(after_text=True))
    with pytest.raises(openai.APIError, match="internal error: RuntimeError") as caught:  # an error event mid-stream
        for _ in client.chat.completions.create(model="paperchat", messages=user(QUESTION), stream=True):
            pass
    assert "secret internal detail" not in str(caught.value)
    monkeypatch.undo()
    completion = client.chat.completions.create(model="paperchat", messages=user(QUESTION))
    assert completion.model_extra["citations"][0]["paper_id"] == FEDSSM


def test_what_other_clients_send_is_accepted(served_app, llm):
    """Nulls for optional fields, OpenAI's extra parameters and content parts, as Open WebUI and others send them."""
    response = post(served_app, {
        "model": "paperchat", "stream": None, "temperature": None, "max_tokens": None, "n": None, "top_p": 1,
        "stream_options": None, "user": "someone", "presence_penalty": 0,
        "messages": [{"role": "system", "content": "You are helpful."},
                     {"role": "user", "name": "ann", "content": [{"type": "text", "text": QUESTION}]}],
    })
    assert response.status_code == 200, response.text
    assert response.json()["citations"][0]["paper_id"] == FEDSSM


def test_the_start_up_message_says_a_key_is_needed(served_app):
    from ui.api.service import build_service

    service = build_service(served_app.components, host="0.0.0.0", loopback=False)
    assert service.message == "OpenAI-compatible API at /v1, MCP at /mcp (each request needs PAPERCHAT_API_KEY)"
    assert API_KEY not in service.message
