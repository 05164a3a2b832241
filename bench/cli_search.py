"""``paperchat search`` in a fresh process, with the embedder the wiring would choose.

``--backend onnx`` swaps ``Components.embedder`` for the fp32 ``OnnxEmbedder`` (what the proposed
``PAPERCHAT_EMBEDDING_BACKEND=onnx`` wiring does) and runs the real CLI; ``--backend as-is`` runs the CLI
untouched. On exit it prints to stderr which heavy modules were imported.

    python bench/cli_search.py --backend onnx search "a question" --json
"""

from __future__ import annotations

import atexit
import json
import sys
from functools import cached_property
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]


def _report() -> None:
    heavy = sorted(m for m in ("torch", "sentence_transformers", "transformers", "sklearn") if m in sys.modules)
    print(json.dumps({"bench": "cli_search", "heavy_modules": heavy}), file=sys.stderr)


def main() -> int:
    argv = sys.argv[1:]
    backend, cache = "as-is", PROJECT / ".paperchat" / "bench" / "models"
    while argv and argv[0].startswith("--"):
        option, value, argv = argv[0], argv[1], argv[2:]
        if option == "--backend":
            backend = value
        elif option == "--cache":
            cache = Path(value)
        else:
            raise SystemExit(f"unknown option {option}")
    atexit.register(_report)
    if backend == "onnx":
        from rag.components import Components
        from rag.embedding import ModelRef
        from rag.onnx_embedding import OnnxEmbedder, onnx_model_path

        def embedder(self):
            ref = ModelRef.resolve(self.settings.embedding_model)
            return OnnxEmbedder(ref.path, onnx_model_path(cache, ref.name, quantized=False), name=ref.name,
                                batch_size=self.settings.embedding_batch_size)

        patched = cached_property(embedder)
        patched.__set_name__(Components, "embedder")
        Components.embedder = patched
    from rag.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
