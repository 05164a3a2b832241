"""The answer pipeline: question (+ conversation) -> search -> prompt -> streamed answer -> checked citations.

It receives its parts (a Retriever, an Embedder for citation checks, a ChatModel or None for
extractive answers) and builds none of them. ``stream`` yields events as they happen so a terminal or
the UI can show the answer while it is written; ``answer`` is the same, collected.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from rag.citations import check_claims, citations_from_checks, clean_markers, split_claims
from rag.embedding import Embedder
from rag.errors import LLMError, LLMInterrupted
from rag.extractive import ExtractiveAnswerer, names_paper
from rag.llm import ChatModel
from rag.prompts import NOT_COVERED, build_prompt, condense_messages, says_not_covered
from rag.retrieval import HybridRetriever, validate_question
from rag.types import Answer, Hit

_ORDINALS = {"first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4, "4th": 4,
             "fifth": 5, "5th": 5}
_ORDINAL_REF = re.compile(
    r"\b(first|1st|second|2nd|third|3rd|fourth|4th|fifth|5th|last)\s+(?:one|paper|source|result|work|method|"
    r"approach|abstract)\b|\b(?:paper|source|result)\s*#?\s*(\d)\b|\[(\d)\]",
    re.IGNORECASE,
)
# What a citation marker can start with: "[" then digits, commas, semicolons, dashes and spaces, no "]" yet.
_MARKER_START = re.compile(r"\[(?:[0-9,;\-\u2010-\u2014\u2212]|[^\S\n])*\Z")
_ANAPHORA = re.compile(
    r"\b(they|them|their|it|its|this|that|these|those|the (?:paper|method|authors?|approach|model|work)s?|"
    r"the same|both|each|above)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class SourcesEvent:
    hits: list[Hit]
    search_query: str


@dataclass(frozen=True)
class TextEvent:
    content: str = ""
    reasoning: str = ""


@dataclass(frozen=True)
class FinalEvent:
    answer: Answer


Event = SourcesEvent | TextEvent | FinalEvent


@dataclass
class PipelineConfig:
    top_k: int = 5
    context_window: int = 4096
    max_tokens: int = 512
    temperature: float = 0.1
    min_relevance: float = 0.25
    small_model: bool = False


@dataclass
class FollowUp:
    query: str
    pinned: list[str] = field(default_factory=list)  # paper_ids the question refers to explicitly


class MarkerFilter:
    """Drops citation markers that match no source from streamed text, holding back only a possible marker.

    What is held back is the end of the text from its last ``[`` on, when nothing but marker characters
    follow it (plus the spaces before it), and never more than ``MAX_HELD`` characters: a real marker is a
    few characters long, so a longer "marker" is let through as text (the final answer is cleaned in one
    piece anyway). Each piece fed is looked at once, so a long stream costs time linear in its length.
    """

    MAX_HELD = 1024

    def __init__(self, valid: set[int]) -> None:
        self.valid = valid
        self.buffer = ""
        self.removed = 0
        self._last = ""  # the last character let through: a piece's start is not a line's start

    def feed(self, text: str) -> str:
        if not text:
            return ""
        if self.buffer and "[" not in text and _MARKER_CHARS.fullmatch(text):
            if len(self.buffer) + len(text) <= self.MAX_HELD:
                self.buffer += text  # still a possible marker
                return ""
            ready, self.buffer = self.buffer + text, ""
            return self._clean(ready)
        cut = text.rfind("[")
        if cut != -1 and _MARKER_START.match(text, cut) and len(text) - cut <= self.MAX_HELD:
            # Hold the space before it too: a dropped marker takes its leading space with it.
            floor = max(0, len(text) - self.MAX_HELD)
            while cut > floor and text[cut - 1] in " \t":
                cut -= 1
            ready, self.buffer = self.buffer + text[:cut], text[cut:]
        else:
            ready, self.buffer = self.buffer + text, ""
        return self._clean(ready)

    def flush(self) -> str:
        ready, self.buffer = self.buffer, ""
        return self._clean(ready)

    def _clean(self, text: str) -> str:
        # Cleaned after the last character shown, so that a marker dropped at the start of a piece is
        # tidied as mid-line text ("See" + " [9] and" -> " and"), not as the start of a line.
        context = self._last if self._last not in ("", "[") else ""
        cleaned, removed = clean_markers(context + text, self.valid)
        # (a space already shown may have been tidied away in front of a dropped marker: it stays shown)
        cleaned = cleaned[len(context) :] if cleaned.startswith(context) else cleaned
        self.removed += removed
        if cleaned:
            self._last = cleaned[-1]
        return cleaned


# Characters that may follow "[" in a marker not yet closed (see _MARKER_START).
_MARKER_CHARS = re.compile(r"(?:[0-9,;\-\u2010-\u2014\u2212]|[^\S\n])*")


class AnswerPipeline:
    def __init__(
        self,
        retriever: HybridRetriever,
        embedder: Embedder,
        chat_model: ChatModel | None,
        *,
        config: PipelineConfig | None = None,
        extractive: ExtractiveAnswerer | None = None,
    ) -> None:
        self.retriever = retriever
        self.embedder = embedder
        self.chat_model = chat_model
        self.config = config or PipelineConfig()
        self.extractive = extractive or ExtractiveAnswerer(embedder, idf=retriever.lexical.idf)

    @property
    def backend(self) -> str:
        return self.chat_model.label if self.chat_model is not None else self.extractive.label

    # --- follow-ups ----------------------------------------------------------------------------

    def follow_up(self, question: str, history: Sequence[dict]) -> FollowUp:
        """The standalone search query for a question in a conversation, and the papers it points at."""
        if not history:
            return FollowUp(question)
        previous = self._previous_papers(history)
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
        if self.chat_model is not None:
            try:
                rewritten = self._condense_with_llm(question, history)
                if rewritten:
                    return FollowUp(rewritten, pinned)
            except LLMError:
                pass  # the deterministic rewrite below still gives a usable query
        titles = [p.title for p in previous if p.paper_id in pinned] or [p.title for p in previous[:2]]
        last_user = next((m.get("content", "") for m in reversed(history) if m.get("role") == "user"), "")
        context = " ".join(titles) if titles else last_user
        return FollowUp(f"{question} {context}".strip(), pinned)

    def _previous_papers(self, history: Sequence[dict]) -> list[Hit]:
        """Papers the last answer cited, in order: from its recorded ids, else by titles found in its text."""
        for message in reversed(history):
            if message.get("role") != "assistant":
                continue
            ids = list(message.get("papers") or [])
            if not ids:
                ids = self.retriever.titles_in(message.get("content", ""))
            return self.retriever.hits_for(ids)
        return []

    def _condense_with_llm(self, question: str, history: Sequence[dict]) -> str:
        parts = []
        for delta in self.chat_model.stream(condense_messages(question, history), max_tokens=64, temperature=0.0):
            parts.append(delta.content)
        text = " ".join("".join(parts).split()).strip().strip('"')
        return text if 3 <= len(text) <= 500 else ""

    # --- answering -----------------------------------------------------------------------------

    def stream(self, question: str, history: Sequence[dict] = (), *, k: int | None = None) -> Iterator[Event]:
        # Before anything else: a follow-up goes to the LLM to be condensed before the search checks it.
        validate_question(question, self.retriever.max_question_chars)
        k = k or self.config.top_k
        follow = self.follow_up(question, history)
        hits = self.retriever.search(follow.query, k)
        if follow.pinned:
            pinned_hits = self.retriever.hits_for(follow.pinned)
            rest = [h for h in hits if h.paper_id not in follow.pinned]
            hits = [*pinned_hits, *rest][: max(k, len(pinned_hits))]
            hits = [Hit(**{**h.__dict__, "rank": i}) for i, h in enumerate(hits, start=1)]
        yield SourcesEvent(hits, follow.query)
        answer = Answer(question=question, answer="", sources=hits, backend=self.backend, search_query=follow.query)

        if not hits or not self._relevant(question, hits, pinned=bool(follow.pinned)):
            answer.answer = self._not_covered(hits)
            answer.refused = True
            yield TextEvent(content=answer.answer)
            yield FinalEvent(answer)
            return

        if self.chat_model is None:
            text, refused = self.extractive.answer(follow.query if follow.pinned else question, hits)
            if refused:
                text = self._not_covered(hits)
            yield TextEvent(content=text)
            yield FinalEvent(self._finish(answer, text, hits, refused=refused))
            return

        # A tiny model reads slowly and loses track of many sources: give it the best three.
        prompt_hits = hits[:3] if self.config.small_model else hits
        plan = build_prompt(
            question, prompt_hits, history=[{"role": m["role"], "content": m.get("content", "")} for m in history],
            context_window=self.config.context_window, max_answer_tokens=self.config.max_tokens,
            small_model=self.config.small_model,
        )
        numbered = {h.paper_id for h in plan.sources}
        answer.sources = plan.sources + [h for h in hits if h.paper_id not in numbered]
        markers = MarkerFilter(set(range(1, len(plan.sources) + 1)))
        content: list[str] = []
        reasoning: list[str] = []
        try:
            for delta in self.chat_model.stream(plan.messages, max_tokens=self.config.max_tokens,
                                                temperature=self.config.temperature):
                shown = markers.feed(delta.content) if delta.content else ""
                content.append(delta.content)
                reasoning.append(delta.reasoning)
                if shown or delta.reasoning:
                    yield TextEvent(content=shown, reasoning=delta.reasoning)
        except LLMInterrupted:
            answer.interrupted = True
        tail = markers.flush()
        if tail:
            yield TextEvent(content=tail)
        answer.reasoning = "".join(reasoning)
        # The final text is cleaned from the raw reply in one piece (the stream was cleaned as it went).
        text = "".join(content).strip()
        final = self._finish(answer, text, plan.sources, refused=says_not_covered(text))
        if final.refused and not final.citations:
            final.answer = self._not_covered(hits, lead=text)
        yield FinalEvent(final)

    def _relevant(self, question: str, hits: Sequence[Hit], *, pinned: bool) -> bool:
        """Is anything retrieved close enough to answer from? A paper named in the question always is."""
        if pinned or any(names_paper(question, h) for h in hits):
            return True
        return max(h.dense_score for h in hits) >= self.config.min_relevance

    def _finish(self, answer: Answer, text: str, numbered: Sequence[Hit], *, refused: bool) -> Answer:
        text, removed = clean_markers(text, set(range(1, len(numbered) + 1)))
        answer.invalid_markers += removed
        answer.answer = text
        by_number = {i: self._paper(h) for i, h in enumerate(numbered, start=1)}
        checks = check_claims(split_claims(text), by_number, self.embedder)
        answer.citations = citations_from_checks(checks, by_number)
        answer.checks = checks
        answer.grounded = bool(answer.citations)
        answer.refused = refused
        return answer

    @staticmethod
    def _paper(hit: Hit):
        from rag.types import Paper

        return Paper(hit.paper_id, hit.title, hit.abstract or hit.text, hit.source, hit.ordinal)

    @staticmethod
    def _not_covered(hits: Sequence[Hit], lead: str = "") -> str:
        lead = lead or NOT_COVERED
        if not hits:
            return f"{lead} The index has no papers close to the question."
        nearest = "; ".join(f"{h.title} ({h.source} #{h.ordinal})" for h in hits[:3])
        return f"{lead} The nearest papers: {nearest}."

    def answer(self, question: str, history: Sequence[dict] = (), *, k: int | None = None) -> Answer:
        final = None
        for event in self.stream(question, history, k=k):
            if isinstance(event, FinalEvent):
                final = event.answer
        assert final is not None
        return final
