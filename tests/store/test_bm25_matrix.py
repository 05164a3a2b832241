"""Our BM25 matrix build (store.bm25.bm25_matrix) against bm25s's own: the same matrix, value for value."""

from __future__ import annotations

from array import array

import bm25s
import numpy as np
import pytest

from store.bm25 import LexicalIndex, adopt_matrix, bm25_matrix


def _corpus(seed: int, n_docs: int, n_vocab: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    # Zipf-like token draws: some tokens in most documents, most in few, some repeated within a document.
    weights = 1.0 / np.arange(1, n_vocab + 1)
    weights /= weights.sum()
    return [rng.choice(n_vocab, size=int(rng.integers(1, 60)), p=weights).tolist() for _ in range(n_docs)]


def _by_bm25s(docs: list[list[int]], n_vocab: int, k1: float, b: float) -> bm25s.BM25:
    vocabulary = {f"t{i}": i for i in range(n_vocab)}
    bm25 = bm25s.BM25(k1=k1, b=b)
    bm25.index(([array("i", d) for d in docs], vocabulary), show_progress=False)
    return bm25


@pytest.mark.parametrize(("seed", "block_tokens"), [(0, 1 << 23), (1, 50), (2, 1)])
def test_matrix_equals_bm25s_value_for_value(seed, block_tokens):
    n_vocab = 300
    docs = _corpus(seed, 400, n_vocab)
    docs[5] = [7]  # a one-token document
    expected = _by_bm25s(docs, n_vocab, 0.9, 0.5)
    tokens = np.array([t for d in docs for t in d], dtype=np.int32)
    lengths = np.array([len(d) for d in docs], dtype=np.int64)
    ours = bm25_matrix(tokens, lengths, n_vocab, k1=0.9, b=0.5, block_tokens=block_tokens)
    assert ours["num_docs"] == expected.scores["num_docs"]
    np.testing.assert_array_equal(ours["indptr"], expected.scores["indptr"])
    np.testing.assert_array_equal(ours["indices"], expected.scores["indices"])
    assert ours["data"].dtype == expected.scores["data"].dtype == np.float32
    np.testing.assert_array_equal(ours["data"], expected.scores["data"])


def test_adopted_matrix_scores_queries_as_bm25s_does(tmp_path):
    n_vocab = 120
    docs = _corpus(3, 200, n_vocab)
    expected = _by_bm25s(docs, n_vocab, 1.2, 0.75)
    vocabulary = {f"t{i}": i for i in range(n_vocab)}
    ours = bm25s.BM25(k1=1.2, b=0.75)
    adopt_matrix(ours, bm25_matrix(np.array([t for d in docs for t in d], dtype=np.int32),
                                   np.array([len(d) for d in docs], dtype=np.int64), n_vocab, k1=1.2, b=0.75),
                 vocabulary)
    assert ours.vocab_dict == expected.vocab_dict
    ours.save(str(tmp_path / "ours"))
    loaded = bm25s.BM25.load(str(tmp_path / "ours"))
    for query in (["t0"], ["t3", "t50", "t3"], ["t119", "t1"]):
        np.testing.assert_array_equal(loaded.get_scores(query), expected.get_scores(query))


def test_lexical_index_builds_and_reloads(tmp_path):
    index = LexicalIndex(tmp_path / "lex")
    rows = [("a::0", "a", "State space models select clients."), ("b::0", "b", "the of and"),
            ("c::0", "c", "Federated learning with state-space client selection.")]
    index.build(rows, generation=3)
    scores = index.scores("state space client")
    assert scores[1] == 0 and scores[0] > 0 and scores[2] > 0
    again = LexicalIndex(tmp_path / "lex")
    assert again.load(3)
    np.testing.assert_array_equal(again.scores("state space client"), scores)
