"""Follow-up questions in a conversation: the standalone search query, and the papers they point at.

A question that refers back ("the second one", a pronoun, or a question of a few words) is rewritten
into a standalone search query: by the chat model when there is one, else by adding the titles of the
papers it points at (or the last user question). Papers named by their place in the last answer are
pinned: the pipeline puts them first among the sources, whatever the search finds.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from rag.answers.prompts import condense_messages
from rag.errors import LLMError
from rag.llm.client import ChatModel
from rag.retrieval.retriever import Retriever
from rag.types import Hit

_ORDINALS = {"first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4, "4th": 4,
             "fifth": 5, "5th": 5}
_ORDINAL_REF = re.compile(
    r"\b(first|1st|second|2nd|third|3rd|fourth|4th|fifth|5th|last)\s+(?:one|paper|source|result|work|method|"
    r"approach|abstract)\b|\b(?:paper|source|result)\s*#?\s*(\d)\b|\[(\d)\]",
    re.IGNORECASE,
)
_ANAPHORA = re.compile(
    r"\b(they|them|their|it|its|this|that|these|those|the (?:paper|method|authors?|approach|model|work)s?|"
    r"the same|both|each|above)\b",
    re.IGNORECASE,
)


@dataclass
class FollowUp:
    query: str
    pinned: list[str] = field(default_factory=list)  # paper_ids the question refers to explicitly


def resolve_follow_up(question: str, history: Sequence[dict], retriever: Retriever,
                      chat_model: ChatModel | None) -> FollowUp:
    """The standalone search query for a question in a conversation, and the papers it points at."""
    if not history:
        return FollowUp(question)
    previous = previous_papers(history, retriever)
    pinned: list[str] = []
    for match in _ORDINAL_REF.finditer(question):
        word, number, bracket = match.groups()
        if word:
            index = len(previous) if word.lower() == "last" else _ORDINALS[word.lower()]
        else:
            index = int(number or bracket)
        if 1 <= index <= len(previous) and previous[index - 1].paper_id not in pinned:
            pinned.append(previous[index - 1].paper_id)
    refers_back = bool(pinned) or bool(_ANAPHORA.search(question)) or len(question.split()) <= 6
    if not refers_back:
        return FollowUp(question)
    if chat_model is not None:
        try:
            rewritten = condense_with_llm(question, history, chat_model)
            if rewritten:
                return FollowUp(rewritten, pinned)
        except LLMError:
            pass  # the deterministic rewrite below still gives a usable query
    titles = [p.title for p in previous if p.paper_id in pinned] or [p.title for p in previous[:2]]
    last_user = next((m.get("content", "") for m in reversed(history) if m.get("role") == "user"), "")
    context = " ".join(titles) if titles else last_user
    return FollowUp(f"{question} {context}".strip(), pinned)


def previous_papers(history: Sequence[dict], retriever: Retriever) -> list[Hit]:
    """Papers the last answer cited, in order: from its recorded ids, else by titles found in its text."""
    for message in reversed(history):
        if message.get("role") != "assistant":
            continue
        ids = list(message.get("papers") or [])
        if not ids:
            ids = retriever.titles_in(message.get("content", ""))
        return retriever.hits_for(ids)
    return []


def condense_with_llm(question: str, history: Sequence[dict], chat_model: ChatModel) -> str:
    """The chat model's standalone rewrite of the question ("" when it wrote nothing usable)."""
    parts = []
    for delta in chat_model.stream(condense_messages(question, history), max_tokens=64, temperature=0.0):
        parts.append(delta.content)
    text = " ".join("".join(parts).split()).strip().strip('"')
    return text if 3 <= len(text) <= 500 else ""
