"""The answer pipeline: question (+ conversation) -> search -> prompt -> streamed answer -> checked citations.

It receives its parts (a ``Retriever``, an ``Embedder`` for citation checks, a ``ChatModel`` or None for
extractive answers) and builds none of them: each is a protocol (rag/retrieval/retriever.py,
rag/embedding/models.py, rag/llm/client.py), so tests pass in-process fakes. ``stream`` yields events as
they happen so a terminal or the UI can show the answer while it is written; ``answer`` is the same, collected.
"""

from __future__ import annotations

import difflib
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from rag.answers.attribution import Attributor
from rag.answers.citations import ClaimCheck, citations_from_checks, clean_markers, split_claims
from rag.answers.extractive import (
    AnswerPlan,
    ExtractiveAnswerer,
    asks_for_figure,
    built_artifact,
    is_multi_paper_question,
    mentions,
    names_alone,
    names_paper,
    precise_figures,
    question_names,
    required_names,
    says_it_builds,
    states_figure,
)
from rag.answers.follow_up import NOTHING_BEFORE, FollowUp, pinned_first, points_back, ranked, resolve_follow_up
from rag.answers.membership import as_list_question, framing_typos_fixed
from rag.answers.metadata import metadata_answer
from rag.answers.numbering import StreamNumbers, consecutive, renumber_text
from rag.answers.prompts import NOT_COVERED, build_prompt, says_not_covered, small_model_messages
from rag.answers.small_talk import fixed_reply, small_talk_answer, without_chat_framing
from rag.answers.spelling import typos_fixed
from rag.answers.topic_questions import filtered_collection_answer, related_answer, topics_answer
from rag.corpus.titles import looks_coined
from rag.embedding.models import Embedder
from rag.errors import LLMInterrupted
from rag.labels import place_label
from rag.llm.client import ChatModel
from rag.retrieval.retriever import Retriever, validate_question
from rag.topics.model import TopicMap
from rag.types import Answer, Citation, ClaimVerdict, Hit, Paper

# What a citation marker can start with: "[" then digits, commas, semicolons, dashes and spaces, no "]" yet.
_MARKER_START = re.compile(r"\[(?:[0-9,;\-\u2010-\u2014\u2212]|[^\S\n])*\Z")


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
    min_relevance: float = 0.32
    # How far below min_relevance the top paper may be when its abstract has most of the question's topic
    # words (words_relevance): a little less similar in meaning, but about the same things.
    relevance_margin: float = 0.07
    words_relevance: float = 0.6  # share of the question's topic words in the top abstract that makes up for it
    # A list question below that bar is still answered when a listed paper has a sentence (or title) this close in
    # meaning to its topic: its framing ("how many of the papers ..., and which ones?") dilutes the similarity.
    list_sentence_relevance: float = 0.55
    small_model: bool = False
    # How the embedded tiny model answers: "lead" (cited evidence with a checked one-sentence lead written by
    # the model), "evidence" (it answers from numbered evidence sentences) or "abstracts" (from whole abstracts).
    small_model_design: str = "lead"
    # A question this short that gives a name no paper mentions ("What datasets does GraphSAGE use?") is declined
    # for it; a longer one is answered if it can be (its names may be context: "... also handle LoRA adapters").
    short_question_words: int = 15
    multi_candidates: int = 30  # how deep "which papers ..." / "how many papers ..." look for papers that qualify
    # "Which papers propose a new benchmark?" reads every abstract of an index this small (a regex each: about a
    # millisecond per thousand papers); beyond, the search's candidates alone.
    builders_scan_max: int = 20_000
    small_model_max_tokens: int = 96  # one or two sentences: a tiny model rambles, and every token costs time
    # A tiny model's lead is kept only this close to a source sentence: below it, its paraphrases drift from
    # what the abstract says (measured: bench/results/tuning.md, "Small-model lead").
    small_model_lead_support: float = 0.85
    # A lead whose words are mostly the evidence's own repeats it (often behind "The answer is:"): left out.
    small_model_lead_new_words: float = 0.25


# Where a question's examples start ("GNNs such as GraphSAGE", "(e.g., Mamba)"): their names ask for nothing.
_EXAMPLES_TAIL = re.compile(r"\s*(?:\(|,?\s*(?:e\.g\.|for example|for instance|such as|including)(?![\w-])).*$",
                            re.IGNORECASE)


def _stated_figures(question: str, hit: Hit) -> list[str]:
    """The precise figures the question gives that the paper's abstract states as written."""
    return [f for f in precise_figures(question) if states_figure(hit.abstract or hit.text, f)]


def stating_figures_first(question: str, hits: Sequence[Hit]) -> list[Hit]:
    """``hits`` with those whose abstract states a precise figure the question gives ahead of the others ("Which
    paper achieves 99.65% accuracy?" was refused: the one abstract that says it ranked second by meaning)."""
    if not precise_figures(question):
        return list(hits)
    stating = [h for h in hits if _stated_figures(question, h)]
    return ranked([*stating, *(h for h in hits if h not in stating)]) if stating else list(hits)


def did_you_mean(question: str, hits: Sequence[Hit], papers: Callable[[], Sequence[Paper]] | None) -> str:
    """For a declined question that gives a coined name no paper has but one paper's short title nearly is
    ("FedSMM"): "No paper is called 'FedSMM'; did you mean FedSSM?", else ""."""
    if papers is None:
        return ""
    asked = [n for n in question_names(question) if looks_coined(n) and not any(mentions(h, n) for h in hits)]
    if not asked:
        return ""
    titles = {p.title.strip().lower(): p.title.strip() for p in papers() if 0 < len(p.title.split()) <= 2}
    for name in asked:
        close = difflib.get_close_matches(name.lower(), list(titles), n=1, cutoff=0.8)
        if close:
            return f"No paper is called '{name}'; did you mean {titles[close[0]]}?"
    return ""


def _normalised(text: str) -> str:
    return " ".join(re.sub(r"\[[0-9, ]+\]|[^\w\s]", " ", text.lower()).split())


class MarkerFilter:
    """Drops citation markers that match no source from streamed text, holding back only a possible marker.

    What is held back is the end of the text from its last ``[`` on, when nothing but marker characters
    follow it (plus the spaces before it), and never more than ``MAX_HELD`` characters: a real marker is a
    few characters long, so a longer "marker" is let through as text (the final answer is cleaned in one
    piece anyway). Each piece fed is looked at once, so a long stream costs time linear in its length.
    """

    MAX_HELD = 1024

    def __init__(self, valid: set[int], numbers: StreamNumbers | None = None) -> None:
        self.valid = valid
        self.numbers = numbers  # renumbers the markers let through (consecutive, in order of first citation)
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
        if self.numbers is not None:
            cleaned = self.numbers.apply(cleaned)
        self.removed += removed
        if cleaned:
            self._last = cleaned[-1]
        return cleaned


# Characters that may follow "[" in a marker not yet closed (see _MARKER_START).
_MARKER_CHARS = re.compile(r"(?:[0-9,;\-\u2010-\u2014\u2212]|[^\S\n])*")


FIXED_REPLY_BACKEND = "paperchat (a fixed reply: nothing searched, no model)"


def fixed_answer(question: str, history: Sequence[dict] = (),
                 papers: Callable[[], Sequence[Paper]] | None = None) -> Answer | None:
    """The reply a question gets with nothing searched and no model: "hello", "thanks!", "what can you do?", a
    question in another language; "the second one?" in a new conversation. None for a question to answer.

    The pipeline answers these first; a caller that would start a model for the answer asks here before."""
    fixed = small_talk_answer(question, papers) or (
        fixed_reply(question, NOTHING_BEFORE, refused=True) if not history and points_back(question) else None)
    if fixed:
        fixed.backend = FIXED_REPLY_BACKEND
    return fixed


class AnswerPipeline:
    def __init__(
        self,
        retriever: Retriever,
        embedder: Embedder,
        chat_model: ChatModel | None,
        *,
        config: PipelineConfig | None = None,
        extractive: ExtractiveAnswerer | None = None,
        topics: Callable[[], TopicMap] | None = None,
    ) -> None:
        self.topics = topics  # the collection's topics, computed when a question asks for them
        self.retriever = retriever
        self.embedder = embedder
        self.chat_model = chat_model
        self.config = config or PipelineConfig()
        self.extractive = extractive or ExtractiveAnswerer(embedder, idf=retriever.idf, search=retriever.search)
        self.attributor = Attributor(embedder)

    @property
    def backend(self) -> str:
        return self.chat_model.label if self.chat_model is not None else self.extractive.label

    # --- follow-ups ----------------------------------------------------------------------------

    def follow_up(self, question: str, history: Sequence[dict]) -> FollowUp:
        """The standalone search query for a question in a conversation, and the papers it points at."""
        # A tiny model's rewrite drifts to words of the previous answer: only a capable model rewrites.
        rewriter = None if self.config.small_model else self.chat_model
        return resolve_follow_up(question, history, self.retriever, rewriter)

    # --- answering -----------------------------------------------------------------------------

    def stream(self, question: str, history: Sequence[dict] = (), *, k: int | None = None) -> Iterator[Event]:
        started = time.monotonic()
        # Before anything else: a follow-up goes to the LLM to be condensed before the search checks it.
        validate_question(question, self.retriever.max_question_chars)
        k = k or self.config.top_k
        papers = getattr(self.retriever, "every_paper", None)  # optional: in-memory test retrievers lack it
        fixed = fixed_answer(question, history, papers)
        if fixed:
            yield SourcesEvent([], question)
            yield TextEvent(content=fixed.answer)
            yield FinalEvent(self._timed(fixed, started))
            return
        asked = question
        # "federated lerning", "summarize Caracl": searched and checked as the corpus spells them.
        vocabulary = getattr(self.retriever, "vocabulary", None)
        question = without_chat_framing(typos_fixed(question, vocabulary() if vocabulary else None))
        if is_multi_paper_question(spelt := framing_typos_fixed(question)) and not is_multi_paper_question(question):
            question = spelt  # "whcih paprs are abut X?" asks for every paper on X
        # ... unless it names a metric ("GPUA zero-shot ImageNet top-1 accuracy?"): that asks for a figure.
        if not history and not asks_for_figure(question) and (listed := as_list_question(question)):
            question = listed  # "federated learning" typed alone: the papers about it, as a search box would give
        follow = self.follow_up(question, history)
        if follow.unresolved:  # "the second one?" after an answer about one paper: say so, search nothing
            unresolved = fixed_reply(asked, follow.unresolved, refused=True)
            yield SourcesEvent([], question)
            yield TextEvent(content=unresolved.answer)
            yield FinalEvent(self._timed(unresolved, started))
            return
        # "Which papers ..." lists every paper likely enough to be about its topic: look deeper than the top k.
        multi = is_multi_paper_question(question)
        hits = self.retriever.search(follow.query, max(k, self.config.multi_candidates) if multi else k)
        if multi and papers is not None:
            hits = self._with_builders(question, hits, papers)
        hits = pinned_first(follow, hits, self.retriever, k)
        if not follow.pinned:
            hits = stating_figures_first(question, hits)
        plan_question, hits, focus = self._follow_up_focus(question, hits, len(follow.pinned))
        # "Who wrote X?", "papers from 2024": answered from the papers' metadata, not their abstracts.
        collection = hits[0].collection if hits else ""
        filters = getattr(self.retriever, "filters", ())
        meta = metadata_answer(question, hits, papers, pinned=bool(follow.pinned), collection=collection) or (
            filtered_collection_answer(question, papers, filters, collection=collection)) or (
            None if follow.pinned else topics_answer(question, self.topics, papers, collection=collection)) or (
            related_answer(question, hits, self.topics, papers, getattr(self.retriever, "vectors", None),
                           collection=collection, pinned=hits[0] if len(follow.pinned) == 1 else None))
        if meta:
            meta.backend = self.backend
            yield SourcesEvent(meta.sources, follow.query)
            consecutive(meta)
            yield TextEvent(content=meta.answer)
            yield FinalEvent(self._timed(meta, started))
            return
        yield SourcesEvent(hits, follow.query)
        answer = Answer(question=asked, answer="", sources=hits, backend=self.backend, search_query=follow.query)

        plan = None
        unused: tuple[str, ...] = ()  # a refused list topic's words that no abstract uses
        # "What datasets does GraphSAGE use?": a name no paper of the index mentions is no paper's to answer for
        # (Fed-Kalter's datasets were given). Not a follow-up's, nor one beside a paper it names ("Does FedSSM
        # beat GraphSAGE?": that abstract does not state it, which the plan says).
        unknown = [] if follow.pinned or any(names_paper(question, h) for h in hits) else (
            self._unknown_names(question, papers))
        # In a short question the name is what is asked about; in a long description of what the reader wants
        # ("... should also handle LoRA adapters"), it may be context the paper never needed to name.
        declined = bool(unknown) and len(question.split()) <= self.config.short_question_words
        relevant = bool(hits) and not declined and self._relevant(question, hits, pinned=bool(follow.pinned))
        if relevant or (hits and multi and not declined):
            # A follow-up about pinned papers is answered from them, in the question's own words (the
            # paper's name added to the query would make the abstract look as if it left the question open).
            plan = self.extractive.plan(plan_question, hits[:focus] if focus else hits, pointed=focus == 1)
            # A list question's framing ("how many of the papers ..., and which ones?") dilutes its similarity to
            # any one abstract: a listed paper with a sentence that says its topic nearly in its words will do, or
            # a likeliest paper whose abstract uses most of the topic's words (as ``_relevant`` asks of a question),
            # or papers that mention a name the topic gives ("evaluate LLM agents on the ALFWorld environment").
            # Below all three, what the bars are there to catch, a topic the corpus lacks ("watermarking LLM text"),
            # shows in words no abstract uses; a topic made of the corpus's words is answered ("How many papers
            # target medical or clinical applications?": framing and alternatives dilute the similarity).
            # "GNNs for molecules": papers about GNNs abound, but none applies them to what no abstract names.
            if multi and (absent := self.extractive.absent_application(self.extractive.list_topic(question))):
                unused, plan = tuple(absent), None
            elif (not relevant and plan.closest < self.config.list_sentence_relevance
                    and plan.covered < self.config.words_relevance and not plan.named):
                unused = tuple(self.extractive.unused_words(self.extractive.list_topic(question)))
                # Under filters, the corpus's words say nothing of the papers that pass: "Which papers are about
                # federated learning?" with title~graph got a graph paper's sentences.
                if unused or filters:
                    plan = None
        if plan is None or plan.kind == "not_covered":
            passing = (f" No paper that passes the filter ({'; '.join(str(f) for f in filters)}) is close to it."
                       if filters and not unused else "")
            lead = " ".join([self._no_abstract_mentions(unknown) or self._no_abstract_uses(unused)
                             or NOT_COVERED + passing, did_you_mean(question, hits, papers)])
            answer.answer = self._not_covered(hits, lead=lead.strip())
            answer.refused = True
            yield TextEvent(content=answer.answer)
            yield FinalEvent(self._timed(answer, started))
            return
        if plan.kind == "not_stated":
            self._not_stated(answer, plan, hits)
            consecutive(answer)
            yield TextEvent(content=answer.answer)
            yield FinalEvent(self._timed(answer, started))
            return

        if self.chat_model is None:
            text = self.extractive.write(plan, hits)
            final = self._finish(answer, text, hits, refused=False)
            # Written whole, then checked: shown with the numbers of the final answer.
            yield TextEvent(content=renumber_text(text, consecutive(final)))
            yield FinalEvent(self._timed(final, started))
            return
        if self.config.small_model and self.config.small_model_design != "abstracts":
            yield from self._small_model_answer(answer, question, plan, hits, started)
            return

        # A tiny model reads slowly and loses track of many sources: give it the best three. A list question
        # gets the papers that qualify (if only one does, that one: not the thirty candidates it was searched
        # deep for), so that it cannot cite one merely because it ranked second.
        prompt_hits = [hits[p.index] for p in plan.papers] if multi else hits
        prompt_hits = prompt_hits[:3] if self.config.small_model else prompt_hits
        plan_ = build_prompt(
            question, prompt_hits, history=[{"role": m["role"], "content": m.get("content", "")} for m in history],
            context_window=self.config.context_window, max_answer_tokens=self.config.max_tokens,
            small_model=self.config.small_model,
        )
        numbered = {h.paper_id for h in plan_.sources}
        answer.sources = plan_.sources + [h for h in hits if h.paper_id not in numbered]
        text, interrupted = yield from self._written(plan_.messages, len(plan_.sources), answer)
        answer.interrupted = interrupted
        final = self._finish(answer, text, plan_.sources, refused=says_not_covered(text))
        if self.config.small_model and not final.citations and not final.refused:
            # Nothing the tiny model wrote is supported: the evidence itself is the answer.
            answer.sources = hits
            final = self._finish(answer, self.extractive.write(plan, hits), hits, refused=False)
        if final.refused and not final.citations:
            final.answer = self._not_covered(hits, lead=text)
        yield FinalEvent(self._timed(final, started))

    def _written(self, messages, sources: int, answer: Answer, *, show: bool = True, max_tokens: int | None = None):
        """Stream the chat model's reply (markers to no source dropped as it goes); returns (text, interrupted)."""
        markers = MarkerFilter(set(range(1, sources + 1)), StreamNumbers())
        content: list[str] = []
        reasoning: list[str] = []
        interrupted = False
        try:
            for delta in self.chat_model.stream(messages, max_tokens=max_tokens or self.config.max_tokens,
                                                temperature=self.config.temperature):
                shown = markers.feed(delta.content) if delta.content else ""
                content.append(delta.content)
                reasoning.append(delta.reasoning)
                if show and (shown or delta.reasoning):
                    yield TextEvent(content=shown, reasoning=delta.reasoning)
        except LLMInterrupted:
            interrupted = True
        tail = markers.flush()
        if show and tail:
            yield TextEvent(content=tail)
        answer.reasoning = "".join(reasoning)
        # The final text is cleaned from the raw reply in one piece (the stream was cleaned as it went).
        return "".join(content).strip(), interrupted

    def _small_model_answer(self, answer: Answer, question: str, plan: AnswerPlan, hits: Sequence[Hit],
                            started: float) -> Iterator[Event]:
        """A task a tiny model can do: read a few numbered evidence sentences, not whole abstracts.

        ``evidence``: it answers from the evidence; what no source supports is removed, and if nothing
        supported is left the evidence itself is the answer. ``lead``: the answer is the cited evidence,
        and the model writes only a one-sentence lead in front of it, kept only if a source supports it.
        Nothing is shown before it is checked: the answer is short and arrives whole.
        """
        evidence = self.extractive.write(plan, hits)
        messages = small_model_messages(question, plan, hits)
        design = self.config.small_model_design
        written, interrupted = yield from self._written(messages, len(hits), answer, show=False,
                                                        max_tokens=self.config.small_model_max_tokens)
        if design == "lead":
            claims = split_claims(written)
            written = claims[0].text if claims else ""
        checked = self.attributor.attribute(written, self._numbered(hits), question=question, drop_unsupported=True)
        kept = [c for c in checked.claims if c.supported]
        if design == "lead":
            useful = bool(kept) and self._lead_adds(kept[0], evidence, hits)
            text = f"{checked.text}\n\n{evidence}" if useful else evidence
        else:
            useful = bool(kept)
            text = checked.text if kept else evidence
        if not useful:  # nothing the model wrote is shown: say so, not that it wrote the answer
            answer.backend = f"{self.backend}: its text left out, the answer is the abstracts' own sentences"
        answer.interrupted = interrupted and not kept
        final = self._finish(answer, text, hits, refused=False)
        yield TextEvent(content=renumber_text(text, consecutive(final)))
        yield FinalEvent(self._timed(final, started))

    def _lead_adds(self, lead: ClaimVerdict, evidence: str, hits: Sequence[Hit]) -> bool:
        """Is a tiny model's lead worth showing above the evidence: close to what a source says, yet not a
        copy of the evidence (a copy adds nothing; a loose paraphrase may say what the abstract does not)?

        Every word it uses must be its source's (or one that asks, "paper", "propose"): a lead one word away
        from its evidence reads as close in meaning ("a single-head MHF module" for "Multi-Head Fourier (MHF)
        module", "an exact reference point" for an approximate one) while it says the opposite; a word taken
        from the question joins the source to what was asked ("CogRouter ... an environment that uses both
        AdaMEM and CogRouter")."""
        if lead.support < self.config.small_model_lead_support:
            return False
        sources = " ".join(hits[m - 1].abstract or hits[m - 1].text for m in lead.markers if 0 < m <= len(hits))
        allowed = set(self.extractive.analyze(sources)) | self.extractive.question_words
        if any(term not in allowed for term in self.extractive.analyze(lead.text)):
            return False
        words = _normalised(lead.text).split()
        known = set(_normalised(evidence).split())
        new = sum(word not in known for word in words)
        return bool(words) and new / len(words) >= self.config.small_model_lead_new_words

    def _relevant(self, question: str, hits: Sequence[Hit], *, pinned: bool) -> bool:
        """Is anything retrieved close enough to answer from? A paper named in the question always is, and so is
        the top paper when its abstract uses a coined name the question gives ("Which paper introduces
        R2-Bench?": R2-Router's abstract builds it)."""
        if pinned or any(names_paper(question, h) for h in hits):
            return True
        if hits and _stated_figures(question, hits[0]):  # "Which paper reaches 99.65% accuracy?"
            return True
        if hits and any(looks_coined(name) and mentions(hits[0], name) for name in question_names(question)):
            return True
        best = max(h.dense_score for h in hits)
        if best >= self.config.min_relevance:
            return True
        # A little less similar in meaning, but the top abstract has most of the question's words: still close.
        return (best >= self.config.min_relevance - self.config.relevance_margin
                and self.extractive.coverage(question, hits[0]) >= self.config.words_relevance)

    @staticmethod
    def _follow_up_focus(question: str, hits: list[Hit], pinned: int) -> tuple[str, list[Hit], int]:
        """The question to plan the answer from, the hits (reordered) and how many leading ones it is planned
        from (0: all). A follow-up is answered from the papers it points at; if it names others too ("how does it
        compare to Fed-Kalter?"), from those as well, placed after them, with the pointed-at papers named in front
        of the question as if the user had written their names for "it"."""
        if not pinned:
            return question, hits, 0
        others = [h for h in hits[pinned:] if names_paper(question, h)]
        if not others:
            return question, hits, pinned
        rest = [h for h in hits[pinned:] if h not in others]
        named = f"{', '.join(h.title for h in hits[:pinned])}: {question}"
        return named, ranked([*hits[:pinned], *others, *rest]), pinned + len(others)

    def _with_builders(self, question: str, hits: list[Hit], papers) -> list[Hit]:
        """For "which papers propose a new benchmark?", ``hits`` and every other paper whose abstract says it
        builds one: what a paper builds is a fact of its abstract, which a search of the question's words may rank
        below its depth (PRM-BiasBench, "We release PRM-BiasBench", was missed). Every abstract is read when the
        index is small enough (``builders_scan_max``)."""
        topic = self.extractive.list_topic(question)
        artifact = built_artifact(topic)
        # "Which papers mention GRPO?", "... release code on GitHub?": every paper that names it, as the search
        # may rank some below its depth (6 of 14 GitHub links were missed).
        names = required_names(topic)
        names = names if names and names_alone(topic, names) else []
        if artifact is None and not names:
            return hits
        every = papers()
        if len(every) > self.config.builders_scan_max:
            return hits
        have = {h.paper_id for h in hits}

        def qualifies(paper: Paper) -> bool:
            if artifact is not None:
                return says_it_builds(paper.abstract, artifact)
            hit = Hit(rank=0, paper_id=paper.paper_id, title=paper.title, score=0.0, source=paper.source,
                      ordinal=paper.ordinal, text="", abstract=paper.abstract)
            return any(mentions(hit, name) for name in names)

        more = [p.paper_id for p in every if p.paper_id not in have and qualifies(p)]
        return ranked([*hits, *self.retriever.hits_for(more)]) if more else hits

    def _numbered(self, numbered: Sequence[Hit]) -> dict[int, Paper]:
        return {i: self._paper(h) for i, h in enumerate(numbered, start=1)}

    def _finish(self, answer: Answer, text: str, numbered: Sequence[Hit], *, refused: bool) -> Answer:
        """Check every claim against every numbered source, re-cite or flag it, and fold the checks into citations."""
        text, removed = clean_markers(text, set(range(1, len(numbered) + 1)))
        answer.invalid_markers += removed
        by_number = self._numbered(numbered)
        checked = self.attributor.attribute(text, by_number, question=answer.question,
                                            drop_unsupported=self.config.small_model, unfinished=answer.interrupted)
        answer.answer = checked.text
        answer.checks = checked.checks
        answer.claims = checked.claims
        answer.citations = citations_from_checks(checked.checks, by_number, answer.question)
        answer.grounded = bool(answer.citations)
        answer.refused = refused
        return answer

    def _not_stated(self, answer: Answer, plan: AnswerPlan, hits: Sequence[Hit]) -> None:
        """The paper exists but its abstract does not state the detail asked: say so and cite the paper."""
        paper = plan.papers[0]
        hit = hits[paper.index]
        number = paper.index + 1
        answer.answer = (f"The abstract of {hit.title} does not state this [{number}]: it {plan.missing}. "
                         f"{NOT_COVERED}")
        abstract = hit.abstract or hit.text
        evidence = paper.sentences[0] if paper.sentences else ""
        start = abstract.find(evidence) if evidence else -1
        answer.citations = [Citation(marker=number, paper_id=hit.paper_id, title=hit.title, source=hit.source,
                                     ordinal=hit.ordinal, evidence=evidence, support=0.0,
                                     claim=f"nearest paper; its abstract {plan.missing}", weak=False)]
        if start >= 0:
            answer.checks = [ClaimCheck(answer.citations[0].claim, number, hit.paper_id, evidence, start,
                                        start + len(evidence), 0.0, False)]
        answer.refused = True
        answer.not_stated = True

    @staticmethod
    def _timed(answer: Answer, started: float) -> Answer:
        """The final answer: its sources numbered 1.. in the order it cites them (every writer's), and its time."""
        consecutive(answer)
        answer.seconds = time.monotonic() - started
        return answer

    @staticmethod
    def _paper(hit: Hit) -> Paper:
        return Paper(hit.paper_id, hit.title, hit.abstract or hit.text, hit.source, hit.ordinal)

    def _unknown_names(self, question: str, papers: Callable[[], Sequence[Paper]] | None) -> list[str]:
        """The names the question gives (coined names, acronyms, capitalised words: "GraphSAGE", "Transformer-XL")
        that no paper's title, abstract or author list mentions. Names given as examples ("GNNs such as
        GraphSAGE") ask for nothing by themselves. Every paper is read when the index is small enough
        (``builders_scan_max``); beyond, none is called unknown."""
        main = _EXAMPLES_TAIL.sub("", question)
        # Not a description ("DINO-style features") nor a compound of a field's acronym ("LLM-generated text").
        names = [n for n in question_names(main) if not re.search(rf"(?<![\w-]){re.escape(n)}-[a-z]", main)
                 and not any(part.islower() and len(part) > 2 for part in n.split("-"))]
        if not names or papers is None:
            return []
        every = papers()
        if len(every) > self.config.builders_scan_max:
            return []
        # What a paper's record says besides its abstract: its authors, its venue ("What ICML 2026 papers ...?").
        hits = [Hit(rank=i + 1, paper_id=p.paper_id, title=p.title, score=0.0, source=p.source, ordinal=p.ordinal,
                    text="", abstract=" ".join([p.abstract, *p.authors, p.venue, place_label(p.source, p.ordinal)]))
                for i, p in enumerate(every)]
        return [name for name in names if not any(mentions(h, name) for h in hits)]

    @staticmethod
    def _no_abstract_mentions(names: Sequence[str]) -> str:
        """The refusal's lead when the question gives names no paper mentions: says which."""
        if not names:
            return ""
        quoted = ", ".join(f"'{n}'" for n in names[:3])
        return f"{NOT_COVERED} No paper in the index mentions {quoted}."

    @staticmethod
    def _no_abstract_uses(words: Sequence[str]) -> str:
        """The refusal's lead when the topic has words no abstract uses: says which, so the reader can rephrase."""
        if not words:
            return ""
        shown = words[:3]
        quoted = ", ".join(f"'{w}'" for w in shown)
        return f"{NOT_COVERED} No abstract uses the word{'s' if len(shown) > 1 else ''} {quoted}."

    @staticmethod
    def _not_covered(hits: Sequence[Hit], lead: str = "") -> str:
        lead = lead or NOT_COVERED
        if not hits:
            return f"{lead} The index has no papers close to the question."
        nearest = "; ".join(f"{h.title} ({h.label})" for h in hits[:3])
        return f"{lead} The nearest papers: {nearest}."

    def answer(self, question: str, history: Sequence[dict] = (), *, k: int | None = None) -> Answer:
        final = None
        for event in self.stream(question, history, k=k):
            if isinstance(event, FinalEvent):
                final = event.answer
        assert final is not None
        return final
