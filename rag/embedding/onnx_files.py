"""The ONNX export's files, shared by the exporter (rag.embedding.onnx) and the runtime embedder
(rag.embedding.onnx_embedder): where they live, the sidecar that fingerprints the model folder they came
from, atomic JSON writes, and the model's own ``tokenizer.json``::

    <cache_dir>/<model name>/model.onnx            fp32 export (needs torch, once, at ingest time)
    <cache_dir>/<model name>/model-int8.onnx       dynamic int8 weights
    <cache_dir>/<model name>/model*.onnx.json      which model folder it came from (a fingerprint)

The fingerprint lets a query refuse an ONNX file exported from another model of the same name, which
the index manifest (it records names) could not tell apart.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path

from rag.errors import ModelNotFound

ONNX_FILE = "model.onnx"
INT8_FILE = "model-int8.onnx"
INT8_SUFFIX = "-int8"
SIDECAR_FORMAT = 1
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
_FINGERPRINT_FILES = ("config.json", "tokenizer.json", "modules.json", "sentence_bert_config.json")


def onnx_model_path(cache_dir: Path, model_name: str, quantized: bool) -> Path:
    """Where the ONNX export of ``model_name`` lives under ``cache_dir`` (e.g. ``<data_dir>/models``)."""
    safe = model_name.strip().replace("/", "--").replace("\\", "--")
    if not safe or safe in (".", ".."):
        raise ValueError(f"not a usable model name: {model_name!r}")
    return Path(cache_dir) / safe / (INT8_FILE if quantized else ONNX_FILE)


def sidecar_path(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def transformer_dir(model_dir: Path) -> Path:
    """The folder of the sentence-transformers Transformer module (the model folder itself, usually)."""
    try:
        modules = json.loads((model_dir / "modules.json").read_text("utf-8"))
    except (OSError, ValueError):
        return model_dir
    for module in modules:
        if str(module.get("type", "")).endswith("models.Transformer"):
            return model_dir / str(module.get("path", ""))
    return model_dir


_SUPPORTED_MODULES = {"Transformer", "Pooling", "Normalize"}


def mean_pooled(model_dir: Path) -> bool:
    """Whether ``OnnxEmbedder`` reproduces this model: a Transformer, mean pooling, at most a Normalize
    (a Dense layer or CLS pooling would be silently dropped, so such models stay on torch)."""
    model_dir = Path(model_dir)
    try:
        modules = json.loads((model_dir / "modules.json").read_text("utf-8"))
        types = [str(module.get("type", "")) for module in modules]
        if not all(t.rsplit(".", 1)[-1] in _SUPPORTED_MODULES for t in types):
            return False
        pooling = next(model_dir / str(m.get("path", "")) for m in modules if str(m["type"]).endswith("Pooling"))
        config = json.loads((pooling / "config.json").read_text("utf-8"))
    except (OSError, ValueError, KeyError, StopIteration, AttributeError, TypeError):
        return False
    modes = {key for key, value in config.items() if key.startswith("pooling_mode_") and value}
    return modes == {"pooling_mode_mean_tokens"}


def _sample_hash(path: Path, block: int = 1 << 20) -> str:
    """sha256 of a file's size and three 1 MiB samples (start, middle, end): cheap, and two fine-tunes
    of one architecture (same size, same safetensors header) still differ in their weights' bytes."""
    size = path.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    with open(path, "rb") as handle:
        for offset in sorted({0, max(0, size // 2 - block // 2), max(0, size - block)}):
            handle.seek(offset)
            digest.update(handle.read(block))
    return digest.hexdigest()[:32]


def source_fingerprint(model_dir: Path) -> str:
    """Identifies the model folder's weights, configuration and tokenizer (a few ms)."""
    model_dir = Path(model_dir)
    digest = hashlib.sha256()
    for folder in dict.fromkeys((model_dir, transformer_dir(model_dir))):
        for name in (*_FINGERPRINT_FILES, *_WEIGHT_FILES):
            file = folder / name
            if file.is_file():
                digest.update(f"{name}:{_sample_hash(file)};".encode())
    return digest.hexdigest()[:32]


def read_sidecar(onnx_path: Path) -> dict:
    try:
        return json.loads(sidecar_path(onnx_path).read_text("utf-8"))
    except (OSError, ValueError):
        return {}


def is_current(model_dir: Path, onnx_path: Path) -> bool:
    """True when ``onnx_path`` exists and was made from this model folder."""
    if not Path(onnx_path).is_file():
        return False
    recorded = read_sidecar(onnx_path).get("source_fingerprint")
    return recorded is not None and recorded == source_fingerprint(model_dir)


def tmp_beside(target: Path) -> Path:
    return target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")


def write_json_atomic(path: Path, data: dict) -> None:
    tmp = tmp_beside(path)
    try:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True), "utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def load_tokenizer(model_dir: Path, max_length: int | None):
    from tokenizers import Tokenizer

    file = Path(model_dir) / "tokenizer.json"
    if not file.is_file():
        file = transformer_dir(Path(model_dir)) / "tokenizer.json"
    if not file.is_file():
        raise ModelNotFound(
            f"{model_dir} has no tokenizer.json, which the ONNX backend needs: use the torch backend for this model"
        )
    tokenizer = Tokenizer.from_file(str(file))
    tokenizer.no_padding()
    if max_length is None:
        tokenizer.no_truncation()
    else:
        # tokenizer.json files often carry a shorter window (128 here) than sentence-transformers uses.
        tokenizer.enable_truncation(max_length=max_length)
    return tokenizer
