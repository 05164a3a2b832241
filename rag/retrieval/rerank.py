"""Optional reranking of the top papers with a user-supplied sentence-transformers cross-encoder.

Off by default: no cross-encoder ships with paperchat, and one costs a forward pass per (question,
paper) pair plus torch at query time. With ``PAPERCHAT_RERANKER_MODEL`` set to a local model folder,
the retriever's first ``rerank_top`` papers are reordered by the model's score for (question, title +
abstract); the rest keep their order below them. Like the embedding model, it is never downloaded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path

import numpy as np

from rag.embedding.models import set_offline
from rag.errors import ModelNotFound
from rag.types import Hit


class CrossEncoderReranker:
    """Implements ``Reranker``: ``rerank(question, hits) -> hits`` with new ranks and scores."""

    def __init__(self, model_dir: str | Path, *, top: int = 30, batch_size: int = 16) -> None:
        self.model_dir = Path(model_dir).expanduser()
        self.top = max(1, int(top))
        self.batch_size = batch_size
        if not (self.model_dir / "config.json").is_file():
            raise ModelNotFound(
                f"PAPERCHAT_RERANKER_MODEL={model_dir} is not a local cross-encoder folder (no config.json): "
                "point it at the folder holding the model files, or unset it to search without reranking"
            )

    def __repr__(self) -> str:
        return f"CrossEncoderReranker({str(self.model_dir)!r})"

    @cached_property
    def _model(self):
        set_offline()
        try:
            from sentence_transformers import CrossEncoder

            return CrossEncoder(str(self.model_dir), device="cpu", local_files_only=True)
        except Exception as e:  # sentence-transformers raises OSError, ValueError, ...
            raise ModelNotFound(
                f"cannot load the cross-encoder {self.model_dir} ({type(e).__name__}: {str(e)[:200]}): fix "
                "PAPERCHAT_RERANKER_MODEL or unset it"
            ) from e

    def scores(self, question: str, hits: Sequence[Hit]) -> np.ndarray:
        pairs = [(question, f"{h.title}. {h.abstract}" if h.title else h.abstract) for h in hits]
        if not pairs:
            return np.zeros(0, dtype=np.float32)
        out = self._model.predict(pairs, batch_size=self.batch_size, show_progress_bar=False)
        return np.asarray(out, dtype=np.float32).reshape(len(pairs), -1)[:, -1]

    def rerank(self, question: str, hits: Sequence[Hit]) -> list[Hit]:
        head, tail = list(hits[: self.top]), list(hits[self.top :])
        scores = self.scores(question, head)
        order = sorted(range(len(head)), key=lambda i: (-float(scores[i]), i))
        reranked = [dataclasses.replace(head[i], score=float(scores[i])) for i in order] + tail
        return [dataclasses.replace(hit, rank=rank) for rank, hit in enumerate(reranked, start=1)]
