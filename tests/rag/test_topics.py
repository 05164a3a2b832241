"""Topics, their labels, the saved copy per index generation, and related papers: over a real index of the
bundled corpus (fake embedder, real Chroma) and over hand-made vectors."""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest

from rag.components import Components
from rag.errors import QueryError
from rag.topics.index import TopicIndex, topics_of
from rag.topics.model import build_topic_map, topic_count
from rag.topics.related import related_papers
from rag.topics.terms import WordCounter, distinctive_terms
from rag.types import Paper
from store.layout import STATE_FILE, TOPICS_FILE, topics_dir
from tests.conftest import BUNDLED_CORPUS, FakeEmbedder


@pytest.fixture(scope="module")
def components(tmp_path_factory):
    from rag.settings import load_settings

    data_dir = tmp_path_factory.mktemp("topics-index")
    settings = load_settings(data_dir=data_dir, embedding_backend="torch", llm="extractive")
    components = Components(settings, embedder=FakeEmbedder(), warn=lambda _line: None)
    components.ingest_files([BUNDLED_CORPUS])
    return components


def words_of(text: str) -> set[str]:
    return set(re.findall(r"[^\W_]+(?:-[^\W_]+)*", text.lower()))


def test_every_paper_is_in_exactly_one_topic_labelled_with_its_own_words(components):
    topic_map = components.topics()
    papers = {p.paper_id: p for p in components.papers()}
    assert len(papers) == 76
    listed = [pid for topic in topic_map.topics for pid in topic.paper_ids]
    assert sorted(listed) == sorted(papers)  # every paper once, none twice
    assert len(topic_map.topics) == topic_count(76) == 6
    assert [t.number for t in topic_map.topics] == list(range(1, 7))
    assert [t.size for t in topic_map.topics] == sorted((t.size for t in topic_map.topics), reverse=True)
    for topic in topic_map.topics:
        abstracts = set().union(*(words_of(papers[pid].abstract) for pid in topic.paper_ids))
        assert len(topic.terms) == 4
        assert all(term in abstracts for term in topic.terms), (topic.terms, topic.number)
    assert set(topic_map.coordinates) == set(papers)


def test_the_same_index_gives_the_same_topics_whatever_the_order(components):
    papers = list(components.papers())
    components.retriever.refresh()
    first = topics_of(papers, components.retriever.vectors)
    random.Random(7).shuffle(papers)
    assert topics_of(papers, components.retriever.vectors) == first


def test_topics_are_saved_per_generation_and_rebuilt_when_the_index_changes(components, tmp_path):
    folder = topics_dir(components.settings.lexical_dir)
    topic_map = components.topics()
    state = json.loads((folder / STATE_FILE).read_text())
    assert state["generation"] == components.store.generation() and state["papers"] == 76
    # A fresh process reads the saved copy back, equal to what was built.
    again = Components(components.settings, embedder=FakeEmbedder(), warn=lambda _line: None)
    assert again.topics() == topic_map
    # The index changes: one more paper; the topics follow.
    extra = tmp_path / "extra.txt"
    extra.write_text("Federated learning with client selection by state space models over many clients.\n")
    components.ingest_files([BUNDLED_CORPUS, extra])
    rebuilt = components.topics()
    assert len(rebuilt.paper_topic) == 77
    assert json.loads((folder / STATE_FILE).read_text())["generation"] == components.store.generation()


def test_a_stale_or_damaged_copy_is_not_used(tmp_path, components):
    index = TopicIndex(tmp_path / "t")
    topic_map = components.topics()
    index.save(topic_map, 5)
    assert index.load(5) == topic_map
    assert index.load(6) is None
    (tmp_path / "t" / TOPICS_FILE).write_text("{not json")
    assert index.load(5) is None


def test_distinctive_terms_are_frequent_in_the_group_and_rare_elsewhere():
    texts = [
        "Graph neural networks for molecules. Graph pooling helps.",
        "Message passing on graph structures and molecules.",
        "Graph transformers scale to large molecules.",
        "Diffusion models generate images. Diffusion sampling is slow.",
        "Faster diffusion sampling for images with fewer steps.",
        "Image diffusion guided by text prompts.",
    ]
    vocabulary = WordCounter().count(texts)
    labels = distinctive_terms(vocabulary, [[0, 1, 2], [3, 4, 5]], 2)
    assert labels == [["graph", "molecules"], ["diffusion", "images"]]


def test_clusters_follow_the_vectors_on_separated_groups():
    rng = np.random.default_rng(0)
    centres = np.eye(8)[:4] * 5
    vectors = np.vstack([c + rng.normal(0, 0.1, (9, 8)) for c in centres])  # 36 papers: sqrt(18) -> 4 topics
    ids = [f"p{i:02d}" for i in range(36)]
    topic_map = build_topic_map(ids, vectors, ["word"] * 36)
    groups = sorted(sorted(t.paper_ids) for t in topic_map.topics)
    assert groups == [ids[i:i + 9] for i in range(0, 36, 9)]


def test_related_papers_are_the_nearest_with_the_words_they_share(components):
    components.retriever.refresh()
    vectors, topic_map = components.retriever.vectors, components.topics()
    papers = components.papers()
    fedssm = next(p for p in papers if p.title == "FedSSM")
    related = related_papers(fedssm.paper_id, papers, vectors, topic_map, 3)
    assert len(related) == 3 and fedssm.paper_id not in {r.paper.paper_id for r in related}
    similarities = [r.similarity for r in related]
    assert similarities == sorted(similarities, reverse=True)
    # Nothing else is nearer than the third.
    rows = vectors.paper_rows
    unit = np.asarray(vectors.profiles) / np.linalg.norm(vectors.profiles, axis=1, keepdims=True)
    others = sorted((float(unit[rows[p.paper_id]] @ unit[rows[fedssm.paper_id]]) for p in papers
                     if p.paper_id != fedssm.paper_id), reverse=True)
    assert similarities == pytest.approx(others[:3], abs=1e-5)
    for item in related:
        # Shared by stem ("participant", "participants"), shown as one of the two abstracts spells it.
        both = WordCounter().count([fedssm.abstract, item.paper.abstract, " ".join(item.shared)]).stems
        assert item.shared and set(both[2]) <= set(both[0]) & set(both[1])
        assert all(w in words_of(fedssm.abstract) | words_of(item.paper.abstract) for w in item.shared)
        assert item.same_topic == (topic_map.paper_topic[item.paper.paper_id] == topic_map.paper_topic[fedssm.paper_id])
        assert "shared words: " in item.shares


def test_an_unknown_paper_id_says_how_to_find_ids(components):
    components.retriever.refresh()
    with pytest.raises(QueryError, match=r"no paper with id 'nope'.*paperchat search QUESTION --json"):
        related_papers("nope", components.papers(), components.retriever.vectors, components.topics(), 3)


def test_few_papers_still_get_topics():
    one = build_topic_map(["a"], np.ones((1, 4)), ["solo paper on kernels"])
    assert [t.paper_ids for t in one.topics] == [("a",)]
    assert build_topic_map([], np.zeros((0, 4)), []).topics == ()
    paper = Paper("a", "A", "alpha", "f.txt", 1)
    assert paper.paper_id == "a"


def test_connectives_and_manner_words_are_no_shared_words():
    # "shared words: upper, lower, finally, bounds"; "requiring, dynamically, design": nothing of why papers are alike.
    counts = WordCounter().count(["Finally, requiring little memory, we dynamically route packets.",
                                  "Finally, requiring no labels, we dynamically route packets."]).stems
    shared = set(counts[0]) & set(counts[1])
    assert shared and not shared & {"final", "finally", "requir", "requiring", "dynam", "dynamically"}
