"""Greetings, thanks and "what can you do?": answered with how to use paperchat, not searched.

Searched, "hello" found "the nearest papers" and "thanks!" was declined as a question the abstracts do not
answer. These replies make no claim about any paper, so they cite none; the examples they give are built from
the index (a paper it holds by its short name), never from one corpus's titles written into the code.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from rag.types import Answer, Paper

_GREETING = re.compile(
    r"^(?:hi|hello|hey|hiya|howdy|greetings|good\s+(?:morning|afternoon|evening)|yo)(?:\s+(?:there|paperchat))?"
    r"\s*[!.?,]*$", re.IGNORECASE)
_THANKS = re.compile(
    r"^(?:(?:ok(?:ay)?|great|cool|nice|perfect|awesome)[,!.]*\s+)?(?:thanks?|thank\s+you|thx|ty|cheers)"
    r"(?:\s+(?:a\s+lot|so\s+much|very\s+much))?\s*[!.]*$", re.IGNORECASE)
_HELP = re.compile(
    r"^(?:help|\?+|what\s+can\s+you\s+do|what\s+do\s+you\s+do|who\s+are\s+you|what\s+are\s+you|"
    r"how\s+(?:do\s+i|can\s+i|should\s+i)\s+use\s+(?:this|you|it|paperchat)|how\s+does\s+(?:this|paperchat)\s+work|"
    r"what\s+is\s+(?:this|paperchat)|what\s+(?:kind\s+of\s+|sort\s+of\s+)?questions\s+can\s+i\s+ask(?:\s+you)?)"
    r"\s*[?!.]*$", re.IGNORECASE)


# "hello, what can you do?", "hi there! help": a greeting before what is asked.
_LEADING_GREETING = re.compile(
    r"^(?:hi|hello|hey|hiya|howdy|greetings|good\s+(?:morning|afternoon|evening))(?:\s+(?:there|paperchat))?"
    r"\s*[!.,:;-]+\s*|^(?:hi|hello|hey)\s+(?=what|who|how|help)", re.IGNORECASE)


def small_talk_answer(question: str, papers: Callable[[], Sequence[Paper]] | None) -> Answer | None:
    """How to use paperchat, for a greeting, thanks or a request for help; None for any other question."""
    text = " ".join(question.split())
    text = _LEADING_GREETING.sub("", text) or text
    if _THANKS.match(text):
        return fixed_reply(question, "You're welcome. Ask another question about the papers whenever you like.")
    if _GREETING.match(text) or _HELP.match(text):
        return fixed_reply(question, _usage(papers() if papers is not None else ()))
    if not_english(text):
        return fixed_reply(question, NOT_ENGLISH, refused=True)
    return None


# A question in another language: the abstracts and the embedding model are English, so its search finds papers
# by chance. Told so instead of "the nearest papers". Function words that only other languages use, and English's.
_FOREIGN_WORDS = frozenset([
    "qué", "que", "cuáles", "cuales", "cuál", "artículos", "articulos", "sobre", "los", "las", "del", "una", "para",
    "por", "cómo", "como", "hay", "quels", "quelles", "quel", "les", "des", "sur", "une", "est", "sont", "dans",
    "articles", "welche", "arbeiten", "über", "und", "der", "die", "das", "ist", "sind", "wie", "gibt", "es", "quali",
    "sono", "gli", "della", "delle", "di", "il", "che", "quais", "são", "sao", "artigos", "não", "uma", "em", "o",
])
_ENGLISH_WORDS = frozenset([
    "the", "a", "an", "which", "what", "how", "is", "are", "does", "do", "of", "on", "about", "papers", "paper",
    "any", "there", "and", "to", "in", "for", "with", "who", "why", "it", "this",
])
NOT_ENGLISH = ("paperchat reads English abstracts with an English model, so a question in another language finds "
               "papers by chance. Please ask in English, e.g. \"Which papers are about federated learning?\"")


# "tell me about X", "can you tell me more about X?", "what do you know about X": X is what is asked. The framing
# pulled the question's meaning away from X ("tell me about the paper on warm-up" was refused, "the paper on
# warm-up" answered).
_CHAT_FRAMING = re.compile(
    r"^\s*(?:(?:hi|hello|hey|ok(?:ay)?|so)\s*[,!.]?\s+)?(?:please\s+)?(?:(?:can|could|would)\s+you\s+(?:please\s+)?)?"
    r"(?:tell\s+me\s+(?:(?:a\s+(?:bit|little)\s+)?more\s+)?about|"
    r"(?:give|show)\s+me\s+(?:an?\s+)?(?:overview|summary|rundown)\s+of|"
    r"what\s+do\s+you\s+know\s+about|i(?:'d|\s+would)\s+like\s+to\s+(?:know|learn|hear)\s+(?:more\s+)?about|"
    r"i\s+want\s+to\s+(?:know|learn)\s+(?:more\s+)?about)\s+(?=\S)", re.IGNORECASE)


def without_chat_framing(question: str) -> str:
    """``question`` without a chatty lead that only asks to be told ("tell me about the paper on warm-up" -> "the
    paper on warm-up"); as it is when nothing would be left."""
    rest = _CHAT_FRAMING.sub("", question, count=1)
    return rest if rest.strip(" ?.!") else question


def not_english(question: str) -> bool:
    """Is the question written in another language than English (another script, or only other languages'
    function words)?"""
    letters = [ch for ch in question if ch.isalpha()]
    if not letters:
        return False
    if sum(not ("a" <= ch.lower() <= "z" or "\u00c0" <= ch <= "\u024f") for ch in letters) > 0.3 * len(letters):
        return True  # Chinese, Cyrillic, Arabic ... script
    words = re.findall(r"[^\W\d_]+", question.lower())
    foreign = sum(w in _FOREIGN_WORDS for w in words)
    return foreign >= 2 and not any(w in _ENGLISH_WORDS for w in words)


def _usage(papers: Sequence[Paper]) -> str:
    named = next((p.title.strip() for p in papers if 0 < len(p.title.split()) <= 2), "")
    size = f"the {len(papers)} paper abstracts in this index" if papers else "the paper abstracts in this index"
    examples = [f"What does {named} propose, and what was it evaluated on?"] if named else []
    examples += ["Which papers use reinforcement learning? (every paper that qualifies, each cited)",
                 "What are the main topics?"]
    lines = [f"I answer questions about {size}. Every claim cites the abstract it comes from ([1], [2], ...), "
             "and where the abstracts do not say, I say so. Try:"]
    lines += [f"- {example}" for example in examples]
    return "\n".join(lines)


def fixed_reply(question: str, text: str, *, refused: bool = False) -> Answer:
    """A reply about using paperchat, not about a paper: nothing searched, nothing cited."""
    return Answer(question=question, answer=text, citations=[], sources=[], grounded=False, search_query="",
                  refused=refused, about_paperchat=True)
