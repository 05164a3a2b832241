"""The fallback title of an abstract that introduces no name: a short phrase saying what the paper does,
lead-ins ("In this paper, we study") dropped, cut at a clause boundary and on a whole phrase.

Abstracts often open with background ("Scientific computing has long relied on ..."), whose first words
name no contribution. Then the phrase comes from the first sentence that says what "we" do ("we investigate
the role of mixed-precision arithmetic in ..."), else from the subject of the first sentence.
"""

from __future__ import annotations

import re

from rag.corpus.title_text import ARTICLES, AUXILIARIES, PREPOSITIONS, SENTENCE_END, capitalise, trim_token, word_set

_PARENTHETICAL = re.compile(r"\s*(?:\([^()]*\)|\[[^\[\]]*\])")  # "(VMC)", "[Mishkin et al., 2024]"
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


# A sentence that says what the paper does, and the verb that introduces its object.
_CONTRIBUTION = re.compile(
    r"^(?:(?:in|within) (?:this|the present|our) (?:paper|work|study|article),?\s*|here,?\s*|to this end,?\s*"
    r"|(?:using|building on|based on|leveraging|drawing on|with)\s[^,]{1,60},\s*)?"  # "Using a paradigm from X, we"
    r"(?:we\s+(?:(?:first|here|now|instead|then|further|also)\s+)?(?:investigate|study|examine|explore|analy[sz]e|"
    r"tackle|consider|address|focus on|provide|present|propose|introduce|develop|derive|design|establish|"
    r"(?:demonstrate|show) that)"
    r"|(?:this|the present|our) (?:paper|work|study|article)\s+(?:presents|proposes|introduces|studies|"
    r"investigates|deals with|addresses|considers|examines|explores|analy[sz]es|develops|provides))\s+",
    re.IGNORECASE,
)
# "To our knowledge, this is the first systematic study to uncover and validate X": the contribution is X.
_FIRST_TO = re.compile(
    r"^(?:to (?:the best of )?our knowledge,?\s*)?(?:this|ours|our (?:paper|work|study))\s+is\s+the\s+first\s+"
    r"(?:[\w-]+\s+){0,3}?(?:study|work|paper|attempt|analysis|investigation|framework|method|approach|benchmark)\s+"
    r"to\s+(?:[a-z]+\s+(?:and|or)\s+)?[a-z]+\s+",
    re.IGNORECASE,
)
# "a theoretical investigation into X", "the role of X": the topic is X.
_META_LEAD = re.compile(
    r"^(?:(?:the|a|an)\s+)?(?:(?:first|novel|new|theoretical|systematic|comprehensive|rigorous|formal|empirical|"
    r"detailed|careful)\s+)*(?:investigation|study|analysis|examination|role)\s+(?:into|of)\s+(?:the\s+)?",
    re.IGNORECASE,
)
# A phrase that points elsewhere ("such problems", "this gap") or names no topic ("three core questions").
_VAGUE = word_set("this these those such it its them their that first three two four several series number set way")
_VAGUE_END = word_set("analysis study investigation approach method framework algorithm technique questions way")
_OWN_WORK = re.compile(r"^(?:(?:in|within) (?:this|the present|our) (?:paper|work|study|article)\b|we\b|"
                       r"(?:this|the present|our) (?:paper|work|study|article)\b)", re.IGNORECASE)
_SUBJECT_END = AUXILIARIES | word_set("remains remain")


def fallback_phrase(text: str, max_words: int) -> str:
    """What the paper does in a few words: its first sentence when that says what the paper does, else the
    first sentence that does ("we investigate X"), else the subject of the opening (background) sentence."""
    sentences = _sentences(text)
    if not sentences or _OWN_WORK.match(sentences[0]):
        return first_sentence_phrase(text, max_words)
    for sentence in sentences[1:]:
        phrase = contribution_phrase(sentence, max_words)
        if phrase:
            return phrase
    return first_sentence_phrase(text, max_words, subject_only=True)


def contribution_phrase(sentence: str, max_words: int) -> str:
    """The object of "we propose ..." / "this paper studies ..." as a topic phrase, or "" when it is vague."""
    match = _CONTRIBUTION.match(sentence) or _FIRST_TO.match(sentence)
    if not match:
        return ""
    obj = re.sub(r"^(?:the|an?)\s+", "", _META_LEAD.sub("", sentence[match.end():], count=1), flags=re.IGNORECASE)
    obj = re.split(r"\s+as\s+(?:a|an|the)\s+", obj, maxsplit=1)[0]  # "X as a scalable approach": the topic is X
    phrase = first_sentence_phrase(obj, max_words)
    words = [trim_token(w).lower() for w in phrase.split()]
    if len(words) < 2 or any(w in _VAGUE for w in words) or words[-1] in _VAGUE_END:
        return ""
    return phrase


def first_sentence_phrase(text: str, max_words: int, *, subject_only: bool = False) -> str:
    """A short phrase from the first sentence, cut at a clause boundary and at ``max_words`` words.

    ``subject_only``: cut before the first auxiliary ("Scientific computing has long relied on" -> "Scientific
    computing"), for background sentences whose predicate says nothing of the paper."""
    sentence = _PARENTHETICAL.sub("", _first_sentence(text)).strip()
    sentence = _META_LEAD.sub("", _LEAD_INS.sub("", sentence, count=1), count=1)
    sentence = _CONCESSIVE.sub("", sentence, count=1)
    subordinate = _SUBORDINATOR.match(sentence) is not None  # "As X grows, ...": X is not what the paper is about
    sentence = _SUBORDINATOR.sub("", sentence, count=1)
    words = _first_clause(sentence)
    if subject_only and not subordinate:
        end = next((i for i, w in enumerate(words) if w.lower() in _SUBJECT_END), len(words))
        words = words[:end] if end >= 2 else words
    if len(words) > max_words:
        # The window is a whole phrase when the next word starts a new one ("... user parameters | by ...").
        whole = words[max_words].lower() in _BREAK_WORDS - {"of", "to"}  # "with respect | to" continues
        words = words[:max_words] if whole else _cut_back(words[:max_words])
    while words and (words[0].lower() in ARTICLES):
        words = words[1:]
    while words and trim_token(words[-1]).lower() in _STOPWORDS:
        words = words[:-1]
    phrase = " ".join(words).strip(" ,;:.-—–!?'\"")
    return capitalise(phrase)


def _sentences(text: str) -> list[str]:
    sentences, start = [], 0
    for end in SENTENCE_END.finditer(text):
        sentences.append(text[start : end.start() + 1].strip())
        start = end.end()
    sentences.append(text[start:].strip())
    return [s for s in sentences if s]


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
            # "estimation of item | and user parameters": the conjunct is cut short; cut before "of" instead.
            if words[i].lower() in {"and", "or"}:
                j = next((j for j in range(i - 1, max(i - 4, 2), -1) if words[j].lower() in PREPOSITIONS), i)
                return words[:j]
            return words[:i]
    return words
