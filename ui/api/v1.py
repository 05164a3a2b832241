"""The OpenAI-compatible API (``/v1``), served by ``paperchat serve`` beside the web UI on the same port.

``GET /v1/models`` lists the answer writers; ``POST /v1/chat/completions`` answers the last user message
with the earlier turns as the conversation, streamed (server-sent events in OpenAI's chunk format, then
``data: [DONE]``) or not. The answer text keeps its ``[n]`` markers and ends with a readable sources block;
the structured citations ride in extra fields (``citations``, ``claims`` when present, ``paperchat``) of
the response and of the last stream chunk. Errors are OpenAI's error JSON with OpenAI's status codes and
never a traceback (``ui.api.errors``). ``ui.api.service`` puts it in front of the web UI.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import anyio
import anyio.to_thread
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from rag.answers.pipeline import FinalEvent, SourcesEvent, TextEvent
from rag.components import Components
from rag.errors import QueryError, UnknownModel
from rag.retrieval.hybrid import validate_question
from rag.types import Turn, as_messages
from ui.api import answers
from ui.api.answers import AnswerGate
from ui.api.errors import APIError, api_error
from ui.shared.text import answer_text

log = logging.getLogger("paperchat.api")

API_PREFIX = "/v1"
CREATED = 1767225600  # the models' "created" time (OpenAI clients show it); 2026-01-01
_END = object()


# --- requests -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChatRequest:
    model: str
    question: str
    history: list[Turn]
    stream: bool
    temperature: float | None
    max_tokens: int | None


async def read_json(request: Request, limit: int) -> dict:
    """The request's JSON object, read up to ``limit`` bytes (413 past it, 400 when it is not a JSON object)."""
    too_large = APIError(413, f"the request body is larger than {limit:,} bytes: send a shorter conversation "
                              "(or raise PAPERCHAT_API_MAX_BODY_BYTES)", code="request_too_large")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    body = bytearray()
    try:
        async for piece in request.stream():
            body += piece
            if len(body) > limit:
                raise too_large
    except ClientDisconnect as e:
        raise APIError(400, "the client closed the connection before the request body arrived") from e
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise APIError(400, f"the request body is not valid JSON ({e}): send a JSON object with 'model' and "
                            "'messages'") from e
    if not isinstance(data, dict):
        raise APIError(400, "the request body must be a JSON object with 'model' and 'messages'")
    return data


def _number(body: dict, name: str, low: float, high: float, *, integer: bool = False):
    value = body.get(name)
    if value is None:
        return None
    wrong = isinstance(value, bool) or not isinstance(value, int if integer else (int, float))
    if wrong or not low <= value <= high:
        kind = "an integer" if integer else "a number"
        raise APIError(400, f"'{name}' must be {kind} from {low:g} to {high:g}", param=name)
    return value


def parse_chat_request(components: Components, body: dict) -> ChatRequest:
    model = body.get("model", answers.DEFAULT_MODEL)
    if not isinstance(model, str) or not model:
        raise APIError(400, f"'model' must be a string: {answers.DEFAULT_MODEL} or {answers.EXTRACTIVE_MODEL}",
                       param="model")
    stream = body.get("stream")
    stream = False if stream is None else stream
    if not isinstance(stream, bool):
        raise APIError(400, "'stream' must be true or false", param="stream")
    n = body.get("n")
    if n is not None and (isinstance(n, bool) or n != 1):
        raise APIError(400, "'n' must be 1: one answer per request", param="n")
    temperature = _number(body, "temperature", 0.0, 2.0)
    max_tokens = _number(body, "max_tokens", 1, 1_000_000, integer=True)
    if max_tokens is None:
        max_tokens = _number(body, "max_completion_tokens", 1, 1_000_000, integer=True)
    if "messages" not in body:
        raise APIError(400, "'messages' is required: a list of {\"role\": ..., \"content\": ...} objects, the last "
                            "one the user's question", param="messages")
    try:
        question, history = answers.conversation(components, body["messages"])
        validate_question(question, components.settings.max_question_chars)
    except QueryError as e:
        raise APIError(400, str(e), param="messages") from e
    return ChatRequest(model, question, history, stream, temperature, max_tokens)


# --- the answer, from the pipeline's worker thread ------------------------------------------------------------


class EventPump:
    """Pulls the pipeline's (blocking) events one at a time in a worker thread."""

    def __init__(self, events: Iterator) -> None:
        self.events = events

    async def next(self):
        return await anyio.to_thread.run_sync(next, self.events, _END)

    async def close(self) -> None:
        # Shielded: runs when the client went away and this task is being cancelled; the generator must
        # close (and with it the LLM stream) in a worker thread, never on the event loop.
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self.events.close)


def _chunk(ident: str, created: int, model: str, delta: dict, finish: str | None = None, **extra) -> bytes:
    data = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}], **extra}
    return b"data: " + json.dumps(data, ensure_ascii=False).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"


class GatedStream(StreamingResponse):
    """A streamed answer that gives its answer slot back however it ends (finished, failed, client gone)."""

    def __init__(self, content, release, **kwargs) -> None:
        super().__init__(content, **kwargs)
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


class ChatAPI:
    def __init__(self, components: Components, gate: AnswerGate, *, max_body_bytes: int) -> None:
        self.components = components
        self.gate = gate
        self.max_body_bytes = max_body_bytes

    # --- routes ---------------------------------------------------------------------------------------------

    async def list_models(self, request: Request) -> Response:
        found = await anyio.to_thread.run_sync(answers.models, self.components)
        return JSONResponse({"object": "list", "data": [self._model(m) for m in found]})

    async def get_model(self, request: Request) -> Response:
        found = await anyio.to_thread.run_sync(answers.models, self.components)
        for model in found:
            if model.id == request.path_params["model"]:
                return JSONResponse(self._model(model))
        raise UnknownModel(f"the model {request.path_params['model']!r} does not exist here: use one of "
                           f"{', '.join(m.id for m in found)}")

    @staticmethod
    def _model(model: answers.ModelInfo) -> dict:
        return {"id": model.id, "object": "model", "created": CREATED, "owned_by": "paperchat",
                "description": model.description}

    async def chat_completions(self, request: Request) -> Response:
        body = await read_json(request, self.max_body_bytes)
        # In a worker thread: reading a conversation back may read the paper list from the store.
        chat = await anyio.to_thread.run_sync(parse_chat_request, self.components, body)
        pipeline = await anyio.to_thread.run_sync(
            lambda: answers.pipeline_for(self.components, chat.model, temperature=chat.temperature,
                                         max_tokens=chat.max_tokens)
        )
        ident = "chatcmpl-" + secrets.token_hex(12)
        created = int(time.time())
        await self.gate.acquire()
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self.gate.release()

        history = as_messages(chat.history)
        try:
            if not chat.stream:
                answer = await anyio.to_thread.run_sync(lambda: pipeline.answer(chat.question, history))
                return JSONResponse(self._completion(ident, created, chat.model, answer))
            pump = EventPump(pipeline.stream(chat.question, history))
            try:
                primed = await self._prime(pump)
            except BaseException:
                await pump.close()
                raise
            stream = self._stream(pump, primed, ident, created, chat.model)
            return GatedStream(stream, release, media_type="text/event-stream",
                               headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        except BaseException:
            release()
            raise
        finally:
            if not chat.stream:
                release()

    # --- answers --------------------------------------------------------------------------------------------

    @staticmethod
    def _completion(ident: str, created: int, model: str, answer) -> dict:
        message = {"role": "assistant", "content": answer_text(answer)}
        if answer.reasoning:
            message["reasoning_content"] = answer.reasoning
        return {
            "id": ident, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}],
            **answers.citation_fields(answer),
        }

    @staticmethod
    async def _prime(pump: EventPump) -> list:
        """Events up to the first text (or the end): errors before any text still get their own status."""
        primed = []
        while True:
            event = await pump.next()
            if event is _END:
                return primed
            primed.append(event)
            if isinstance(event, FinalEvent) or (isinstance(event, TextEvent) and (event.content or event.reasoning)):
                return primed

    async def _stream(self, pump: EventPump, primed: list, ident: str, created: int,
                      model: str) -> AsyncIterator[bytes]:
        streamed: list[str] = []
        final = None
        try:
            yield _chunk(ident, created, model, {"role": "assistant", "content": ""})
            pending = list(primed)
            while True:
                event = pending.pop(0) if pending else await pump.next()
                if event is _END:
                    break
                if isinstance(event, TextEvent):
                    delta = {}
                    if event.content:
                        delta["content"] = event.content
                        streamed.append(event.content)
                    if event.reasoning:
                        delta["reasoning_content"] = event.reasoning
                    if delta:
                        yield _chunk(ident, created, model, delta)
                elif isinstance(event, FinalEvent):
                    final = event.answer
                elif not isinstance(event, SourcesEvent):
                    log.warning("unexpected pipeline event %r", type(event).__name__)
            if final is None:
                raise RuntimeError("the pipeline ended without a final answer")
            yield _chunk(ident, created, model, {"content": answers.stream_end(final, "".join(streamed))})
            yield _chunk(ident, created, model, {}, "stop", **answers.citation_fields(final))
            yield DONE
        except (anyio.get_cancelled_exc_class(), GeneratorExit):
            raise
        except Exception as error:  # after the 200 went out: the error is an event, as OpenAI sends it
            yield b"data: " + json.dumps(api_error(error).body(), ensure_ascii=False).encode() + b"\n\n"
            yield DONE
        finally:
            await pump.close()


def _guarded(handler):
    """Any failure of a route -> an OpenAI-shaped error response (never a traceback)."""

    async def route(request: Request) -> Response:
        try:
            return await handler(request)
        except Exception as error:
            return api_error(error).response()

    return route


async def _not_found(request: Request, exc: HTTPException) -> Response:
    if exc.status_code == 405:
        return APIError(405, f"{request.method} is not allowed on {request.url.path}").response()
    return APIError(404, f"no such endpoint: {request.url.path} (the API has GET /v1/models and "
                         "POST /v1/chat/completions)", code="not_found").response()


def build_api(components: Components, gate: AnswerGate, *, max_body_bytes: int) -> Starlette:
    chat = ChatAPI(components, gate, max_body_bytes=max_body_bytes)
    routes = [
        Route(f"{API_PREFIX}/models", _guarded(chat.list_models), methods=["GET"]),
        Route(f"{API_PREFIX}/models/{{model:path}}", _guarded(chat.get_model), methods=["GET"]),
        Route(f"{API_PREFIX}/chat/completions", _guarded(chat.chat_completions), methods=["POST"]),
    ]
    return Starlette(routes=routes, exception_handlers={HTTPException: _not_found})


