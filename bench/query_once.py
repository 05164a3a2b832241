"""One question in a fresh process, the ONNX way: what `paperchat search` must cost at most.

Imports ``rag.embedding.onnx_embedder``, opens the embedded Chroma store, embeds the question and queries the chunks;
prints the hits as JSON and, on stderr, which heavy modules were imported (torch must not be).
Run by ``bench/stages.py startup``; alone: ``python bench/query_once.py --data-dir DIR "question"``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rag.embedding.models import ModelRef
from rag.embedding.onnx_embedder import OnnxEmbedder
from rag.embedding.onnx_files import onnx_model_path
from store.chroma import ChromaStore
from store.layout import chroma_dir

PROJECT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("question")
    parser.add_argument("--data-dir", type=Path, required=True, help="a paperchat data dir (holds chroma/)")
    parser.add_argument("--collection", default="paperchat")
    parser.add_argument("--cache", type=Path, default=PROJECT / ".paperchat" / "bench" / "models")
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()

    ref = ModelRef.resolve(None)
    embedder = OnnxEmbedder(ref.path, onnx_model_path(args.cache, ref.name, quantized=False), name=ref.name)
    store = ChromaStore(path=chroma_dir(args.data_dir), collection=args.collection)
    store.check_manifest({"embedding_model": embedder.name, "embedding_dimension": embedder.dimension})
    vector = embedder.embed([args.question])[0]
    matches = store.query_chunks(vector, args.k)
    print(json.dumps([{"paper_id": m.paper_id, "similarity": round(m.similarity, 4)} for m in matches]))
    heavy = sorted(m for m in ("torch", "sentence_transformers", "transformers", "sklearn") if m in sys.modules)
    print(json.dumps({"bench": "query_once", "heavy_modules": heavy}), file=sys.stderr)


if __name__ == "__main__":
    main()
