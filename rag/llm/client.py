"""The chat model seam: stream answers from any OpenAI-compatible chat-completions endpoint.

:class:`ChatModel` is what the answer pipeline talks to; :class:`OpenAIChatModel` implements it over
httpx for Ollama, llama.cpp's ``llama-server``, vLLM, LM Studio, OpenAI and the like: it builds the
requests, lists the server's models, and runs the retry loop. Its collaborators live next to it:
:mod:`rag.llm.endpoint` (URL, credentials, connection), :mod:`rag.llm.replies` (reading a streamed or
JSON reply), :mod:`rag.llm.http_errors` (what each failure is called and what to do about it) and
:mod:`rag.llm.retries` (when to ask again). Connection errors, 429 and 5xx are retried with exponential
backoff, but never once part of an answer has been handed out; a server that refuses ``"stream": true``
is asked again without it.

Every failure surfaces as exactly one :class:`rag.errors.LLMError` subclass whose one-line message
says what happened and what to do. The API key is sent only in the ``Authorization`` header: it is
kept out of every message, ``repr`` and log line, even when a server echoes it back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any, Protocol, runtime_checkable

import httpx

from rag.errors import LLMInterrupted, LLMModelNotFound, LLMProtocolError, LLMUnavailable
from rag.llm.endpoint import Endpoint
from rag.llm.http_errors import EndpointErrors, error_detail, failure_reason, read_error_body
from rag.llm.replies import (
    ANSWER_CHARS_PER_TOKEN,
    ANSWER_DEADLINE_FACTOR,
    MIN_ANSWER_CHARS,
    DeadlineWatchdog,
    Delta,
    ReplyReader,
    ReplyState,
)
from rag.llm.retries import RetryableError, StreamRefusedError, backoff_delay

_log = logging.getLogger(__name__)


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


class OpenAIChatModel:
    """A :class:`ChatModel` for any server that speaks the OpenAI chat-completions API.

    The httpx client is created on first use and closed by :meth:`close` (or ``with``). ``embedded``
    marks the bundled llama.cpp server, whose URL means nothing to the user and is left out of the label.
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
        embedded: bool = False,
    ) -> None:
        self._endpoint = Endpoint(base_url, api_key=api_key, timeout=timeout, transport=transport)
        self.base_url = self._endpoint.base_url
        self.model = model or None
        self.timeout = self._endpoint.timeout
        self.retries = max(0, int(retries))
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.backoff = max(0.0, float(backoff))
        self.label_prefix = label_prefix
        self._embedded = embedded
        self._resolved_model: str | None = None
        self._shown_url = self._endpoint.shown_url
        self._errors = EndpointErrors(self._endpoint)
        self._reader = ReplyReader(self._errors, self._shown_url, self.timeout)

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
        if self._embedded:
            return f"{self.label_prefix}: {model}"  # an embedded server's port means nothing to the user
        return f"{self.label_prefix}: {model} @ {self._shown_url}"

    @property
    def label_url(self) -> str:
        """The endpoint URL as shown: without ``user:password@``."""
        return self._shown_url

    def __repr__(self) -> str:
        key = "'***'" if self._endpoint.api_key else "None"
        return f"OpenAIChatModel(base_url={self._shown_url!r}, model={self.model!r}, api_key={key})"

    # --- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        self._endpoint.close()

    def __enter__(self) -> OpenAIChatModel:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- models --------------------------------------------------------------------------------

    def list_models(self) -> list[str]:
        """The model ids the server lists at ``GET {base_url}/models``."""
        url = f"{self._endpoint.request_url}/models"
        attempt = 0
        while True:
            try:
                return self._list_models_once(url, attempt)
            except RetryableError as retry:
                attempt = self._before_retry(retry, attempt)

    def _list_models_once(self, url: str, attempt: int) -> list[str]:
        try:
            response = self._endpoint.http().get(url, headers=self._endpoint.headers())
        except httpx.TimeoutException as e:
            raise self._errors.timeout("listing models") from e
        except httpx.TransportError as e:
            raise RetryableError(self._errors.unreachable(e), failure_reason(e)) from e
        except (httpx.HTTPError, httpx.InvalidURL) as e:
            raise self._errors.odd_http(e) from e
        if response.status_code >= 400:
            detail = error_detail(response.content, self._endpoint.secrets)
            if response.status_code == 404:
                self._errors.fail(
                    LLMUnavailable,
                    self._errors.missing_path_message(f"{self._shown_url}/models")
                    + " (or set PAPERCHAT_LLM_MODEL if the server has no model list)",
                )
            self._errors.raise_for_status(response, detail, attempt)
        try:
            payload = response.json()
        except (ValueError, RecursionError) as e:
            raise self._errors.not_json(response.text, "/models") from e
        ids = _model_ids(payload)
        if ids is None:
            self._errors.fail(
                LLMProtocolError,
                f"the LLM endpoint at {self._shown_url} answered /models without a model list. "
                "Check that PAPERCHAT_LLM_BASE_URL points at an OpenAI-compatible API, or set PAPERCHAT_LLM_MODEL",
            )
        return ids

    def resolve_model(self) -> str:
        """The configured model, else the first one the server lists."""
        if self.model:
            return self.model
        if self._resolved_model is None:
            models = self.list_models()
            if not models:
                self._errors.fail(
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
            state = ReplyState(deadline=deadline, max_chars=max_chars)
            try:
                yield from self._chat_once(body, attempt, state)
                return
            except StreamRefusedError:
                _log.info("LLM endpoint %s refused streaming; asking without it", self._shown_url)
                body = {**body, "stream": False}
            except RetryableError as retry:
                attempt = self._before_retry(retry, attempt, deadline)

    def _before_retry(self, retry: RetryableError, attempt: int, deadline: float = float("inf")) -> int:
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

    def _chat_once(self, body: dict[str, Any], attempt: int, state: ReplyState) -> Iterator[Delta]:
        url = f"{self._endpoint.request_url}/chat/completions"
        remaining = state.deadline - time.monotonic()
        if remaining <= 0:
            raise self._reader.deadline_error(state)
        # No single wait for a byte may outlast the answer's deadline.
        timeout = httpx.Timeout(min(self.timeout, remaining))
        headers = self._endpoint.headers()
        try:
            with self._endpoint.http().stream("POST", url, json=body, headers=headers, timeout=timeout) as response:
                watchdog = DeadlineWatchdog(response, state)
                try:
                    if response.status_code >= 400:
                        raw = read_error_body(response)
                        self._errors.raise_for_chat_status(response, raw, body, attempt, self.list_models)
                    state.response_started = True
                    yield from self._reader.read(response, bool(body["stream"]), state)
                finally:
                    watchdog.cancel()
        except (httpx.HTTPError, httpx.InvalidURL) as e:  # InvalidURL: e.g. a body that cannot be decoded
            self._reader.raise_if_cut(state, e)
            if state.complete:
                return  # the answer was whole; only the goodbye was slow or broken
            raise self._chat_failure(e, state) from e

    def _chat_failure(self, error: Exception, state: ReplyState) -> Exception:
        """What a failed chat request becomes: a broken-off answer, a final error, or a reason to retry."""
        if isinstance(error, httpx.TimeoutException):
            if state.yielded:
                return LLMInterrupted(
                    self._errors.redact(
                        f"the LLM endpoint at {self._shown_url} stopped sending for {self.timeout:g} s in the middle "
                        f"of the answer (PAPERCHAT_LLM_TIMEOUT={self.timeout:g}); showing the part that arrived. "
                        "Ask again, or raise PAPERCHAT_LLM_TIMEOUT"
                    ),
                    partial=state.partial,
                )
            return self._errors.timeout("answering")
        reason = failure_reason(error)
        if isinstance(error, httpx.TransportError):
            if state.yielded:
                return self._errors.interrupted(state.partial, f"the connection broke ({reason})")
            if state.response_started:
                return RetryableError(
                    self._errors.error(
                        LLMInterrupted,
                        f"the LLM endpoint at {self._shown_url} dropped the connection before answering "
                        f"({reason}). Check the server's log (it may have crashed or run out of memory)",
                    ),
                    f"connection dropped before the answer ({reason})",
                )
            return RetryableError(self._errors.unreachable(error), reason)
        if state.yielded:
            return self._errors.interrupted(state.partial, f"the reply could not be read ({reason})")
        return self._errors.odd_http(error)


def _model_ids(payload: Any) -> list[str] | None:
    """The ids in a ``/models`` reply (OpenAI's ``data``, Ollama's ``models``, or a bare list); None if none."""
    entries = payload.get("data") if isinstance(payload, dict) else payload
    if isinstance(payload, dict) and entries is None:
        entries = payload.get("models")
    if not isinstance(entries, list):
        return None
    ids = []
    for entry in entries:
        ident = entry.get("id") or entry.get("model") or entry.get("name") if isinstance(entry, dict) else entry
        if isinstance(ident, str) and ident:
            ids.append(ident)
    return ids
