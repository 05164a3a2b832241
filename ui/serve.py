"""``paperchat serve`` (and ``python app.py``): the web UI, with the OpenAI-compatible API (``/v1``) and the MCP
server (``/mcp``) on the same port, until Ctrl-C or SIGTERM.

This is where the web UI and the API meet: ``launch_with_api`` puts the API's routes in front of the UI's,
both over the same ``Components``. On the way out everything is closed, which stops the embedded LLM.
"""

from __future__ import annotations

import argparse
import contextlib
import signal

from rag.components import Components
from rag.errors import ConfigError
from rag.text import say
from ui.shared.commands import components_from_args


def add_serve_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--host", default=None,
                        help="address to listen on (default: $GRADIO_SERVER_NAME or 127.0.0.1)")
    parser.add_argument("--port", type=int, default=None,
                        help="port (default: $GRADIO_SERVER_PORT, else the first free port from 7860)")
    parser.add_argument("--share", action="store_true",
                        help="also open a public *.gradio.live link (set PAPERCHAT_AUTH=user:password first)")
    parser.add_argument("--k", type=int, default=None, help="papers to consult (default: PAPERCHAT_TOP_K)")
    parser.add_argument("--extractive", action="store_true", help="no LLM: answer with cited sentences")
    parser.add_argument("--open", dest="open_browser", action="store_true", help="open a browser tab")
    parser.set_defaults(func=cmd_serve)
    return parser


def cmd_serve(args) -> int:
    """Run the web UI until Ctrl-C; PaperchatError propagates (the caller prints it as one line)."""
    if getattr(args, "port", None) is not None and not 0 <= args.port <= 65535:
        raise ConfigError(f"--port {args.port}: must be between 0 and 65535")
    components = components_from_args(args)
    return serve(
        components,
        host=getattr(args, "host", None),
        port=getattr(args, "port", None),
        share=bool(getattr(args, "share", False)),
        open_browser=bool(getattr(args, "open_browser", False)),
    )


def launch_with_api(demo, components: Components, *, host: str | None = None, port: int | None = None,
                    share: bool = False, open_browser: bool = False) -> str:
    """``ui.web.app.launch`` with the API and the MCP server in front of the UI; returns the local URL."""
    from ui.api.service import build_service
    from ui.web.app import is_loopback, launch, resolve_host

    host = resolve_host(host)
    service = build_service(components, host=host, loopback=is_loopback(host) and not share)
    return launch(demo, components.settings, host=host, port=port, share=share, open_browser=open_browser,
                  middleware=service.middleware, lifespan=service.lifespan, messages=[service.message])


def serve(components: Components, *, host: str | None = None, port: int | None = None, share: bool = False,
          open_browser: bool = False) -> int:
    """Run the web UI until Ctrl-C or SIGTERM; always closes the components (stops the embedded LLM)."""
    previous_term = None
    demo = None

    def on_term(signum, frame):
        raise KeyboardInterrupt

    try:
        components.ensure_index()
        components.warm_up()  # the first question should not wait for the model and the tables
        from ui.web.app import build_app  # Gradio loads only once the settings are known to be good

        demo = build_app(components)
        previous_term = signal.signal(signal.SIGTERM, on_term)
        launch_with_api(demo, components, host=host, port=port, share=share, open_browser=open_browser)
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
        components.close()
        say("stopped")
