"""The topics saved beside the other derived indexes (``<name>@topics/``, store/layout.py), per store
generation: built once after the index changes, read back by every later command and app start."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from rag.topics.model import Topic, TopicMap, build_topic_map
from rag.types import Paper
from store.atomic import save_folder_atomically
from store.layout import STATE_FILE, TOPICS_FILE, TOPICS_FORMAT
from store.vectors import VectorTable


def topics_of(papers: Sequence[Paper], vectors: VectorTable) -> TopicMap:
    """The topics of ``papers`` from their profile vectors (papers without a vector are left out)."""
    rows = vectors.paper_rows
    kept = [p for p in papers if p.paper_id in rows]
    matrix = np.asarray(vectors.profiles)[[rows[p.paper_id] for p in kept]] if kept else np.zeros((0, 0))
    return build_topic_map([p.paper_id for p in kept], matrix, [p.abstract for p in kept])


class TopicIndex:
    """The saved topics of one collection."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self._lock = threading.Lock()  # one build at a time, however many sessions ask
        self._current: tuple[int, TopicMap] | None = None

    def current(self, generation: int, retriever, papers: Callable[[], Sequence[Paper]]) -> TopicMap:
        """The topics at ``generation``: kept in memory, else read back, else built from ``retriever``'s vector
        table (brought in step with the store first) and ``papers()``, and saved."""
        with self._lock:
            if self._current is None or self._current[0] != generation:
                topic_map = self.load(generation)
                if topic_map is None:
                    retriever.refresh()
                    generation = retriever.vectors.generation  # the index may have moved on meanwhile
                    topic_map = topics_of(papers(), retriever.vectors)
                    self.save(topic_map, generation)
                self._current = (generation, topic_map)
            return self._current[1]

    def load(self, generation: int) -> TopicMap | None:
        """The topics saved at ``generation``; None when missing, stale or damaged (the caller rebuilds)."""
        try:
            state = json.loads((self.folder / STATE_FILE).read_text())
            if state.get("format") != TOPICS_FORMAT or state.get("generation") != generation:
                return None
            return _from_json(json.loads((self.folder / TOPICS_FILE).read_text()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def save(self, topic_map: TopicMap, generation: int) -> None:
        def fill(tmp: Path) -> None:
            (tmp / TOPICS_FILE).write_text(json.dumps(_to_json(topic_map), ensure_ascii=False))
            (tmp / STATE_FILE).write_text(json.dumps(
                {"format": TOPICS_FORMAT, "generation": generation, "papers": len(topic_map.paper_topic)}
            ))

        save_folder_atomically(self.folder, fill, optional=True)


def _to_json(topic_map: TopicMap) -> dict:
    return {
        "topics": [{"number": t.number, "terms": list(t.terms), "papers": list(t.paper_ids)} for t in topic_map.topics],
        "coordinates": {pid: list(xy) for pid, xy in topic_map.coordinates.items()},
        "idf": topic_map.idf,
    }


def _from_json(data: dict) -> TopicMap:
    topics = tuple(
        Topic(int(t["number"]), tuple(str(w) for w in t["terms"]), tuple(str(p) for p in t["papers"]))
        for t in data["topics"]
    )
    coordinates = {str(pid): (float(xy[0]), float(xy[1])) for pid, xy in data["coordinates"].items()}
    paper_topic = {pid: t.number for t in topics for pid in t.paper_ids}
    if set(paper_topic) != set(coordinates):
        raise ValueError("topics and map disagree")
    return TopicMap(topics, paper_topic, coordinates, {str(k): float(v) for k, v in data["idf"].items()})
