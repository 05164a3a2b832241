"""One OpenAI-compatible server as the client reaches it: its URL, its credentials and its HTTP connection.

The API key is sent only in the ``Authorization`` header, and ``user:password@`` in the URL only as a
header too: the URL that is shown and requested never carries them, and :attr:`Endpoint.secrets` lists
what every message must be redacted of, even when a server echoes it back.
"""

from __future__ import annotations

import base64
import threading
from urllib.parse import urlsplit

import httpx

from rag.redact import redact_secrets, redact_url, url_credentials

# A proxy from the environment must not capture a server on this machine.
_THIS_MACHINE = ("127.0.0.1", "localhost", "::1", "0.0.0.0")


class Secret:
    """Holds the API key so that no ``repr``, ``vars()`` dump or traceback local shows it."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "'***'"


class Endpoint:
    """Where requests go and with which credentials; the httpx client is created on first use."""

    def __init__(
        self, base_url: str, *, api_key: str | None, timeout: float, transport: httpx.BaseTransport | None
    ) -> None:
        self.base_url = base_url.strip().rstrip("/")
        self.timeout = float(timeout)
        self._secret = Secret(api_key) if api_key else None
        self._transport = transport
        self._client: httpx.Client | None = None
        self._client_lock = threading.Lock()
        self.shown_url = redact_url(self.base_url)
        # Credentials in the URL are sent as a header, never as part of the URL (httpx would turn them into
        # an Authorization header that replaces the API key's).
        self.request_url = self.shown_url
        credentials = url_credentials(self.base_url)
        self._basic = Secret(":".join(credentials)) if credentials else None

    @property
    def api_key(self) -> str | None:
        return self._secret.value if self._secret is not None else None

    @property
    def secrets(self) -> list[str | None]:
        """Everything never to show: the API key, and the URL's password."""
        password = self._basic.value.partition(":")[2] if self._basic is not None else None
        return [self.api_key, password]

    def redact(self, text: str) -> str:
        return redact_secrets(text, self.secrets)

    def headers(self) -> dict[str, str]:
        """The API key as ``Authorization: Bearer``, what OpenAI-compatible servers read. The URL's
        ``user:password`` goes in ``Authorization: Basic`` when there is no key; with a key too, in
        ``Proxy-Authorization: Basic`` (one header cannot carry both; a proxy asking for a login reads that)."""
        headers = {"Accept": "text/event-stream, application/json"}
        basic = f"Basic {base64.b64encode(self._basic.value.encode()).decode()}" if self._basic else None
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
            if basic:
                headers["Proxy-Authorization"] = basic
        elif basic:
            headers["Authorization"] = basic
        return headers

    @property
    def is_open(self) -> bool:
        """Whether the httpx client exists (it is created by the first request)."""
        return self._client is not None

    def http(self) -> httpx.Client:
        with self._client_lock:
            if self._client is None:
                host = (urlsplit(self.base_url).hostname or "").lower()
                self._client = httpx.Client(
                    timeout=httpx.Timeout(self.timeout),
                    transport=self._transport,
                    trust_env=host not in _THIS_MACHINE,
                )
            return self._client

    def close(self) -> None:
        with self._client_lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()
