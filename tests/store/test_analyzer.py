"""BM25's analyzer (store/bm25.py): what words become, and that remembering each word's analysis changes nothing."""

from __future__ import annotations

import pytest

import store.bm25 as bm25
from store.bm25 import Analyzer, LexicalParams

TEXT = "MA-RAG beats the state-of-the-art; don't Retrievers retrieve? GPT-4o, Fed-Kalter's gains x_y"


def test_words_are_lowered_stemmed_and_stopwords_dropped_keeping_compounds():
    tokens = Analyzer(LexicalParams())(TEXT)
    assert tokens[:3] == ["ma", "rag", "ma-rag"]
    assert "the" not in tokens and "state" in tokens and "art" in tokens and "state-of-the-art" in tokens
    assert tokens.count("retriev") == 2  # "Retrievers" and "retrieve": one stem
    assert "gpt-4o" in tokens and "fed-kalter's" in tokens and "x" in tokens and "y" in tokens


@pytest.mark.parametrize("params", [LexicalParams(), LexicalParams(stem=False), LexicalParams(stopwords=False)])
def test_a_remembered_word_is_analysed_as_a_new_one(params, monkeypatch):
    monkeypatch.setattr(bm25, "_MEMO_WORDS", 3)  # the memo fills and is cleared several times over TEXT
    remembering = Analyzer(params)
    first = remembering(TEXT)
    assert remembering(TEXT) == first
    assert len(remembering._memo) <= 3
    assert all(Analyzer(params)(word) == remembering(word) for word in TEXT.split())
