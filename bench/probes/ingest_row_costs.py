"""Rows/s of the ingest path (bench/synthetic.write_through_ingest) with parts of a row removed or a Chroma
setting changed, by monkeypatching ChromaStore for the measurement only; interleaved rounds.

    PYTHONPATH=.:bench nice -n 10 .venv/bin/python bench/probes/ingest_row_costs.py CHUNKS ROUNDS VARIANT,...
"""

import json
import os
import shutil
import sys

from stages import _vocabulary, chunk_defaults
from synthetic import RandomEmbedder, synthetic_papers, write_through_ingest

import store.chroma_client as cc
from rag.ingest import make_chunker

CHUNKS, ROUNDS = int(sys.argv[1]), int(sys.argv[2])
variants = sys.argv[3].split(",")
emb = RandomEmbedder(1)
mt, ov = chunk_defaults()
chunker = make_chunker(emb, mt, ov)
papers, chunks = synthetic_papers(CHUNKS, chunker, _vocabulary(), 1)
real_collection, real_call = cc.ChromaConnection._collection, cc.ChromaConnection._call


def patched(variant):
    def _collection(self, name, create, metadata=None):
        if "sync" not in variant:
            return real_collection(self, name, create, metadata)

        def op():
            try:
                return self.client.get_collection(name, embedding_function=None)
            except Exception:
                pass
            return self.client.create_collection(
                name,
                metadata=metadata,
                embedding_function=None,
                configuration={"hnsw": {"space": "cosine", "sync_threshold": 100000}},
            )

        return self._call("open", op)

    def _call(self, doing, fn, *args, **kw):
        if doing == "write papers":
            if "nodoc" in variant:
                kw["documents"] = None
            if "packed" in variant:
                kw["metadatas"] = [
                    {"paper_id": m["paper_id"], "content_hash": m["content_hash"], "record": json.dumps(m)}
                    for m in kw["metadatas"]
                ]
        return real_call(self, doing, fn, *args, **kw)

    cc.ChromaConnection._collection = _collection
    cc.ChromaConnection._call = _call


res = {}
for r in range(ROUNDS):
    for v in variants if r % 2 == 0 else variants[::-1]:
        patched(v)
        d = f"{os.environ.get('PROBE_DIR', '/tmp/paperchat-probes')}/iv/{v}-{r}"
        shutil.rmtree(d, ignore_errors=True)
        out = write_through_ingest(d, papers, chunker, RandomEmbedder(1))
        rate = (chunks + len(papers)) / out["write_s"]
        res.setdefault(v, []).append(round(rate))
        print(v, round(rate), "rows/s", flush=True)
print(json.dumps({"chunks": chunks, "papers": len(papers), "rows_per_s": res}))
