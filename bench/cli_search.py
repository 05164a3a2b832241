"""``paperchat search`` in a fresh process, exactly as shipped, reporting which modules it imported.

Runs the real CLI untouched (the embedder is whatever ``PAPERCHAT_EMBEDDING_BACKEND`` and the index
choose); on exit it prints to stderr, as one JSON line, which heavy modules were imported and whether
onnxruntime was (i.e. an ONNX embedder answered).

    PAPERCHAT_DATA_DIR=DIR python bench/cli_search.py search "a question" --json
"""

from __future__ import annotations

import atexit
import json
import sys

HEAVY = ("torch", "sentence_transformers", "transformers", "sklearn")


def _report() -> None:
    heavy = sorted(m for m in HEAVY if m in sys.modules)
    print(json.dumps({"bench": "cli_search", "heavy_modules": heavy, "onnxruntime": "onnxruntime" in sys.modules}),
          file=sys.stderr)


def main() -> int:
    argv = sys.argv[1:]
    if argv[:1] == ["--backend"]:  # the old form: `--backend as-is` (the only one left) ran the CLI untouched
        if argv[1] != "as-is":
            raise SystemExit("bench/cli_search.py runs the CLI as shipped: set PAPERCHAT_EMBEDDING_BACKEND instead")
        argv = argv[2:]
    atexit.register(_report)
    from ui.cli.main import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
