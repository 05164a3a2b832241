"""The lexical (BM25) half of hybrid search, kept in step with the Chroma store.

The BM25 index is derived data: it is rebuilt from the store's chunks whenever its recorded
``generation`` differs from the store's, so several processes (or machines sharing one Chroma server)
each keep a correct copy, and a missing or damaged copy is never fatal. It is saved with bm25s's own
format (NumPy arrays loaded with ``allow_pickle=False`` plus JSON), written to a temporary folder and
swapped in (store.atomic), so a killed process never leaves half an index behind; its files are named in
store.layout.
"""

from __future__ import annotations

import json
import math
import re
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from rag.types import Paper
from store.atomic import save_folder_atomically
from store.layout import AUTHORS_FILE, BM25_FOLDER, IDS_FILE, LEXICAL_FORMAT, STATE_FILE, TITLES_FILE

_TOKEN = re.compile(r"[^\W_]+(?:[-'][^\W_]+)*", re.UNICODE)
_MEMO_WORDS = 500_000  # distinct words an Analyzer remembers (about 100 MB at most)


@dataclass(frozen=True)
class LexicalParams:
    # Lower than BM25's textbook k1/b: abstracts are short and dense (tuned on SciFact: bench/results/tuning.md).
    k1: float = 0.9
    b: float = 0.5
    stem: bool = True
    stopwords: bool = True


class Analyzer:
    """Lower-cases, splits, drops stopwords and stems; "MA-RAG" yields "ma", "rag" and "ma-rag"."""

    def __init__(self, params: LexicalParams) -> None:
        self.params = params

    @cached_property
    def _stemmer(self):
        if not self.params.stem:
            return None
        import Stemmer

        return Stemmer.Stemmer("english")

    @cached_property
    def _stopwords(self) -> frozenset[str]:
        if not self.params.stopwords:
            return frozenset()
        from bm25s.stopwords import STOPWORDS_EN

        return frozenset(STOPWORDS_EN)

    def plain(self, text: str) -> list[str]:
        """Stems of every word, stopwords included (for word lists that must match analysed text)."""
        words = _TOKEN.findall(text.lower())
        return self._stemmer.stemWords(words) if self._stemmer is not None else words

    def __call__(self, text: str) -> list[str]:
        # Each distinct word is analysed once and remembered: building BM25 over a corpus analyses millions of
        # words drawn from a vocabulary of thousands, and the per-word work (splitting, stopwords, stemming)
        # was most of a build's time.
        memo = self._memo
        tokens: list[str] = []
        for word in _TOKEN.findall(text.lower()):
            analysed = memo.get(word)
            if analysed is None:
                analysed = self._word(word)
                if len(memo) >= _MEMO_WORDS:
                    memo.clear()  # bounded: a corpus of rare words cannot grow it without end
                memo[word] = analysed
            tokens.extend(analysed)
        return tokens

    @cached_property
    def _memo(self) -> dict[str, tuple[str, ...]]:
        return {}

    def _word(self, word: str) -> tuple[str, ...]:
        """One lower-cased word's tokens: its stem, or for "ma-rag" the stems of its parts and the compound."""
        if "-" in word or "'" in word:
            words = [p for p in re.split(r"[-']", word) if p and p not in self._stopwords]
            if "-" in word:
                words.append(word)  # the compound itself: exact method names match strongly
        elif word in self._stopwords:
            return ()
        else:
            words = [word]
        if self._stemmer is None:
            return tuple(words)
        return tuple(w if "-" in w else s for w, s in zip(words, self._stemmer.stemWords(words), strict=True))


class LexicalIndex:
    """BM25 over chunk texts (title prepended), persisted in ``folder``."""

    def __init__(self, folder: Path, params: LexicalParams | None = None) -> None:
        self.folder = folder
        self.params = params or LexicalParams()
        self.analyze = Analyzer(self.params)
        self._bm25 = None
        self.chunk_ids: list[str] = []
        self.paper_ids: list[str] = []
        self.titles: dict[str, str] = {}  # paper_id -> title, saved with the index so a start-up reads no papers
        self.authors: dict[str, list[str]] = {}  # paper_id -> authors (papers that name them), saved likewise
        self.generation: int | None = None

    def __len__(self) -> int:
        return len(self.chunk_ids)

    @property
    def _state_file(self) -> Path:
        return self.folder / STATE_FILE

    def _settings_key(self) -> dict:
        # "heads": what each row holds before its text (lexical_heads); an index saved before authors were
        # searchable does not match, so it is rebuilt from the store once, as a stale generation is.
        return {"format": LEXICAL_FORMAT, "heads": HEADS, **self.params.__dict__}

    def build(
        self,
        rows: Iterable[tuple[str, str, str]],
        generation: int,
        titles: dict[str, str] | None = None,
        authors: dict[str, list[str]] | None = None,
    ) -> None:
        """Index ``(chunk_id, paper_id, text)`` rows and save the result with the papers' ``titles`` and
        ``authors``."""
        import bm25s

        chunk_ids: list[str] = []
        paper_ids: list[str] = []
        # Every text's token ids in one compact array, with our own vocabulary: given token lists, bm25s keeps a
        # list of ids beside each list of tokens (16 bytes a token), GBs at a million chunks.
        vocabulary: dict[str, int] = {}
        tokens = array("i")
        lengths = array("q")
        for chunk_id, paper_id, text in rows:
            chunk_ids.append(chunk_id)
            paper_ids.append(paper_id)
            analysed = self.analyze(text) or ["\u2205"]  # as bm25s would have it: no empty documents
            tokens.extend([vocabulary.setdefault(t, len(vocabulary)) for t in analysed])
            lengths.append(len(analysed))
        bm25 = None
        if chunk_ids:
            bm25 = bm25s.BM25(k1=self.params.k1, b=self.params.b)
            scores = bm25_matrix(np.frombuffer(tokens, dtype=np.int32), np.frombuffer(lengths, dtype=np.int64),
                                 len(vocabulary), k1=self.params.k1, b=self.params.b)
            adopt_matrix(bm25, scores, vocabulary)
        self._bm25 = bm25
        self.chunk_ids, self.paper_ids, self.generation = chunk_ids, paper_ids, generation
        self.titles = dict(titles or {})
        self.authors = {pid: list(names) for pid, names in (authors or {}).items() if names}
        self._save()

    def _save(self) -> None:
        def fill(tmp: Path) -> None:
            if self._bm25 is not None:
                self._bm25.save(str(tmp / BM25_FOLDER))
            (tmp / IDS_FILE).write_text(json.dumps({"chunk_ids": self.chunk_ids, "paper_ids": self.paper_ids}))
            (tmp / TITLES_FILE).write_text(json.dumps(self.titles))
            (tmp / AUTHORS_FILE).write_text(json.dumps(self.authors))
            state = {"generation": self.generation, "count": len(self.chunk_ids), **self._settings_key()}
            (tmp / STATE_FILE).write_text(json.dumps(state))

        save_folder_atomically(self.folder, fill, optional=True)

    def load(self, generation: int) -> bool:
        """Load the saved index if it matches ``generation`` and these parameters; False when stale."""
        import bm25s

        try:
            state = json.loads(self._state_file.read_text())
            if state.get("generation") != generation or any(
                state.get(k) != v for k, v in self._settings_key().items()
            ):
                return False
            ids = json.loads((self.folder / IDS_FILE).read_text())
            titles = json.loads((self.folder / TITLES_FILE).read_text())
            authors = json.loads((self.folder / AUTHORS_FILE).read_text())  # missing in older indexes: rebuilt
            if not isinstance(titles, dict) or not isinstance(authors, dict):
                return False
            bm25 = None
            if state["count"]:
                bm25 = bm25s.BM25.load(str(self.folder / BM25_FOLDER), mmap=False)
        except (OSError, ValueError, KeyError, TypeError):
            return False  # missing or damaged: the caller rebuilds it from the store
        self._bm25 = bm25
        self.chunk_ids, self.paper_ids, self.generation = ids["chunk_ids"], ids["paper_ids"], generation
        self.titles = {str(k): str(v) for k, v in titles.items()}
        self.authors = {str(k): [str(n) for n in v] for k, v in authors.items() if isinstance(v, list)}
        return len(self.chunk_ids) == state["count"]

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every chunk for ``query`` (zeros when no query word is in the index)."""
        if self._bm25 is None:
            return np.zeros(len(self.chunk_ids), dtype=np.float32)
        vocab = self._bm25.vocab_dict
        tokens = [t for t in self.analyze(query) if t in vocab]
        if not tokens:
            return np.zeros(len(self.chunk_ids), dtype=np.float32)
        return np.asarray(self._bm25.get_scores(tokens), dtype=np.float32)

    def idf(self, term: str) -> float:
        """BM25's inverse document frequency of an analysed term (rare terms weigh more); unknown terms max."""
        n = len(self.chunk_ids)
        df = 0
        if self._bm25 is not None and term in self._bm25.vocab_dict:
            indptr = self._bm25.scores["indptr"]
            token = self._bm25.vocab_dict[term]
            df = int(indptr[token + 1] - indptr[token])
        return float(np.log(1 + (n - df + 0.5) / (df + 0.5)))

    def top(self, query: str, n: int) -> list[tuple[int, float]]:
        """The ``n`` best (row, score) pairs with a positive score."""
        scores = self.scores(query)
        if not len(scores):
            return []
        n = min(n, len(scores))
        rows = np.argpartition(-scores, n - 1)[:n]
        rows = rows[np.argsort(-scores[rows], kind="stable")]
        return [(int(r), float(scores[r])) for r in rows if scores[r] > 0]


def bm25_matrix(tokens: np.ndarray, lengths: np.ndarray, n_vocab: int, *, k1: float, b: float,
                block_tokens: int = 1 << 18) -> dict:
    """bm25s's score matrix (``BM25.scores``: CSC, a column per token, rows = documents in order) for documents
    given as one array of token ids (``tokens``, document after document, ``lengths`` each), as bm25s's own
    "lucene" build makes it, value for value (tests/store/test_bm25_matrix.py).

    Built in blocks of documents, twice over (document frequencies, then scores written into place), so that
    besides the result (8 bytes a distinct token of a document) only one block's pairs are held: bm25s's build
    holds several copies of every (document, token) pair, 7 GB over a 1 GB result at a million chunks, and
    counts each document's tokens in Python."""
    n_docs = len(lengths)
    starts = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    average = lengths.mean()  # a float64 scalar, as in bm25s: the arithmetic below is done in float64 as there
    blocks = _document_blocks(starts, block_tokens)
    frequency = np.zeros(n_vocab, dtype=np.int64)
    for first, last in blocks:
        _docs, block_tokens_, _tf = _pairs(tokens, starts, first, last, n_vocab)
        frequency += np.bincount(block_tokens_, minlength=n_vocab)
    idf = np.zeros(n_vocab, dtype=np.float32)
    seen = frequency > 0
    distinct, which = np.unique(frequency[seen], return_inverse=True)  # math.log per value, as bm25s computes it
    idf[seen] = np.array([math.log(1 + (n_docs - f + 0.5) / (f + 0.5)) for f in distinct.tolist()],
                         dtype=np.float32)[which]
    indptr = np.zeros(n_vocab + 1, dtype=np.int64)
    np.cumsum(frequency, out=indptr[1:])
    data = np.empty(int(indptr[-1]), dtype=np.float32)
    indices = np.empty(int(indptr[-1]), dtype=np.int32)
    cursor = indptr[:-1].copy()  # where each token's next document goes
    for first, last in blocks:
        docs, block_tokens_, tf = _pairs(tokens, starts, first, last, n_vocab)
        order = np.argsort(block_tokens_, kind="stable")  # by token, documents still in order within one
        docs, block_tokens_, tf = docs[order], block_tokens_[order], tf[order].astype(np.float64)
        counts = np.bincount(block_tokens_, minlength=n_vocab)
        group = np.cumsum(counts) - counts
        place = cursor[block_tokens_] + (np.arange(len(docs)) - group[block_tokens_])
        saturation = tf / (k1 * ((1 - b) + b * lengths[docs] / average) + tf)
        data[place] = idf[block_tokens_] * saturation
        indices[place] = docs
        cursor += counts
    return {"data": data, "indices": indices, "indptr": indptr, "num_docs": n_docs}


def _document_blocks(starts: np.ndarray, block_tokens: int) -> list[tuple[int, int]]:
    """Runs of whole documents of about ``block_tokens`` tokens each."""
    blocks, first, n_docs = [], 0, len(starts) - 1
    while first < n_docs:
        last = int(np.searchsorted(starts, starts[first] + block_tokens, side="right")) - 1
        last = min(max(last, first + 1), n_docs)
        blocks.append((first, last))
        first = last
    return blocks


def _pairs(tokens: np.ndarray, starts: np.ndarray, first: int, last: int,
           n_vocab: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Documents ``first:last``'s distinct (document, token) pairs, ordered by document then token, with counts."""
    span = tokens[starts[first] : starts[last]].astype(np.int64)
    docs = np.repeat(np.arange(first, last, dtype=np.int64), np.diff(starts[first : last + 1]))
    keys, tf = np.unique(docs * n_vocab + span, return_counts=True)
    return (keys // n_vocab).astype(np.int32), (keys % n_vocab).astype(np.int64), tf


def adopt_matrix(bm25, scores: dict, vocabulary: dict[str, int]) -> None:
    """Give a ``bm25s.BM25`` a matrix built by ``bm25_matrix``, as its ``index`` would have set it."""
    vocab = dict(vocabulary)
    if "" not in vocab:
        vocab[""] = max(vocab.values()) + 1  # bm25s's empty token
    bm25.scores = scores
    bm25.vocab_dict = vocab
    bm25.nonoccurrence_array = None
    bm25.unique_token_ids_set = set(vocab.values())


HEADS = "title+authors"


def lexical_heads(papers: Iterable[Paper]) -> dict[str, str]:
    """What goes before each paper's text in the lexical indexes: its title, then its authors when the records
    name them ("Adam: A Method .... Diederik P. Kingma, Jimmy Ba"), so that "kingma adam" finds the paper by
    its words. Lexical only: the dense text (rag.ingest) stays title and abstract, so a corpus without
    authors (the bundled one) is indexed and ranked exactly as before."""
    heads = {}
    for paper in papers:
        authors = ", ".join(a for a in paper.authors if a.strip())
        heads[paper.paper_id] = f"{paper.title}. {authors}" if paper.title and authors else paper.title or authors
    return heads


def rows_with_titles(rows: Iterable[tuple[str, str, str]], titles: dict[str, str]) -> Iterable[tuple[str, str, str]]:
    """Prepend each paper's title (its ``lexical_heads``) to its chunks: titles, method names and authors are
    strong lexical evidence."""
    for chunk_id, paper_id, text in rows:
        title = titles.get(paper_id, "")
        yield chunk_id, paper_id, f"{title}. {text}" if title else text


def paper_max(rows: Sequence[tuple[int, float]], paper_ids: Sequence[str]) -> dict[str, tuple[float, int]]:
    """Best score per paper, with the row that gave it."""
    best: dict[str, tuple[float, int]] = {}
    for row, score in rows:
        pid = paper_ids[row]
        if pid not in best or score > best[pid][0]:
            best[pid] = (score, row)
    return best
