from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rag.corpus.chunking import Chunker, split_sentences
from rag.types import Paper


def word_count(text: str) -> int:
    """A stand-in tokenizer: one token per word plus the two special tokens."""
    return len(text.split()) + 2


def paper(text: str) -> Paper:
    return Paper("p#1", "t", text, "f.txt", 1)


def check_invariants(text: str, chunker: Chunker) -> None:
    chunks = chunker.chunk(paper(text))
    if not text.strip():
        assert chunks == []
        return
    covered = [False] * len(text)
    previous = (-1, -1)
    for i, chunk in enumerate(chunks):
        assert chunk.index == i
        assert chunk.text == text[chunk.start : chunk.end]  # verbatim slice
        assert chunker.count_tokens(chunk.text) <= chunker.max_tokens
        assert chunk.start > previous[0] and chunk.end > previous[1]  # order kept, always moving forward
        previous = (chunk.start, chunk.end)
        for pos in range(chunk.start, chunk.end):
            covered[pos] = True
    lost = [c for c, seen in zip(text, covered, strict=True) if not seen and not c.isspace()]
    assert lost == []  # no text lost


sentence = st.lists(
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12),
    min_size=1,
    max_size=40,
).map(lambda words: " ".join(words) + ".")


@settings(max_examples=150, deadline=None)
@given(st.lists(sentence, max_size=25).map(" ".join), st.integers(8, 60), st.integers(0, 3))
def test_chunks_keep_all_text_in_order_within_limit(text, max_tokens, overlap):
    check_invariants(text, Chunker(word_count, max_tokens, overlap))


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=3000), st.integers(4, 40))
def test_arbitrary_text_never_breaks_invariants(text, max_tokens):
    check_invariants(text, Chunker(len, max_tokens, 1))  # one token per character: forces word/char splits


def test_short_abstract_stays_whole():
    text = "We propose FedSSM. It selects clients with state space models."
    chunks = Chunker(word_count, 256, 1).chunk(paper(text))
    assert [c.text for c in chunks] == [text]


def test_long_abstract_overlaps_by_one_sentence():
    sentences = [f"Sentence number {i} says something new." for i in range(12)]
    chunks = Chunker(word_count, 20, 1).chunk(paper(" ".join(sentences)))
    assert len(chunks) > 2
    for before, after in zip(chunks, chunks[1:], strict=False):
        last_sentence = before.text.split(". ")[-1].rstrip(".")
        assert after.text.startswith(last_sentence)


def test_sentence_split_respects_abbreviations():
    text = "We use e.g. transformers and compare to Smith et al. on ImageNet. Results improve by 3.5 points. Done!"
    spans = [text[a:b] for a, b in split_sentences(text)]
    assert spans == [
        "We use e.g. transformers and compare to Smith et al. on ImageNet.",
        "Results improve by 3.5 points.",
        "Done!",
    ]


def test_real_tokenizer_limit_on_bundled_corpus(bundled_papers, tokenizer_counter):
    chunker = Chunker(tokenizer_counter, 256, 1)
    for p in bundled_papers:
        chunks = chunker.chunk(p)
        assert chunks and all(tokenizer_counter(c.text) <= 256 for c in chunks)
        assert all(c.paper_id == p.paper_id for c in chunks)


def _bert_embedder():
    from rag.embedding.models import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder()
    assert embedder.token_starts("a b") is not None  # the bundled model's tokenizer splits at whitespace
    return embedder


def test_one_tokenisation_per_abstract_gives_the_same_chunks_on_the_bundled_corpus(bundled_papers):
    embedder = _bert_embedder()
    for max_tokens in (24, 64, 256):
        fast = Chunker(embedder.count_tokens, max_tokens, 1, embedder.token_starts)
        exact = Chunker(embedder.count_tokens, max_tokens, 1)
        assert [fast.chunk(p) for p in bundled_papers] == [exact.chunk(p) for p in bundled_papers]


# Characters where a span count could go wrong: spaces BERT does not treat as such (\x1c is dropped as a control
# character, so the word runs on), spaces it does (no-break, ideographic), CJK, accents, punctuation.
_TRICKY = st.lists(st.sampled_from([*"ab cd.\n\t,;!?()\"'-", "\x1c", "\u00a0", "\u3000", "\u4e2d", "e\u0301", "\u00c9",
                                    "x" * 120]), max_size=300).map("".join)


@settings(max_examples=150, deadline=None)
@given(_TRICKY, st.integers(4, 40), st.integers(0, 2))
def test_span_counts_from_one_tokenisation_match_counting_each_span(text, max_tokens, overlap):
    embedder = _bert_embedder()
    fast = Chunker(embedder.count_tokens, max_tokens, overlap, embedder.token_starts)
    exact = Chunker(embedder.count_tokens, max_tokens, overlap)
    assert fast.chunk(paper(text)) == exact.chunk(paper(text))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([*"ab .,\n", "\x1c", "\u00a0", "\u4e2d", "e\u0301", "xyzzy"]), max_size=30)
       .map("".join))
def test_every_span_count_matches_counting_the_span(text):
    from rag.token_spans import SpanCounter

    embedder = _bert_embedder()
    count = SpanCounter(text, embedder.count_tokens, embedder.token_starts(text))
    for start in range(len(text) + 1):
        for end in range(start, len(text) + 1):
            assert count(start, end) == embedder.count_tokens(text[start:end]), (start, end)
