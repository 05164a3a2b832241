"""Typos put right from the corpus's own words (rag/answers/spelling.py)."""

from __future__ import annotations

from rag.answers.spelling import corrected, typos_fixed
from rag.corpus.vocabulary import vocabulary_of

ABSTRACTS = [
    "Federated learning trains one model across clients. FedSSM selects clients for federated learning.",
    "Caracal replaces attention with a Fourier layer. Reinforcement learning improves reasoning.",
    "Fed-Kalter brings Kalman filtering into graph learning. GPT models are evaluated.",
]
VOCABULARY = vocabulary_of(ABSTRACTS)


def test_a_typo_of_a_corpus_word_is_put_right_as_the_corpus_spells_it():
    assert typos_fixed("which papers are about federated lerning?", VOCABULARY) == (
        "which papers are about federated learning?")
    assert typos_fixed("wich papers use reinforcment learning for reasoing?", VOCABULARY) == (
        "wich papers use reinforcement learning for reasoning?")
    assert typos_fixed("summarize Caracl", VOCABULARY) == "summarize Caracal"
    assert typos_fixed("what does Fed-Kalterr do? and FedSM?", VOCABULARY) == "what does Fed-Kalter do? and FedSSM?"


def test_english_words_acronyms_and_words_far_from_the_corpus_stay_as_typed():
    assert corrected("lawyer", vocabulary_of(["a layer of the network"])) is None  # English, one letter from it
    assert corrected("GPTQ", VOCABULARY) is None  # an acronym, not a typo of "GPT"
    assert corrected("watermarking", VOCABULARY) is None  # nothing one edit away
    assert corrected("lern", VOCABULARY) is None  # too short to tell
    # Another form of a corpus word is no typo: "codec" where the abstracts say "codecs" (not "codes").
    assert corrected("codec", vocabulary_of(["Neural speech codecs use codes."])) is None
    assert typos_fixed("federated lerning", None) == "federated lerning"  # no vocabulary: as typed
