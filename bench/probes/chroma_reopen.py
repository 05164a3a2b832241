import sys
import time

import numpy as np

t0 = time.perf_counter()
import chromadb  # noqa: E402 - timed: importing chromadb is part of opening a store

c = chromadb.PersistentClient(path=sys.argv[1], settings=chromadb.Settings(anonymized_telemetry=False))
t1 = time.perf_counter()
for col in c.list_collections():
    col = c.get_collection(col.name)
    t2 = time.perf_counter()
    n = col.count()
    q = np.ones((1, 384), dtype=np.float32)
    col.query(query_embeddings=q, n_results=5)
    t3 = time.perf_counter()
    print(
        col.name,
        n,
        f"open {t1 - t0:.2f}s count+first query {t3 - t2:.2f}s",
        col.configuration_json["hnsw"]["sync_threshold"],
        flush=True,
    )
