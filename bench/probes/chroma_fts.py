"""Interleaved: chunk rows with documents, FTS left on / FTS disabled via Schema / (measurement only) Chroma's
FTS5 trigram table swapped for a plain table in a separate store, to price the full-text index itself."""

import json
import os
import shutil
import sqlite3
import sys
import time

import chromadb
import numpy as np
from chromadb import FtsIndexConfig, Schema, VectorIndexConfig

N, B, R = int(sys.argv[1]), 5000, int(sys.argv[2])
rng = np.random.default_rng(0)
words = np.array([f"w{i}" for i in range(5000)])
vec = rng.standard_normal((N, 384)).astype(np.float32)
vec /= np.linalg.norm(vec, axis=1, keepdims=True)
docs = [" ".join(rng.choice(words, 140)) for _ in range(N)]
metas = [{"paper_id": f"syn{i // 2:07d}", "chunk": i % 2, "start": 0, "end": 900} for i in range(N)]
clients = {}


def client(kind):
    if kind not in clients:
        d = f"{os.environ.get('PROBE_DIR', '/tmp/paperchat-probes')}/fts2-{kind}"
        shutil.rmtree(d, ignore_errors=True)
        clients[kind] = chromadb.PersistentClient(path=d, settings=chromadb.Settings(anonymized_telemetry=False))
        if kind == "plain":
            con = sqlite3.connect(f"{d}/chroma.sqlite3")
            con.execute("DROP TABLE embedding_fulltext_search")
            con.execute("CREATE TABLE embedding_fulltext_search (rowid INTEGER PRIMARY KEY, string_value TEXT)")
            con.commit()
            con.close()
    return clients[kind]


res = {}
order = ["meta", "docs", "docs-schema-nofts", "docs-plain-table"]
for r in range(R):
    for v in order if r % 2 == 0 else order[::-1]:
        kw = {"configuration": {"hnsw": {"space": "cosine"}}}
        if v == "docs-schema-nofts":
            s = Schema()
            s.delete_index(config=FtsIndexConfig(), key="#document")
            s.create_index(config=VectorIndexConfig(space="cosine"))
            kw = {"schema": s}
        col = client("plain" if v == "docs-plain-table" else "main").create_collection(
            f"t{r}-{v}", embedding_function=None, **kw
        )
        t0 = time.perf_counter()
        for st in range(0, N, B):
            a = dict(
                ids=[f"x{i}" for i in range(st, st + B)], embeddings=vec[st : st + B], metadatas=metas[st : st + B]
            )
            if v != "meta":
                a["documents"] = docs[st : st + B]
            col.add(**a)
        res.setdefault(v, []).append(round(N / (time.perf_counter() - t0)))
        print(v, res[v][-1], flush=True)
print(json.dumps(res))
con = sqlite3.connect(f"{os.environ.get('PROBE_DIR', '/tmp/paperchat-probes')}/fts2-main/chroma.sqlite3")
print("fts rows in main store", con.execute("select count(*) from embedding_fulltext_search").fetchone()[0])
