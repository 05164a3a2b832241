"""A scripted OpenAI-compatible chat server for tests: real HTTP on 127.0.0.1, an ephemeral port.

In tests::

    with ScriptedLLMServer(reply="An answer [1].") as server:
        model = OpenAIChatModel(server.base_url)        # "http://127.0.0.1:PORT/v1"
        server.mode = "cut"                             # change behaviour between requests
        server.requests                                 # [{"method", "path", "headers", "json"}, ...]

As a process (for CLI and UI tests that point a real app at it)::

    python -m tests.fake_llm --port 0 --reply "text [1]" [--mode stream] [--models a,b] ...

prints its base URL as the first line of stdout and serves until killed.

Behaviour is set with attributes (read once per request under a lock, so they may be changed between
requests from another thread): ``reply`` (a string or ``callable(request_json) -> str``), ``reasoning``
(the thinking text of the "reasoning" and "think" modes), ``models``, ``chunk_size`` (characters per SSE
chunk), ``delay`` (seconds between chunks), ``mode`` (see ``MODES``), ``status_code`` / ``retry_after`` /
``fail_times`` / ``error_message`` (for "status"), ``strict_model`` (404 for a model not in ``models``),
``api_key`` (require this Bearer token, else 401 echoing the token received, as some servers do; ``echo``,
a ``callable(token) -> str``, changes how it is echoed: base64, upper case...),
``reasoning_field`` ("reasoning_content" or "reasoning"), ``line_ending`` ("\\n", "\\r\\n" or "\\r"),
``cut_after`` (content chunks sent before "cut" drops the connection), ``malformed_after`` (content
chunks sent before the bad line of "malformed") and ``split_size`` (bytes per write in "split").
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODES = (
    "stream",  # a normal SSE stream: role chunk, content chunks, finish_reason "stop", [DONE]
    "no_stream",  # a JSON completion even when streaming was asked for
    "reject_stream",  # 400 mentioning streaming when stream=true; a JSON completion when stream=false
    "hang",  # read the request, then say nothing until the server is closed
    "status",  # answer `status_code` with an OpenAI-style error (and Retry-After); after `fail_times`, "stream"
    "malformed",  # a data line that is not JSON (after `malformed_after` content chunks), then the rest
    "cut",  # part of the answer, then the connection is dropped: no finish_reason, no [DONE]
    "usage_only",  # a normal stream plus a chunk with "choices": [] and usage, as OpenAI sends
    "reasoning",  # `reasoning_field` deltas with the thinking text before the content
    "think",  # content "<think>reasoning</think>\n\nreply" in chunks of at most 3 characters
    "keepalive",  # ": keep-alive" comment lines before and between events
    "split",  # each event written in several tiny writes (`split_size` bytes), flushed one by one
    "ping",  # the role chunk, then a ": ping" comment every `delay` seconds (0.2 s if 0), never an answer or an end
    "trickle",  # the reply's words, one every `delay` seconds (0.2 s if 0), over and over, never an end
)

DEFAULT_REPLY = "Scripted answer about the abstracts [1]."
DEFAULT_REASONING = "The question asks about the abstracts; source [1] covers it."


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (also for "connection refused" tests). Here, not in
    tests/processes.py, because this file also runs on its own as a script, outside the tests package."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ScriptedLLMServer:
    """An OpenAI-compatible server whose every answer is scripted; see the module docstring."""

    def __init__(
        self,
        *,
        reply: str | Callable[[dict[str, Any]], str] = DEFAULT_REPLY,
        reasoning: str = DEFAULT_REASONING,
        models: list[str] | None = None,
        mode: str = "stream",
        chunk_size: int = 8,
        delay: float = 0.0,
        status_code: int = 500,
        retry_after: str | float | None = None,
        fail_times: int | None = None,
        error_message: str | None = None,
        strict_model: bool = False,
        api_key: str | None = None,
        echo: Callable[[str], str] | None = None,
        reasoning_field: str = "reasoning_content",
        line_ending: str = "\n",
        cut_after: int | None = None,
        malformed_after: int = 0,
        split_size: int = 3,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.reply = reply
        self.reasoning = reasoning
        self.models = list(models) if models is not None else ["scripted-model"]
        self.mode = mode
        self.chunk_size = chunk_size
        self.delay = delay
        self.status_code = status_code
        self.retry_after = retry_after
        self.fail_times = fail_times
        self.error_message = error_message
        self.strict_model = strict_model
        self.api_key = api_key
        self.echo = echo
        self.reasoning_field = reasoning_field
        self.line_ending = line_ending
        self.cut_after = cut_after
        self.malformed_after = malformed_after
        self.split_size = split_size
        self._host = host
        self._port = port
        self._lock = threading.Lock()
        self._requests: list[dict[str, Any]] = []
        self._failures_sent = 0
        self._closing = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle -----------------------------------------------------------------------------

    def start(self) -> ScriptedLLMServer:
        if self._httpd is not None:
            return self
        handler = type("Handler", (_Handler,), {"scripted": self})
        httpd = _QuietServer((self._host, self._port), handler)
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="scripted-llm", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()  # releases "hang" handlers
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ScriptedLLMServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def serve_forever(self) -> None:
        """Run until interrupted (the standalone process)."""
        self.start()
        try:
            self._closing.wait()
        finally:
            self.close()

    # --- what tests look at --------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the scripted server is not started")
        return self._httpd.server_address[1]

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every request so far: ``{"method", "path", "headers", "json"}`` (``json`` is None if none)."""
        with self._lock:
            return list(self._requests)

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["path"].endswith("/chat/completions")]

    def reset(self) -> None:
        """Forget recorded requests and the failures already sent in "status" mode."""
        with self._lock:
            self._requests.clear()
            self._failures_sent = 0

    # --- used by the handler -------------------------------------------------------------------

    def _record(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self._requests.append(entry)

    def _snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                name: getattr(self, name)
                for name in (
                    "reply",
                    "reasoning",
                    "models",
                    "mode",
                    "chunk_size",
                    "delay",
                    "status_code",
                    "retry_after",
                    "fail_times",
                    "error_message",
                    "strict_model",
                    "api_key",
                    "echo",
                    "reasoning_field",
                    "line_ending",
                    "cut_after",
                    "malformed_after",
                    "split_size",
                )
            }

    def _take_failure(self, fail_times: int | None) -> bool:
        """In "status" mode: whether this request should fail (counts the failures sent)."""
        with self._lock:
            if fail_times is not None and self._failures_sent >= fail_times:
                return False
            self._failures_sent += 1
            return True


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up (after a timeout, or between keep-alive requests) is no error."""
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    scripted: ScriptedLLMServer  # set on the subclass made per server
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server_version = "ScriptedLLM/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    # --- routing -------------------------------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        config = self._start(None)
        if config is None:
            return
        if self.path.rstrip("/") == "/v1/models":
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "scripted"} for m in config["models"]]
            self._send_json(200, {"object": "list", "data": data})
        else:
            self._send_text(404, "Not Found")

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        config = self._start(body)
        if config is None:
            return
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send_text(404, "Not Found")
            return
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            self._send_error_json(400, "'messages' is required", "invalid_request_error")
            return
        model = body.get("model")
        if config["strict_model"] and model not in config["models"]:
            self._send_error_json(404, f"model '{model}' not found", "invalid_request_error", "model_not_found")
            return
        self._chat(config, body)

    def _start(self, body: Any) -> dict[str, Any] | None:
        """Record the request; check the key. The configuration to answer with, or None if answered."""
        scripted = self.scripted
        scripted._record(
            {"method": self.command, "path": self.path, "headers": dict(self.headers.items()), "json": body}
        )
        config = scripted._snapshot()
        key = config["api_key"]
        if key is not None:
            sent = self.headers.get("Authorization", "")
            if sent != f"Bearer {key}":
                token = sent.removeprefix("Bearer ").strip()
                if token and config["echo"] is not None:
                    token = config["echo"](token)
                message = f"Incorrect API key provided: {token}" if token else "You didn't provide an API key."
                self._send_error_json(401, message, "invalid_request_error", "invalid_api_key")
                return None
        return config

    # --- chat ----------------------------------------------------------------------------------

    def _chat(self, config: dict[str, Any], body: dict[str, Any]) -> None:
        mode = config["mode"]
        streaming = bool(body.get("stream"))
        reply = config["reply"](body) if callable(config["reply"]) else str(config["reply"])
        if mode == "hang":
            self.scripted._closing.wait()
            self.close_connection = True
            return
        if mode == "status" and self.scripted._take_failure(config["fail_times"]):
            headers = {}
            if config["retry_after"] is not None:
                headers["Retry-After"] = str(config["retry_after"])
            status = int(config["status_code"])
            message = config["error_message"] or f"scripted failure (HTTP {status})"
            kind = "server_error" if status >= 500 else "invalid_request_error"
            self._send_error_json(status, message, kind, None, headers)
            return
        if mode == "reject_stream" and streaming:
            self._send_error_json(400, "streaming is not supported by this server", "invalid_request_error")
            return
        if mode in ("no_stream", "reject_stream") or not streaming:
            self._send_json(200, _completion(body, reply, config))
            return
        self._stream(config, body, reply)

    def _stream(self, config: dict[str, Any], body: dict[str, Any], reply: str) -> None:
        mode = config["mode"]
        model = body.get("model") or config["models"][0]
        size = max(1, int(config["chunk_size"]))
        if mode == "think":
            size = min(size, 3)
            text = f"<think>{config['reasoning']}</think>\n\n{reply}"
        else:
            text = reply
        pieces = [text[i : i + size] for i in range(0, len(text), size)]

        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        eol = config["line_ending"]
        delay = float(config["delay"])

        def event(payload: str) -> None:
            if mode == "keepalive":
                self._write(f": keep-alive{eol}{eol}".encode(), config)
            self._write(f"data: {payload}{eol}{eol}".encode(), config)
            if delay:
                time.sleep(delay)

        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            return json.dumps(
                {
                    "id": "chatcmpl-scripted",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                },
                ensure_ascii=False,
            )

        try:
            if mode == "keepalive":
                self._write(f": keep-alive{eol}{eol}".encode(), config)
            event(chunk({"role": "assistant", "content": ""}))
            if mode in ("ping", "trickle"):
                self._endless(mode, text, delay or 0.2, eol, event, chunk)
                return
            if mode == "reasoning":
                thought = config["reasoning"]
                for i in range(0, len(thought), size):
                    event(chunk({config["reasoning_field"]: thought[i : i + size], "content": None}))
            cut_after = config["cut_after"] if config["cut_after"] is not None else max(1, len(pieces) // 2)
            for index, piece in enumerate(pieces):
                if mode == "malformed" and index == config["malformed_after"]:
                    event('{"choices": [{"delta": {"content": "broken')
                if mode == "cut" and index == cut_after:
                    self._drop()
                    return
                event(chunk({"content": piece}))
            if mode == "malformed" and config["malformed_after"] >= len(pieces):
                event('{"choices": [{"delta": {"content": "broken')
            if mode == "cut":
                self._drop()
                return
            event(chunk({}, finish="stop"))
            if mode == "usage_only":
                usage = {"prompt_tokens": 42, "completion_tokens": len(pieces), "total_tokens": 42 + len(pieces)}
                event(
                    json.dumps(
                        {
                            "id": "chatcmpl-scripted",
                            "object": "chat.completion.chunk",
                            "created": 0,
                            "model": model,
                            "choices": [],
                            "usage": usage,
                        }
                    )
                )
            event("[DONE]")
            self._write_raw(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _endless(self, mode: str, text: str, delay: float, eol: str, event, chunk) -> None:
        """Keep the stream open until the server closes or the client leaves: comments, or words one by one."""
        words = text.split() or ["word"]
        sent = 0
        while not self.scripted._closing.wait(delay):
            if mode == "ping":
                self._write_chunk(f": ping{eol}{eol}".encode())
            else:
                event(chunk({"content": words[sent % len(words)] + " "}))
                sent += 1
        self.close_connection = True

    # --- writing -------------------------------------------------------------------------------

    def _write(self, data: bytes, config: dict[str, Any]) -> None:
        """Write ``data`` as HTTP chunks: whole, or in tiny flushed pieces in "split" mode."""
        if config["mode"] == "split":
            step = max(1, int(config["split_size"]))
            for i in range(0, len(data), step):
                self._write_chunk(data[i : i + step])
                time.sleep(0.0005)
        else:
            self._write_chunk(data)

    def _write_chunk(self, data: bytes) -> None:
        self._write_raw(b"%x\r\n%s\r\n" % (len(data), data))

    def _write_raw(self, data: bytes) -> None:
        self.wfile.write(data)
        self.wfile.flush()

    def _drop(self) -> None:
        """Close the connection in the middle of the chunked body."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_error_json(
        self,
        status: int,
        message: str,
        kind: str,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self._send_json(status, {"error": {"message": message, "type": kind, "param": None, "code": code}}, headers)

    def _send_text(self, status: int, text: str) -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _completion(body: dict[str, Any], reply: str, config: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply}
    if config["mode"] == "reasoning":
        message[config["reasoning_field"]] = config["reasoning"]
    elif config["mode"] == "think":
        message["content"] = f"<think>{config['reasoning']}</think>\n\n{reply}"
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model") or config["models"][0],
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49},
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A scripted OpenAI-compatible chat server for tests.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: any free port (the URL is printed first)")
    parser.add_argument("--reply", default=DEFAULT_REPLY, help="the answer text")
    parser.add_argument("--reasoning", default=DEFAULT_REASONING, help="thinking text for --mode reasoning/think")
    parser.add_argument("--mode", choices=MODES, default="stream")
    parser.add_argument("--models", default="scripted-model", help="comma-separated ids for GET /v1/models")
    parser.add_argument("--chunk-size", type=int, default=8)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds between chunks")
    parser.add_argument("--status-code", type=int, default=500)
    parser.add_argument("--retry-after", default=None)
    parser.add_argument("--fail-times", type=int, default=None)
    parser.add_argument("--error-message", default=None)
    parser.add_argument("--strict-model", action="store_true")
    parser.add_argument("--api-key", default=None, help="require this Bearer token")
    args = parser.parse_args(argv)
    server = ScriptedLLMServer(
        reply=args.reply,
        reasoning=args.reasoning,
        models=[m for m in args.models.split(",") if m],
        mode=args.mode,
        chunk_size=args.chunk_size,
        delay=args.delay,
        status_code=args.status_code,
        retry_after=args.retry_after,
        fail_times=args.fail_times,
        error_message=args.error_message,
        strict_model=args.strict_model,
        api_key=args.api_key,
        host=args.host,
        port=args.port,
    )
    server.start()
    print(server.base_url if args.host == "127.0.0.1" else f"http://{args.host}:{server.port}/v1", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
        sys.stdout.flush()


if __name__ == "__main__":
    main()
