import sys

import chromadb

c = chromadb.PersistentClient(path=sys.argv[1], settings=chromadb.Settings(anonymized_telemetry=False))
for col in c.list_collections():
    if "sync" in col.name:
        c.get_collection(col.name).modify(configuration={"hnsw": {"sync_threshold": 1000}})
        print("lowered", col.name)
