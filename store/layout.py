"""The index's layout on disk: which folders and files a data folder holds, and the format numbers of
the derived copies, in one place so that the Chroma store, the BM25 index, the vector table, ingest and
the benchmarks agree::

    <data_dir>/chroma/                     the embedded Chroma store: collections <name> and <name>-papers
    <data_dir>/ingest.lock                 held by the one ingest writing to this data folder
    <data_dir>/lexical/<name>/             BM25 over chunks: bm25/, ids.json, titles.json, state.json
    <data_dir>/lexical/<name>@papers/      BM25 over whole papers (same files)
    <data_dir>/lexical/<name>@vectors/     every stored vector: <array>.npy, ids.json, state.json
    <data_dir>/lexical/<name>@topics/      the papers' topics and map (rag/topics): topics.json, state.json

The BM25 folders, the vector table and the topics are derived data: each ``state.json`` records the store's
``generation`` it was built at and its format number; a copy of another format is rebuilt.
"""

from __future__ import annotations

from pathlib import Path

CHROMA_FOLDER = "chroma"
LEXICAL_FOLDER = "lexical"
LOCK_FILE = "ingest.lock"
PAPERS_SUFFIX = "-papers"  # the papers collection beside the chunks collection
PAPERS_LEXICAL_SUFFIX = "@papers"
VECTORS_SUFFIX = "@vectors"
TOPICS_SUFFIX = "@topics"

STATE_FILE = "state.json"
IDS_FILE = "ids.json"
TITLES_FILE = "titles.json"
AUTHORS_FILE = "authors.json"  # paper_id -> authors, for "papers by Tri Dao" (hybrid name matching)
TOPICS_FILE = "topics.json"
BM25_FOLDER = "bm25"
VECTOR_ARRAYS = ("chunks", "profiles", "norms", "chunk_weights", "starts")

LEXICAL_FORMAT = 2  # 2: titles.json beside the index
VECTORS_FORMAT = 1
TOPICS_FORMAT = 1


def chroma_dir(data_dir: Path) -> Path:
    """The embedded Chroma store of a data folder."""
    return Path(data_dir) / CHROMA_FOLDER


def lexical_dir(data_dir: Path, collection: str) -> Path:
    """The BM25 index over the chunks of ``collection``."""
    return Path(data_dir) / LEXICAL_FOLDER / collection


def papers_lexical_dir(lexical_folder: Path) -> Path:
    """The BM25 index over whole papers, beside the chunks' one."""
    return lexical_folder.with_name(lexical_folder.name + PAPERS_LEXICAL_SUFFIX)


def vectors_dir(lexical_folder: Path) -> Path:
    """The vector table, beside the chunks' BM25 index."""
    return lexical_folder.with_name(lexical_folder.name + VECTORS_SUFFIX)


def topics_dir(lexical_folder: Path) -> Path:
    """The topics and the map of the papers, beside the chunks' BM25 index."""
    return lexical_folder.with_name(lexical_folder.name + TOPICS_SUFFIX)


def papers_collection(collection: str) -> str:
    """The Chroma collection of paper records that goes with the chunks collection ``collection``."""
    return collection + PAPERS_SUFFIX
