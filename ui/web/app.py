"""The paperchat web UI (Gradio 6): layout and wiring. What happens on each event is in ``ui.web.callbacks``.

``build_app(services)`` returns the ``gr.Blocks``; ``serve(components, ...)`` prepares the index, launches
the server (127.0.0.1 unless told otherwise, never a public share link unless asked) and, on the way out
(Ctrl-C, SIGTERM), closes everything, which stops the embedded LLM.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import sys
from collections.abc import Iterator

import gradio as gr

from rag.errors import ConfigError, PaperchatError
from ui.web import callbacks, render
from ui.web.callbacks import ChatSession, Services, SessionSettings

DEFAULT_HOST = "127.0.0.1"
CONCURRENCY = 4  # answers written at once; more wait in the queue


def _say(message: str) -> None:
    print(f"paperchat: {message}", file=sys.stderr, flush=True)


def build_app(services: Services) -> gr.Blocks:
    defaults = services.defaults()
    private = {"api_visibility": "private"}

    with gr.Blocks(title="paperchat", analytics_enabled=False) as demo:
        session = gr.State(ChatSession())
        gr.Markdown("# paperchat\n" + render.INTRO)
        status_line = gr.Markdown("**Index:** …", elem_classes="pc-status", elem_id="pc-status")

        with gr.Tabs():
            with gr.Tab("Chat", id="chat"), gr.Row(equal_height=False):
                with gr.Column(scale=3):
                    chatbot = gr.Chatbot(
                        label="Conversation",
                        height=560,
                        buttons=["copy", "copy_all"],
                        placeholder=(
                            "### Ask a question about the papers\n"
                            "Answers cite their sources; follow-ups like *“what did the second one "
                            "evaluate on?”* use the conversation. Try an example:"
                        ),
                        examples=[{"text": q} for q in render.EXAMPLE_QUESTIONS],
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
                            show_label=False, container=False, scale=1, lines=1, max_lines=6, autofocus=True,
                            elem_id="pc-question",
                        )
                        ask = gr.Button("Ask", variant="primary", scale=0, min_width=96, elem_id="pc-ask")
                    with gr.Row():
                        stop = gr.Button("■ Stop", variant="stop", size="sm", scale=0, min_width=96, elem_id="pc-stop")
                        new = gr.Button("+ New chat", size="sm", scale=0, min_width=120, elem_id="pc-new")
                with gr.Column(scale=2):
                    gr.Markdown("### Sources")
                    sources = gr.HTML(render.SOURCES_PLACEHOLDER, elem_id="pc-sources-panel", js_on_load=None,
                                      max_height=640)

            with gr.Tab("Papers", id="papers"):
                paper_filter = gr.Textbox(
                    label="Filter", placeholder="keywords in the title, abstract or file name", elem_id="pc-filter"
                )
                papers = gr.HTML(render.message_html("Loading the papers…"), elem_id="pc-papers", js_on_load=None)

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
                    refresh = gr.Button("↻ Refresh models", scale=1, min_width=120)
                with gr.Row():
                    api_key = gr.Textbox(
                        label="API key", type="password", value="", scale=2,
                        placeholder="blank: none (the server's own key is used only for the server's endpoint)",
                    )
                    top_k = gr.Slider(1, callbacks.MAX_TOP_K, step=1, value=defaults.top_k, label="Papers to consult")
                    temperature = gr.Slider(0.0, 2.0, step=0.05, value=defaults.temperature, label="Temperature")
                    extractive = gr.Checkbox(
                        value=defaults.extractive, label="Extractive mode (no LLM: quoted sentences)"
                    )

        settings_inputs = [base_url, model, api_key, top_k, temperature, extractive]

        # --- chat ---------------------------------------------------------------------------------------------

        def answer_question(text: str, state: ChatSession, *raw) -> Iterator[tuple]:
            first = True
            for current in callbacks.respond(services, text, state, SessionSettings.from_inputs(*raw)):
                yield current.messages, current.panel, current, ("" if first else gr.skip())
                first = False

        def chat_example(state: ChatSession, url_, model_, key_, k_, t_, extractive_, evt: gr.SelectData):
            value = evt.value if isinstance(evt.value, dict) else {"text": str(evt.value or "")}
            yield from answer_question(value.get("text", ""), state, url_, model_, key_, k_, t_, extractive_)

        chat_outputs = [chatbot, sources, session, question]
        events = [
            question.submit(answer_question, [question, session, *settings_inputs], chat_outputs,
                            concurrency_limit=CONCURRENCY, concurrency_id="answer", **private),
            ask.click(answer_question, [question, session, *settings_inputs], chat_outputs,
                      concurrency_limit=CONCURRENCY, concurrency_id="answer", **private),
            chatbot.example_select(chat_example, [session, *settings_inputs], chat_outputs,
                                   concurrency_limit=CONCURRENCY, concurrency_id="answer", **private),
        ]

        def do_stop(state: ChatSession):
            state = callbacks.stop(state)
            return state.messages, state
        stop.click(do_stop, [session], [chatbot, session], cancels=events, queue=False, **private)

        def do_new(state: ChatSession):
            fresh = callbacks.new_chat(state)
            return fresh.messages, fresh.panel, fresh, ""
        new.click(do_new, [session], [chatbot, sources, session, question], cancels=events, queue=False, **private)
        chatbot.clear(do_new, [session], [chatbot, sources, session, question], cancels=events, queue=False,
                      **private)

        def do_select(state: ChatSession, evt: gr.SelectData):
            return callbacks.select_message(state, evt.index)
        chatbot.select(do_select, [session], [sources], queue=False, **private)

        # --- settings -----------------------------------------------------------------------------------------

        def do_refresh(*raw):
            choices, chosen, line = callbacks.refresh_models(services, SessionSettings.from_inputs(*raw))
            return gr.Dropdown(choices=choices, value=chosen or None), line

        def do_status(*raw):
            return callbacks.status(services, SessionSettings.from_inputs(*raw))

        refresh.click(do_refresh, settings_inputs, [model, status_line], **private)
        base_url.submit(do_refresh, settings_inputs, [model, status_line], **private)
        base_url.blur(do_refresh, settings_inputs, [model, status_line], **private)
        api_key.submit(do_refresh, settings_inputs, [model, status_line], **private)
        extractive.input(do_status, settings_inputs, [status_line], **private)
        model.input(do_status, settings_inputs, [status_line], **private)

        # --- papers -------------------------------------------------------------------------------------------

        def do_papers(query: str):
            return callbacks.search_papers(services, query)

        paper_filter.change(do_papers, [paper_filter], [papers], trigger_mode="always_last", **private)

        # --- first load (per browser session) -----------------------------------------------------------------

        demo.load(do_refresh, settings_inputs, [model, status_line], **private)
        demo.load(do_papers, [paper_filter], [papers], **private)

        # --- API: Client(url).predict(question, api_name="/chat") ---------------------------------------------

        def chat_api(question: str) -> str:
            """Answer one question from the abstracts (no conversation); the answer followed by its sources."""
            try:
                return callbacks.api_chat(services, question)
            except PaperchatError as error:
                # A bad question or a failing endpoint is the caller's answer, not a bug: no traceback in the log.
                raise gr.Error(str(error), print_exception=False) from error

        gr.api(chat_api, api_name="chat", concurrency_limit=CONCURRENCY, concurrency_id="answer")

    demo.queue(default_concurrency_limit=CONCURRENCY)
    return demo


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


def prepare(components) -> Services:
    """Build the index from the bundled corpus if it is empty, and load what the first question needs."""
    from ui.cli import ensure_index

    ensure_index(components)
    services = Services(components)
    services.warm_up()
    return services


def launch(demo: gr.Blocks, settings, *, host: str | None = None, port: int | None = None, share: bool = False,
           open_browser: bool = False, services: Services | None = None) -> str:
    """Start serving ``demo`` without blocking; returns the local URL. Warns when it is open to others.

    With ``services``, the OpenAI-compatible API (``/v1``) and the MCP server (``/mcp``) are served on the
    same port, in front of the UI (``ui.api.v1``).
    """
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    host = resolve_host(host)
    port = resolve_port(port)
    auth = parse_auth(settings.auth)
    if not is_loopback(host) and auth is None:
        _say(f"warning: serving on {host}, reachable from other machines, without a login; "
             "set PAPERCHAT_AUTH=user:password to require one")
    if share and auth is None:
        _say("warning: --share makes a public link without a login; set PAPERCHAT_AUTH=user:password first")
    extra = {}
    service = None
    if services is not None:
        from ui.api.v1 import build_service

        service = build_service(services, host=host, loopback=is_loopback(host) and not share)
        # Gradio builds its FastAPI app from these: the API's routes sit in front of the UI's, and the MCP
        # sessions live as long as the server.
        extra["app_kwargs"] = {"middleware": service.middleware,
                               **({"lifespan": service.lifespan} if service.lifespan else {})}
    _app, local_url, share_url = demo.launch(
        server_name=host, server_port=port, share=bool(share), auth=auth, inbrowser=open_browser,
        prevent_thread_lock=True, quiet=True, show_error=False, ssr_mode=False, mcp_server=False,
        run_history=False,  # it would keep every event's inputs, the API key too, in the browser
        enable_monitoring=False, footer_links=["api", "settings"], css=render.CSS, theme=gr.themes.Soft(), **extra,
    )
    _say(f"open {local_url}" + (f" (public link: {share_url})" if share_url else "") + "; Ctrl-C stops")
    if service is not None:
        _say(service.message)
    return local_url


def serve(components, *, host: str | None = None, port: int | None = None, share: bool = False,
          open_browser: bool = False) -> int:
    """Run the web UI until Ctrl-C or SIGTERM; always closes the components (stops the embedded LLM)."""
    previous_term = None
    services = None
    demo = None

    def on_term(signum, frame):
        raise KeyboardInterrupt

    try:
        services = prepare(components)
        demo = build_app(services)
        previous_term = signal.signal(signal.SIGTERM, on_term)
        launch(demo, components.settings, host=host, port=port, share=share, open_browser=open_browser,
               services=services)
        demo.block_thread()  # returns on Ctrl-C (and on SIGTERM, turned into one above)
        return 0
    except KeyboardInterrupt:
        return 130
    finally:
        if previous_term is not None:
            signal.signal(signal.SIGTERM, previous_term)
        if demo is not None:
            with contextlib.suppress(Exception):  # the server may already be down
                demo.close()
        if services is not None:
            services.close()
        else:
            components.close()
        _say("stopped")
