"""Open the paperchat web UI: ``python app.py [--host H] [--port P] [--share] [--k K] [--extractive]``.

Wiring only: the options of ``paperchat serve`` (``ui.serve``), run like every paperchat command
(``ui.shared.commands.run_command``: one-line errors, exit codes).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    from ui.serve import add_serve_arguments  # the web UI's imports: inside run_command's Ctrl-C handler

    return add_serve_arguments(argparse.ArgumentParser(prog="app.py", description="Open the paperchat web UI."))


def main(argv: Sequence[str] | None = None) -> int:
    from ui.shared.commands import run_command

    return run_command(build_parser, argv)


if __name__ == "__main__":
    sys.exit(main())
