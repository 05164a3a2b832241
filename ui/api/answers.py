"""What the OpenAI-compatible API and the MCP server share: the answer writers offered as models, a
conversation read from chat messages, the structured citations of an answer, and a gate that limits
how many answers are written at once. No HTTP here: ``ui.api.v1`` and ``ui.api.mcp_server`` are the transports.

The parts come from ``rag.components.Components`` (the same index, embedder and pipelines as the web UI);
nothing is built a second time.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace

from rag.answers.pipeline import AnswerPipeline
from rag.components import Components
from rag.errors import QueryError, ServerBusy, UnknownModel
from rag.labels import file_label
from rag.types import Answer, Turn
from ui.shared.text import answer_text, describe_answer_writer

DEFAULT_MODEL = "paperchat"
EXTRACTIVE_MODEL = "paperchat-extractive"
ROLES = ("system", "developer", "user", "assistant", "tool", "function")
SOURCES_HEADINGS = ("\n\nSources:\n", "\n\nNearest papers:\n")
CHECKED_HEADING = "\n\nChecked answer:\n"  # after a streamed answer the check changed (stream_end)
# "[2] FedSSM — ICML 2026 · #1 of file 000 (weakly supported)": a line of the sources block (answer_text); the
# file is its label (rag/labels.py). Answers written before labels said "— 000_dcbf1b5d2daaeff5.txt #1".
_SOURCE_LINE = re.compile(r"^\[(\d+)\] .* — (?:(?:.+ · )?#(?P<ordinal>\d+) of (?P<file>.+?)|"
                          r"(?P<source>.+) #(?P<number>\d+))(?: \(weakly supported\))?$")


@dataclass(frozen=True)
class ModelInfo:
    id: str
    description: str


def models(components: Components) -> list[ModelInfo]:
    """The answer writers offered: the server's configured default, and extractive (no LLM)."""
    default = describe_answer_writer(components, components.session_defaults())
    return [
        ModelInfo(DEFAULT_MODEL, f"the server's default answer writer: {default}"),
        ModelInfo(EXTRACTIVE_MODEL, "extractive: quoted, cited sentences from the abstracts, no LLM"),
    ]


def pipeline_for(components: Components, model: str, *, temperature: float | None = None,
                 max_tokens: int | None = None) -> AnswerPipeline:
    """The pipeline answering as ``model``, with this request's temperature and answer length."""
    if model not in (DEFAULT_MODEL, EXTRACTIVE_MODEL):
        known = ", ".join(m.id for m in models(components))
        raise UnknownModel(f"the model {model!r} does not exist here: use one of {known} (GET /v1/models)")
    defaults = components.session_defaults()
    session = replace(
        defaults,
        extractive=model == EXTRACTIVE_MODEL or defaults.extractive,
        temperature=defaults.temperature if temperature is None else temperature,
        max_tokens=max_tokens,
    )
    return components.pipeline_for(session)


# --- conversations --------------------------------------------------------------------------------------------


def message_text(content, where: str) -> str:
    """A chat message's text: a string, or a list of ``{"type": "text", "text": ...}`` parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise QueryError(f"{where}: only text content is read: give a string or "
                                 "[{\"type\": \"text\", \"text\": \"...\"}] parts")
            parts.append(part["text"])
        return "\n".join(parts)
    raise QueryError(f"{where}: 'content' must be a string or a list of text parts")


def split_sources(text: str) -> tuple[str, list[tuple[str, int]]]:
    """An answer as this server wrote it -> (the answer text, the (file, position) of each listed paper: the file
    as its label names it, "file 000", or its name).

    Of a streamed answer followed by its checked text, the answer is the checked text."""
    for heading in SOURCES_HEADINGS:
        head, found, block = text.rpartition(heading)
        if found:
            head = head.rpartition(CHECKED_HEADING)[2]
            places = []
            for line in block.splitlines():
                match = _SOURCE_LINE.match(line.strip())
                if match and match["file"]:
                    places.append((match["file"], int(match["ordinal"])))
                elif match:
                    places.append((match["source"], int(match["number"])))
            return head.strip(), places if heading == SOURCES_HEADINGS[0] else []
    return text.rpartition(CHECKED_HEADING)[2].strip(), []


def read_turns(messages, where: str) -> list[tuple[str, str, dict]]:
    """The user and assistant turns of chat messages: (role, text, the message); others are checked, then
    left out (paperchat writes its own instructions)."""
    if not isinstance(messages, list):
        raise QueryError(f"'{where}' must be a list of {{\"role\": ..., \"content\": ...}} objects")
    turns = []
    for number, message in enumerate(messages):
        here = f"{where}[{number}]"
        if not isinstance(message, dict):
            raise QueryError(f"{here} must be an object with 'role' and 'content'")
        role = message.get("role")
        if not isinstance(role, str) or role not in ROLES:
            raise QueryError(f"{here}: 'role' must be one of {', '.join(ROLES)}")
        text = message_text(message.get("content"), here)
        if role in ("user", "assistant"):
            turns.append((role, text, message))
    return turns


def history_of(components: Components, turns: list[tuple[str, str, dict]]) -> list[Turn]:
    """Turns read from chat messages -> the conversation the pipeline reads. An assistant turn's cited papers
    are its "papers" when it gives them (the ``ask`` tool's history), else read back from the sources block
    this server wrote."""
    lookup: dict[tuple[str, int], str] | None = None
    history: list[Turn] = []
    for role, text, message in turns:
        if role == "user":
            history.append(Turn.asked(text))
            continue
        answer, places = split_sources(text)
        given = message.get("papers")
        papers: list[str] = []
        if isinstance(given, list) and all(isinstance(p, str) for p in given):
            papers = list(given)
        elif places:
            if lookup is None:
                lookup = _places(components.papers())
            papers = [lookup[place] for place in places if lookup.get(place)]
        history.append(Turn("assistant", answer, tuple(papers)))
    return history


def _places(papers) -> dict[tuple[str, int], str]:
    """(file, position) -> paper id, the file by its name and by its label ("file 000"); a label two files
    share names no paper ("")."""
    lookup: dict[tuple[str, int], str] = {}
    for paper in papers:
        lookup[(paper.source, paper.ordinal)] = paper.paper_id
        label = (file_label(paper.source), paper.ordinal)
        if label[0] != paper.source:
            lookup[label] = "" if lookup.get(label, paper.paper_id) != paper.paper_id else paper.paper_id
    return lookup


def conversation(components: Components, messages, *, where: str = "messages") -> tuple[str, list[Turn]]:
    """OpenAI chat messages -> (the question: the last user message, the conversation before it).

    Earlier user and assistant turns are the conversation, so "what did the second one evaluate on?"
    resolves against the papers the previous answer cited, as in the web UI.
    """
    if not isinstance(messages, list) or not messages:
        raise QueryError(f"'{where}' must be a non-empty list of {{\"role\": ..., \"content\": ...}} objects")
    turns = read_turns(messages, where)
    if not turns or turns[-1][0] != "user" or not turns[-1][1].strip():
        raise QueryError(f"the last message in '{where}' must be the user's question (role 'user', non-empty)")
    return turns[-1][1].strip(), history_of(components, turns[:-1])


def history_from(components: Components, history) -> list[Turn]:
    """An ``ask`` tool's ``history`` (chat messages, an assistant turn optionally with "papers")."""
    return [] if history is None else history_of(components, read_turns(history, "history"))


# --- answers --------------------------------------------------------------------------------------------------


def sources_tail(answer: Answer) -> str:
    """What follows the answer's own text in :func:`answer_text`: streamed after the answer."""
    text = answer_text(answer)
    lead = answer.answer.strip()
    return text[len(lead):] if text.startswith(lead) else "\n\n" + text


def stream_end(answer: Answer, streamed: str) -> str:
    """What to send after the ``streamed`` text so that the message ends as :func:`answer_text` does.

    The final text may add to what streamed (a refusal lists the nearest papers): the rest is sent. When the
    check changed it (a claim re-cited or struck, sources renumbered), the checked answer follows under its
    own heading: the sources block's numbers are its numbers.
    """
    shown, text = streamed.strip(), answer.answer.strip()
    if text.startswith(shown):
        rest = text[len(shown):]
    elif " ".join(shown.split()) == " ".join(text.split()):
        rest = ""  # only spaces differ (the stream is cleaned piece by piece)
    else:
        rest = CHECKED_HEADING + text
    return rest + sources_tail(answer)


def citation_fields(answer: Answer) -> dict:
    """The structured citations for clients that render them: ``citations`` (and ``claims`` when the answer
    has per-claim verdicts) as ``Answer.to_dict`` gives them, and the rest of it under ``paperchat``."""
    data = answer.to_dict()
    hits = {h.paper_id: h for h in answer.sources}
    # Each citation with its paper's label, authors, year, venue and URL (from the hit it cites).
    fields = {"citations": [_with_metadata(c, hits.get(c["paper_id"])) for c in data.pop("citations", [])]}
    if "claims" in data:
        fields["claims"] = data.pop("claims")
    data.pop("answer", None)
    fields["paperchat"] = data
    return fields


def _with_metadata(citation: dict, hit) -> dict:
    return {**citation, "label": hit.label, **hit.metadata()} if hit is not None else citation


# --- how many answers at once ---------------------------------------------------------------------------------


class AnswerGate:
    """At most ``concurrent`` answers written at once, at most ``waiting`` more waiting; past that, ``ServerBusy``.

    Used from one event loop (the server's); the answers themselves run in worker threads.
    """

    def __init__(self, concurrent: int, waiting: int) -> None:
        self.concurrent = concurrent
        self.max_waiting = waiting
        self._slots = asyncio.Semaphore(concurrent)
        self.waiting = 0

    async def acquire(self) -> None:
        if self._slots.locked() and self.waiting >= self.max_waiting:
            raise ServerBusy(f"busy: {self.concurrent} answers are being written and {self.waiting} wait; "
                             "retry in a few seconds")
        self.waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self.waiting -= 1

    def release(self) -> None:
        self._slots.release()

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        await self.acquire()
        try:
            yield
        finally:
            self.release()
