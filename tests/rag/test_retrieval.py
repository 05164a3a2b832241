from __future__ import annotations

import pytest

from rag.errors import QueryError
from rag.evaluation import dev_metrics, load_dev
from rag.retrieval.hybrid import HybridRetriever, _name_pattern
from store.bm25 import LexicalIndex
from tests.conftest import DEV_QUESTIONS


@pytest.fixture(scope="module")
def bundled_retriever(bundled_index):
    """The retriever the product builds over the index `paperchat ingest` made (its own embedding runtime)."""
    from rag.components import Components
    from rag.settings import load_settings

    return Components(load_settings(data_dir=bundled_index)).retriever


@pytest.mark.slow
def test_fedssm_ranks_first(bundled_retriever):
    hits = bundled_retriever.search("state space models for choosing clients in federated learning", 5)
    assert (hits[0].source, hits[0].ordinal) == ("000_dcbf1b5d2daaeff5.txt", 1)
    assert hits[0].title == "FedSSM"
    assert len({h.paper_id for h in hits}) == len(hits) == 5  # each paper once
    assert [h.rank for h in hits] == [1, 2, 3, 4, 5]
    assert hits[0].text in hits[0].abstract  # the best chunk, verbatim


@pytest.mark.slow
def test_dev_set_quality(bundled_retriever):
    questions = load_dev(DEV_QUESTIONS)
    metrics = dev_metrics(questions, bundled_retriever.search_many([q.question for q in questions], 10))
    assert metrics["recall@1"] >= 0.96
    assert metrics["mrr"] >= 0.98
    assert metrics["set_recall@10"] >= 0.95


@pytest.mark.slow
def test_method_name_in_question_finds_its_paper(bundled_retriever, bundled_papers):
    named = [p for p in bundled_papers if _name_pattern(p.title)]
    assert len(named) > 20
    for paper in named:
        for question in (f"what did the {paper.title} authors evaluate on?", f"What problem does {paper.title} solve?"):
            hits = bundled_retriever.search(question, 3)
            assert hits[0].paper_id == paper.paper_id, question


@pytest.mark.slow
def test_too_long_question_is_rejected(bundled_retriever):
    with pytest.raises(QueryError, match="limit is 4,000"):
        bundled_retriever.search("x" * 4001)
    with pytest.raises(QueryError, match="empty"):
        bundled_retriever.search("   ")


@pytest.mark.slow
def test_search_ranks_by_the_weighted_features(bundled_retriever):
    """``features`` + ``weights`` are the whole fusion: what bench/fit_fusion.py fits is what search ranks by."""
    question = "privacy-preserving training across many clients with state space models"
    vector = bundled_retriever.embedder.embed([question])
    found = bundled_retriever.features([question], vector)[0]
    assert found.features.shape == (len(found.paper_ids), 4)
    assert ((found.features >= 0) & (found.features <= 1)).all()
    scores = found.features @ bundled_retriever.weights()
    by_features = [pid for _, pid in sorted(zip(-scores, found.paper_ids, strict=True))][:5]
    assert [h.paper_id for h in bundled_retriever.search(question, 5)] == by_features


@pytest.mark.slow
def test_follow_up_is_evaluated_as_the_product_searches_it(bundled_retriever):
    from rag.evaluation import DevQuestion, search_as_asked

    history = [{"role": "user", "content": "Which paper uses state space models to pick clients?"},
               {"role": "assistant", "content": "FedSSM [1] scores clients with a state space model."}]
    asked = DevQuestion("What did they evaluate on?", "followup", [("000_dcbf1b5d2daaeff5.txt", 1)], history=history)
    alone = DevQuestion("What did they evaluate on?", "followup", [("000_dcbf1b5d2daaeff5.txt", 1)])
    with_history, without = search_as_asked([asked, alone], bundled_retriever, 5)
    assert with_history[0].title == "FedSSM"
    assert without[0].title != "FedSSM"  # the question alone names no paper
    assert len({h.paper_id for h in with_history}) == len(with_history) == 5


def test_name_pattern_only_for_coined_names():
    assert _name_pattern("FedSSM").search("how does fedssm pick clients?")
    assert _name_pattern("MA-RAG").search("what did the MA-RAG authors evaluate on?")
    assert not _name_pattern("MA-RAG").search("MA-RAGE is something else")
    assert _name_pattern("Diffusion models for protein design") is None
    assert _name_pattern("Learning") is None
    # One inner capital is enough: "What did the CogRouter authors evaluate on?" missed its paper without the bonus.
    assert _name_pattern("CogRouter").search("what problem does CogRouter solve?")
    assert _name_pattern("PoLar") and _name_pattern("CalM") and _name_pattern("MeGan")
    assert _name_pattern("Caracal") is None and _name_pattern("Negative sampling") is None


# --- batching and start-up (fake embedder: fast) ------------------------------------------------------


QUESTIONS = [
    "state space models for choosing clients in federated learning",
    "what did the MA-RAG authors evaluate on?",
    "diffusion models for robot policies",
    "which papers study reward hacking in language models?",
]


def test_search_many_gives_what_searching_one_by_one_gives(fake_index):
    together = fake_index.search_many(QUESTIONS, 5)
    alone = [fake_index.search(q, 5) for q in QUESTIONS]
    assert together == alone
    assert all(len(hits) == 5 for hits in together)
    assert fake_index.search_many([], 5) == []


def test_every_hit_shows_a_passage_of_its_own_abstract(fake_index):
    for hits in fake_index.search_many(QUESTIONS, 10):
        for hit in hits:
            assert hit.text and hit.text in hit.abstract


def test_a_fresh_process_reads_titles_from_the_lexical_index_not_every_paper(fake_index, monkeypatch):
    fake_index.refresh()  # the BM25 index and its title table are on disk now
    store = fake_index.store
    fresh = HybridRetriever(store, fake_index.embedder, LexicalIndex(fake_index.lexical.folder))

    def no_reading(*_args, **_kwargs):
        raise AssertionError("refresh read every paper although the saved lexical index is current")

    monkeypatch.setattr(store, "iter_papers", no_reading)
    monkeypatch.setattr(store, "iter_chunks", no_reading)
    hits = fresh.search("what did the MA-RAG authors evaluate on?", 3)
    assert hits[0].title == "MA-RAG"  # the name bonus works from the saved titles
    assert fresh.titles_in("compare MA-RAG with FedSSM") == [
        next(pid for pid, t in fresh.lexical.titles.items() if t == "MA-RAG"),
        next(pid for pid, t in fresh.lexical.titles.items() if t == "FedSSM"),
    ]


def test_a_lexical_index_saved_without_titles_is_rebuilt(fake_index, tmp_path):
    import shutil

    fake_index.refresh()
    folder = tmp_path / "lexical"
    shutil.copytree(fake_index.lexical.folder, folder)
    (folder / "titles.json").unlink()  # as an index saved by an older paperchat
    assert not LexicalIndex(folder).load(fake_index.store.generation())
    fresh = HybridRetriever(fake_index.store, fake_index.embedder, LexicalIndex(folder))
    assert fresh.search("what did the MA-RAG authors evaluate on?", 1)[0].title == "MA-RAG"
    assert (folder / "titles.json").is_file()


@pytest.mark.parametrize("candidates", [3, 100])
def test_every_candidate_gets_its_exact_dense_score(fake_index, candidates):
    """Papers that one of the three searches found and the others did not are scored from their stored
    vectors, never given a floor value (with 3 candidates per side most papers are found by one side)."""
    from rag.retrieval.hybrid import FusionParams

    store = fake_index.store
    fake_index.refresh()
    retriever = HybridRetriever(store, fake_index.embedder, LexicalIndex(fake_index.lexical.folder),
                                params=FusionParams(candidates=candidates))
    question = "which papers study reward hacking and federated clients in language models?"
    vector = fake_index.embedder.embed([question])[0]
    hits = retriever.search(question, 40)
    assert len(hits) >= (5 if candidates == 3 else 40)
    profiles = store.paper_profiles([h.paper_id for h in hits])
    for hit in hits:
        unit, meta = profiles[hit.paper_id]
        chunks = store.chunk_vectors([f"{hit.paper_id}::{i}" for i in range(meta["n_chunks"])])
        best = max(float(v @ vector) for v in chunks.values())
        expected = meta["chunk_weight"] * best + meta["profile_norm"] * float(unit @ vector)
        assert hit.dense_score == pytest.approx(expected, abs=1e-4), hit.title


def test_the_hybrid_retriever_and_the_fake_offer_what_the_pipeline_needs(fake_index, fake_retriever):
    """Both implement ``Retriever`` (the pipeline's seam); the hybrid one's idf is its BM25 index's."""
    from rag.retrieval.retriever import Retriever

    assert isinstance(fake_index, Retriever) and isinstance(fake_retriever, Retriever)
    fake_index.refresh()
    assert fake_index.idf("feder") == fake_index.lexical.idf("feder") < fake_index.idf("\x00never-a-term\x00")
    assert fake_retriever.idf("feder") < fake_retriever.idf("\x00never-a-term\x00")
