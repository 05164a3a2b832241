"""When to ask an endpoint again: the waits between attempts, and the signals that an attempt may be retried.

Connection errors, 429 and 5xx are retried with exponential backoff (or the server's ``Retry-After``);
a server that refuses ``"stream": true`` is asked once more without it. The retry loop itself is the
client's (:meth:`rag.llm.client.OpenAIChatModel.stream`): it never retries once part of an answer was
handed out.
"""

from __future__ import annotations

import email.utils
from datetime import UTC, datetime

from rag.errors import LLMError

MAX_BACKOFF = 8.0  # seconds: cap of the exponential backoff between retries
MAX_RETRY_AFTER = 30.0  # seconds: cap on a server's Retry-After


class RetryableError(Exception):
    """This attempt failed in a way worth retrying; ``error`` is raised if no retry is left."""

    def __init__(self, error: LLMError, reason: str, wait: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.reason = reason  # a few words for the log line
        self.wait = wait


class StreamRefusedError(Exception):
    """The server refused ``"stream": true``; ask again without streaming."""


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

