"""Open the paperchat web UI: ``python app.py [--host H] [--port P] [--share] [--k K] [--extractive]``.

Wiring only: settings (environment + options) -> components -> UI (``ui.web.app.serve``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    from rag.errors import PaperchatError
    from ui.serve import add_serve_arguments, cmd_serve

    parser = add_serve_arguments(argparse.ArgumentParser(prog="app.py", description="Open the paperchat web UI."))
    args = parser.parse_args(argv)
    try:
        return cmd_serve(args)
    except PaperchatError as e:
        print(f"paperchat: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        if os.environ.get("PAPERCHAT_DEBUG"):
            raise
        print(f"paperchat: internal error: {type(e).__name__}: {e} (rerun with PAPERCHAT_DEBUG=1 for details)",
              file=sys.stderr)
        return 70


if __name__ == "__main__":
    sys.exit(main())
