"""Follow-up questions in a conversation: the standalone search query, and the papers they point at.

A question that refers back ("the second one", "the latter", "the third one from your first answer", a
pronoun, or a question of a few words) is resolved deterministically against the papers earlier answers
named: their recorded paper ids where the client kept them, else what their text says. A chat client
sends text only, so an answer's papers are read from it in order: names of papers ("FedSSM"), and for an
answer that describes papers without naming them ("one fine-tunes ..., and another learns ..."), each
description is searched on its own. Papers a question points at are pinned: the pipeline puts them first
among the sources, whatever the search finds. A capable chat model may rewrite a question that points at
no paper into a standalone query; the rewrite is kept only if it keeps the question's own words.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rag.answers.extractive import is_multi_paper_question
from rag.answers.prompts import condense_messages, says_not_covered
from rag.corpus.chunking import split_sentences
from rag.corpus.titles import looks_coined
from rag.errors import LLMError
from rag.llm.client import ChatModel
from rag.retrieval.retriever import Retriever
from rag.types import Hit

_ORDINALS = {"first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4, "4th": 4,
             "fifth": 5, "5th": 5, "sixth": 6, "6th": 6, "seventh": 7, "7th": 7, "eighth": 8, "8th": 8,
             "ninth": 9, "9th": 9, "tenth": 10, "10th": 10}
_ORDINAL_WORD = "|".join(_ORDINALS)
# "the second one", "the last paper", "paper 2", "[2]", "the latter" / "the former".
_PAPER_REF = re.compile(
    rf"\b({_ORDINAL_WORD}|last)\s+(?:one|paper|source|result|work|method|approach|abstract|model|system|"
    rf"benchmark|study|item)s?\b|\b(?:paper|source|result|number|no\.)\s*#?\s*(\d{{1,2}})\b|\[(\d{{1,2}})\]|"
    rf"\bthe\s+(former|latter)\b",
    re.IGNORECASE,
)
# "from your first answer", "in the previous reply", "of your earlier list".
_TURN_REF = re.compile(
    rf"\b(?:from|in|of)\s+(?:your|the|my|that)\s+({_ORDINAL_WORD}|previous|last|earlier|latest)\s+"
    r"(?:answer|reply|response|list|message|turn)\b",
    re.IGNORECASE,
)
_ANAPHORA = re.compile(
    r"\b(they|them|their|it|its|this|that|these|those|the (?:paper|method|authors?|approach|model|work)s?|"
    r"the same|both|each|above)\b",
    re.IGNORECASE,
)
# Where one description of a paper ends and the next begins inside a sentence.
_NEXT_ITEM = re.compile(r";\s+|,?\s+(?:and|while|whereas)\s+(?=(?:another|the other|a second|a third|the second|"
                        r"the third|one)\b)|,\s+(?=another\b)", re.IGNORECASE)
_MARKERS = re.compile(r"\[\d+(?:\s*[-,–]\s*\d+)*\]")  # markers tell nothing without their source list
_LIST_ITEM = re.compile(r"^\s*(?:[-*•]|\d{1,2}[.)])\s+", re.MULTILINE)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9-]*")
_QUESTION_FILLER = frozenset((
    "what", "which", "who", "whom", "whose", "when", "where", "why", "how", "does", "did", "do", "is", "are", "was",
    "were", "has", "have", "had", "the", "a", "an", "of", "in", "on", "for", "to", "and", "or", "with", "about",
    "from", "by", "as", "at", "that", "this", "these", "those", "they", "them", "their", "it", "its", "one", "ones",
    "paper", "papers", "second", "first", "third", "last", "latter", "former", "also", "besides", "other", "than",
    "more", "most", "any", "some", "there", "here", "your", "you", "answer", "tell", "me", "please",
))


# A short message that continues the conversation ("and the datasets?", "what about the results?", "also code?").
_LEANS_BACK = re.compile(r"^\W*(?:and|also|plus|or|but|so|then|what about|how about|same for)\b", re.IGNORECASE)
# What one asks of a paper already named ("datasets?", "any limitations?", "evaluation metrics?"): a message of
# these words alone is about the paper before.
_ASPECT_WORDS = frozenset((
    "dataset", "datasets", "data", "benchmark", "benchmarks", "result", "results", "finding", "findings", "metric",
    "metrics", "baseline", "baselines", "evaluation", "evaluations", "evaluate", "evaluated", "experiment",
    "experiments", "performance", "perform", "accuracy", "speedup", "limitation", "limitations", "weakness",
    "weaknesses", "code", "github", "link", "repo", "repository", "author", "authors", "year", "venue", "method",
    "methods", "approach", "idea", "contribution", "contributions", "novelty", "model", "models", "task", "tasks",
    "setup", "setting", "settings", "architecture", "loss", "training", "trained", "hyperparameters", "summary",
    "summarize", "summarise", "explain", "details", "detail", "more", "else", "main", "key", "used", "use", "uses",
    "compare", "compared", "comparison", "improvement", "improvements", "gain", "gains", "cost", "costs",
))


def _only_aspects(question: str) -> bool:
    words = [w.lower() for w in _WORD.findall(question)]
    return any(w in _ASPECT_WORDS for w in words) and all(
        w in _ASPECT_WORDS or w in _QUESTION_FILLER for w in words)


@dataclass
class FollowUp:
    query: str
    pinned: list[str] = field(default_factory=list)  # paper_ids the question refers to explicitly
    # What to tell the reader when the question points at a paper no earlier answer has ("the second one" after
    # an answer about one paper): searching its words would answer about some other paper.
    unresolved: str = ""


def pinned_first(follow: FollowUp, hits: Sequence[Hit], retriever: Retriever, k: int) -> list[Hit]:
    """The papers a follow-up points at, then the search's other hits: ``k`` of them (every pinned paper kept),
    ranked 1.. in that order."""
    if not follow.pinned:
        return list(hits)
    pinned = retriever.hits_for(follow.pinned)
    rest = [h for h in hits if h.paper_id not in follow.pinned]
    return ranked([*pinned, *rest][: max(k, len(pinned))])


def ranked(hits: Sequence[Hit]) -> list[Hit]:
    """``hits`` in the order given, ranked 1.. in it."""
    return [Hit(**{**h.__dict__, "rank": i}) for i, h in enumerate(hits, start=1)]


def resolve_follow_up(question: str, history: Sequence[dict], retriever: Retriever,
                      rewriter: ChatModel | None) -> FollowUp:
    """The standalone search query for a question in a conversation, and the papers it points at.

    ``rewriter`` is a chat model trusted to rewrite questions (a capable endpoint), or None."""
    if not history:
        return FollowUp(question)
    turns = _assistant_turns(history)
    cache: dict[int, list[Hit]] = {}

    def papers(index: int) -> list[Hit]:
        """The papers of ``turns[index]``, read once per question (reading may search)."""
        if index not in cache:
            cache[index] = papers_of(turns[index], retriever)
        return cache[index]

    pinned = _pinned(question, turns, papers)
    if not pinned and turns and (reference := _PAPER_REF.search(question)):
        return FollowUp(question, unresolved=_no_such_paper(reference.group(0), papers(len(turns) - 1)))
    pronoun = bool(_ANAPHORA.search(question))
    # A short message may lean on the answer before ("and the datasets?"), unless it stands on its own: a list
    # question ("Which papers use RL?") or one that names its subject ("summarize FedSMM", typo and all).
    stands_alone = is_multi_paper_question(question) or any(looks_coined(w) for w in question.split())
    # "What is the capital of France?" is short and stands alone: a short message leans back only when it says
    # so ("and ...?", "what about ...?") or asks about an aspect of a paper and nothing else ("datasets?").
    short = len(question.split()) <= 6 and not stands_alone and (
        bool(_LEANS_BACK.match(question)) or _only_aspects(question))
    refers_back = bool(pinned) or pronoun or short
    if not refers_back:
        return FollowUp(question)
    # The answer the conversation is about: the last one, unless it declined ("the second one?" when there was
    # one paper): its "nearest papers" are no subject, and "and its results?" still means the paper before.
    about = next((i for i in range(len(turns) - 1, -1, -1) if not _declined(turns[i])), len(turns) - 1)
    last = papers(about) if turns else []
    if not pinned and pronoun and len(last) == 1:
        pinned = [last[0].paper_id]  # "what did they evaluate on?" after an answer about one paper
    if not pinned and rewriter is not None:
        rewritten = _checked_rewrite(question, history, rewriter)
        if rewritten:
            return FollowUp(rewritten)
    titles = [h.title for h in retriever.hits_for(pinned)] if pinned else [h.title for h in last[:2]]
    last_user = next((m.get("content", "") for m in reversed(history) if m.get("role") == "user"), "")
    context = " ".join(titles) if titles else last_user
    return FollowUp(f"{question} {context}".strip(), pinned)


# A message that only points back ("the second one?", "and the last paper?", "[2]", "that one"): in a new
# conversation there is nothing it can mean.
_ONLY_POINTS_BACK = re.compile(
    rf"^\W*(?:and\s+|so\s+|what\s+about\s+|tell\s+me\s+(?:more\s+)?about\s+)?(?:the\s+)?"
    rf"(?:(?:{_ORDINAL_WORD}|last|other|previous|same|that|this)\s+(?:one|paper|source|result|work|method|abstract)s?"
    rf"|\[\d{{1,2}}\]|(?:paper|source|number)\s*#?\s*\d{{1,2}}|it|that|them|those|the\s+(?:former|latter))\W*$",
    re.IGNORECASE,
)
NOTHING_BEFORE = ("There is no earlier answer in this conversation to point back to: ask about a topic or a paper "
                  "first, e.g. \"Which papers are about federated learning?\", then \"the second one?\".")


# "what did the second one evaluate on?", "summarize [2]", "is the latter better?": a place in an earlier answer.
_POINTS_AT_PLACE = re.compile(rf"\bthe\s+(?:{_ORDINAL_WORD}|last)\s+(?:one|paper)s?\b|\[\d{{1,2}}\]|"
                              r"\bthe\s+(?:former|latter)\b", re.IGNORECASE)


def points_back(question: str) -> bool:
    """Does the message point at an earlier answer's paper ("the second one?", "what did the first paper find?")?"""
    return bool(_ONLY_POINTS_BACK.match(question) or _POINTS_AT_PLACE.search(question))


def _no_such_paper(reference: str, last: Sequence[Hit]) -> str:
    names = ", ".join(h.title for h in last)
    # In words, not digits: a figure in a reply reads as one an abstract gave.
    words = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
    count = words[len(last) - 1] if 0 < len(last) <= len(words) else str(len(last))
    named = f"named only {count} paper{'s' if len(last) != 1 else ''} ({names})" if last else "named no paper"
    return (f"The last answer {named}: there is no \"{reference.lower()}\" to point at. Ask about a paper by "
            "its name, or ask for a list first (\"Which papers are about ...?\").")


def _declined(turn: dict) -> bool:
    """An answer that cited nothing and said the abstracts do not answer."""
    return not turn.get("papers") and says_not_covered(turn.get("content", ""))


def _assistant_turns(history: Sequence[dict]) -> list[dict]:
    return [m for m in history if m.get("role") == "assistant" and (m.get("content") or m.get("papers"))]


def _pinned(question: str, turns: list[dict], papers: Callable[[int], list[Hit]]) -> list[str]:
    """The papers the question names by their place in an earlier answer (``papers(i)``: those of
    ``turns[i]``), in the question's order."""
    if not turns:
        return []
    turn_match = _TURN_REF.search(question)
    chosen = _chosen_turn(turn_match.group(1).lower(), turns) if turn_match else None

    pinned: list[str] = []
    for match in _PAPER_REF.finditer(question):
        if turn_match and turn_match.start() <= match.start() < turn_match.end():
            continue  # "your first answer" names a turn, not a paper
        word, number, bracket, side = match.groups()
        # The most recent list long enough for the reference, unless the question names the answer: after "what
        # did the second one evaluate on?" (answered about one paper), "and the first one?" means the list's first.
        # An answer about one paper is a list of one only when no list came before it.
        candidates = [chosen] if chosen is not None else list(range(len(turns) - 1, -1, -1))
        lists_first = [i for i in candidates if len(papers(i)) > 1] + [i for i in candidates if len(papers(i)) <= 1]
        for index in lists_first:
            listed = papers(index)
            position = _position(word, number or bracket, side, len(listed))
            if position is not None and 1 <= position <= len(listed) and (side is None or len(listed) > 1):
                if listed[position - 1].paper_id not in pinned:
                    pinned.append(listed[position - 1].paper_id)
                break
    return pinned


def _chosen_turn(word: str, turns: list[dict]) -> int | None:
    if word in {"previous", "last", "latest"}:
        return len(turns) - 1
    if word == "earlier":
        return max(len(turns) - 2, 0)
    index = _ORDINALS.get(word, 0) - 1
    return index if 0 <= index < len(turns) else None


def _position(word: str | None, number: str | None, side: str | None, count: int) -> int | None:
    if side:
        return 1 if side.lower() == "former" else count
    if word:
        return count if word.lower() == "last" else _ORDINALS[word.lower()]
    return int(number) if number else None


def papers_of(turn: dict, retriever: Retriever) -> list[Hit]:
    """The papers an answer named, in its order: its recorded ids, else what its text says."""
    ids = list(turn.get("papers") or [])
    if ids:
        return retriever.hits_for(ids)
    text = _MARKERS.sub(" ", turn.get("content", ""))
    items = [item for item in _LIST_ITEM.split(text)[1:] if item.strip()] if len(_LIST_ITEM.findall(text)) > 1 else []
    if items:  # a list: one paper an item, named or described
        found = [pid for item in items for pid in (_named_in(item, retriever)[:1] or _described_by(item, retriever))]
    else:
        units = mention_units(text)
        # Prose that names its papers names each one: a sentence that does not is more about a named paper.
        # Only prose that names none is read description by description.
        found = [pid for unit in units for pid in _named_in(unit, retriever)]
        if not found:
            found = [pid for unit in units for pid in _described_by(unit, retriever)]
    return retriever.hits_for(list(dict.fromkeys(found)))


def previous_papers(history: Sequence[dict], retriever: Retriever) -> list[Hit]:
    """Papers the last answer named, in order (see :func:`papers_of`)."""
    turns = _assistant_turns(history)
    return papers_of(turns[-1], retriever) if turns else []


def mention_units(text: str) -> list[str]:
    """An answer cut where one paper's mention ends and the next begins: list items, sentences, and
    "one ..., and another ..." inside a sentence."""
    text = _MARKERS.sub(" ", text)
    items = [part for part in _LIST_ITEM.split(text) if part.strip()]
    units: list[str] = []
    for item in items:
        for start, end in split_sentences(item):
            units.extend(p.strip() for p in _NEXT_ITEM.split(item[start:end]) if p and p.strip())
    return units


def _named_in(text: str, retriever: Retriever) -> list[str]:
    """Papers a passage names: by their name-like titles, else by a coined name only their abstract uses."""
    named = retriever.titles_in(text)
    if named:
        return named
    found: list[str] = []
    for token in dict.fromkeys(w.strip("-") for w in _WORD.findall(text)):
        if not looks_coined(token):
            continue
        hits = retriever.search(token, 1)
        said = hits and re.search(rf"(?<![\w-]){re.escape(token)}(?![\w-])", hits[0].abstract or hits[0].text, re.I)
        if said and hits[0].paper_id not in found:
            found.append(hits[0].paper_id)
    return found


def _described_by(text: str, retriever: Retriever) -> list[str]:
    """The paper a passage describes without naming it ("one paper perturbs the prompt with distractors")."""
    if len(_content_words(text)) < 4 or _is_refusal(text):
        return []
    hits = retriever.search(text, 1)
    return [hits[0].paper_id] if hits else []


def _is_refusal(text: str) -> bool:
    lowered = text.lower()
    return any(p in lowered for p in ("no abstract", "does not state", "do not say", "not covered", "nearest papers"))


def _content_words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text) if len(w) > 2 and w.lower() not in _QUESTION_FILLER}


def _checked_rewrite(question: str, history: Sequence[dict], chat_model: ChatModel) -> str:
    """The chat model's standalone rewrite, if it keeps most of the question's own words ("" otherwise)."""
    try:
        rewritten = condense_with_llm(question, history, chat_model)
    except LLMError:
        return ""  # the deterministic query still works
    own = _content_words(question)
    kept = own & _content_words(rewritten)
    return rewritten if rewritten and (not own or len(kept) >= 0.5 * len(own)) else ""


def condense_with_llm(question: str, history: Sequence[dict], chat_model: ChatModel) -> str:
    """The chat model's standalone rewrite of the question ("" when it wrote nothing usable)."""
    parts = []
    for delta in chat_model.stream(condense_messages(question, history), max_tokens=64, temperature=0.0):
        parts.append(delta.content)
    text = " ".join("".join(parts).split()).strip().strip('"')
    return text if 3 <= len(text) <= 500 else ""
