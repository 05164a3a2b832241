"""Which part of a Chroma add costs: interleaved variants, rows/s each round."""

import json
import os
import shutil
import sys
import time

import chromadb
import numpy as np

d = sys.argv[4] if len(sys.argv) > 4 else os.environ.get("PROBE_DIR", "/tmp/paperchat-probes") + "/p2"
shutil.rmtree(d, ignore_errors=True)
c = chromadb.PersistentClient(path=d, settings=chromadb.Settings(anonymized_telemetry=False))
rng = np.random.default_rng(0)
words = np.array([f"w{i}" for i in range(5000)])
N, B = int(sys.argv[1]), int(sys.argv[2])
vec = rng.standard_normal((N, 384)).astype(np.float32)
vec /= np.linalg.norm(vec, axis=1, keepdims=True)
docs = [" ".join(rng.choice(words, 140)) for _ in range(N)]
metas = [{"paper_id": f"syn{i // 2:07d}", "chunk": i % 2, "start": 0, "end": 900} for i in range(N)]
VARIANTS = {
    "bare": dict(),
    "meta": dict(meta=1),
    "docs": dict(meta=1, docs=1),
    "docs-upsert": dict(meta=1, docs=1, upsert=1),
    "docs-sync": dict(meta=1, docs=1, hnsw={"sync_threshold": 100000}),
    "docs-sync-batch": dict(meta=1, docs=1, hnsw={"batch_size": 10000, "sync_threshold": 100000}),
    "docs-sync20k": dict(meta=1, docs=1, hnsw={"sync_threshold": 20000}),
    "bare-sync": dict(hnsw={"batch_size": 10000, "sync_threshold": 100000}),
    "docs-short": dict(meta=1, docs=1, short=1),
    "docs-ef": dict(meta=1, docs=1, hnsw={"ef_construction": 40}),
}
res = {}
for _r in range(int(sys.argv[5]) if len(sys.argv) > 5 else 1):
    for name in sys.argv[3].split(","):
        v = VARIANTS[name]
        col = c.create_collection(
            f"t-{name}-{time.time_ns()}",
            embedding_function=None,
            configuration={"hnsw": {"space": "cosine", **v.get("hnsw", {})}},
        )
        t0 = time.perf_counter()
        for st in range(0, N, B):
            a = dict(ids=[f"x{i}" for i in range(st, min(N, st + B))], embeddings=vec[st : st + B])
            if v.get("meta"):
                a["metadatas"] = metas[st : st + B]
            if v.get("docs"):
                a["documents"] = [t[:60] for t in docs[st : st + B]] if v.get("short") else docs[st : st + B]
            (col.upsert if v.get("upsert") else col.add)(**a)
        dt = time.perf_counter() - t0
        res.setdefault(name, []).append(round(N / dt))
        print(name, f"{N / dt:.0f} rows/s", flush=True)
print(json.dumps(res))
