"""Settings -> components. The only place that decides which concrete parts are built.

Everything here is lazy: building a component loads nothing heavy; the embedding model loads on the
first ``embed`` and the Chroma client on the first store call.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from rag.embedding import Embedder, ProgressBar, SentenceTransformerEmbedder
from rag.ingest import Ingestor, index_manifest, make_chunker
from rag.lexical import LexicalIndex
from rag.retrieval import HybridRetriever
from rag.settings import Settings
from store.chroma import ChromaStore


@dataclass
class Components:
    settings: Settings

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
