"""The paperchat web UI (Gradio 6): layout and wiring. What happens on each event is in ``ui.web.callbacks``.

``build_app(components)`` returns the ``gr.Blocks``; ``launch(demo, ...)`` starts serving it (127.0.0.1
unless told otherwise, never a public share link unless asked), with whatever middleware the caller puts
in front of it (``ui.serve`` adds the API and the MCP server).
"""

from __future__ import annotations

import ipaddress
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import gradio as gr

from rag.components import MAX_TOP_K, Components, SessionSettings
from rag.errors import ConfigError, PaperchatError
from rag.exports.filters import FIELDS
from rag.text import say
from ui.web import callbacks, map_canvas, papers_map, render
from ui.web.callbacks import ChatSession
from ui.web.intro import filter_placeholder, intro_for
from ui.web.takeaway import LastAnswer, markdown_file, recording

DEFAULT_HOST = "127.0.0.1"
CONCURRENCY = 4  # answers written at once; more wait in the queue
STOP_SETTLE_SECONDS = 0.5  # how long after Stop a late update of the cancelled stream may still arrive
PRIVATE = {"api_visibility": "private"}  # every event but ``/chat`` stays out of the public API

# A click on an answer's [n] (a link to #pc-source-n) opens and shows that card in the sources panel. The
# chat's links would otherwise navigate (or open a tab); the click still reaches the chat, which switches
# the panel to that answer's sources, so the card is looked up again once that has arrived.
MARKER_SCRIPT = """<script>
document.addEventListener("click", (event) => {
  const link = event.target.closest ? event.target.closest('a[href^="#pc-source-"]') : null;
  if (!link) return;
  event.preventDefault();
  const id = link.getAttribute("href").slice(1);
  const show = () => {
    const card = document.getElementById(id);
    if (!card) return;
    card.querySelectorAll("details").forEach((d) => { d.open = true; });
    card.scrollIntoView({ behavior: "smooth", block: "nearest" });
    card.classList.add("pc-flash");
    setTimeout(() => card.classList.remove("pc-flash"), 1500);
  };
  show();
  setTimeout(show, 500);
}, true);
// The question box takes the focus once it is there, without scrolling to it: Gradio's autofocus scrolled the page
// past the title, the intro and the tabs on load (to the box under the 560 px chat: scrollY ~600 at 400x800).
(() => {
  const started = Date.now();
  const focusQuestion = () => {
    const box = document.querySelector("#pc-question textarea");
    if (!box) { if (Date.now() - started < 30000) setTimeout(focusQuestion, 100); return; }
    const active = document.activeElement;
    if (!active || active === document.body) box.focus({ preventScroll: true });
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", focusQuestion);
  else focusQuestion();
})();
</script>"""


@dataclass
class _Widgets:
    """The app's input and output components, for wiring events to them."""

    demo: gr.Blocks
    session: gr.State
    status_line: gr.Markdown
    chatbot: gr.Chatbot
    question: gr.Textbox
    where: gr.Textbox
    ask: gr.Button
    stop: gr.Button
    new: gr.Button
    notice: gr.Markdown
    sources: gr.HTML
    download: gr.DownloadButton
    last_answer: gr.State
    paper_filter: gr.Textbox
    topic_filter: gr.Dropdown
    paper_map: gr.HTML
    card: gr.HTML
    papers: gr.HTML
    base_url: gr.Textbox
    model: gr.Dropdown
    refresh: gr.Button
    endpoint_note: gr.Markdown
    api_key: gr.Textbox
    extractive: gr.Checkbox
    settings_inputs: list


def build_app(components: Components) -> gr.Blocks:
    """The web UI over ``components``: chat, papers and settings tabs, and the ``/chat`` API endpoint."""
    defaults = components.session_defaults()
    papers = components.papers()
    intro = intro_for(papers, components.settings.collection)  # the served corpus's own text
    with gr.Blocks(title="paperchat", analytics_enabled=False) as demo:
        gr.Markdown(intro.markdown)
        status_line = gr.Markdown("**Papers:** …", elem_classes="pc-status", elem_id="pc-status")
        points = papers_map.MapPoints(components)  # the map, made once per index generation, for every session
        with gr.Tabs():
            chat = _chat_tab(intro.examples, filter_placeholder(papers))
            papers_tab = _papers_tab(points)
            panel = _settings_tab(defaults)
        ui = _Widgets(demo=demo, session=gr.State(ChatSession()), last_answer=gr.State(LastAnswer()),
                      status_line=status_line, **papers_tab, **chat, **panel)
        _wire_chat(components, ui)
        _wire_settings(components, ui)
        _wire_papers(components, ui, points)
        _add_chat_api(components)
    demo.queue(default_concurrency_limit=CONCURRENCY)
    return demo


def _chat_tab(examples: list[str], where_examples: str) -> dict:
    with gr.Tab("Chat", id="chat"), gr.Row(equal_height=False):
        with gr.Column(scale=3):
            chatbot = gr.Chatbot(
                label="Conversation",
                show_label=False,  # Gradio floats the label over the messages: it hid text when scrolled
                height=560,
                buttons=["copy", "copy_all"],
                placeholder=(
                    "### Ask a question about the papers\n"
                    "Answers cite their sources; follow-ups like *“what did the second one "
                    "evaluate on?”* use the conversation. Try an example:"
                ),
                examples=[{"text": q} for q in examples],
                sanitize_html=True,  # and every corpus/model text is escaped before it gets here
                allow_tags=False,
                render_markdown=True,
                latex_delimiters=[],
                feedback_options=None,
                elem_id="pc-chat",
            )
            with gr.Row(equal_height=True):
                question = gr.Textbox(
                    placeholder="Ask about the papers…",
                    show_label=False, container=False, scale=1, lines=1, max_lines=6,
                    elem_id="pc-question",
                )
                ask = gr.Button("Ask", variant="primary", scale=0, min_width=96, elem_id="pc-ask")
            where = gr.Textbox(
                label="Only papers where", lines=1, max_lines=1, elem_id="pc-where",
                placeholder=where_examples,  # examples that match this collection's papers
                info=f"FIELD OP VALUE, ';' between filters; fields: {', '.join(FIELDS)}; ~ means contains",
            )
            notice = gr.Markdown("", elem_id="pc-notice")  # why a question was not taken
            with gr.Row():
                # Shown only while an answer is being written (see _wire_chat).
                stop = gr.Button("■ Stop", variant="stop", size="sm", scale=0, min_width=96, elem_id="pc-stop",
                                 visible=False)
                new = gr.Button("+ New chat", size="sm", scale=0, min_width=120, elem_id="pc-new")
                # Shown once the session has a finished answer: that answer and its references as Markdown.
                download = gr.DownloadButton("⤓ Download Markdown", size="sm", scale=0, min_width=180,
                                             elem_id="pc-download", visible=False)
        with gr.Column(scale=2):
            gr.Markdown("### Sources")
            sources = gr.HTML(render.SOURCES_PLACEHOLDER, elem_id="pc-sources-panel", js_on_load=None,
                              max_height=640)
    return {"chatbot": chatbot, "question": question, "ask": ask, "stop": stop, "new": new, "notice": notice,
            "sources": sources, "download": download, "where": where}


def _papers_tab(points: papers_map.MapPoints) -> dict:
    def map_details(asked):  # the map's ids, titles and hover texts, asked for by its script as the mouse moves
        return points.details(asked)
    map_details.__name__ = map_canvas.DETAILS_FUNCTION

    with gr.Tab("Papers", id="papers"):
        # The map and the card are each at least papers_map.NARROW_PX wide (its CSS; gr.HTML's own min_width does
        # not reach the page): on a narrow screen the card wraps under a full-width map (at 400 px the map was a
        # 124 px column beside a 148 px card).
        with gr.Row(equal_height=False, elem_classes="pc-map-row"):
            paper_map = gr.HTML("", html_template=map_canvas.MAP_TEMPLATE, js_on_load=map_canvas.MAP_SCRIPT,
                                scale=3, elem_id=map_canvas.MAP_ELEMENT_ID, container=True, padding=True,
                                server_functions=[map_details])
            card = gr.HTML(papers_map.CARD_PLACEHOLDER, elem_id="pc-map-card", js_on_load=None, max_height=520,
                           scale=2)
        with gr.Row():
            paper_filter = gr.Textbox(label="Filter", placeholder="keywords in the title, abstract or file name",
                                      elem_id="pc-filter", scale=3)
            topic_filter = gr.Dropdown(label="Topic", choices=[("All topics", papers_map.ALL_TOPICS)],
                                       value=papers_map.ALL_TOPICS, scale=2, elem_id="pc-topic-filter")
        papers = gr.HTML(render.message_html("Loading the papers…"), elem_id="pc-papers", js_on_load=None)
    return {"paper_filter": paper_filter, "topic_filter": topic_filter, "paper_map": paper_map, "card": card,
            "papers": papers}


def _settings_tab(defaults: SessionSettings) -> dict:
    with gr.Tab("Settings", id="settings"):
        gr.Markdown(
            "These settings apply to **your session only**. Leave the endpoint blank for the server's "
            "default backend. The API key is sent only to the endpoint and never shown again."
        )
        with gr.Row():
            base_url = gr.Textbox(
                label="Endpoint URL (OpenAI-compatible)", value=defaults.base_url, scale=3,
                elem_id="pc-endpoint",
                placeholder="e.g. http://127.0.0.1:11434/v1 (Ollama); blank: the server's default",
            )
            model = gr.Dropdown(
                label="Model", choices=[defaults.model] if defaults.model else [],
                value=defaults.model or None, allow_custom_value=True, scale=2,
            )
            refresh = gr.Button("↻ Refresh models", scale=1, min_width=120, elem_id="pc-refresh")
        endpoint_note = gr.Markdown("", elem_id="pc-endpoint-note")  # what Refresh found, beside the button
        with gr.Row():
            api_key = gr.Textbox(
                label="API key", type="password", value="", scale=2,
                placeholder="blank: none (the server's own key is used only for the server's endpoint)",
            )
            top_k = gr.Slider(1, MAX_TOP_K, step=1, value=defaults.top_k, label="Papers to consult",
                              info="for one answer; a \"which papers\" question lists every paper that qualifies")
            temperature = gr.Slider(0.0, 2.0, step=0.05, value=defaults.temperature, label="Temperature")
            extractive = gr.Checkbox(
                value=defaults.extractive, label="Extractive mode (no LLM: quoted sentences)"
            )
    return {"base_url": base_url, "model": model, "refresh": refresh, "api_key": api_key, "extractive": extractive,
            "endpoint_note": endpoint_note,
            "settings_inputs": [base_url, model, api_key, top_k, temperature, extractive]}


def _wire_chat(components: Components, ui: _Widgets) -> None:
    def answer_question(text: str, where: str, state: ChatSession, last: LastAnswer, *raw) -> Iterator[tuple]:
        first, stop_shown, panel_shown = True, None, None
        answering = recording(components, last)  # notes the final answer for "Download Markdown"
        for current in callbacks.respond(answering, text, state, callbacks.session_settings(*raw), where):
            # A question that was not taken stays in the box, with the reason under it.
            box = "" if first and not current.notice else gr.skip()
            notice = f"⚠ {render.plain_markdown(current.notice)}" if current.notice else ""
            # The Stop button changes only when answering starts or ends, not with every streamed piece.
            stop = gr.Button(visible=current.answering) if current.answering != stop_shown else gr.skip()
            stop_shown = current.answering
            # The panel is sent only when it changes: an update still in flight when Stop is pressed must not
            # put "the answer is being written" back over the stopped panel.
            panel = current.panel if current.panel != panel_shown else gr.skip()
            panel_shown = current.panel
            yield current.messages, panel, current, box, notice, stop
            first = False

    def chat_example(where: str, state: ChatSession, last: LastAnswer, url_, model_, key_, k_, t_, extractive_,
                     evt: gr.SelectData):
        value = evt.value if isinstance(evt.value, dict) else {"text": str(evt.value or "")}
        yield from answer_question(value.get("text", ""), where, state, last, url_, model_, key_, k_, t_,
                                   extractive_)

    chat_outputs = [ui.chatbot, ui.sources, ui.session, ui.question, ui.notice, ui.stop]
    # Every Ask reaches the server ("once" ignored an Ask while the stopped answer's event was still winding
    # down, with no word said); one already answering in this conversation is told to wait (callbacks.respond).
    answering = {"concurrency_limit": CONCURRENCY, "concurrency_id": "answer", "show_progress_on": [ui.chatbot],
                 "trigger_mode": "multiple", **PRIVATE}
    asked = [ui.question, ui.where, ui.session, ui.last_answer, *ui.settings_inputs]
    events = [
        ui.question.submit(answer_question, asked, chat_outputs, **answering),
        ui.ask.click(answer_question, asked, chat_outputs, **answering),
        ui.chatbot.example_select(chat_example, asked[1:], chat_outputs, **answering),
    ]

    def offer_download(last: LastAnswer):
        path = markdown_file(last, components.settings.collection)
        return gr.DownloadButton(value=str(path) if path else None, visible=path is not None)
    for event in events:
        event.then(offer_download, [ui.last_answer], [ui.download], queue=False, **PRIVATE)

    def do_stop(state: ChatSession):
        state = callbacks.stop(state)
        return state.messages, state.panel, state, gr.Button(visible=False)
    def show_stopped(state: ChatSession):
        # An update the cancelled stream had already sent can land after Stop's own: show the stopped turn again
        # once it has (the session itself was stopped in place, so it holds the right text).
        time.sleep(STOP_SETTLE_SECONDS)
        return state.messages, state.panel
    ui.stop.click(do_stop, [ui.session], [ui.chatbot, ui.sources, ui.session, ui.stop], cancels=events, queue=False,
                  **PRIVATE).then(show_stopped, [ui.session], [ui.chatbot, ui.sources], queue=False, **PRIVATE)

    def do_new(state: ChatSession, last: LastAnswer):
        fresh = callbacks.new_chat(state)
        last.clear()
        return fresh.messages, fresh.panel, fresh, "", "", gr.Button(visible=False), gr.DownloadButton(visible=False)
    new_outputs = [ui.chatbot, ui.sources, ui.session, ui.question, ui.notice, ui.stop, ui.download]
    ui.new.click(do_new, [ui.session, ui.last_answer], new_outputs, cancels=events, queue=False, **PRIVATE)
    ui.chatbot.clear(do_new, [ui.session, ui.last_answer], new_outputs, cancels=events, queue=False, **PRIVATE)

    def do_select(state: ChatSession, evt: gr.SelectData):
        return callbacks.select_message(state, evt.index)
    ui.chatbot.select(do_select, [ui.session], [ui.sources], queue=False, **PRIVATE)


def _wire_settings(components: Components, ui: _Widgets) -> None:
    def do_refresh(*raw):
        choices, chosen, line, note = callbacks.refresh_settings(components, callbacks.session_settings(*raw))
        return gr.Dropdown(choices=choices, value=chosen or None), line, note

    def do_status(*raw):
        return callbacks.status(components, callbacks.session_settings(*raw))

    inputs, refreshed = ui.settings_inputs, [ui.model, ui.status_line, ui.endpoint_note]
    ui.refresh.click(do_refresh, inputs, refreshed, **PRIVATE)
    ui.base_url.submit(do_refresh, inputs, refreshed, **PRIVATE)
    ui.base_url.blur(do_refresh, inputs, refreshed, **PRIVATE)
    ui.api_key.submit(do_refresh, inputs, refreshed, **PRIVATE)
    ui.extractive.input(do_status, inputs, [ui.status_line], **PRIVATE)
    ui.model.input(do_status, inputs, [ui.status_line], **PRIVATE)
    ui.demo.load(do_refresh, inputs, refreshed, **PRIVATE)  # first load, per browser session


def _wire_papers(components: Components, ui: _Widgets, points: papers_map.MapPoints) -> None:
    def do_papers(query: str, topic):
        return papers_map.papers_list_html(components, query, topic)

    def do_map():
        try:
            return points.current(), gr.Dropdown(choices=papers_map.topic_choices(components))
        except PaperchatError:  # the list says what is wrong
            return '{"x":[],"y":[],"topics":[]}', gr.Dropdown(choices=[("All topics", papers_map.ALL_TOPICS)])

    def do_select(evt: gr.SelectData):
        # A legend entry chooses the topic filter (the list follows); a point opens that paper's card.
        if (topic := papers_map.legend_topic(evt.value)) is not None:
            return gr.skip(), topic
        return papers_map.select_on_map(components, evt.value), gr.skip()

    listing = [ui.paper_filter, ui.topic_filter]
    ui.paper_filter.change(do_papers, listing, [ui.papers], trigger_mode="always_last", **PRIVATE)
    ui.topic_filter.change(do_papers, listing, [ui.papers], **PRIVATE)
    ui.topic_filter.change(None, [ui.topic_filter], None, js=map_canvas.SHOW_TOPIC_JS, **PRIVATE)  # on the map too
    ui.paper_map.select(do_select, None, [ui.card, ui.topic_filter], **PRIVATE)
    # The map and the list load apart: the map need not wait for the list's related papers.
    ui.demo.load(do_map, None, [ui.paper_map, ui.topic_filter], **PRIVATE)
    ui.demo.load(do_papers, listing, [ui.papers], **PRIVATE)


def _add_chat_api(components: Components) -> None:
    """``Client(url).predict(question, api_name="/chat")``: one question, the answer and its sources."""

    def chat_api(question: str) -> str:
        """Answer one question from the abstracts (no conversation); the answer followed by its sources."""
        try:
            return callbacks.api_chat(components, question)
        except PaperchatError as error:
            # A bad question or a failing endpoint is the caller's answer, not a bug: no traceback in the log.
            raise gr.Error(str(error), print_exception=False) from error

    gr.api(chat_api, api_name="chat", concurrency_limit=CONCURRENCY, concurrency_id="answer")
# --- serving ---------------------------------------------------------------------------------------------------


def resolve_host(host: str | None) -> str:
    return host or os.environ.get("GRADIO_SERVER_NAME") or DEFAULT_HOST


def resolve_port(port: int | None) -> int | None:
    if port is not None:
        return port
    raw = os.environ.get("GRADIO_SERVER_PORT")
    if not raw:
        return None  # Gradio picks the first free port from 7860
    try:
        return int(raw)
    except ValueError as e:
        raise ConfigError(f"GRADIO_SERVER_PORT: {raw!r} is not a port number") from e


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def parse_auth(auth: str | None) -> tuple[str, str] | None:
    if not auth:
        return None
    user, _, password = auth.partition(":")
    return user, password


def launch(demo: gr.Blocks, settings, *, host: str | None = None, port: int | None = None, share: bool = False,
           open_browser: bool = False, middleware: Sequence = (), lifespan=None, messages: Sequence[str] = ()) -> str:
    """Start serving ``demo`` without blocking; returns the local URL. Warns when it is open to others.

    ``middleware`` goes in front of the UI's routes and ``lifespan`` lives as long as the server (the API
    and MCP sessions, ``ui.serve``); ``messages`` are said after the URL.
    """
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    host = resolve_host(host)
    port = resolve_port(port)
    auth = parse_auth(settings.auth)
    if not is_loopback(host) and auth is None:
        say(f"warning: serving on {host}, reachable from other machines, without a login; "
            "set PAPERCHAT_AUTH=user:password to require one")
    if share and auth is None:
        say("warning: --share makes a public link without a login; set PAPERCHAT_AUTH=user:password first")
    extra = {}
    if middleware:
        # Gradio builds its FastAPI app from these: the API's routes sit in front of the UI's.
        extra["app_kwargs"] = {"middleware": list(middleware), **({"lifespan": lifespan} if lifespan else {})}
    _app, local_url, share_url = demo.launch(
        server_name=host, server_port=port, share=bool(share), auth=auth, inbrowser=open_browser,
        prevent_thread_lock=True, quiet=True, show_error=False, ssr_mode=False, mcp_server=False,
        run_history=False,  # it would keep every event's inputs, the API key too, in the browser
        enable_monitoring=False, footer_links=["api", "settings"], css=render.CSS + papers_map.CSS + map_canvas.MAP_CSS,
        theme=gr.themes.Soft(),
        head=MARKER_SCRIPT, **extra,
    )
    say(f"open {local_url}" + (f" (public link: {share_url})" if share_url else "") + "; Ctrl-C stops")
    for message in messages:
        say(message)
    return local_url
