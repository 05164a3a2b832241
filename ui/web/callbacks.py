"""What the web UI does, as plain functions: no Gradio here, so every callback is tested without a browser.

Every callback takes the shared ``Components`` (the index, the embedder and the pipelines, built and cached
by the composition root, ``rag.components``) and one session's settings. ``ChatSession`` is one browser
session's conversation; the app keeps one per session in a ``gr.State``, never globally, so users never
see each other's answers.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from rag.answers.pipeline import FinalEvent, SourcesEvent, TextEvent
from rag.components import MAX_TOP_K, Components, SessionSettings
from rag.errors import ConfigError, LLMAuthError, LLMError, LLMTimeout, PaperchatError, QueryError
from rag.exports.filtered import check_filters, filters_in
from rag.redact import redact_url
from rag.retrieval.retriever import validate_question
from rag.text import clean_input, counted
from rag.types import Answer, Turn, as_messages
from ui.shared.text import answer_text, describe_answer_writer, filter_papers
from ui.web import render

log = logging.getLogger("paperchat.ui")

STREAM_INTERVAL = 0.05  # seconds between UI updates while an answer streams
PROBE_TIMEOUT = 3.0  # seconds to wait for an endpoint's model list in the status line
SETTINGS_HINT = "In this app: check the endpoint URL, model and API key in the Settings tab, or tick extractive mode"
TIMEOUT_HINT = "It timed out: ask again, choose a smaller model or another endpoint in the Settings tab, or tick " \
    "extractive mode"
EMPTY_QUESTION = "Type a question about the papers first."
STARTING_EMBEDDED = "Starting the embedded model (the first answer takes ~15 s)…"
STILL_ANSWERING = "An answer is still being written: wait for it, or press ■ Stop, then ask again."

# The library's messages speak to whoever runs the server (environment variables, command-line flags); a
# person in the web UI can do neither, so those parts are cut or said as what the UI offers.
_OPERATOR_ASIDE = re.compile(r"\s*\([^()]*(?:PAPERCHAT_|(?<![\w-])--\w)[^()]*\)")
_OPERATOR_CLAUSE = re.compile(
    r"(?:,\s*(?:or\s+)?|\s+or\s+)(?:set|raise|use|unset)\s+[^,;]*?(?:PAPERCHAT_\w+|(?<![\w-])--[\w-]+)[^,;]*?"
    r"(?=,|;|\.\s|\.?$)",
    re.IGNORECASE,
)
_UI_NAMES = {"PAPERCHAT_LLM_BASE_URL": "the endpoint URL", "PAPERCHAT_LLM_MODEL": "the model"}
_SENTENCE_BREAK = re.compile(r"(?<=\.)\s+(?=[A-Z`])")
_OPERATOR_WORD = re.compile(r"PAPERCHAT_\w+|(?<![\w-])--[a-z][\w-]*")


def session_settings(base_url, model, api_key, top_k, temperature, extractive) -> SessionSettings:
    """A session's settings from the panel's raw values (None, floats from sliders, stray spaces)."""
    try:
        k = int(top_k) if top_k is not None else 5
    except (TypeError, ValueError):
        k = 5
    try:
        temp = float(temperature) if temperature is not None else 0.1
    except (TypeError, ValueError):
        temp = 0.1
    return SessionSettings(
        base_url=(base_url or "").strip().rstrip("/"),
        model=(model or "").strip(),
        api_key=(api_key or "").strip(),
        top_k=max(1, min(MAX_TOP_K, k)),
        temperature=max(0.0, min(2.0, temp)),
        extractive=bool(extractive),
    )


def ui_wording(message: str) -> str:
    """A library error message as a web user can act on it: no environment variables, no CLI flags."""
    text = _OPERATOR_ASIDE.sub("", message)
    text = _OPERATOR_CLAUSE.sub("", text)
    for name, said in _UI_NAMES.items():
        text = re.sub(rf"\b{name}=(\S+)", rf"{said} to \1", text)
        text = text.replace(name, said)
    text = text.replace("(or unset it to use the first)", "(or leave it blank for the first)")
    parts = _SENTENCE_BREAK.split(text)
    kept = [part for part in parts if not _OPERATOR_WORD.search(part)]
    if not kept and parts:
        # What happened is worth saying even when every sentence goes on to name a setting: keep what comes
        # before the operator's part ("cannot reach the Chroma server at ...: start it with ...").
        what = _OPERATOR_WORD.split(parts[0])[0].split(": ")[0].split("; ")[0].split(" (")[0].strip()
        kept = [f"{what}; whoever runs this server can fix it"] if len(what) > 12 else []
    text = " ".join(kept).strip().rstrip(".:;, ")
    return (text[:1].upper() + text[1:] + ".") if text else "Something went wrong."


def error_for_ui(error: PaperchatError) -> str:
    """What the chat says when a question cannot be answered: the reason, then what to do in this app."""
    text = ui_wording(str(error))
    if isinstance(error, LLMTimeout):
        return f"{text} {TIMEOUT_HINT}."
    if isinstance(error, LLMError):
        return f"{text} {SETTINGS_HINT}."
    return text


def embedded_model_starting(components: Components, settings: SessionSettings) -> bool:
    """Whether answering with these settings first starts the embedded llama.cpp server (a wait of seconds)."""
    uses_default = not settings.extractive and not settings.base_url
    return uses_default and components.answer_writer() == "embedded" and components.built_chat_model is None


@dataclass
class ChatSession:
    """One browser session's conversation."""

    history: list[Turn] = field(default_factory=list)  # what the pipeline reads back for follow-ups
    messages: list[dict] = field(default_factory=list)  # what the Chatbot shows (escaped)
    panels: dict[int, str] = field(default_factory=dict)  # index of an answer in ``messages`` -> sources HTML
    panel: str = render.SOURCES_PLACEHOLDER  # the sources panel shown now
    turn: int = 0  # bumped by every new question, stop and new chat: a stale stream stops writing
    pending: dict | None = None  # the answer being written: question, partial text, where it is shown
    notice: str = ""  # why the last question was not taken (it stays in the box); "" when it was
    answering: bool = False  # an answer is being written now: the Stop button is shown


# --- chat ------------------------------------------------------------------------------------------------------


def new_chat(session: ChatSession | None = None) -> ChatSession:
    """A fresh conversation; a stream still writing to the old one stops writing."""
    fresh = ChatSession()
    if session is not None:
        session.turn += 1
        session.pending = None
        fresh.turn = session.turn
    return fresh


class _AnswerView:
    """What one question's turn shows while its answer is written: the reasoning bubble and the answer."""

    def __init__(self, session: ChatSession, question: str) -> None:
        self.session = session
        self.question = question
        self.turn = session.turn
        self.base = [*session.messages, {"role": "user", "content": render.chat_text(question)}]
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.hits = None  # what the search found, once it has
        self.filters = ""  # the filters the answer was searched under, as the filter box says them
        self.started = time.monotonic()

    @property
    def current(self) -> bool:
        """False once a stop, a new chat or a newer question took the session over."""
        return self.session.turn == self.turn

    @property
    def partial(self) -> str:
        return "".join(self.content)

    def show(self, text: str, *, done: bool = False) -> None:
        turn_messages = []
        if self.reasoning and "".join(self.reasoning).strip():
            meta = {"title": "Reasoning", "status": "done"}
            if done:
                meta["duration"] = round(time.monotonic() - self.started, 1)
            else:
                meta["log"] = "thinking…"
            turn_messages.append(
                {"role": "assistant", "content": render.chat_text("".join(self.reasoning).strip()), "metadata": meta}
            )
        turn_messages.append({"role": "assistant", "content": text})
        self.session.messages = self.base + turn_messages
        self.session.pending = {"question": self.question, "partial": self.partial,
                                "index": len(self.session.messages) - 1, "view": self}

    def fail(self, message: str) -> None:
        """The error once, in the chat; the panel keeps the papers the search found (they are still useful)."""
        session = self.session
        if self.partial.strip():
            self.show(render.interrupted_markdown(self.partial, message))
            session.history = [*session.history, Turn.asked(self.question), Turn.cut_short(self.partial)]
        else:
            session.messages = [*self.base, {"role": "assistant", "content": render.error_markdown(message)}]
        session.panel = self.sources_so_far("no answer was written")
        session.pending = None
        session.answering = False

    def sources_so_far(self, why: str) -> str:
        if self.hits is None:
            return render.message_html(f"No sources: {why}.")
        return render.retrieved_html(self.hits, note=why)

    def finish(self, final: Answer) -> None:
        session = self.session
        if final.reasoning and not "".join(self.reasoning).strip():
            self.reasoning.append(final.reasoning)
        self.show(render.answer_markdown(final), done=True)
        session.panel = render.sources_html(final, self.filters)
        session.panels[len(session.messages) - 1] = session.panel
        session.history = [*session.history, Turn.asked(self.question), Turn.answered(final)]
        session.pending = None
        session.answering = False


def filter_wording(message: str) -> str:
    """A filter's error as the filter box takes it: its examples without the command line's ``--where``."""
    text = message.replace("--where ", "")
    return text[:1].upper() + text[1:]


def respond(
    components: Components, question: str, session: ChatSession, settings: SessionSettings, where: str = ""
) -> Iterator[ChatSession]:
    """Answer ``question`` in ``session`` from the papers passing the filters ``where`` (blank: all), yielding the
    session each time what it shows changes.

    The session's ``messages`` (for the Chatbot) and ``panel`` (sources HTML) are what to show. Errors
    become a readable assistant message; the session stays usable for the next question.
    """
    question = clean_input(question or "").strip()
    session.notice = ""
    if session.answering:
        # One answer at a time in a conversation: a second one started meanwhile would write over the first's turn
        # (Enter pressed while an answer was written lost both). The question waits in the box.
        session.notice = STILL_ANSWERING
        yield session
        return
    try:  # a question (or filter) the search would refuse is said next to the box, and stays in it to be fixed
        validate_question(question, components.settings.max_question_chars)
    except QueryError as error:
        session.notice = EMPTY_QUESTION if not question else ui_wording(str(error))
        yield session
        return
    try:
        filters = filters_in(clean_input(where or ""))
        if filters:  # reads every paper: only when there is something to check
            check_filters(components.papers(), filters)
    except QueryError as error:
        session.notice = filter_wording(str(error))
        yield session
        return
    except PaperchatError:
        pass  # the store is unreachable: the answer below says so in the chat, as without filters
    settings = replace(settings, filters=filters)
    session.turn += 1
    session.answering = True
    view = _AnswerView(session, question)
    view.filters = "; ".join(str(f) for f in filters)
    view.show("*Searching the abstracts…*")
    session.panel = render.message_html("Searching the abstracts…")
    try:
        yield session
        yield from _stream(components, question, session, settings, view)
    finally:
        if view.current:  # closed mid-answer (the browser went away): the next question is taken
            session.answering = False


def _stream(components: Components, question: str, session: ChatSession, settings: SessionSettings,
            view: _AnswerView) -> Iterator[ChatSession]:
    final: Answer | None = None
    last = 0.0
    try:
        if embedded_model_starting(components, settings):
            view.show(f"*{STARTING_EMBEDDED}*")
            session.panel = render.message_html(STARTING_EMBEDDED)
            yield session
        pipeline = components.pipeline_for(settings)
        for event in pipeline.stream(question, as_messages(session.history), k=settings.top_k):
            if not view.current:
                return  # stopped, or a new chat: this stream no longer owns the session
            if isinstance(event, SourcesEvent):
                view.hits = list(event.hits)
                session.panel = render.retrieved_html(event.hits)
                view.show("*Writing the answer…*")
                yield session
            elif isinstance(event, TextEvent):
                view.content.append(event.content)
                view.reasoning.append(event.reasoning)
                now = time.monotonic()
                if now - last >= STREAM_INTERVAL:
                    last = now
                    view.show(render.chat_text(view.partial) or "*Thinking…*")
                    yield session
            elif isinstance(event, FinalEvent):
                final = event.answer
    except PaperchatError as error:
        if view.current:
            view.fail(error_for_ui(error))
            yield session
        return
    except Exception as error:  # a bug: say so in the chat, log it, keep the app working
        log.exception("answering failed")
        if view.current:
            view.fail(f"internal error: {type(error).__name__}: {error} (this is a bug; the server log has details)")
            yield session
        return
    if not view.current:
        return
    assert final is not None, "the pipeline ended without a final answer"
    view.finish(final)
    yield session


def stop(session: ChatSession) -> ChatSession:
    """The stop button: keep what was written so far, marked as stopped, and let follow-ups use it."""
    pending = session.pending
    session.turn += 1  # the cancelled stream, if it runs on, no longer writes here
    session.pending = None
    session.answering = False
    if not pending:
        return session
    session.panel = pending["view"].sources_so_far("the answer was stopped")
    index = pending["index"]
    partial = pending["partial"]
    messages = list(session.messages)
    if 0 <= index < len(messages):
        messages[index] = {"role": "assistant", "content": render.interrupted_markdown(partial, "Stopped")}
    session.messages = messages
    if partial.strip():
        session.history = [*session.history, Turn.asked(pending["question"]), Turn.cut_short(partial)]
    return session


def select_message(session: ChatSession, index) -> str:
    """The sources panel of the answer clicked in the chat (the current panel if it has none)."""
    if isinstance(index, (list, tuple)):
        index = index[0] if index else None
    if isinstance(index, int):
        for i in range(index, len(session.messages)):  # a reasoning bubble: the answer follows it
            if i in session.panels:
                return session.panels[i]
            if session.messages[i].get("role") != "assistant" or not session.messages[i].get("metadata"):
                break
    return session.panel


# --- settings panel --------------------------------------------------------------------------------------------


def _server_endpoint(components: Components) -> str:
    """The server's endpoint URL when the server's default answer writer is that endpoint."""
    return (components.settings.llm_base_url or "") if components.answer_writer() == "endpoint" else ""


def _probe(components: Components, settings: SessionSettings, *, asked: bool = False) -> tuple[list[str] | None, str]:
    """(the endpoint's models or None, a status part) for the endpoint these settings use, if any. In extractive
    mode only when ``asked`` (the Refresh button): its answer says whether the endpoint typed there works."""
    url = settings.base_url or _server_endpoint(components)
    if not url or (settings.extractive and not asked):
        return None, ""
    try:
        models = components.list_models(url, settings.api_key, timeout=PROBE_TIMEOUT)
    except LLMAuthError:
        return None, "**Endpoint:** ✗ key rejected (check the API key in the Settings tab)"
    except ConfigError as error:  # the URL typed in the Settings tab: say what is wrong with it
        return None, f"**Endpoint:** ✗ {ui_wording(str(error))}"
    except LLMError:  # the why is said once, in the answer, when a question is asked
        return None, "**Endpoint:** ✗ not reachable"
    return models, f"**Endpoint:** ✓ reachable ({len(models)} model{'s' if len(models) != 1 else ''})"


def status(components: Components, settings: SessionSettings,
           probe: tuple[list[str] | None, str] | None = None) -> str:
    """One status line (Markdown, escaped): index size, who answers, whether the endpoint answers."""
    try:
        papers, _chunks = components.store.counts()  # chunks are how the index stores them: no reader's business
        index = f"**{counted(papers, 'paper')}** indexed"
        if resume := components.unfinished_ingest():  # an interrupted ingest: answers come from part of the papers
            index += f" (⚠ the last ingest did not finish: run `{resume}` to complete the index)"
    except PaperchatError as error:
        index = f"**Index:** unavailable ({error})"
    models, endpoint = probe if probe is not None else _probe(components, settings)
    parts = [index, f"**Answers:** {answer_writer_line(components, settings, models)}"]
    if endpoint:
        parts.append(endpoint)
    return render.chat_text(" · ".join(parts))


def answer_writer_line(components: Components, settings: SessionSettings, listed: list[str] | None = None) -> str:
    """Who writes the answers, in the status line's words: "<model> at <host>" for an endpoint."""
    if settings.extractive or (not settings.base_url and components.answer_writer() != "endpoint"):
        return describe_answer_writer(components, settings, listed)
    url = settings.base_url or components.settings.llm_base_url or ""
    model = settings.model if settings.base_url else (components.settings.llm_model or "")
    if not model:
        model = f"{listed[0]} (the endpoint's first model)" if listed else "the endpoint's first model"
    return f"{model} at {redact_url(url)}"


def refresh_settings(components: Components, settings: SessionSettings) -> tuple[list[str], str, str, str]:
    """Models offered by the session's endpoint (choices, the model to select), the status line, and what the
    Settings tab says beside its Refresh button (Markdown): whether the endpoint answered and what to do if not.
    The header line alone said "not reachable", out of sight of the button."""
    probe = _probe(components, settings, asked=True)
    models = probe[0] or []
    chosen = settings.model if settings.model else (models[0] if models else "")
    choices = list(dict.fromkeys([*models, *([settings.model] if settings.model else [])]))
    return choices, chosen, status(components, settings, probe), endpoint_note(components, settings, probe)


def endpoint_note(components: Components, settings: SessionSettings, probe: tuple[list[str] | None, str]) -> str:
    """The Settings tab's word on the endpoint just asked for its models ("" when none was asked)."""
    models, said = probe
    url = settings.base_url or _server_endpoint(components)
    if not said or not url:
        return ""
    where = render.code_span(redact_url(url))  # as typed, not a link to follow
    if models is not None:
        listed = ", ".join(models[:5]) + (f" and {len(models) - 5} more" if len(models) > 5 else "")
        return f"✓ {where} answered: " + render.plain_markdown(
            counted(len(models), "model") + (f" ({listed})" if listed else "") + ".")
    if "not reachable" in said:
        return (f"✗ {where} is not reachable: no models listed. Check the URL and that a server runs there, leave it "
                "blank for the server's default, or tick extractive mode.")
    return said.replace("**Endpoint:** ", "")  # already said as a web user can act on it (_probe)


# --- papers tab ------------------------------------------------------------------------------------------------


def search_papers(components: Components, query: str) -> str:
    try:
        papers = components.papers()
    except PaperchatError as error:
        return render.message_html(str(error))
    query = query or ""
    return render.papers_html(filter_papers(papers, query), len(papers), query)


# --- API -------------------------------------------------------------------------------------------------------


def api_chat(components: Components, question: str) -> str:
    """``/chat``: one question, no history, the server's settings; the answer followed by its sources.

    Raises ``PaperchatError`` (a one-line message) when it cannot answer.
    """
    question = clean_input(question or "").strip() if isinstance(question, str) else ""
    if not question:
        raise QueryError("ask a question, e.g. \"Which papers use state-space models for client selection?\"")
    defaults = components.session_defaults()
    answer = components.pipeline_for(defaults).answer(question, [], k=defaults.top_k)
    return answer_text(answer)
