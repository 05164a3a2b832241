"""What the web UI does, as plain functions: no Gradio here, so every callback is tested without a browser.

``Services`` holds what all sessions share (the index, the embedder, the default pipeline) and builds
per-session pipelines from a session's settings (endpoint, model, key, temperature, extractive), cached
per distinct settings. ``ChatSession`` is one browser session's conversation; the app keeps one per
session in a ``gr.State``, never globally, so users never see each other's answers.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from rag.answers.pipeline import AnswerPipeline, FinalEvent, PipelineConfig, SourcesEvent, TextEvent
from rag.errors import ConfigError, LLMAuthError, LLMError, PaperchatError, QueryError
from rag.redact import redact_url
from rag.text import clean_input
from rag.types import Answer, Paper
from ui.web import render

log = logging.getLogger("paperchat.ui")

STREAM_INTERVAL = 0.05  # seconds between UI updates while an answer streams
PROBE_TIMEOUT = 3.0  # seconds to wait for an endpoint's model list in the status line
MAX_TOP_K = 20
MAX_CACHED_PIPELINES = 16
SETTINGS_HINT = "In this app: check the endpoint URL, model and API key in the Settings tab, or tick extractive mode"


@dataclass(frozen=True)
class SessionSettings:
    """One session's answer settings, from the settings panel. ``api_key`` never appears in a repr."""

    base_url: str = ""  # blank: the server's default backend
    model: str = ""  # blank: the endpoint's first listed model
    api_key: str = field(default="", repr=False)
    top_k: int = 5
    temperature: float = 0.1
    extractive: bool = False

    @classmethod
    def from_inputs(cls, base_url, model, api_key, top_k, temperature, extractive) -> SessionSettings:
        """From the panel's raw values (None, floats from sliders, stray spaces)."""
        try:
            k = int(top_k) if top_k is not None else 5
        except (TypeError, ValueError):
            k = 5
        try:
            temp = float(temperature) if temperature is not None else 0.1
        except (TypeError, ValueError):
            temp = 0.1
        return cls(
            base_url=(base_url or "").strip().rstrip("/"),
            model=(model or "").strip(),
            api_key=(api_key or "").strip(),
            top_k=max(1, min(MAX_TOP_K, k)),
            temperature=max(0.0, min(2.0, temp)),
            extractive=bool(extractive),
        )


@dataclass
class ChatSession:
    """One browser session's conversation."""

    history: list[dict] = field(default_factory=list)  # what the pipeline reads: role, content, papers
    messages: list[dict] = field(default_factory=list)  # what the Chatbot shows (escaped)
    panels: dict[int, str] = field(default_factory=dict)  # index of an answer in ``messages`` -> sources HTML
    panel: str = render.SOURCES_PLACEHOLDER  # the sources panel shown now
    turn: int = 0  # bumped by every new question, stop and new chat: a stale stream stops writing
    pending: dict | None = None  # the answer being written: question, partial text, where it is shown


def display_url(url: str) -> str:
    """``url`` without user:password@ (never shown)."""
    return redact_url(url)


def check_url(url: str) -> str:
    if not url.startswith(("http://", "https://")):
        raise ConfigError(
            f"the endpoint URL {display_url(url)!r} must start with http:// or https://, e.g. http://127.0.0.1:11434/v1"
        )
    return url


class Services:
    """What every session shares, and the per-session pipelines built from it."""

    def __init__(self, components, *, probe_timeout: float = PROBE_TIMEOUT) -> None:
        self.components = components
        self.settings = components.settings
        self.probe_timeout = probe_timeout
        self._lock = threading.RLock()
        self._pipelines: OrderedDict[tuple, AnswerPipeline] = OrderedDict()
        self._chat_models: list = []
        self._papers: tuple[int, list[Paper]] | None = None

    # --- defaults ------------------------------------------------------------------------------

    def defaults(self) -> SessionSettings:
        """The settings a new session starts with (the server's). The server's key is never handed out."""
        return SessionSettings(
            base_url=display_url(self.settings.llm_base_url or ""),  # its password stays on the server
            model=self.settings.llm_model or "",
            top_k=min(MAX_TOP_K, self.settings.top_k),
            temperature=self.settings.llm_temperature,
            extractive=self.components.backend_kind() == "extractive",
        )

    def warm_up(self) -> None:
        """Load the embedder and the retriever's tables now, so the first question is not slow."""
        with self._lock:
            self.components.retriever.refresh()
            self.components.embedder.embed(["warm up"])

    def default_pipeline(self) -> AnswerPipeline:
        with self._lock:  # the embedded server must start once, however many sessions ask at once
            return self.components.pipeline

    def real_url(self, url: str) -> str:
        """The server's own endpoint URL (credentials included) for the URL a session sees of it, else ``url``."""
        server = self.settings.llm_base_url or ""
        if server and url and url == display_url(server):
            return server
        return url

    def _server_key(self, url: str) -> str:
        """The server's configured API key, only for the server's configured URL (never sent elsewhere)."""
        key = self.settings.llm_api_key
        if key is None or url != (self.settings.llm_base_url or ""):
            return ""
        return key.get_secret_value()

    def _chat_model(self, url: str, model: str, api_key: str, temperature: float, *, timeout=None, retries=None):
        from rag.llm.client import OpenAIChatModel

        url = self.real_url(url)

        return OpenAIChatModel(
            url,
            api_key=api_key or self._server_key(url) or None,
            model=model or None,
            timeout=timeout if timeout is not None else self.settings.llm_timeout,
            retries=retries if retries is not None else self.settings.llm_retries,
            temperature=temperature,
            max_tokens=self.settings.llm_max_tokens,
        )

    def _config(self, temperature: float, *, small_model: bool = False) -> PipelineConfig:
        s = self.settings
        return PipelineConfig(
            top_k=s.top_k, context_window=s.llm_context_window, max_tokens=s.llm_max_tokens,
            temperature=temperature, min_relevance=s.min_relevance, small_model=small_model,
            small_model_design=s.embedded_answer,
        )

    def pipeline_for(self, session: SessionSettings) -> AnswerPipeline:
        """The pipeline for a session's settings: the shared default one, or one cached per distinct settings."""
        if session.extractive:
            key: tuple = ("extractive",)
        elif not session.base_url:
            default = self.default_pipeline()
            if default.chat_model is None or session.temperature == default.config.temperature:
                return default
            key = ("default", session.temperature)
        else:
            url = self.real_url(check_url(session.base_url))
            same_as_server = (
                self.components.backend_kind() == "endpoint"
                and url == (self.settings.llm_base_url or "")
                and session.model == (self.settings.llm_model or "")
                and not session.api_key
                and session.temperature == self.settings.llm_temperature
            )
            if same_as_server:
                return self.default_pipeline()
            digest = hashlib.sha256(session.api_key.encode()).hexdigest() if session.api_key else ""
            key = ("endpoint", url, session.model, digest, session.temperature)
        with self._lock:
            if key in self._pipelines:
                self._pipelines.move_to_end(key)
                return self._pipelines[key]
            pipeline = self._build(key, session)
            self._pipelines[key] = pipeline
            while len(self._pipelines) > MAX_CACHED_PIPELINES:
                self._pipelines.popitem(last=False)  # its chat model is closed at shutdown
            return pipeline

    def _build(self, key: tuple, session: SessionSettings) -> AnswerPipeline:
        retriever, embedder = self.components.retriever, self.components.embedder
        if key[0] == "extractive":
            return AnswerPipeline(retriever, embedder, None, config=self._config(session.temperature))
        if key[0] == "default":
            default = self.default_pipeline()
            return AnswerPipeline(
                retriever, embedder, default.chat_model, config=replace(default.config, temperature=session.temperature)
            )
        chat_model = self._chat_model(session.base_url, session.model, session.api_key, session.temperature)
        self._chat_models.append(chat_model)
        return AnswerPipeline(retriever, embedder, chat_model, config=self._config(session.temperature))

    # --- endpoint, index -----------------------------------------------------------------------

    def list_models(self, base_url: str, api_key: str = "") -> list[str]:
        """The models an endpoint lists (short timeout, no retries); raises an ``LLMError``."""
        url = check_url(base_url.strip().rstrip("/"))
        model = self._chat_model(url, "", api_key.strip(), self.settings.llm_temperature,
                                 timeout=self.probe_timeout, retries=0)
        try:
            return model.list_models()
        finally:
            model.close()

    def counts(self) -> tuple[int, int]:
        return self.components.store.counts()

    def papers(self) -> list[Paper]:
        """Every paper in the index, by source and position; re-read only when the index changed."""
        store = self.components.store
        generation = store.generation()
        with self._lock:
            if self._papers is None or self._papers[0] != generation:
                papers = sorted(store.iter_papers(), key=lambda p: (p.source, p.ordinal, p.paper_id))
                self._papers = (generation, papers)
            return self._papers[1]

    def close(self) -> None:
        """Close the per-session chat clients and the shared components (stops the embedded LLM)."""
        with self._lock:
            models, self._chat_models = self._chat_models, []
            self._pipelines.clear()
        for model in models:
            try:
                model.close()
            except Exception:  # closing must go on for the rest
                log.exception("closing a chat model failed")
        self.components.close()


# --- chat ------------------------------------------------------------------------------------------------------


def new_chat(session: ChatSession | None = None) -> ChatSession:
    """A fresh conversation; a stream still writing to the old one stops writing."""
    fresh = ChatSession()
    if session is not None:
        session.turn += 1
        session.pending = None
        fresh.turn = session.turn
    return fresh


def respond(
    services: Services, question: str, session: ChatSession, settings: SessionSettings
) -> Iterator[ChatSession]:
    """Answer ``question`` in ``session``, yielding the session each time what it shows changes.

    The session's ``messages`` (for the Chatbot) and ``panel`` (sources HTML) are what to show. Errors
    become a readable assistant message; the session stays usable for the next question.
    """
    question = clean_input(question or "").strip()
    if not question:
        yield session
        return
    session.turn += 1
    turn = session.turn
    base = [*session.messages, {"role": "user", "content": render.chat_text(question)}]
    content: list[str] = []
    reasoning: list[str] = []
    started = time.monotonic()

    def show(answer_text: str, *, done: bool = False) -> None:
        turn_messages = []
        if reasoning and "".join(reasoning).strip():
            elapsed = time.monotonic() - started
            meta = {"title": "Reasoning", "status": "done"}
            if done:
                meta["duration"] = round(elapsed, 1)
            else:
                meta["log"] = "thinking…"
            turn_messages.append(
                {"role": "assistant", "content": render.chat_text("".join(reasoning).strip()), "metadata": meta}
            )
        turn_messages.append({"role": "assistant", "content": answer_text})
        session.messages = base + turn_messages
        session.pending = {"question": question, "partial": "".join(content), "index": len(session.messages) - 1}

    def current() -> bool:
        return session.turn == turn

    show("*Searching the abstracts…*")
    session.panel = render.message_html("Searching the abstracts…")
    yield session

    final: Answer | None = None
    last = 0.0
    try:
        pipeline = services.pipeline_for(settings)
        for event in pipeline.stream(question, session.history, k=settings.top_k):
            if not current():
                return  # stopped, or a new chat: this stream no longer owns the session
            if isinstance(event, SourcesEvent):
                session.panel = render.retrieved_html(event.hits)
                show("*Writing the answer…*")
                yield session
            elif isinstance(event, TextEvent):
                content.append(event.content)
                reasoning.append(event.reasoning)
                now = time.monotonic()
                if now - last >= STREAM_INTERVAL:
                    last = now
                    show(render.chat_text("".join(content)) or "*Thinking…*")
                    yield session
            elif isinstance(event, FinalEvent):
                final = event.answer
    except PaperchatError as error:
        if not current():
            return
        message = str(error)
        if isinstance(error, LLMError):
            message += f". {SETTINGS_HINT}"
        _fail(session, question, "".join(content), message, base, show)
        yield session
        return
    except Exception as error:  # a bug: say so in the chat, log it, keep the app working
        log.exception("answering failed")
        if not current():
            return
        message = f"internal error: {type(error).__name__}: {error} (this is a bug; the server log has details)"
        _fail(session, question, "".join(content), message, base, show)
        yield session
        return
    if not current():
        return
    assert final is not None, "the pipeline ended without a final answer"
    if final.reasoning and not "".join(reasoning).strip():
        reasoning.append(final.reasoning)
    show(render.answer_markdown(final), done=True)
    index = len(session.messages) - 1
    session.panel = render.sources_html(final)
    session.panels[index] = session.panel
    session.history = [*session.history, {"role": "user", "content": question}, render.history_entry(final)]
    session.pending = None
    yield session


def _fail(session: ChatSession, question: str, partial: str, message: str, base: list[dict], show) -> None:
    if partial.strip():
        show(render.interrupted_markdown(partial, message))
        session.history = [*session.history, {"role": "user", "content": question},
                           {"role": "assistant", "content": partial.strip(), "papers": []}]
    else:
        session.messages = [*base, {"role": "assistant", "content": render.error_markdown(message)}]
    session.panel = render.message_html(message)
    session.pending = None


def stop(session: ChatSession) -> ChatSession:
    """The stop button: keep what was written so far, marked as stopped, and let follow-ups use it."""
    pending = session.pending
    session.turn += 1  # the cancelled stream, if it runs on, no longer writes here
    session.pending = None
    if not pending:
        return session
    index = pending["index"]
    partial = pending["partial"]
    messages = list(session.messages)
    if 0 <= index < len(messages):
        messages[index] = {"role": "assistant", "content": render.interrupted_markdown(partial, "Stopped")}
    session.messages = messages
    if partial.strip():
        session.history = [*session.history, {"role": "user", "content": pending["question"]},
                           {"role": "assistant", "content": partial.strip(), "papers": []}]
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


def backend_description(services: Services, settings: SessionSettings, listed: list[str] | None = None) -> str:
    """Who answers for these settings; ``listed``: the endpoint's models, if known (names the default one)."""
    if settings.extractive:
        return "extractive: quoted sentences from the abstracts, no LLM"
    kind = "endpoint" if settings.base_url else services.components.backend_kind()
    if kind == "endpoint":
        url = settings.base_url or services.settings.llm_base_url or ""
        model = settings.model if settings.base_url else (services.settings.llm_model or "")
        if not model:
            model = f"{listed[0]} (first listed)" if listed else "the first listed model"
        return f"endpoint {model} @ {display_url(url)}"
    if kind == "embedded":
        chat_model = services.components.__dict__.get("chat_model")
        if chat_model is not None:
            return chat_model.label + " (embedded, a tiny model; connect an endpoint for better answers)"
        return ("embedded llama.cpp model (starts with the first question; a tiny model, "
                "connect an endpoint for better answers)")
    return "extractive: quoted sentences from the abstracts, no LLM"


def _server_endpoint(services: Services) -> str:
    """The server's endpoint URL when the server's default backend is that endpoint."""
    return (services.settings.llm_base_url or "") if services.components.backend_kind() == "endpoint" else ""


def _probe(services: Services, settings: SessionSettings) -> tuple[list[str] | None, str]:
    """(the endpoint's models or None, a status part) for the endpoint these settings use, if any."""
    url = settings.base_url or _server_endpoint(services)
    if not url or settings.extractive:
        return None, ""
    try:
        models = services.list_models(url, settings.api_key)
    except LLMAuthError as error:
        return None, f"**Endpoint:** ✗ key rejected: {error}"
    except (LLMError, ConfigError) as error:
        return None, f"**Endpoint:** ✗ not reachable: {error}"
    return models, f"**Endpoint:** ✓ reachable ({len(models)} model{'s' if len(models) != 1 else ''})"


def status(services: Services, settings: SessionSettings, probe: tuple[list[str] | None, str] | None = None) -> str:
    """One status line (Markdown, escaped): index size, who answers, whether the endpoint answers."""
    try:
        papers, chunks = services.counts()
        index = f"**Index:** {papers} papers, {chunks} chunks"
    except PaperchatError as error:
        index = f"**Index:** unavailable ({error})"
    models, endpoint = probe if probe is not None else _probe(services, settings)
    parts = [index, f"**Backend:** {backend_description(services, settings, models)}"]
    if endpoint:
        parts.append(endpoint)
    return render.chat_text(" · ".join(parts))


def refresh_models(services: Services, settings: SessionSettings) -> tuple[list[str], str, str]:
    """Models offered by the session's endpoint: (choices, the model to select, status line)."""
    probe = _probe(services, settings)
    models = probe[0] or []
    chosen = settings.model if settings.model else (models[0] if models else "")
    choices = list(dict.fromkeys([*models, *([settings.model] if settings.model else [])]))
    return choices, chosen, status(services, settings, probe)


# --- papers tab ------------------------------------------------------------------------------------------------


def search_papers(services: Services, query: str) -> str:
    try:
        papers = services.papers()
    except PaperchatError as error:
        return render.message_html(str(error))
    query = query or ""
    return render.papers_html(render.filter_papers(papers, query), len(papers), query)


# --- API -------------------------------------------------------------------------------------------------------


def api_chat(services: Services, question: str) -> str:
    """``/chat``: one question, no history, the server's settings; the answer followed by its sources.

    Raises ``PaperchatError`` (a one-line message) when it cannot answer.
    """
    question = clean_input(question or "").strip() if isinstance(question, str) else ""
    if not question:
        raise QueryError("ask a question, e.g. \"Which papers use state-space models for client selection?\"")
    defaults = services.defaults()
    answer = services.pipeline_for(defaults).answer(question, [], k=defaults.top_k)
    return render.api_text(answer)
