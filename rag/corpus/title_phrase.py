"""The fallback title of an abstract that introduces no name: a short phrase from its first sentence,
lead-ins ("In this paper, we study") dropped, cut at a clause boundary and on a whole phrase.
"""

from __future__ import annotations

import re

from rag.corpus.title_text import ARTICLES, AUXILIARIES, PREPOSITIONS, SENTENCE_END, capitalise, trim_token, word_set

_PARENTHETICAL = re.compile(r"\s*\([^()]*\)")
_STOPWORDS = (
    PREPOSITIONS
    | ARTICLES
    | AUXILIARIES
    | word_set("and or but nor yet so that which who whose where when while as be been its their this these those")
    | word_set("such than not very both")
)
_BREAK_WORDS = PREPOSITIONS | AUXILIARIES | word_set("which that where whose and or but yet")
# Lead-ins that say nothing about the topic: "In this paper, we study ...".
_LEAD_INS = re.compile(
    r"^(?:(?:in|within) (?:this|the present|our) (?:paper|work|study|article),?\s*)?"
    r"(?:(?:this|the present|our) (?:paper|work|study|article)\s+(?:presents|proposes|introduces|studies|"
    r"investigates|deals with|addresses|considers|examines|explores|analyzes|analyses|revisits)\s+"
    r"|we\s+(?:(?:first|here|now)\s+)?(?:are\s+considering|study|consider|investigate|show that|show|examine|"
    r"explore|analyze|analyse|address|revisit|present|propose|introduce|tackle|focus on)\s+)?"
    r"(?:(?:the|a|an) (?:problem|task|question|challenge) of\s+)?",
    re.IGNORECASE,
)
# "As X grows, ..." keeps X; "Contrary to X, Y" keeps Y.
_SUBORDINATOR = re.compile(r"^(?:as|while|although|though|when|whereas|since|because|if)\s+", re.IGNORECASE)
_CONCESSIVE = re.compile(r"^(?:contrary to|despite|unlike|in contrast to|beyond|given)\b[^,]*,\s*", re.IGNORECASE)
_CLAUSE_BREAK = re.compile(r"\s*(?:[;:]|,|\s—\s|\s(?:which|where|whereas|but|while|whose)\s)\s*")


def first_sentence_phrase(text: str, max_words: int) -> str:
    """A short phrase from the first sentence, cut at a clause boundary and at ``max_words`` words."""
    sentence = _PARENTHETICAL.sub("", _first_sentence(text)).strip()
    sentence = _LEAD_INS.sub("", sentence, count=1)
    sentence = _CONCESSIVE.sub("", sentence, count=1)
    sentence = _SUBORDINATOR.sub("", sentence, count=1)
    words = _first_clause(sentence)
    if len(words) > max_words:
        words = _cut_back(words[:max_words])
    while words and (words[0].lower() in ARTICLES):
        words = words[1:]
    while words and trim_token(words[-1]).lower() in _STOPWORDS:
        words = words[:-1]
    phrase = " ".join(words).strip(" ,;:.-—–!?'\"")
    return capitalise(phrase)


def _first_sentence(text: str) -> str:
    end = SENTENCE_END.search(text)
    return text[: end.start() + 1] if end else text


def _first_clause(sentence: str) -> list[str]:
    """Words up to the first clause boundary, but never fewer than three (``Large-scale, multi-subject``)."""
    for boundary in _CLAUSE_BREAK.finditer(sentence):
        words = sentence[: boundary.start()].split()
        if len(words) >= 3:
            return words
    return sentence.split()


def _cut_back(words: list[str]) -> list[str]:
    """Cut before the last break word (preposition, conjunction, auxiliary) so the label ends on a whole phrase.

    A cut that would leave a dangling article ("is an important") is skipped; then the window stays whole.
    """
    for i in range(len(words) - 1, 2, -1):
        if words[i].lower() in _BREAK_WORDS and not any(w.lower() in ARTICLES for w in words[i - 2 : i]):
            return words[:i]
    return words
