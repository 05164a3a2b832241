"""The Gradio app in-process over a tiny index (fake embedder): its API, its login, its warnings. No browser."""

from __future__ import annotations

import pytest

from tests.processes import free_port

QUESTION = "Which papers use state space models for client selection?"

# Gradio's queue calls pandas in a way pandas 3 deprecates: not ours to fix.
pytestmark = [pytest.mark.filterwarnings("ignore:.*no_silent_downcasting"),
              pytest.mark.filterwarnings("ignore:The copy keyword is deprecated")]


@pytest.fixture
def launched(make_components, llm_server):
    """``launched(**settings)`` -> (url, components) of a running app; closed afterwards."""
    from ui.web.app import build_app, launch

    demos = []

    def start(host="127.0.0.1", **overrides):
        components = make_components(llm_base_url=llm_server.base_url, **overrides)
        demo = build_app(components)
        demos.append(demo)
        url = launch(demo, components.settings, host=host, port=free_port())
        return url.replace("0.0.0.0", "127.0.0.1"), components

    yield start
    for demo in demos:
        demo.close()


def test_chat_api_is_the_only_public_endpoint(launched, llm_server, capsys):
    from gradio_client import Client

    llm_server.reply = "FedSSM selects clients with state space models [1]."
    url, _ = launched()
    assert "warning" not in capsys.readouterr().err  # loopback: no warning
    client = Client(url, verbose=False)
    info = client.view_api(print_info=False, return_format="dict")
    assert list(info["named_endpoints"]) == ["/chat"] and not info["unnamed_endpoints"]
    text = client.predict(QUESTION, api_name="/chat")
    assert text.startswith("FedSSM selects clients with state space models [1].\n\n"
                           "Sources:\n[1] FedSSM — ICML 2026 · #1 of file 000")
    assert client.predict("Which papers detect anomalies with causal graphs?", api_name="/chat")  # stateless


def test_chat_api_errors_are_readable(launched, llm_server):
    from gradio_client import Client

    llm_server.mode = "status"
    llm_server.status_code = 401
    llm_server.error_message = "Incorrect API key provided"
    url, _ = launched(llm_retries=0)
    client = Client(url, verbose=False)
    with pytest.raises(Exception, match="key") as raised:
        client.predict(QUESTION, api_name="/chat")
    assert "Traceback" not in str(raised.value)
    llm_server.mode = "stream"
    assert "FedSSM" in client.predict(QUESTION, api_name="/chat")  # the app keeps working


def test_login_and_open_address_warning(launched, llm_server, capsys):
    from gradio_client import Client

    url, _ = launched(host="0.0.0.0", auth="ann:s3cret")
    assert "warning" not in capsys.readouterr().err  # a login is required: no warning
    with pytest.raises(Exception):  # noqa: B017 - gradio_client raises different errors across versions
        Client(url, verbose=False).predict(QUESTION, api_name="/chat")
    assert "FedSSM" in Client(url, auth=("ann", "s3cret"), verbose=False).predict(QUESTION, api_name="/chat")

    launched(host="0.0.0.0")
    err = capsys.readouterr().err
    assert "warning: serving on 0.0.0.0" in err and "PAPERCHAT_AUTH" in err


def test_invalid_chat_api_calls_are_answered_without_tracebacks(launched, capfd):
    """Issue 17, item 11: every invalid /chat call used to log two tracebacks."""
    from gradio_client import Client

    url, _ = launched(max_question_chars=100)
    client = Client(url, verbose=False)
    capfd.readouterr()
    for question in ("", "   ", "x" * 500):
        with pytest.raises(Exception, match="question") as raised:
            client.predict(question, api_name="/chat")
        assert "Traceback" not in str(raised.value)
    assert client.predict("state space models for client selection?", api_name="/chat")  # still answering
    logged = capfd.readouterr()
    assert "Traceback" not in logged.out + logged.err


def test_four_endless_answers_do_not_keep_a_fifth_user_waiting(launched, llm_server):
    """Issue 17, item 1: four streams kept open by ": ping" fill the four answer slots; they are cut at the
    answer deadline (3 x PAPERCHAT_LLM_TIMEOUT = 3 s here) and the fifth user then gets an answer."""
    import time

    from gradio_client import Client

    from ui.web.app import CONCURRENCY

    llm_server.mode = "ping"
    llm_server.reply = "FedSSM selects clients with state space models [1]."
    url, _ = launched(llm_timeout=1.0, llm_retries=0)
    started = time.monotonic()
    endless = [Client(url, verbose=False).submit(QUESTION, api_name="/chat") for _ in range(CONCURRENCY)]
    deadline = time.monotonic() + 20
    while len(llm_server.chat_requests) < CONCURRENCY and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(llm_server.chat_requests) == CONCURRENCY  # every slot holds an endless stream
    llm_server.mode = "stream"
    fifth = Client(url, verbose=False).submit(QUESTION, api_name="/chat")
    assert fifth.result(timeout=60).startswith("FedSSM selects clients")
    waited = time.monotonic() - started
    for job in endless:
        with pytest.raises(Exception, match="sent no answer within 3 s") as raised:
            job.result(timeout=30)
        assert "PAPERCHAT_LLM_TIMEOUT" in str(raised.value)
    assert waited < 30  # cut at the 3 s deadline, not at the endpoint's whim (the probe waited 104 s)


def test_the_map_s_hover_texts_come_from_its_server_function(launched):
    """What the map's script asks for as the mouse moves (``server.map_details``), over HTTP as the page does."""
    import httpx

    from ui.web import map_canvas, papers_map

    url, components = launched()
    config = httpx.get(f"{url}config", timeout=30).json()
    (widget,) = [c for c in config["components"] if c.get("props", {}).get("elem_id") == map_canvas.MAP_ELEMENT_ID]
    version = components.store.generation()
    asked = {"data": {"version": version, "start": 0}, "component_id": widget["id"],
             "fn_name": map_canvas.DETAILS_FUNCTION, "session_hash": "test-map"}
    got = httpx.post(f"{url}gradio_api/component_server", json=asked, timeout=30).json()
    order = papers_map.MapLayout(components, version).papers
    assert got["version"] == version and got["id"] == [p.paper_id for p in order]  # the map's rows, in order
    assert got["title"] == [p.title for p in order]
    stale = httpx.post(f"{url}gradio_api/component_server", json={**asked, "data": {"version": version + 1,
                                                                                    "start": 0}}, timeout=30).json()
    assert stale == {"version": version, "stale": True}


def test_every_ask_reaches_the_server(make_components, llm_server):
    """Gradio's default ("once") ignored an Ask while a stopped answer's event was still winding down, silently;
    the server says when an answer is still being written (callbacks.respond)."""
    from ui.web.app import build_app

    demo = build_app(make_components(llm_base_url=llm_server.base_url))
    try:
        config = demo.get_config_file()
        ids = {c["props"].get("elem_id"): c["id"] for c in config["components"]}
        asks = {(ids["pc-ask"], "click"), (ids["pc-question"], "submit")}
        modes = {tuple(t): d["trigger_mode"] for d in config["dependencies"] for t in d["targets"]
                 if tuple(t) in asks}
        assert modes == {target: "multiple" for target in asks}
    finally:
        demo.close()
