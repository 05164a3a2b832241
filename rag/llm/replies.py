"""Reading a chat-completions reply: Server-Sent Events or one JSON object, into :class:`Delta` pieces.

:class:`ReplyReader` copes with what real servers send: ``data: [DONE]``, usage-only chunks, keep-alive
comments, reasoning as ``reasoning_content`` / ``reasoning`` or inside ``<think>...</think>``, finish
reasons, the legacy ``text`` shape, a JSON reply to a streamed request. It also bounds a reply: the whole
answer must be in by its deadline (a :class:`DeadlineWatchdog` shuts a connection kept open by
``: ping`` comments) and may not be far longer than ``max_tokens`` asks for.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from rag.errors import LLMError, LLMInterrupted, LLMProtocolError, LLMServerError, LLMTimeout
from rag.llm.http_errors import EndpointErrors
from rag.llm.sse import SSEEvent, SSEParser
from rag.llm.think import ThinkSplitter
from rag.text import one_line

# One answer (all its attempts) must be complete this many PAPERCHAT_LLM_TIMEOUTs after it was asked for:
# the timeout alone bounds each wait for a byte, not a stream kept open by ": ping" comments or a word at a time.
ANSWER_DEADLINE_FACTOR = 3
# The most answer text (content + reasoning) accepted per requested token, and at least MIN_ANSWER_CHARS:
# a token is about 4 characters, so an endpoint that goes past this ignores max_tokens.
ANSWER_CHARS_PER_TOKEN = 16
MIN_ANSWER_CHARS = 16_000
MAX_REPLY_BYTES = 8 * 1024 * 1024  # bytes of one reply read at most (events, comments and all)


@dataclass(frozen=True)
class Delta:
    """One piece of a streamed reply."""

    content: str = ""  # answer text
    reasoning: str = ""  # reasoning text (reasoning_content / reasoning fields, or inside <think>...</think>)


@dataclass
class ReplyState:
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


class ReplyReader:
    """Turns one endpoint's replies into :class:`Delta` pieces, or the ``LLMError`` that says what was wrong."""

    def __init__(self, errors: EndpointErrors, shown_url: str, timeout: float) -> None:
        self._errors = errors
        self._shown_url = shown_url
        self._timeout = timeout

    def read(self, response: httpx.Response, streaming: bool, state: ReplyState) -> Iterator[Delta]:
        """The reply by its content type: events, JSON (also to a streamed request), never a web page."""
        ctype = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype == "text/event-stream":
            yield from self._read_events(response, state)
        elif ctype == "application/json" or ctype.endswith("+json") or not streaming:
            yield from self._read_json(response, state)
        elif ctype == "text/html":
            self._errors.fail(
                LLMProtocolError,
                f"the LLM endpoint at {self._shown_url} answered with a web page, not the chat API. "
                "Set PAPERCHAT_LLM_BASE_URL to the API's base (it usually ends in /v1)",
            )
        else:  # no or an odd content type: treat it as an event stream, which is what we asked for
            yield from self._read_events(response, state)

    def _read_json(self, response: httpx.Response, state: ReplyState) -> Iterator[Delta]:
        raw = bytearray()
        for piece in response.iter_bytes():
            self._check_limits(state, len(piece))
            raw += piece
        try:
            payload = json.loads(raw)
        except (ValueError, RecursionError) as e:
            raise self._errors.not_json(raw.decode("utf-8", errors="replace"), "/chat/completions") from e
        if isinstance(payload, dict) and "error" in payload and "choices" not in payload:
            self._errors.fail(
                LLMServerError,
                f"the LLM endpoint at {self._shown_url} reported an error: {self._errors.quote(payload)}. "
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
            raise self._errors.wrong_shape("a completion without choices[0].message") from e
        if content is not None and not isinstance(content, str):
            raise self._errors.wrong_shape("a non-text message content")
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

    def _read_events(self, response: httpx.Response, state: ReplyState) -> Iterator[Delta]:
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
            raise self._errors.interrupted(state.partial, "the stream ended without finishing the answer")
        self._errors.fail(
            LLMProtocolError,
            f"the LLM endpoint at {self._shown_url} sent no completion in its reply to /chat/completions. "
            "Check that PAPERCHAT_LLM_BASE_URL points at an OpenAI-compatible API, and the server's log",
        )

    def _handle_event(self, event: SSEEvent, state: ReplyState, *, final: bool) -> Iterator[Delta]:
        """One event: ``[DONE]``, a server's error, or a chunk of the answer (a broken one is an error)."""
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
                raise self._errors.interrupted(state.partial, "the stream carried a line that is not JSON") from e
            raise LLMProtocolError(
                self._errors.redact(
                    f"the LLM endpoint at {self._shown_url} streamed a line that is not JSON "
                    f"({one_line(data, 80)!r}). Check that PAPERCHAT_LLM_BASE_URL points at an "
                    "OpenAI-compatible API"
                )
            ) from e
        if not isinstance(chunk, dict):
            raise self._errors.wrong_shape("a stream chunk that is not a JSON object")
        if "error" in chunk and not chunk.get("choices"):
            said = self._errors.quote(chunk)
            if state.yielded:
                raise self._errors.interrupted(state.partial, f"the server reported an error mid-stream: {said}")
            self._errors.fail(
                LLMServerError,
                f"the LLM endpoint at {self._shown_url} reported an error: {said}. Check the server's log",
            )
        yield from self._handle_chunk(chunk, state)

    def _handle_chunk(self, chunk: dict[str, Any], state: ReplyState) -> Iterator[Delta]:
        """One completion chunk: its answer text, reasoning (fields or think-tags) and finish reason."""
        choices = chunk.get("choices")
        if choices is None:
            return  # e.g. a usage report or a vendor's heartbeat object
        if not isinstance(choices, list):
            raise self._errors.wrong_shape("a stream chunk whose choices is not a list")
        state.chunks += 1
        if not choices:
            return  # usage-only chunk
        choice = choices[0]
        if not isinstance(choice, dict):
            raise self._errors.wrong_shape("a stream chunk whose choice is not an object")
        delta = choice.get("delta")
        if delta is None:
            delta = choice.get("message") or {}
        if not isinstance(delta, dict):
            raise self._errors.wrong_shape("a stream chunk whose delta is not an object")
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

    def _emit(self, state: ReplyState, content: str, reasoning: str) -> Delta:
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

    def _check_limits(self, state: ReplyState, size: int) -> None:
        """Cut the reply at the answer's deadline, at the size cap, or after ``MAX_REPLY_BYTES``."""
        state.bytes_read += size
        if state.cut is None and time.monotonic() >= state.deadline:
            state.cut = "deadline"
        if state.cut is None and state.bytes_read > MAX_REPLY_BYTES:
            state.cut = "size"
        if state.cut is not None:
            raise self._cut_error(state)

    def raise_if_cut(self, state: ReplyState, error: Exception) -> None:
        """A read that failed because the watchdog closed the connection at the deadline."""
        if state.cut is not None and not state.complete:
            raise self._cut_error(state) from error

    def _cut_error(self, state: ReplyState) -> LLMError:
        if state.cut == "size":
            why = (
                f"it sent more than {state.max_chars:,} characters (or {MAX_REPLY_BYTES // (1024 * 1024)} MB), "
                "far more than PAPERCHAT_LLM_MAX_TOKENS asks for"
            )
            if state.yielded:
                return self._errors.interrupted(state.partial, why)
            return self._errors.error(
                LLMProtocolError, f"the LLM endpoint at {self._shown_url} {why}; check the server"
            )
        return self.deadline_error(state)

    def deadline_error(self, state: ReplyState) -> LLMError:
        limit = ANSWER_DEADLINE_FACTOR * self._timeout
        rule = f"{ANSWER_DEADLINE_FACTOR} x PAPERCHAT_LLM_TIMEOUT={self._timeout:g}"
        if state.partial:
            return LLMInterrupted(
                self._errors.redact(
                    f"the answer from the LLM endpoint at {self._shown_url} was not finished after {limit:g} s "
                    f"({rule}); showing the part that arrived. Ask again, or raise PAPERCHAT_LLM_TIMEOUT"
                ),
                partial=state.partial,
            )
        return self._errors.error(
            LLMTimeout,
            f"the LLM endpoint at {self._shown_url} sent no answer within {limit:g} s ({rule}), although it "
            "kept the connection open. Raise PAPERCHAT_LLM_TIMEOUT, use a smaller model, or check the server",
        )


class DeadlineWatchdog:
    """Shuts a response's connection at the answer's deadline, so that a read waiting for a byte ends there.

    The reading thread then sees a transport error and, finding ``state.cut`` set, reports the deadline.
    """

    def __init__(self, response: httpx.Response, state: ReplyState) -> None:
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
