"""Bare 384-d embeddings added in 5,000-row calls to two collections, alternately: default HNSW settings and
the settings given as JSON (default: sync_threshold 100,000); rows/s per 10,000 rows as the collections grow.

    nice -n 10 .venv/bin/python bench/probes/chroma_scale.py ROWS ['{"ef_construction": 40}']
"""

import json
import os
import shutil
import sys
import time

import chromadb
import numpy as np

d = os.environ.get("PROBE_DIR", "/tmp/paperchat-probes") + "/scale"
shutil.rmtree(d, ignore_errors=True)
c = chromadb.PersistentClient(path=d, settings=chromadb.Settings(anonymized_telemetry=False))
N, B, STEP = int(sys.argv[1]), 5000, 10000
rng = np.random.default_rng(0)
other = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {"sync_threshold": 100000}
other_name = "+".join(f"{k}={v}" for k, v in other.items())
cols = {
    "default": c.create_collection(
        "hnsw-default", embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
    ),
    other_name: c.create_collection(
        "hnsw-other", embedding_function=None, configuration={"hnsw": {"space": "cosine", **other}}
    ),
}
rates = {k: [] for k in cols}
for st in range(0, N, STEP):
    vec = rng.standard_normal((STEP, 384)).astype(np.float32)
    vec /= np.linalg.norm(vec, axis=1, keepdims=True)
    for name, col in cols.items():
        t0 = time.perf_counter()
        for a in range(0, STEP, B):
            col.add(ids=[f"x{st + a + i}" for i in range(B)], embeddings=vec[a : a + B])
        rates[name].append(round(STEP / (time.perf_counter() - t0)))
    print(st + STEP, {k: v[-1] for k, v in rates.items()}, flush=True)
print(json.dumps(rates))
