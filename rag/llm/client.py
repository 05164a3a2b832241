"""The chat model seam: stream answers from any OpenAI-compatible chat-completions endpoint.

:class:`ChatModel` is what the answer pipeline talks to; :class:`OpenAIChatModel` implements it over
httpx for Ollama, llama.cpp's ``llama-server``, vLLM, LM Studio, OpenAI and the like. It streams with
Server-Sent Events and copes with what real servers do: ``data: [DONE]``, usage-only chunks, keep-alive
comments, reasoning sent as ``reasoning_content`` / ``reasoning`` or inside ``<think>...</think>``,
servers that ignore or refuse ``"stream": true``. Connection errors, 429 and 5xx are retried with
exponential backoff, but never once part of an answer has been handed out.

Every failure surfaces as exactly one :class:`rag.errors.LLMError` subclass whose one-line message
says what happened and what to do. The API key is sent only in the ``Authorization`` header: it is
kept out of every message, ``repr`` and log line, even when a server echoes it back.
"""

from __future__ import annotations

import base64
import codecs
import contextlib
import email.utils
import json
import logging
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NoReturn, Protocol, runtime_checkable
from urllib.parse import urlsplit

import httpx

from rag.errors import (
    LLMAuthError,
    LLMError,
    LLMInterrupted,
    LLMModelNotFound,
    LLMProtocolError,
    LLMRateLimited,
    LLMServerError,
    LLMTimeout,
    LLMUnavailable,
)
from rag.llm.sse import SSEEvent, SSEParser
from rag.redact import redact_secrets, redact_url, url_credentials

_log = logging.getLogger(__name__)

MAX_BACKOFF = 8.0  # seconds: cap of the exponential backoff between retries
MAX_RETRY_AFTER = 30.0  # seconds: cap on a server's Retry-After
EXCERPT_CHARS = 200  # longest excerpt of a server's error message quoted in our messages
_MAX_ERROR_BODY = 64 * 1024  # bytes of an error reply we read at most
# One answer (all its attempts) must be complete this many PAPERCHAT_LLM_TIMEOUTs after it was asked for:
# the timeout alone bounds each wait for a byte, not a stream kept open by ": ping" comments or a word at a time.
ANSWER_DEADLINE_FACTOR = 3
# The most answer text (content + reasoning) accepted per requested token, and at least MIN_ANSWER_CHARS:
# a token is about 4 characters, so an endpoint that goes past this ignores max_tokens.
ANSWER_CHARS_PER_TOKEN = 16
MIN_ANSWER_CHARS = 16_000
MAX_REPLY_BYTES = 8 * 1024 * 1024  # bytes of one reply read at most (events, comments and all)
_START_HINT = (
    "Start a server there (e.g. `ollama serve`, `llama-server -m MODEL.gguf --port 8080`) "
    "or set PAPERCHAT_LLM_BASE_URL, or use --extractive"
)
_THINK_OPEN = "<think>"
_THINK_CLOSE = "</think>"


@dataclass(frozen=True)
class Delta:
    """One piece of a streamed reply."""

    content: str = ""  # answer text
    reasoning: str = ""  # reasoning text (reasoning_content / reasoning fields, or inside <think>...</think>)


@runtime_checkable
class ChatModel(Protocol):
    """The seam the answer pipeline uses to get an answer written."""

    @property
    def label(self) -> str:
        """Who writes the answer, for display, e.g. ``endpoint: gpt-4o-mini @ http://127.0.0.1:8080/v1``."""
        ...

    def stream(
        self, messages: list[dict[str, str]], *, max_tokens: int | None = None, temperature: float | None = None
    ) -> Iterator[Delta]:
        """Yield the reply piece by piece; raise an ``LLMError`` on failure."""
        ...


class ThinkSplitter:
    """Moves text inside ``<think>...</think>`` at the start of an answer's content to reasoning.

    Reasoning models (Qwen3, DeepSeek-R1 distills, ...) served without a reasoning parser put their
    thoughts in the content. Tags may arrive split across chunks (``<th`` + ``ink>``): text that could
    still be the start of a tag is held back until the next piece decides. Only a ``<think>`` that opens
    the content (after whitespace) counts, so an answer that merely mentions the tag is left alone.
    Whitespace right after ``</think>`` is dropped.
    """

    def __init__(self) -> None:
        self._state = "start"  # "start": nothing decided yet; "think": inside the tags; "content": after
        self._buffer = ""
        self._strip_leading = False

    def feed(self, text: str) -> tuple[str, str]:
        """Return the ``(content, reasoning)`` that can be released after ``text``."""
        content: list[str] = []
        reasoning: list[str] = []
        self._buffer += text
        while self._buffer:
            if self._state == "start":
                stripped = self._buffer.lstrip()
                if stripped.startswith(_THINK_OPEN):
                    self._state = "think"
                    self._buffer = stripped[len(_THINK_OPEN) :]
                elif not stripped or _THINK_OPEN.startswith(stripped):
                    break  # could still become "<think>": wait for more
                else:
                    self._state = "content"
            elif self._state == "think":
                end = self._buffer.find(_THINK_CLOSE)
                if end >= 0:
                    reasoning.append(self._buffer[:end])
                    self._buffer = self._buffer[end + len(_THINK_CLOSE) :]
                    self._state = "content"
                    self._strip_leading = True
                else:
                    keep = _partial_tag_suffix(self._buffer, _THINK_CLOSE)
                    reasoning.append(self._buffer[: len(self._buffer) - keep])
                    self._buffer = self._buffer[len(self._buffer) - keep :]
                    break
            else:
                content.append(self._release_content(self._buffer))
                self._buffer = ""
        return "".join(content), "".join(reasoning)

    def held_content(self) -> str:
        """Answer text held back so far (possibly the start of a tag)."""
        return "" if self._state == "think" else self._buffer

    def flush(self) -> tuple[str, str]:
        """End of the answer: release whatever is held back."""
        held, self._buffer = self._buffer, ""
        if self._state == "think":
            return "", held  # the model stopped while still thinking
        return self._release_content(held), ""

    def _release_content(self, text: str) -> str:
        if self._strip_leading:
            text = text.lstrip()
            if text:
                self._strip_leading = False
        return text


def _partial_tag_suffix(text: str, tag: str) -> int:
    """Length of the longest end of ``text`` that is a proper beginning of ``tag``."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0


@dataclass
class _StreamState:
    """What one request has produced so far."""

    yielded: bool = False  # a Delta has been handed out: no retry from here on
    content: list[str] = field(default_factory=list)  # answer text handed out
    chunks: int = 0  # well-formed completion chunks received
    finish_reason: str | None = None
    done: bool = False  # "[DONE]" or a complete non-streamed reply
    response_started: bool = False  # a 2xx status line arrived
    splitter: ThinkSplitter = field(default_factory=ThinkSplitter)
    deadline: float = float("inf")  # time.monotonic() by which the whole answer must be in
    max_chars: int = MIN_ANSWER_CHARS  # most content + reasoning characters accepted
    chars: int = 0  # content + reasoning characters handed out
    bytes_read: int = 0
    cut: str | None = None  # why the reply was cut short ("deadline", "size"), if it was

    @property
    def partial(self) -> str:
        return "".join(self.content) + self.splitter.held_content()

    @property
    def complete(self) -> bool:
        return self.done or self.finish_reason is not None


class _RetryableError(Exception):
    """Internal: this attempt failed in a way worth retrying; ``error`` is raised if no retry is left."""

    def __init__(self, error: LLMError, reason: str, wait: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.reason = reason  # a few words for the log line
        self.wait = wait


class _Secret:
    """Holds the API key so that no ``repr``, ``vars()`` dump or traceback local shows it."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "'***'"


class _StreamRefusedError(Exception):
    """Internal: the server refused ``"stream": true``; ask again without streaming."""


class OpenAIChatModel:
    """A :class:`ChatModel` for any server that speaks the OpenAI chat-completions API.

    The httpx client is created on first use and closed by :meth:`close` (or ``with``).
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        model: str | None = None,
        timeout: float = 60.0,
        retries: int = 2,
        temperature: float = 0.1,
        max_tokens: int = 512,
        backoff: float = 0.5,
        transport: httpx.BaseTransport | None = None,
        label_prefix: str = "endpoint",
        local: bool = False,
    ) -> None:
        self.base_url = base_url.strip().rstrip("/")
        self._secret = _Secret(api_key) if api_key else None
        self.model = model or None
        self.timeout = float(timeout)
        self.retries = max(0, int(retries))
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.backoff = max(0.0, float(backoff))
        self.label_prefix = label_prefix
        self._local = local
        self._transport = transport
        self._client: httpx.Client | None = None
        self._client_lock = threading.Lock()
        self._resolved_model: str | None = None
        self._shown_url = redact_url(self.base_url)
        # Credentials in the URL are sent as a header, never as part of the URL (httpx would turn them into
        # an Authorization header that replaces the API key's).
        self._request_url = self._shown_url
        credentials = url_credentials(self.base_url)
        self._basic = _Secret(":".join(credentials)) if credentials else None

    @property
    def _api_key(self) -> str | None:
        return self._secret.value if self._secret is not None else None

    @property
    def _secrets(self) -> list[str | None]:
        """Everything never to show: the API key, and the URL's password."""
        password = self._basic.value.partition(":")[2] if self._basic is not None else None
        return [self._api_key, password]

    @property
    def answer_deadline(self) -> float:
        """Seconds a whole answer may take, retries included: ``ANSWER_DEADLINE_FACTOR`` x the timeout."""
        return ANSWER_DEADLINE_FACTOR * self.timeout

    def max_chars_for(self, max_tokens: int | None = None) -> int:
        """The most answer text (content + reasoning) accepted for a request of ``max_tokens``."""
        tokens = self.max_tokens if max_tokens is None else max_tokens
        return max(MIN_ANSWER_CHARS, ANSWER_CHARS_PER_TOKEN * int(tokens))

    @property
    def max_answer_chars(self) -> int:
        return self.max_chars_for()

    @classmethod
    def from_settings(cls, settings: Any) -> OpenAIChatModel:
        """Build from :class:`rag.settings.Settings` (``llm_base_url`` must be set)."""
        if not settings.llm_base_url:
            raise LLMUnavailable(
                "no LLM endpoint is configured. Set PAPERCHAT_LLM_BASE_URL (e.g. http://127.0.0.1:11434/v1), "
                "or use --extractive"
            )
        key = settings.llm_api_key
        if key is not None and hasattr(key, "get_secret_value"):
            key = key.get_secret_value()
        return cls(
            settings.llm_base_url,
            api_key=key,
            model=settings.llm_model,
            timeout=settings.llm_timeout,
            retries=settings.llm_retries,
            temperature=settings.llm_temperature,
            max_tokens=settings.llm_max_tokens,
        )

    # --- identity ------------------------------------------------------------------------------

    @property
    def label(self) -> str:
        model = self.model or self._resolved_model or "first listed model"
        if self._local:
            return f"{self.label_prefix}: {model}"  # an embedded server's port means nothing to the user
        return f"{self.label_prefix}: {model} @ {self._shown_url}"

    @property
    def label_url(self) -> str:
        """The endpoint URL as shown: without ``user:password@``."""
        return self._shown_url

    def __repr__(self) -> str:
        key = "'***'" if self._api_key else "None"
        return f"OpenAIChatModel(base_url={self._shown_url!r}, model={self.model!r}, api_key={key})"

    # --- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        with self._client_lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def __enter__(self) -> OpenAIChatModel:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _http(self) -> httpx.Client:
        with self._client_lock:
            if self._client is None:
                host = (urlsplit(self.base_url).hostname or "").lower()
                self._client = httpx.Client(
                    timeout=httpx.Timeout(self.timeout),
                    transport=self._transport,
                    # a proxy from the environment must not capture a server on this machine
                    trust_env=host not in ("127.0.0.1", "localhost", "::1", "0.0.0.0"),
                )
            return self._client

    def _headers(self) -> dict[str, str]:
        """The API key as ``Authorization: Bearer``, what OpenAI-compatible servers read. The URL's
        ``user:password`` goes in ``Authorization: Basic`` when there is no key; with a key too, in
        ``Proxy-Authorization: Basic`` (one header cannot carry both; a proxy asking for a login reads that)."""
        headers = {"Accept": "text/event-stream, application/json"}
        basic = f"Basic {base64.b64encode(self._basic.value.encode()).decode()}" if self._basic else None
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
            if basic:
                headers["Proxy-Authorization"] = basic
        elif basic:
            headers["Authorization"] = basic
        return headers

    # --- models --------------------------------------------------------------------------------

    def list_models(self) -> list[str]:
        """The model ids the server lists at ``GET {base_url}/models``."""
        url = f"{self._request_url}/models"
        attempt = 0
        while True:
            try:
                return self._list_models_once(url, attempt)
            except _RetryableError as retry:
                attempt = self._before_retry(retry, attempt)

    def _list_models_once(self, url: str, attempt: int) -> list[str]:
        try:
            response = self._http().get(url, headers=self._headers())
        except httpx.TimeoutException as e:
            raise self._timeout_error("listing models") from e
        except httpx.TransportError as e:
            raise _RetryableError(self._unreachable_error(e), _reason(e)) from e
        except (httpx.HTTPError, httpx.InvalidURL) as e:
            raise self._odd_http_error(e) from e
        if response.status_code >= 400:
            detail = _error_detail(response.content, self._secrets)
            if response.status_code == 404:
                self._fail(
                    LLMUnavailable,
                    self._missing_path_message(f"{self._shown_url}/models")
                    + " (or set PAPERCHAT_LLM_MODEL if the server has no model list)",
                )
            self._raise_for_status(response, detail, attempt)
        try:
            payload = response.json()
        except (ValueError, RecursionError) as e:
            raise self._not_json_error(response.text, "/models") from e
        entries = payload.get("data") if isinstance(payload, dict) else payload
        if isinstance(payload, dict) and entries is None:
            entries = payload.get("models")
        if not isinstance(entries, list):
            self._fail(
                LLMProtocolError,
                f"the LLM endpoint at {self._shown_url} answered /models without a model list. "
                "Check that PAPERCHAT_LLM_BASE_URL points at an OpenAI-compatible API, or set PAPERCHAT_LLM_MODEL",
            )
        ids = []
        for entry in entries:
            ident = entry.get("id") or entry.get("model") or entry.get("name") if isinstance(entry, dict) else entry
            if isinstance(ident, str) and ident:
                ids.append(ident)
        return ids

    def resolve_model(self) -> str:
        """The configured model, else the first one the server lists."""
        if self.model:
            return self.model
        if self._resolved_model is None:
            models = self.list_models()
            if not models:
                self._fail(
                    LLMModelNotFound,
                    f"the LLM endpoint at {self._shown_url} lists no models at /models. Load one in the server "
                    "(e.g. `ollama pull qwen2.5:0.5b`) or set PAPERCHAT_LLM_MODEL",
                )
            self._resolved_model = models[0]
        return self._resolved_model

    # --- chat ----------------------------------------------------------------------------------

    def complete(
        self, messages: list[dict[str, str]], *, max_tokens: int | None = None, temperature: float | None = None
    ) -> tuple[str, str]:
        """The whole reply as ``(content, reasoning)``."""
        content: list[str] = []
        reasoning: list[str] = []
        for delta in self.stream(messages, max_tokens=max_tokens, temperature=temperature):
            content.append(delta.content)
            reasoning.append(delta.reasoning)
        return "".join(content), "".join(reasoning)

    def stream(
        self, messages: list[dict[str, str]], *, max_tokens: int | None = None, temperature: float | None = None
    ) -> Iterator[Delta]:
        """``POST {base_url}/chat/completions`` and yield the reply as it arrives."""
        body: dict[str, Any] = {
            "model": self.resolve_model(),
            "messages": messages,
            "stream": True,
            "temperature": self.temperature if temperature is None else temperature,
            "max_tokens": self.max_tokens if max_tokens is None else max_tokens,
        }
        deadline = time.monotonic() + self.answer_deadline
        max_chars = self.max_chars_for(body["max_tokens"])
        attempt = 0
        while True:
            state = _StreamState(deadline=deadline, max_chars=max_chars)
            try:
                yield from self._chat_once(body, attempt, state)
                return
            except _StreamRefusedError:
                _log.info("LLM endpoint %s refused streaming; asking without it", self._shown_url)
                body = {**body, "stream": False}
            except _RetryableError as retry:
                attempt = self._before_retry(retry, attempt, deadline)

    def _before_retry(self, retry: _RetryableError, attempt: int, deadline: float = float("inf")) -> int:
        """Sleep before the next attempt, or raise the final error when no retry is left (or no time)."""
        if attempt >= self.retries:
            raise retry.error from retry.__cause__
        wait = backoff_delay(self.backoff, attempt) if retry.wait is None else retry.wait
        if time.monotonic() + wait >= deadline:
            raise retry.error from retry.__cause__
        _log.warning(
            "LLM endpoint %s: %s; retrying in %.2f s (attempt %d of %d)",
            self._shown_url,
            retry.reason,
            wait,
            attempt + 2,
            self.retries + 1,
        )
        time.sleep(wait)
        return attempt + 1

    def _chat_once(self, body: dict[str, Any], attempt: int, state: _StreamState) -> Iterator[Delta]:
        url = f"{self._request_url}/chat/completions"
        remaining = state.deadline - time.monotonic()
        if remaining <= 0:
            raise self._deadline_error(state)
        # No single wait for a byte may outlast the answer's deadline.
        timeout = httpx.Timeout(min(self.timeout, remaining))
        try:
            with self._http().stream("POST", url, json=body, headers=self._headers(), timeout=timeout) as response:
                watchdog = _Watchdog(response, state)
                try:
                    if response.status_code >= 400:
                        raw = _read_limited(response)
                        self._handle_error_status(response, raw, body, attempt)
                    state.response_started = True
                    yield from self._read_reply(response, bool(body["stream"]), state)
                finally:
                    watchdog.cancel()
        except httpx.TimeoutException as e:
            self._raise_if_cut(state, e)
            if state.complete:
                return  # the answer was whole; only the goodbye was slow
            if state.yielded:
                raise LLMInterrupted(
                    self._redact(
                        f"the LLM endpoint at {self._shown_url} stopped sending for {self.timeout:g} s in the middle "
                        f"of the answer (PAPERCHAT_LLM_TIMEOUT={self.timeout:g}); showing the part that arrived. "
                        "Ask again, or raise PAPERCHAT_LLM_TIMEOUT"
                    ),
                    partial=state.partial,
                ) from e
            raise self._timeout_error("answering") from e
        except httpx.TransportError as e:
            self._raise_if_cut(state, e)
            if state.complete:
                return
            if state.yielded:
                raise self._interrupted(state, f"the connection broke ({_reason(e)})") from e
            if state.response_started:
                raise _RetryableError(
                    self._error(
                        LLMInterrupted,
                        f"the LLM endpoint at {self._shown_url} dropped the connection before answering "
                        f"({_reason(e)}). Check the server's log (it may have crashed or run out of memory)",
                    ),
                    f"connection dropped before the answer ({_reason(e)})",
                ) from e
            raise _RetryableError(self._unreachable_error(e), _reason(e)) from e
        except (httpx.HTTPError, httpx.InvalidURL) as e:  # e.g. a body that cannot be decoded
            self._raise_if_cut(state, e)
            if state.complete:
                return
            if state.yielded:
                raise self._interrupted(state, f"the reply could not be read ({_reason(e)})") from e
            raise self._odd_http_error(e) from e

    def _handle_error_status(self, response: httpx.Response, raw: bytes, body: dict[str, Any], attempt: int) -> None:
        status = response.status_code
        detail = _error_detail(raw, self._secrets)
        lowered = detail.lower()
        if status in (400, 422) and body["stream"] and "stream" in lowered:
            raise _StreamRefusedError()
        if status == 404 or (status in (400, 422) and _mentions_unknown_model(raw, lowered)):
            if status == 404 and not _mentions_model(raw, lowered):
                self._fail(LLMUnavailable, self._missing_path_message(f"{self._shown_url}/chat/completions"))
            self._fail(LLMModelNotFound, self._unknown_model_message(body["model"], status))
        self._raise_for_status(response, detail, attempt)

    def _raise_for_status(self, response: httpx.Response, detail: str, attempt: int) -> NoReturn:
        """Errors shared by every request: auth, rate limits, server failures, other refusals."""
        status = response.status_code
        where = f"the LLM endpoint at {self._shown_url}"
        said = f": {detail}" if detail else ""
        tries = f"{attempt + 1} attempt{'s' if attempt else ''}"
        if status in (401, 403):
            if self._api_key:
                self._fail(
                    LLMAuthError,
                    f"{where} rejected the API key (HTTP {status}{said}). Set PAPERCHAT_LLM_API_KEY to a valid key",
                )
            self._fail(
                LLMAuthError,
                f"{where} requires an API key (HTTP {status}{said}). Set PAPERCHAT_LLM_API_KEY (or OPENAI_API_KEY)",
            )
        if status == 429:
            raise _RetryableError(
                self._error(
                    LLMRateLimited,
                    f"{where} kept answering 429 Too Many Requests ({tries}{said}). Wait a minute and ask again, "
                    "or raise PAPERCHAT_LLM_RETRIES",
                ),
                "HTTP 429 Too Many Requests",
                wait=retry_after_delay(response.headers.get("retry-after")),
            )
        if status >= 500:
            raise _RetryableError(
                self._error(
                    LLMServerError,
                    f"{where} failed with HTTP {status} ({tries}{said}). Check the server's log, or try again later",
                ),
                f"HTTP {status}",
            )
        hint = "Check PAPERCHAT_LLM_BASE_URL and PAPERCHAT_LLM_MODEL"
        if re.search(r"context|too long|too many tokens|maximum.*tokens|max_tokens", detail, re.IGNORECASE):
            hint = (
                "The prompt may be too long: lower PAPERCHAT_TOP_K or PAPERCHAT_LLM_MAX_TOKENS, "
                "or set PAPERCHAT_LLM_CONTEXT_WINDOW to the model's real window"
            )
        self._fail(LLMError, f"{where} refused the request (HTTP {status}{said}). {hint}")

    # --- reading a reply -----------------------------------------------------------------------

    def _read_reply(self, response: httpx.Response, streaming: bool, state: _StreamState) -> Iterator[Delta]:
        ctype = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype == "text/event-stream":
            yield from self._read_events(response, state)
        elif ctype == "application/json" or ctype.endswith("+json") or not streaming:
            yield from self._read_json(response, state)
        elif ctype == "text/html":
            self._fail(
                LLMProtocolError,
                f"the LLM endpoint at {self._shown_url} answered with a web page, not the chat API. "
                "Set PAPERCHAT_LLM_BASE_URL to the API's base (it usually ends in /v1)",
            )
        else:  # no or an odd content type: treat it as an event stream, which is what we asked for
            yield from self._read_events(response, state)

    def _read_json(self, response: httpx.Response, state: _StreamState) -> Iterator[Delta]:
        raw = bytearray()
        for piece in response.iter_bytes():
            self._check_limits(state, len(piece))
            raw += piece
        try:
            payload = json.loads(raw)
        except (ValueError, RecursionError) as e:
            raise self._not_json_error(raw.decode("utf-8", errors="replace"), "/chat/completions") from e
        if isinstance(payload, dict) and "error" in payload and "choices" not in payload:
            self._fail(
                LLMServerError,
                f"the LLM endpoint at {self._shown_url} reported an error: {_error_text(payload, self._secrets)}. "
                "Check the server's log",
            )
        try:
            choice = payload["choices"][0]
            message = choice.get("message") or {}
            content = message.get("content")
            reasoning = message.get("reasoning_content") or message.get("reasoning")
            if content is None:
                content = choice.get("text")  # legacy completions shape
        except (KeyError, IndexError, TypeError, AttributeError) as e:
            raise self._wrong_shape_error("a completion without choices[0].message") from e
        if content is not None and not isinstance(content, str):
            self._fail(LLMProtocolError, self._wrong_shape_message("a non-text message content"))
        text, thought = state.splitter.feed(content or "")
        rest, rest_thought = state.splitter.flush()
        text += rest
        thought = (reasoning if isinstance(reasoning, str) else "") + thought + rest_thought
        state.done = True
        state.chunks += 1
        if thought:
            yield self._emit(state, "", thought)
        if text:
            yield self._emit(state, text, "")
        if state.cut is not None:
            raise self._cut_error(state)

    def _read_events(self, response: httpx.Response, state: _StreamState) -> Iterator[Delta]:
        parser = SSEParser()
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        try:
            for raw in response.iter_bytes():
                self._check_limits(state, len(raw))
                for event in parser.feed(decoder.decode(raw)):
                    yield from self._handle_event(event, state, final=False)
                    if state.done:
                        break
                if state.done:
                    break
            else:
                for event in parser.feed(decoder.decode(b"", final=True)) + parser.close():
                    yield from self._handle_event(event, state, final=True)
                    if state.done:
                        break
        except httpx.TransportError:
            if not state.complete:
                raise
            # the answer was whole; only the goodbye failed (a slow or broken close)
        content, reasoning = state.splitter.flush()
        if content or reasoning:
            yield self._emit(state, content, reasoning)
        if state.cut is not None:
            raise self._cut_error(state)  # the cap was reached in the reply's last piece
        if state.complete:
            return
        if state.yielded or state.chunks:
            raise self._interrupted(state, "the stream ended without finishing the answer")
        self._fail(
            LLMProtocolError,
            f"the LLM endpoint at {self._shown_url} sent no completion in its reply to /chat/completions. "
            "Check that PAPERCHAT_LLM_BASE_URL points at an OpenAI-compatible API, and the server's log",
        )

    def _handle_event(self, event: SSEEvent, state: _StreamState, *, final: bool) -> Iterator[Delta]:
        data = event.data.strip()
        if not data:
            return
        if data == "[DONE]":
            state.done = True
            return
        try:
            chunk = json.loads(data)
        except (ValueError, RecursionError) as e:
            if final and (state.chunks or state.yielded):
                return  # a last line cut short by the end of the stream: judged by what came before
            if state.partial:
                raise self._interrupted(state, "the stream carried a line that is not JSON") from e
            raise LLMProtocolError(
                self._redact(
                    f"the LLM endpoint at {self._shown_url} streamed a line that is not JSON "
                    f"({_one_line(data, 80)!r}). Check that PAPERCHAT_LLM_BASE_URL points at an "
                    "OpenAI-compatible API"
                )
            ) from e
        if not isinstance(chunk, dict):
            self._fail(LLMProtocolError, self._wrong_shape_message("a stream chunk that is not a JSON object"))
        if "error" in chunk and not chunk.get("choices"):
            said = _error_text(chunk, self._secrets)
            if state.yielded:
                raise self._interrupted(state, f"the server reported an error mid-stream: {said}")
            self._fail(
                LLMServerError,
                f"the LLM endpoint at {self._shown_url} reported an error: {said}. Check the server's log",
            )
        choices = chunk.get("choices")
        if choices is None:
            return  # e.g. a usage report or a vendor's heartbeat object
        if not isinstance(choices, list):
            self._fail(LLMProtocolError, self._wrong_shape_message("a stream chunk whose choices is not a list"))
        state.chunks += 1
        if not choices:
            return  # usage-only chunk
        choice = choices[0]
        if not isinstance(choice, dict):
            self._fail(LLMProtocolError, self._wrong_shape_message("a stream chunk whose choice is not an object"))
        delta = choice.get("delta")
        if delta is None:
            delta = choice.get("message") or {}
        if not isinstance(delta, dict):
            self._fail(LLMProtocolError, self._wrong_shape_message("a stream chunk whose delta is not an object"))
        reasoning = delta.get("reasoning_content")
        if not isinstance(reasoning, str) or not reasoning:
            reasoning = delta.get("reasoning")
        reasoning = reasoning if isinstance(reasoning, str) else ""
        content = delta.get("content")
        if not isinstance(content, str):
            text = choice.get("text")  # legacy completions shape
            content = text if isinstance(text, str) else ""
        if choice.get("finish_reason"):
            state.finish_reason = str(choice["finish_reason"])
        if content:
            content, thought = state.splitter.feed(content)
            reasoning += thought
        if content or reasoning:
            yield self._emit(state, content, reasoning)

    def _emit(self, state: _StreamState, content: str, reasoning: str) -> Delta:
        """The next piece of the answer, trimmed to the size cap (the reading loop then cuts the reply)."""
        room = state.max_chars - state.chars
        if len(reasoning) + len(content) > room:
            reasoning = reasoning[:room]
            content = content[: room - len(reasoning)]
            state.cut = "size"
        state.chars += len(reasoning) + len(content)
        state.yielded = True
        if content:
            state.content.append(content)
        return Delta(content=content, reasoning=reasoning)

    def _check_limits(self, state: _StreamState, size: int) -> None:
        """Cut the reply at the answer's deadline, at the size cap, or after ``MAX_REPLY_BYTES``."""
        state.bytes_read += size
        if state.cut is None and time.monotonic() >= state.deadline:
            state.cut = "deadline"
        if state.cut is None and state.bytes_read > MAX_REPLY_BYTES:
            state.cut = "size"
        if state.cut is not None:
            raise self._cut_error(state)

    def _raise_if_cut(self, state: _StreamState, error: Exception) -> None:
        """A read that failed because the watchdog closed the connection at the deadline."""
        if state.cut is not None and not state.complete:
            raise self._cut_error(state) from error

    def _cut_error(self, state: _StreamState) -> LLMError:
        if state.cut == "size":
            why = (
                f"it sent more than {state.max_chars:,} characters (or {MAX_REPLY_BYTES // (1024 * 1024)} MB), "
                "far more than PAPERCHAT_LLM_MAX_TOKENS asks for"
            )
            if state.yielded:
                return self._interrupted(state, why)
            return self._error(LLMProtocolError, f"the LLM endpoint at {self._shown_url} {why}; check the server")
        return self._deadline_error(state)

    def _deadline_error(self, state: _StreamState) -> LLMError:
        limit = self.answer_deadline
        rule = f"{ANSWER_DEADLINE_FACTOR} x PAPERCHAT_LLM_TIMEOUT={self.timeout:g}"
        if state.partial:
            return LLMInterrupted(
                self._redact(
                    f"the answer from the LLM endpoint at {self._shown_url} was not finished after {limit:g} s "
                    f"({rule}); showing the part that arrived. Ask again, or raise PAPERCHAT_LLM_TIMEOUT"
                ),
                partial=state.partial,
            )
        return self._error(
            LLMTimeout,
            f"the LLM endpoint at {self._shown_url} sent no answer within {limit:g} s ({rule}), although it "
            "kept the connection open. Raise PAPERCHAT_LLM_TIMEOUT, use a smaller model, or check the server",
        )

    # --- messages ------------------------------------------------------------------------------

    def _redact(self, text: str) -> str:
        return redact_secrets(text, self._secrets)

    def _error(self, cls: type[LLMError], message: str) -> LLMError:
        return cls(self._redact(_one_line(message, 2000)))

    def _fail(self, cls: type[LLMError], message: str) -> NoReturn:
        raise self._error(cls, message)

    def _interrupted(self, state: _StreamState, what: str) -> LLMInterrupted:
        return LLMInterrupted(
            self._redact(
                _one_line(
                    f"the answer from the LLM endpoint at {self._shown_url} broke off: {what}; "
                    "showing the part that arrived. Ask again, and check the server's log if it keeps happening",
                    2000,
                )
            ),
            partial=state.partial,
        )

    def _unreachable_error(self, error: httpx.TransportError) -> LLMError:
        return self._error(
            LLMUnavailable, f"cannot reach the LLM endpoint at {self._shown_url} ({_reason(error)}). {_START_HINT}"
        )

    def _odd_http_error(self, error: Exception) -> LLMError:
        if isinstance(error, httpx.InvalidURL):
            return self._error(
                LLMUnavailable,
                f"the LLM endpoint URL {self._shown_url} is not a valid URL ({_one_line(str(error), 120)}). "
                "Set PAPERCHAT_LLM_BASE_URL to something like http://127.0.0.1:11434/v1",
            )
        return self._error(
            LLMProtocolError,
            f"the reply of the LLM endpoint at {self._shown_url} could not be read ({_reason(error)}). "
            "Check that PAPERCHAT_LLM_BASE_URL points at an OpenAI-compatible API",
        )

    def _timeout_error(self, doing: str) -> LLMError:
        return self._error(
            LLMTimeout,
            f"the LLM endpoint at {self._shown_url} did not answer within {self.timeout:g} s while {doing} "
            f"(PAPERCHAT_LLM_TIMEOUT={self.timeout:g}). Raise PAPERCHAT_LLM_TIMEOUT, use a smaller model, "
            "or check that the server is not stuck",
        )

    def _not_json_error(self, text: str, path: str) -> LLMError:
        return self._error(
            LLMProtocolError,
            f"the LLM endpoint at {self._shown_url} answered {path} with something that is not JSON "
            f"({_one_line(text, 80)!r}). Check that PAPERCHAT_LLM_BASE_URL points at an OpenAI-compatible API "
            "(it usually ends in /v1)",
        )

    def _wrong_shape_message(self, what: str) -> str:
        return (
            f"the LLM endpoint at {self._shown_url} sent {what}, which is not an OpenAI-compatible reply. "
            "Check that PAPERCHAT_LLM_BASE_URL points at an OpenAI-compatible API"
        )

    def _wrong_shape_error(self, what: str) -> LLMError:
        return self._error(LLMProtocolError, self._wrong_shape_message(what))

    def _missing_path_message(self, url: str) -> str:
        if urlsplit(self.base_url).path.rstrip("/").endswith("/v1"):
            fix = "Check PAPERCHAT_LLM_BASE_URL: it should be the API's base URL"
        else:
            fix = f"The URL is probably missing `/v1`: set PAPERCHAT_LLM_BASE_URL={self._shown_url}/v1"
        return f"the LLM endpoint has nothing at {url} (HTTP 404). {fix}"

    def _unknown_model_message(self, model: str, status: int) -> str:
        try:
            offered = self.list_models()
        except LLMError:
            offered = None
        if offered is None:
            offers = "the server's model list could not be fetched"
        elif not offered:
            offers = "the server lists no models"
        else:
            shown = ", ".join(offered[:10]) + (f" and {len(offered) - 10} more" if len(offered) > 10 else "")
            offers = f"the server offers: {shown}"
        return (
            f"the LLM endpoint at {self._shown_url} has no model {model!r} (HTTP {status}); {offers}. "
            "Set PAPERCHAT_LLM_MODEL to one of them (or unset it to use the first)"
        )


class _Watchdog:
    """Shuts a response's connection at the answer's deadline, so that a read waiting for a byte ends there.

    The reading thread then sees a transport error and, finding ``state.cut`` set, reports the deadline.
    """

    def __init__(self, response: httpx.Response, state: _StreamState) -> None:
        self._response = response
        self._state = state
        self._timer = threading.Timer(max(0.0, state.deadline - time.monotonic()), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def cancel(self) -> None:
        self._timer.cancel()

    def _fire(self) -> None:
        if self._state.complete:
            return
        self._state.cut = self._state.cut or "deadline"
        stream = self._response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


# --- helpers -----------------------------------------------------------------------------------


def backoff_delay(backoff: float, attempt: int) -> float:
    """Seconds to wait before retry number ``attempt + 1``: ``backoff * 2**attempt``, capped at 8 s."""
    return min(backoff * 2**attempt, MAX_BACKOFF)


def retry_after_delay(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (seconds or an HTTP date), capped at 30 s.

    ``None`` when the header is absent or unreadable (the exponential backoff applies then).
    """
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    if seconds != seconds:  # NaN
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


def _one_line(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _read_limited(response: httpx.Response) -> bytes:
    raw = bytearray()
    for piece in response.iter_bytes():
        raw += piece
        if len(raw) >= _MAX_ERROR_BODY:
            break
    return bytes(raw[:_MAX_ERROR_BODY])


def _error_text(payload: Any, secrets: list[str | None]) -> str:
    """The message inside an OpenAI-style (or similar) error object, as one short redacted line."""
    message: Any = payload
    if isinstance(payload, dict):
        err = payload.get("error", payload)
        message = (err.get("message") or err.get("detail") or err.get("msg") or err) if isinstance(err, dict) else err
        if message is payload and isinstance(payload.get("message") or payload.get("detail"), str):
            message = payload.get("message") or payload.get("detail")
    if not isinstance(message, str):
        message = json.dumps(message, ensure_ascii=False)
    return _one_line(redact_secrets(message, secrets), EXCERPT_CHARS)


def _error_detail(raw: bytes, secrets: list[str | None]) -> str:
    text = raw.decode("utf-8", errors="replace")
    try:
        payload = json.loads(text)
    except (ValueError, RecursionError):
        text = redact_secrets(text, secrets)
        if "<html" in text[:500].lower():
            text = re.sub(r"<[^>]*>", " ", text)
        return _one_line(text, EXCERPT_CHARS)
    return _error_text(payload, secrets)


def _mentions_model(raw: bytes, lowered_detail: str) -> bool:
    return "model" in lowered_detail or b"model_not_found" in raw


def _mentions_unknown_model(raw: bytes, lowered_detail: str) -> bool:
    if b"model_not_found" in raw:
        return True
    return "model" in lowered_detail and bool(
        re.search(r"not found|does not exist|not exist|unknown|not a valid model|no such", lowered_detail)
    )


def _reason(error: Exception) -> str:
    """A few words on why a connection failed."""
    text = str(error)
    lowered = text.lower()
    if isinstance(error, httpx.ConnectError):
        if "refused" in lowered or "errno 111" in lowered or "errno 61" in lowered:
            return "connection refused"
        if any(
            marker in lowered
            for marker in ("name or service not known", "nodename nor servname", "getaddrinfo", "name resolution")
        ):
            return "host not found"
        if "ssl" in lowered or "certificate" in lowered:
            return f"TLS failed: {_one_line(text, 120)}"
    return _one_line(text, 120) or type(error).__name__
