"""How a command-line entry point runs (``paperchat ...`` and ``python app.py``): its options checked, settings
from the environment and the options -> components, and the one top-level error handler.

Every failure ends as one ``paperchat: ...`` line on stderr and an exit code; a traceback only for a bug,
and only with PAPERCHAT_DEBUG=1.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from rag.errors import PaperchatError
from rag.text import say

if TYPE_CHECKING:
    from rag.components import Components

EXIT_INTERNAL = 70  # EX_SOFTWARE: a bug
EXIT_INTERRUPTED = 130


def components_from_args(args: argparse.Namespace) -> Components:
    """Settings (environment plus the command line's --k and --extractive) -> components, with the parts
    the entry point was given instead (``run_command(parts=...)``)."""
    from rag.components import Components
    from rag.settings import load_settings

    overrides = {}
    if getattr(args, "k", None):
        overrides["top_k"] = args.k
    if getattr(args, "extractive", False):
        overrides["llm"] = "extractive"
    quiet = getattr(args, "json", False)  # --json: nothing on stderr but errors (no ingest progress)
    return Components(load_settings(**overrides), show_progress=False if quiet else None, **getattr(args, "parts", {}))


def run_command(build_parser: Callable[[], argparse.ArgumentParser], argv: Sequence[str] | None = None, *,
                parts: Mapping[str, object] | None = None) -> int:
    """Build the parser, parse ``argv``, run the command it names (``args.func``) and turn every failure into one
    line.

    The parser is built in here, not by the caller: building it imports the commands' modules (numpy, pydantic,
    the store: most of a command's first second), and Ctrl-C then must be "interrupted" as it is later, not a
    traceback. ``parts`` are given to ``Components`` instead of built from settings (tests: a fake embedder).
    """
    try:
        args = build_parser().parse_args(argv)  # a usage error or --help: SystemExit, which passes through
        args.parts = dict(parts or {})
        return int(args.func(args) or 0)
    except PaperchatError as e:
        say(f"error: {e}")
        return e.exit_code
    except KeyboardInterrupt:
        say("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `paperchat search ... | head`: the reader left; not an error worth a message.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as e:
        if os.environ.get("PAPERCHAT_DEBUG"):
            raise
        say(f"internal error: {type(e).__name__}: {e} (this is a bug; rerun with PAPERCHAT_DEBUG=1 for details)")
        return EXIT_INTERNAL
