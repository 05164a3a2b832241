"""Opening the Chroma store, embedded (a folder) or on a ``chroma run`` server, and turning what Chroma
and httpx raise into paperchat's errors, each saying what to do (start the server, free disk space, make
the folder writable...). A server that went away is forgotten, so the next call reconnects.

Embeddings are always passed in (collections are opened with ``embedding_function=None``), so
Chroma's own ONNX default, which would download a model, never runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Self

from rag.errors import StoreError, StoreUnavailable
from store.layout import PAPERS_SUFFIX, papers_collection


class ChromaConnection:
    """One corpus's two collections in Chroma, embedded (a folder) or on a server (host:port), opened lazily;
    every call goes through ``_call``, which turns Chroma's exceptions into paperchat's errors."""

    def __init__(
        self,
        *,
        path: Path | None = None,
        host: str | None = None,
        port: int = 8000,
        collection: str = "paperchat",
        timeout: int = 30,
    ) -> None:
        if (path is None) == (host is None):
            raise ValueError("give exactly one of path= (embedded store) or host= (Chroma server)")
        self.path = path
        self.host = host
        self.port = port
        self.timeout = timeout
        self.name = collection
        self._client = None
        self._chunks = None
        self._papers = None

    @classmethod
    def from_settings(cls, settings) -> Self:
        if settings.chroma_host:
            return cls(host=settings.chroma_host, port=settings.chroma_port, collection=settings.collection,
                       timeout=settings.chroma_timeout)
        return cls(path=settings.index_dir, collection=settings.collection)

    @property
    def location(self) -> str:
        if self.host is not None:
            return f"chroma server http://{self.host}:{self.port} (collection {self.name})"
        return f"{self.path} (collection {self.name})"

    @property
    def client(self):
        if self._client is None:
            import chromadb

            settings = chromadb.Settings(anonymized_telemetry=False, allow_reset=False)
            try:
                if self.host is not None:
                    self._probe_server()  # chromadb.HttpClient's constructor already talks to the server
                    self._client = chromadb.HttpClient(host=self.host, port=self.port, settings=settings)
                    _set_session_timeout(self._client, self.timeout)
                    self._client.heartbeat()
                else:
                    self.path.mkdir(parents=True, exist_ok=True)
                    self._client = chromadb.PersistentClient(path=str(self.path), settings=settings)
            except PermissionError as e:
                raise StoreError(f"cannot write the index folder {self.path}: {e.strerror}; "
                                 "set PAPERCHAT_DATA_DIR to a writable folder") from e
            except Exception as e:
                self._client = None
                raise self._translate(e, "open the index") from e
        return self._client

    def _probe_server(self) -> None:
        """Fail within the timeout, with the usual errors, if the server does not answer its heartbeat."""
        import httpx

        with httpx.Client(timeout=self.timeout, trust_env=False) as http:
            http.get(f"http://{self.host}:{self.port}/api/v2/heartbeat")

    def _translate(self, error: Exception, doing: str) -> StoreError:
        if isinstance(error, StoreError):
            return error
        if self.host is not None and _is_timeout(error):
            return StoreUnavailable(
                f"the Chroma server at http://{self.host}:{self.port} did not answer within {self.timeout} s "
                f"(PAPERCHAT_CHROMA_TIMEOUT) to {doing}: check that `chroma run` is running and not stuck, "
                "or raise PAPERCHAT_CHROMA_TIMEOUT"
            )
        text = f"{type(error).__name__}: {error}".replace("\n", " ")[:300]
        if self.host is not None and any(
            word in text.lower() for word in ("connect", "refused", "timed out", "timeout", "unreachable", "resolve")
        ):
            return StoreUnavailable(
                f"cannot reach the Chroma server at http://{self.host}:{self.port} to {doing}: start it with "
                f"`chroma run --path DIR --host {self.host} --port {self.port}` or unset PAPERCHAT_CHROMA_HOST "
                "to use the embedded store"
            )
        if "readonly" in text.lower() or "read-only" in text.lower() or "permission" in text.lower():
            return StoreError(f"cannot {doing} at {self.location}: the folder is read-only ({text}); "
                              "make it writable or set PAPERCHAT_DATA_DIR")
        if "no space" in text.lower() or "disk is full" in text.lower() or "database or disk is full" in text.lower():
            return StoreError(f"cannot {doing} at {self.location}: the disk is full; free space and run the ingest "
                              "again (it resumes where it stopped)")
        return StoreError(f"cannot {doing} at {self.location}: {text}")

    def _call(self, doing: str, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except StoreError:
            raise
        except Exception as e:
            # A server that went away: forget the client so the next call reconnects.
            if self.host is not None:
                self._client = self._chunks = self._papers = None
            raise self._translate(e, doing) from e

    def _collection(self, name: str, create: bool, metadata: dict | None = None):
        def op():
            try:
                return self.client.get_collection(name, embedding_function=None)
            except Exception as e:
                if not create or not _is_missing(e):
                    raise
            # get_or_create would overwrite an existing collection's manifest: only create when missing.
            return self.client.create_collection(
                name, metadata=metadata, configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
            )

        return self._call("open the index", op)

    def _open(self, create: bool, manifest: dict | None = None) -> bool:
        if self._chunks is not None:
            return True
        collections = self._call("list collections", self.client.list_collections)
        existing = {c.name if hasattr(c, "name") else c for c in collections}
        if self.name not in existing and not create:
            return False
        self._chunks = self._collection(self.name, create, metadata={**(manifest or {}), "generation": 0})
        self._papers = self._collection(papers_collection(self.name), create, metadata={"role": "papers"})
        return True

    def exists(self) -> bool:
        return self._open(create=False)

    def collection_names(self) -> list[str]:
        """The indexes (chunk collections) this store holds, by name."""
        collections = self._call("list collections", self.client.list_collections)
        names = {c.name if hasattr(c, "name") else c for c in collections}
        return sorted(n for n in names if not n.endswith(PAPERS_SUFFIX) or n[: -len(PAPERS_SUFFIX)] not in names)


def _is_missing(error: Exception) -> bool:
    text = str(error).lower()
    return type(error).__name__ == "NotFoundError" or "does not exist" in text or "not found" in text


def _is_timeout(error: BaseException) -> bool:
    import httpx

    while error is not None:
        if isinstance(error, httpx.TimeoutException | TimeoutError):
            return True
        error = error.__cause__ or error.__context__
    return False


def _set_session_timeout(client, seconds: float) -> None:
    """Give chromadb's HTTP session a timeout: chromadb 1.5 builds it with ``httpx.Client(timeout=None)`` and no
    setting reaches it (its ``chroma_*_timeout_seconds`` settings are the server's), so a stalled server would
    hang every call. The session is an attribute of chromadb's client internals; tests/store/test_chroma_server.py
    stops a real server to check that this still takes effect."""
    import httpx

    session = getattr(getattr(client, "_server", None), "_session", None)
    if not isinstance(session, httpx.Client):
        raise StoreError(
            "this chromadb version's HTTP client has no session paperchat can give a timeout to; "
            "install chromadb 1.x as pyproject.toml says, or unset PAPERCHAT_CHROMA_HOST to use the embedded store"
        )
    session.timeout = httpx.Timeout(float(seconds))
