"""What goes wrong between the client and an endpoint, as ``rag.errors``: one ``LLMError`` per failure.

:class:`EndpointErrors` turns HTTP statuses (401/403, 404, 429, 5xx, refusals), httpx transport errors,
timeouts and replies of the wrong shape into one-line messages that say what happened and what to do,
quoting the server's own error text briefly and always redacted of the endpoint's secrets. 429 and 5xx
come back as :class:`~rag.llm.retries.RetryableError`; a refused ``"stream": true`` as
:class:`~rag.llm.retries.StreamRefusedError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, NoReturn
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
from rag.llm.endpoint import Endpoint
from rag.llm.retries import RetryableError, StreamRefusedError, retry_after_delay
from rag.redact import redact_secrets
from rag.text import one_line

EXCERPT_CHARS = 200  # longest excerpt of a server's error message quoted in our messages
_MAX_ERROR_BODY = 64 * 1024  # bytes of an error reply we read at most
_START_HINT = (
    "Start a server there (e.g. `ollama serve`, `llama-server -m MODEL.gguf --port 8080`) "
    "or set PAPERCHAT_LLM_BASE_URL, or use --extractive"
)


class EndpointErrors:
    """Builds the error for each way a request to one endpoint can fail, naming the endpoint as shown."""

    def __init__(self, endpoint: Endpoint) -> None:
        self._endpoint = endpoint
        self._shown_url = endpoint.shown_url

    def redact(self, text: str) -> str:
        return self._endpoint.redact(text)

    def quote(self, payload: Any) -> str:
        """The message in a server's error object, short and redacted, to quote in ours."""
        return error_text(payload, self._endpoint.secrets)

    def error(self, cls: type[LLMError], message: str) -> LLMError:
        return cls(self.redact(one_line(message, 2000)))

    def fail(self, cls: type[LLMError], message: str) -> NoReturn:
        raise self.error(cls, message)

    def interrupted(self, partial: str, what: str) -> LLMInterrupted:
        return LLMInterrupted(
            self.redact(
                one_line(
                    f"the answer from the LLM endpoint at {self._shown_url} broke off: {what}; "
                    "showing the part that arrived. Ask again, and check the server's log if it keeps happening",
                    2000,
                )
            ),
            partial=partial,
        )

    def unreachable(self, error: httpx.TransportError) -> LLMError:
        return self.error(
            LLMUnavailable,
            f"cannot reach the LLM endpoint at {self._shown_url} ({failure_reason(error)}). {_START_HINT}",
        )

    def odd_http(self, error: Exception) -> LLMError:
        if isinstance(error, httpx.InvalidURL):
            return self.error(
                LLMUnavailable,
                f"the LLM endpoint URL {self._shown_url} is not a valid URL ({one_line(str(error), 120)}). "
                "Set PAPERCHAT_LLM_BASE_URL to something like http://127.0.0.1:11434/v1",
            )
        return self.error(
            LLMProtocolError,
            f"the reply of the LLM endpoint at {self._shown_url} could not be read ({failure_reason(error)}). "
            "Check that PAPERCHAT_LLM_BASE_URL points at an OpenAI-compatible API",
        )

    def timeout(self, doing: str) -> LLMError:
        timeout = self._endpoint.timeout
        return self.error(
            LLMTimeout,
            f"the LLM endpoint at {self._shown_url} did not answer within {timeout:g} s while {doing} "
            f"(PAPERCHAT_LLM_TIMEOUT={timeout:g}). Raise PAPERCHAT_LLM_TIMEOUT, use a smaller model, "
            "or check that the server is not stuck",
        )

    def not_json(self, text: str, path: str) -> LLMError:
        return self.error(
            LLMProtocolError,
            f"the LLM endpoint at {self._shown_url} answered {path} with something that is not JSON "
            f"({one_line(text, 80)!r}). Check that PAPERCHAT_LLM_BASE_URL points at an OpenAI-compatible API "
            "(it usually ends in /v1)",
        )

    def wrong_shape_message(self, what: str) -> str:
        return (
            f"the LLM endpoint at {self._shown_url} sent {what}, which is not an OpenAI-compatible reply. "
            "Check that PAPERCHAT_LLM_BASE_URL points at an OpenAI-compatible API"
        )

    def wrong_shape(self, what: str) -> LLMError:
        return self.error(LLMProtocolError, self.wrong_shape_message(what))

    def missing_path_message(self, url: str) -> str:
        if urlsplit(self._endpoint.base_url).path.rstrip("/").endswith("/v1"):
            fix = "Check PAPERCHAT_LLM_BASE_URL: it should be the API's base URL"
        else:
            fix = f"The URL is probably missing `/v1`: set PAPERCHAT_LLM_BASE_URL={self._shown_url}/v1"
        return f"the LLM endpoint has nothing at {url} (HTTP 404). {fix}"

    def unknown_model_message(self, model: str, status: int, offered: list[str] | None) -> str:
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

    # --- HTTP statuses -----------------------------------------------------------------------------

    def raise_for_chat_status(
        self, response: httpx.Response, raw: bytes, body: dict[str, Any], attempt: int,
        list_models: Callable[[], list[str]],
    ) -> NoReturn:
        """A failed ``/chat/completions``: a refused stream, a wrong path or model, then what any request gets."""
        status = response.status_code
        detail = error_detail(raw, self._endpoint.secrets)
        lowered = detail.lower()
        if status in (400, 422) and body["stream"] and "stream" in lowered:
            raise StreamRefusedError()
        if status == 404 or (status in (400, 422) and _mentions_unknown_model(raw, lowered)):
            if status == 404 and not _mentions_model(raw, lowered):
                self.fail(LLMUnavailable, self.missing_path_message(f"{self._shown_url}/chat/completions"))
            try:
                offered: list[str] | None = list_models()
            except LLMError:
                offered = None
            self.fail(LLMModelNotFound, self.unknown_model_message(body["model"], status, offered))
        self.raise_for_status(response, detail, attempt)

    def raise_for_status(self, response: httpx.Response, detail: str, attempt: int) -> NoReturn:
        """Errors shared by every request: auth, rate limits, server failures, other refusals."""
        status = response.status_code
        where = f"the LLM endpoint at {self._shown_url}"
        said = f": {detail}" if detail else ""
        tries = f"{attempt + 1} attempt{'s' if attempt else ''}"
        if status in (401, 403):
            if self._endpoint.api_key:
                self.fail(
                    LLMAuthError,
                    f"{where} rejected the API key (HTTP {status}{said}). Set PAPERCHAT_LLM_API_KEY to a valid key",
                )
            self.fail(
                LLMAuthError,
                f"{where} requires an API key (HTTP {status}{said}). Set PAPERCHAT_LLM_API_KEY (or OPENAI_API_KEY)",
            )
        if status == 429:
            raise RetryableError(
                self.error(
                    LLMRateLimited,
                    f"{where} kept answering 429 Too Many Requests ({tries}{said}). Wait a minute and ask again, "
                    "or raise PAPERCHAT_LLM_RETRIES",
                ),
                "HTTP 429 Too Many Requests",
                wait=retry_after_delay(response.headers.get("retry-after")),
            )
        if status >= 500:
            raise RetryableError(
                self.error(
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
        self.fail(LLMError, f"{where} refused the request (HTTP {status}{said}). {hint}")


# --- reading what a server said ------------------------------------------------------------------


def read_error_body(response: httpx.Response) -> bytes:
    """The start of an error reply: enough to quote, never a whole runaway body."""
    raw = bytearray()
    for piece in response.iter_bytes():
        raw += piece
        if len(raw) >= _MAX_ERROR_BODY:
            break
    return bytes(raw[:_MAX_ERROR_BODY])


def error_text(payload: Any, secrets: list[str | None]) -> str:
    """The message inside an OpenAI-style (or similar) error object, as one short redacted line."""
    message: Any = payload
    if isinstance(payload, dict):
        err = payload.get("error", payload)
        message = (err.get("message") or err.get("detail") or err.get("msg") or err) if isinstance(err, dict) else err
        if message is payload and isinstance(payload.get("message") or payload.get("detail"), str):
            message = payload.get("message") or payload.get("detail")
    if not isinstance(message, str):
        message = json.dumps(message, ensure_ascii=False)
    return one_line(redact_secrets(message, secrets), EXCERPT_CHARS)


def error_detail(raw: bytes, secrets: list[str | None]) -> str:
    """What an error reply's body says (JSON error object, plain text or a web page), as one short line."""
    text = raw.decode("utf-8", errors="replace")
    try:
        payload = json.loads(text)
    except (ValueError, RecursionError):
        text = redact_secrets(text, secrets)
        if "<html" in text[:500].lower():
            text = re.sub(r"<[^>]*>", " ", text)
        return one_line(text, EXCERPT_CHARS)
    return error_text(payload, secrets)


def _mentions_model(raw: bytes, lowered_detail: str) -> bool:
    return "model" in lowered_detail or b"model_not_found" in raw


def _mentions_unknown_model(raw: bytes, lowered_detail: str) -> bool:
    if b"model_not_found" in raw:
        return True
    return "model" in lowered_detail and bool(
        re.search(r"not found|does not exist|not exist|unknown|not a valid model|no such", lowered_detail)
    )


def failure_reason(error: Exception) -> str:
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
            return f"TLS failed: {one_line(text, 120)}"
    return one_line(text, 120) or type(error).__name__
