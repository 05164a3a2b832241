"""Errors in OpenAI's shape (``{"error": {"message", "type", "param", "code"}}``) with OpenAI's status codes,
for the API and for the guard in front of it; every exception maps to one, and none shows a traceback."""

from __future__ import annotations

import logging

from starlette.responses import JSONResponse

from rag.errors import LLMError, LLMRateLimited, PaperchatError, QueryError, ServerBusy, UnknownModel
from ui.api.answers import EXTRACTIVE_MODEL

log = logging.getLogger("paperchat.api")

RETRY_AFTER = "2"  # seconds a client told 429 should wait


class APIError(Exception):
    """An error answered in OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}``."""

    def __init__(self, status: int, message: str, *, kind: str = "invalid_request_error", code: str | None = None,
                 param: str | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.code = code
        self.param = param
        self.headers = headers or {}

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def api_error(error: Exception) -> APIError:
    """Any exception -> the APIError a client gets; unexpected ones are logged, never shown."""
    if isinstance(error, APIError):
        return error
    if isinstance(error, UnknownModel):
        return APIError(404, str(error), code="model_not_found", param="model")
    if isinstance(error, QueryError):
        return APIError(400, str(error))
    if isinstance(error, ServerBusy):
        return APIError(429, str(error), kind="rate_limit_error", code="server_busy",
                        headers={"Retry-After": RETRY_AFTER})
    if isinstance(error, LLMRateLimited):
        return APIError(429, f"the answer writer is rate limited: {error}; retry later",
                        kind="rate_limit_error", code="upstream_rate_limited", headers={"Retry-After": RETRY_AFTER})
    if isinstance(error, LLMError):
        return APIError(503, f"the answer writer failed: {error}; retry later, or use the model "
                             f"{EXTRACTIVE_MODEL} (no LLM)", kind="server_error", code="upstream_unavailable")
    if isinstance(error, PaperchatError):
        return APIError(503, str(error), kind="server_error", code="unavailable")
    log.error("API request failed", exc_info=error)
    return APIError(500, f"internal error: {type(error).__name__} (this is a bug; the server log has details)",
                    kind="server_error", code="internal_error")
