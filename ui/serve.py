"""``paperchat serve``: open the web UI, with the OpenAI-compatible API (``/v1``) and the MCP server (``/mcp``)
on the same port. ``python app.py`` takes the same options.

Hook into ``ui/cli.py``::

    from ui.serve import add_serve_arguments, cmd_serve
    p = sub.add_parser("serve", help="open the web UI (http://127.0.0.1:7860)")
    add_serve_arguments(p)
    p.set_defaults(func=cmd_serve)
"""

from __future__ import annotations

import argparse


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
    return parser


def components_from_args(args):
    """Settings (environment plus the command line) -> components."""
    from rag.components import components_from_args as build

    return build(args)


def cmd_serve(args) -> int:
    """Run the web UI until Ctrl-C; PaperchatError propagates (the caller prints it as one line)."""
    from rag.errors import ConfigError

    if getattr(args, "port", None) is not None and not 0 <= args.port <= 65535:
        raise ConfigError(f"--port {args.port}: must be between 0 and 65535")
    if getattr(args, "k", None) is not None and args.k < 1:
        raise ConfigError(f"--k {args.k}: must be at least 1")
    components = components_from_args(args)

    from ui.web.app import serve  # Gradio loads only once the settings are known to be good

    return serve(
        components,
        host=getattr(args, "host", None),
        port=getattr(args, "port", None),
        share=bool(getattr(args, "share", False)),
        open_browser=bool(getattr(args, "open_browser", False)),
    )
