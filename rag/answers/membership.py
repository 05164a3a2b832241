"""Which papers belong in a list answer ("which papers ...?", "how many papers ...?"): each candidate's chance
of being about what the question asks, from three signals that together agree with a reader's judgement more
than any one of them does:

* ``topic_rank``: how the paper ranks when the topic alone is searched (its fused score over the best one's);
  the question's framing ("how many of the papers ..., and which ones?") left out of the search;
* ``topic_coverage``: how much of the topic's words its abstract uses (idf-weighted, as the relevance checks);
* ``closest_sentence``: how close in meaning its closest sentence (or its title) is to the topic: a paper is
  often about a topic in one sentence ("we distil a large teacher into a small student") and about something
  else in the rest, which a whole-abstract vector dilutes.

They are combined by a logistic model fitted on list questions with judged answers (``bench/fit_membership.py``
over ``data/eval/lists.jsonl`` and the dev sets' multi-paper questions, cross-validated); a paper is listed when
its chance reaches ``threshold``. A ranked list cut at a share of the top score cannot do this: for broad topics
the scores fall off smoothly, and the second paper is no more likely to qualify for having ranked second.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from rag.corpus.chunking import split_sentences
from rag.types import Hit

FEATURES = ("topic_rank", "topic_coverage", "closest_sentence")

# The words that frame a list question rather than say what it is about, removed from its topic.
# "... papers in the collection", "... papers are there?": the end of a question whose topic comes first.
_PAPERS_LAST = (r"(?:papers?|works?|studies|articles?)\s*(?:(?:in|of|from)\s+(?:this|the)\s+(?:collection|corpus|set|"
                r"index|conference|list)\s*)?(?:(?:are|is)\s+there\s*|exist\s*|do\s+you\s+have\s*)?(?:here\s*)?[.?!]*\s*$")
_NOT_POINTING = r"(?<!\bthe)(?<!\bthese)(?<!\bthose)(?<!\bour)(?<!\bother)"  # "... used in the papers?" points back
_FRAMING = [re.compile(p, re.IGNORECASE) for p in (
    r",?\s*(?:and\s+)?(?:which|what)(?:\s+(?:ones|ones are they|are they|papers are they|are those))?\s*[?.]*\s*$",
    r"\b(?:list|name)\s+them\b\.?",
    r"^\s*(?:so,?\s+|ok,?\s+|and\s+)?(?:how many|which|what)\s+(?:of\s+(?:the|these|those)\s+)?"
    r"(?:papers|works|studies|articles|abstracts|submissions)\s+(?:in\s+(?:this|the)\s+(?:collection|corpus|set)\s+)?"
    r"(?:are\s+(?:there\s+)?(?:about|on)\s+)?",
    r"^\s*(?:are|is)\s+there\s+(?:any\s+)?(?:papers?|works?|studies|articles)\s+(?:about|on|that|which|where)?\s*",
    r"^\s*(?:list|name|show|find)\s+(?:me\s+)?(?:all\s+)?(?:the\s+)?(?:papers|works|studies)\s+(?:that|which|about|on)?\s*",
    r"^\s*(?:is|are)\s+there\s+(?:any\s+|a\s+|some\s+)?(?:papers?|works?|research|stud(?:y|ies)|articles?)\s+"
    r"(?:about|on|that|which|where|using|for)?\s*",
    r"^\s*any(?:thing)?\s+(?:papers?|works?|research|stud(?:y|ies))\s+(?:on|about|that|which|where|using|for)\s*",
    r"^\s*(?:show|give|tell)\s+(?:me\s+)?(?:about\s+)?(?:all\s+|any\s+)?(?:the\s+)?(?:papers|works|studies)\s+"
    r"(?:on|about|that|which|using)?\s*",
    r"^\s*(?:papers|works|studies|research)\s+(?:on|about|that|using|which|where)\s*",
    r"^\s*(?:does|do|did|has|have)\s+any\s+(?:papers?|works?|stud(?:y|ies))\s+",
    r"^\s*what\s+(?:work|research)\s+(?:has|have)\s+been\s+done\s+(?:on|about)\s*",
    r"^\s*(?:list|show|find|give)\s+(?:me\s+)?(?:all\s+)?(?:the\s+)?(?:work|research|literature)\s+(?:on|about|in)\s*",
    # "List all the federated learning papers in the collection.", "Which RL papers are there?": the topic stands
    # before "papers".
    r"^\s*(?:(?:list|name|show|find|give)\s+(?:me\s+)?(?:all\s+|every\s+|each\s+|any\s+)?(?:of\s+)?(?:the\s+)?|"
    r"(?:which|what)\s+)(?=[^?]*\w" + _NOT_POINTING + r"\s+" + _PAPERS_LAST + ")",
    r"(?<=\w)" + _NOT_POINTING + r"\s+" + _PAPERS_LAST,
)]

# A message of a few words that asks nothing ("federated learning", "rag", "state space models") names a topic: a
# reader typing it into a search box wants the papers about it. Any word that asks, points back or chats makes
# it something else ("explain FedSSM", "the second one", "and its results", "thanks").
_BARE_TOPIC = re.compile(r"^\s*[\w][\w\s'/+-]*[?.!]?\s*$")
_NOT_A_TOPIC_WORD = frozenset([
    "what", "which", "who", "whom", "whose", "where", "when", "why", "how", "is", "are", "was", "were", "be", "do",
    "does", "did", "can", "could", "should", "would", "will", "has", "have", "had", "may", "might", "must", "shall",
    "tell", "show", "list", "find", "give", "explain", "summarize", "summarise", "describe", "define", "compare",
    "eli5", "tldr", "tl", "dr", "vs", "versus", "but", "so", "the", "a", "an", "it", "its", "this",
    "that", "these", "those", "they", "their", "them", "he", "she", "his", "her", "i", "me", "my", "we", "our", "us",
    "you", "your", "please", "hi", "hello", "hey", "thanks", "thank", "yes", "no", "ok", "okay", "more", "also",
    "else", "again", "another", "other", "same", "first", "second", "third", "last", "next", "previous", "one",
    "ones", "papers", "paper", "work", "works", "study", "studies", "abstract", "abstracts",
    "any", "anything",  # "Any weaknesses of FedSSM?" asks about FedSSM
])
BARE_TOPIC_MAX_WORDS = 5


def as_list_question(message: str) -> str | None:
    """"Which papers are about X?" for a message that only names a topic X ("federated learning"); else None."""
    if not _BARE_TOPIC.match(message):
        return None
    words = re.findall(r"[\w'-]+", message.lower())
    if not any(ch.isalpha() for ch in message) or len(words) > BARE_TOPIC_MAX_WORDS:
        return None  # "2024" is no topic
    if words[0] in ("and", "or") or any(w in _NOT_A_TOPIC_WORD for w in words):
        return None
    return f"Which papers are about {' '.join(message.split()).strip(' ?.!')}?"


# What the question rules out (", not offline preference pairs", "rather than X", "excluding X"): its words say
# what a paper must not be about, so they are no part of the topic (they would count towards its coverage).
_EXCLUSION = re.compile(r"(?:,\s*(?:but\s+|and\s+)?not|\brather\s+than|\bexcluding)\s+[^,;:()?]*",
                        re.IGNORECASE)


# The words that frame a list question, as typed in haste: "whcih paprs are abut X?" asks what "which papers are
# about X?" asks. A word is read as one of these only when it is close to it and is no English word itself.
_FRAMING_WORDS = ("which", "what", "papers", "paper", "about", "there", "works", "studies", "list", "many")
_KNOWN_WORDS = frozenset(_FRAMING_WORDS) | frozenset([
    "with", "whose", "while", "white", "where", "were", "when", "then", "them", "these", "their", "those", "wait",
    "whats", "that", "than", "this", "man", "any", "lost", "lust", "last", "least", "lots", "first",
    "pages", "paths", "pairs", "parts", "pipers", "pager", "pepper", "paperchat", "abuts", "abbot", "above",
    "studied", "student", "stories", "words", "worse", "wars", "worked", "forks", "thee", "three", "tree",
    "wheat", "whit", "witch", "weather", "wither", "either", "other", "mean", "maybe", "main", "much", "major",
])


def framing_typos_fixed(question: str) -> str:
    """The question with a misspelt framing word put right ("whcih paprs are abut" -> "which papers are about"):
    only words of four letters or more that are no English word and within one or two letters of a framing
    word. What the question is about is left as typed."""
    def fix(match: re.Match[str]) -> str:
        word = match.group(0)
        lower = word.lower()
        if len(lower) < 4 or lower in _KNOWN_WORDS or not lower.isalpha():
            return word
        close = difflib.get_close_matches(lower, _FRAMING_WORDS, n=1, cutoff=0.75)
        # "workers", "working", "lists" keep the framing word's first letters: other words, not typos of it.
        return close[0] if close and lower[:4] != close[0][:4] else word

    return re.sub(r"[A-Za-z]+", fix, question)


def list_topic(question: str) -> str:
    """What a list question asks about: "How many papers are about federated learning, and which?" ->
    "federated learning". The question itself when nothing is left."""
    topic = " ".join(question.split())
    for _ in range(2):  # "Are there papers on X? Which ones?": the trailing part first, then the lead
        for pattern in _FRAMING:
            topic = pattern.sub(" ", topic).strip()
    topic = _EXCLUSION.sub("", topic)
    topic = " ".join(topic.replace("( ", "(").replace(" )", ")").replace("()", "").split()).strip(" ,;:?.")
    return topic or question


@dataclass(frozen=True)
class MembershipParams:
    """The logistic model's weights, one for each of ``FEATURES`` (fitted: bench/fit_membership.py)."""

    intercept: float = -7.71
    topic_rank: float = 5.72
    topic_coverage: float = 3.67
    closest_sentence: float = 3.07
    threshold: float = 0.4  # the chance at which a paper is listed
    # ... if its abstract uses at least this share of what the likeliest paper's uses of the topic's words: a
    # paper that merely sounds close ("e.g. about client selection") is not listed beside one that is about it.
    relative_coverage: float = 0.6

    def weights(self) -> np.ndarray:
        return np.array([getattr(self, name) for name in FEATURES])


def membership_features(
    topic: str,
    hits: Sequence[Hit],
    topic_hits: Sequence[Hit],
    coverage: Callable[[str, Hit], float],
    embed: Callable[[list[str]], np.ndarray],
) -> np.ndarray:
    """One row of ``FEATURES`` for each of ``hits``; ``topic_hits``: the search for the topic alone."""
    if not hits:
        return np.zeros((0, len(FEATURES)))
    topic_scores = {h.paper_id: h.score for h in topic_hits}
    best = max(topic_scores.values(), default=0.0)
    rank = [topic_scores.get(h.paper_id, 0.0) / best if best > 0 else 0.0 for h in hits]
    covered = [coverage(topic, h) for h in hits]
    # Every candidate's sentences (and title) in one embedding call.
    texts: list[str] = [topic]
    owners: list[int] = []
    for i, hit in enumerate(hits):
        abstract = hit.abstract or hit.text
        sentences = [s for s in (hit.title, *(abstract[a:b] for a, b in split_sentences(abstract))) if s.strip()]
        texts.extend(sentences)
        owners.extend([i] * len(sentences))
    vectors = np.asarray(embed(texts), dtype=np.float64)
    similarity = vectors[1:] @ vectors[0]
    closest = np.full(len(hits), -1.0)
    np.maximum.at(closest, np.array(owners, dtype=int), similarity)
    return np.column_stack([rank, covered, closest])


def chances(features: np.ndarray, params: MembershipParams) -> np.ndarray:
    """Each row's chance of belonging, by the logistic model."""
    if len(features) == 0:
        return np.zeros(0)
    return 1.0 / (1.0 + np.exp(-(params.intercept + features @ params.weights())))


def listed(chance: np.ndarray, coverage: np.ndarray, params: MembershipParams) -> list[int]:
    """The rows a list names, likeliest first: each whose chance reaches ``threshold`` and whose abstract uses at
    least ``relative_coverage`` of the likeliest row's share of the topic's words; the likeliest alone if none."""
    order = sorted(range(len(chance)), key=lambda i: (-chance[i], i))
    if not order:
        return []
    bar = params.relative_coverage * coverage[order[0]]
    return [i for i in order if chance[i] >= params.threshold and coverage[i] >= bar] or order[:1]
