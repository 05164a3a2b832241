"""The optional cross-encoder reranker, with a tiny randomly initialised cross-encoder made on the spot
(no trained one ships or may be downloaded: this checks the plumbing, bench/ would measure quality)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from rag.embedding.models import bundled_model_dir
from rag.errors import ModelNotFound
from rag.retrieval.rerank import CrossEncoderReranker


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory) -> Path:
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    folder = tmp_path_factory.mktemp("tiny-cross-encoder")
    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, num_labels=1)
    BertForSequenceClassification(config).save_pretrained(folder)
    source = bundled_model_dir()
    for name in ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        if (source / name).is_file():
            shutil.copy(source / name, folder / name)
    return folder


def test_a_missing_model_folder_says_what_to_do(tmp_path):
    with pytest.raises(ModelNotFound, match="PAPERCHAT_RERANKER_MODEL"):
        CrossEncoderReranker(tmp_path / "nope")


@pytest.mark.slow
def test_reranker_orders_the_top_papers_by_the_model_and_keeps_the_rest(fake_index, tiny_cross_encoder):
    question = "which papers study federated learning clients?"
    hits = fake_index.search(question, 12)
    reranker = CrossEncoderReranker(tiny_cross_encoder, top=8)
    reranked = reranker.rerank(question, hits)
    scores = reranker.scores(question, hits[:8])
    expected = [hits[i].paper_id for i in np.argsort(-scores, kind="stable")]
    assert [h.paper_id for h in reranked[:8]] == expected
    assert [h.paper_id for h in reranked[8:]] == [h.paper_id for h in hits[8:]]
    assert [h.rank for h in reranked] == list(range(1, 13))


@pytest.mark.slow
def test_settings_switch_reranking_on_in_the_retriever(settings_factory, tiny_cross_encoder, fake_index):
    from rag.retrieval.hybrid import HybridRetriever

    settings = settings_factory(reranker_model=str(tiny_cross_encoder), rerank_top=6)
    retriever = HybridRetriever.from_settings(settings, fake_index.store, fake_index.embedder, fake_index.lexical)
    assert isinstance(retriever.reranker, CrossEncoderReranker) and retriever.reranker.top == 6
    question = "diffusion models for robot policies"
    plain = fake_index.search(question, 6)
    reranked = retriever.search(question, 3)
    assert len(reranked) == 3
    assert {h.paper_id for h in reranked} <= {h.paper_id for h in plain}  # reordered from the top 6
    assert HybridRetriever.from_settings(settings_factory(), fake_index.store, fake_index.embedder,
                                         fake_index.lexical).reranker is None
