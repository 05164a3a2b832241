"""Every error paperchat raises on purpose.

Each message says what happened and what to do about it. Library exceptions are translated at the
boundary (``raise LLMUnavailable(...) from e``) so callers only ever need to catch ``PaperchatError``.
The CLI prints ``str(error)`` as one line and exits non-zero; it never shows a traceback for these.

Hierarchy::

    PaperchatError
    ├── ConfigError              bad or inconsistent settings
    ├── CorpusError              a corpus file or record cannot be used
    ├── ModelNotFound            a configured embedding model is missing
    ├── StoreError               the index cannot be opened or written
    │   ├── IndexMismatch        built with another model or chunking: rebuild
    │   ├── IndexLocked          another ingest holds the lock
    │   └── StoreUnavailable     the Chroma server cannot be reached
    ├── QueryError               a question that cannot be searched (too long, empty)
    │   └── UnknownModel         an API request names a model this server does not offer
    ├── ServerBusy               every answer slot of the API is taken: retry later
    └── LLMError                 the chat endpoint failed
        ├── LLMUnavailable       connection refused / DNS / network
        ├── LLMAuthError         401/403: key missing or rejected
        ├── LLMModelNotFound     404: the model is unknown to the server
        ├── LLMRateLimited       429 after retries
        ├── LLMTimeout           no answer within the timeout
        ├── LLMServerError       5xx after retries
        ├── LLMProtocolError     the reply is not OpenAI-compatible
        └── LLMInterrupted       the stream broke after part of the answer arrived
"""

from __future__ import annotations


class PaperchatError(Exception):
    """Base class: everything paperchat raises on purpose. ``str()`` is a one-line user message."""

    exit_code = 1


class ConfigError(PaperchatError):
    """A setting is invalid or settings contradict each other."""


class CorpusError(PaperchatError):
    """A corpus path cannot be read at all (missing path, nothing loadable)."""


class ModelNotFound(PaperchatError):
    """The configured embedding model is not on disk (we never download one)."""


class StoreError(PaperchatError):
    """The index cannot be opened or written."""


class IndexMismatch(StoreError):
    """The index was built with another embedding model or chunking than the one configured."""


class IndexLocked(StoreError):
    """Another ingest is writing to the index."""


class StoreUnavailable(StoreError):
    """The Chroma server is not reachable."""


class QueryError(PaperchatError):
    """A question that cannot be searched."""


class UnknownModel(QueryError):
    """An API request names a model this server does not offer."""


class ServerBusy(PaperchatError):
    """Every answer slot of the API is taken and the waiting line is full: retry later."""


class LLMError(PaperchatError):
    """The chat-completions endpoint failed."""


class LLMUnavailable(LLMError):
    """Nothing answers at the configured URL."""


class LLMAuthError(LLMError):
    """The server rejected the API key (or needs one)."""


class LLMModelNotFound(LLMError):
    """The server does not know the configured model."""


class LLMRateLimited(LLMError):
    """The server kept answering 429 Too Many Requests."""


class LLMTimeout(LLMError):
    """The server did not answer in time."""


class LLMServerError(LLMError):
    """The server kept failing with 5xx."""


class LLMProtocolError(LLMError):
    """The server's reply is not a valid OpenAI-compatible response."""


class LLMInterrupted(LLMError):
    """The stream broke off after part of the answer had arrived; ``partial`` holds that part."""

    def __init__(self, message: str, partial: str = "") -> None:
        super().__init__(message)
        self.partial = partial
