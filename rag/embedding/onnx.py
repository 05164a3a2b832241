"""Sentence embeddings through ONNX Runtime: the query path without torch.

Importing sentence-transformers costs seconds (torch, transformers, scikit-learn) while a question needs
one forward pass of a 22M-parameter model. ``OnnxEmbedder`` runs the same model with ``onnxruntime`` and
the model's own ``tokenizer.json`` (``tokenizers``), so a search imports neither torch nor transformers.

It reproduces sentence-transformers exactly for the models it accepts (mean pooling, like
all-MiniLM-L6-v2; see ``1_Pooling/config.json``): word pieces truncated to ``max_seq_length`` (special
tokens included), mean of the token vectors over the attention mask, L2 normalisation. The fp32 export
gives the torch model's vectors (cosine > 0.9999), so it keeps the model's name and an index built by
either backend is searched by both; the int8 model is another model (``<name>-int8``).

Files, all derived from the model folder and rebuilt at will (written atomically)::

    <cache_dir>/<model name>/model.onnx            export_onnx: needs torch, once, at ingest time
    <cache_dir>/<model name>/model-int8.onnx       quantize_int8: dynamic int8 weights
    <cache_dir>/<model name>/model*.onnx.json      which model folder it came from (a fingerprint)

The fingerprint lets a query refuse an ONNX file exported from another model of the same name, which
the index manifest (it records names) could not tell apart. ``python -m rag.embedding.onnx`` creates the
files by hand.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from functools import cached_property
from pathlib import Path

import numpy as np

from rag.errors import ModelNotFound

ONNX_FILE = "model.onnx"
INT8_FILE = "model-int8.onnx"
INT8_SUFFIX = "-int8"
OPSET = 17
SIDECAR_FORMAT = 1
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
_FINGERPRINT_FILES = ("config.json", "tokenizer.json", "modules.json", "sentence_bert_config.json")


# --- file locations and fingerprints ---------------------------------------------------------------


def onnx_model_path(cache_dir: Path, model_name: str, quantized: bool) -> Path:
    """Where the ONNX export of ``model_name`` lives under ``cache_dir`` (e.g. ``<data_dir>/models``)."""
    safe = model_name.strip().replace("/", "--").replace("\\", "--")
    if not safe or safe in (".", ".."):
        raise ValueError(f"not a usable model name: {model_name!r}")
    return Path(cache_dir) / safe / (INT8_FILE if quantized else ONNX_FILE)


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def _transformer_dir(model_dir: Path) -> Path:
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
    for folder in dict.fromkeys((model_dir, _transformer_dir(model_dir))):
        for name in (*_FINGERPRINT_FILES, *_WEIGHT_FILES):
            file = folder / name
            if file.is_file():
                digest.update(f"{name}:{_sample_hash(file)};".encode())
    return digest.hexdigest()[:32]


def read_sidecar(onnx_path: Path) -> dict:
    try:
        return json.loads(_sidecar(onnx_path).read_text("utf-8"))
    except (OSError, ValueError):
        return {}


def is_current(model_dir: Path, onnx_path: Path) -> bool:
    """True when ``onnx_path`` exists and was made from this model folder."""
    if not Path(onnx_path).is_file():
        return False
    recorded = read_sidecar(onnx_path).get("source_fingerprint")
    return recorded is not None and recorded == source_fingerprint(model_dir)


def _tmp_beside(target: Path) -> Path:
    return target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")


def _write_json_atomic(path: Path, data: dict) -> None:
    tmp = _tmp_beside(path)
    try:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True), "utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


# --- export and quantisation (ingest time: torch and onnx are imported here only) ------------------


def export_onnx(model_dir: Path, target: Path, *, optimize: bool = True) -> Path:
    """Export the sentence-transformers model in ``model_dir`` to ONNX at ``target`` (atomically).

    The graph maps ``input_ids``, ``attention_mask``, ``token_type_ids`` (int64, batch x sequence, both
    dynamic) to ``token_embeddings`` (batch x sequence x hidden); pooling happens in ``OnnxEmbedder``.
    With ``optimize`` ONNX Runtime's BERT fusions (attention, LayerNorm, GELU) are applied offline. The
    result is checked against torch before it replaces ``target``. Needs torch, transformers and onnx.
    """
    from rag.embedding.models import set_offline

    set_offline()
    model_dir, target = Path(model_dir), Path(target)
    started = time.monotonic()
    target.parent.mkdir(parents=True, exist_ok=True)  # an unwritable cache fails here, before seconds of work
    try:
        import torch
        from transformers import AutoConfig, AutoModel
    except ImportError as e:
        raise ModelNotFound(f"exporting the embedding model to ONNX needs torch and transformers: {e}") from e
    try:
        import onnx  # noqa: F401  (torch's exporter needs it)
    except ImportError as e:
        raise ModelNotFound("exporting the embedding model to ONNX needs the `onnx` package: pip install onnx") from e

    source = _transformer_dir(model_dir)
    if not (source / "config.json").is_file():
        raise ModelNotFound(f"cannot export {model_dir} to ONNX: no config.json in {source}")
    try:
        config = AutoConfig.from_pretrained(str(source), local_files_only=True)
        model = AutoModel.from_pretrained(str(source), local_files_only=True, attn_implementation="eager")
    except Exception as e:  # transformers raises OSError, ValueError, ...
        raise ModelNotFound(f"cannot load {source} to export it to ONNX ({type(e).__name__}: {e})") from e
    model.eval()

    class TokenEmbeddings(torch.nn.Module):
        def __init__(self, inner) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            out = self.inner(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return out.last_hidden_state

    tokenizer = _load_tokenizer(model_dir, max_length=None)
    tokenizer.enable_padding(pad_id=tokenizer.token_to_id("[PAD]") or 0)
    sample = ["A short sentence.", "A longer sentence about state space models for client selection."]
    encodings = tokenizer.encode_batch(sample)
    ids = torch.tensor([e.ids for e in encodings], dtype=torch.long)
    mask = torch.tensor([e.attention_mask for e in encodings], dtype=torch.long)
    types = torch.zeros_like(ids)
    wrapper = TokenEmbeddings(model).eval()  # a new Module starts in training mode: dropout would be on

    target.parent.mkdir(parents=True, exist_ok=True)
    raw = _tmp_beside(target)
    fused = _tmp_beside(target)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {name: {0: "batch", 1: "sequence"} for name in [*names, "token_embeddings"]}
    try:
        import warnings

        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation and tracer warnings
            torch.onnx.export(
                wrapper, (ids, mask, types), str(raw), dynamo=False, input_names=names,
                output_names=["token_embeddings"], dynamic_axes=axes, opset_version=OPSET, do_constant_folding=True,
            )
            expected = wrapper(ids, mask, types).numpy()
        result = raw
        if optimize:
            from onnxruntime.transformers.optimizer import optimize_model

            optimized = optimize_model(
                str(raw), model_type="bert", num_heads=int(config.num_attention_heads),
                hidden_size=int(config.hidden_size), opt_level=1,
            )
            optimized.save_model_to_file(str(fused))
            result = fused
        feeds = {"input_ids": ids.numpy(), "attention_mask": mask.numpy(), "token_type_ids": types.numpy()}
        got = _run_once(result, feeds)
        valid = mask.numpy().astype(bool)
        error = float(np.abs(got - expected)[valid].max())
        if not error < 1e-3:
            raise ModelNotFound(f"the ONNX export of {model_dir} does not reproduce the model (max error {error:g})")
        os.replace(result, target)
    finally:
        raw.unlink(missing_ok=True)
        fused.unlink(missing_ok=True)
    _write_json_atomic(_sidecar(target), {
        "format": SIDECAR_FORMAT,
        "kind": "fp32",
        "source": str(model_dir),
        "source_fingerprint": source_fingerprint(model_dir),
        "opset": OPSET,
        "optimized": optimize,
        "max_abs_error_vs_torch": error,
        "torch": torch.__version__,
        "seconds": round(time.monotonic() - started, 1),
    })
    return target


def quantize_int8(source: Path, target: Path) -> Path:
    """Dynamic int8 quantisation of an fp32 export (ONNX Runtime's ``quantize_dynamic``), written atomically.

    Weights become int8 per output channel, activations uint8 quantised at run time (the U8S8 kernels,
    VNNI where the CPU has it). Only MatMul and the fused Attention are quantised: quantising the word
    embeddings too saved no time and cost accuracy, uint8 weights were slower, per-tensor weights lost
    far more (cosine to fp32 down to 0.88). Measured in bench/ and the module's report. Needs ``onnx``.
    """
    source, target = Path(source), Path(target)
    if not source.is_file():
        raise ModelNotFound(f"cannot quantise {source}: it does not exist (export the model first)")
    try:
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as e:
        raise ModelNotFound(f"quantising the embedding model needs onnx and onnxruntime: {e}") from e
    started = time.monotonic()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_beside(target)
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)  # its advice to pre-process is for static quantisation; keep ingest output clean
    try:
        quantize_dynamic(
            str(source), str(tmp), weight_type=QuantType.QInt8, per_channel=INT8_OPTIONS["per_channel"],
            reduce_range=INT8_OPTIONS["reduce_range"], op_types_to_quantize=list(INT8_OPTIONS["op_types"]),
            # The fused graph's contrib ops defeat shape inference; every untyped tensor there is float.
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )
        os.replace(tmp, target)
    finally:
        logging.disable(previous)
        tmp.unlink(missing_ok=True)
    meta = read_sidecar(source)
    _write_json_atomic(_sidecar(target), {
        "format": SIDECAR_FORMAT,
        "kind": "int8-dynamic",
        "source": meta.get("source", str(source)),
        "source_fingerprint": meta.get("source_fingerprint"),
        "quantized_from": str(source),
        "options": {**INT8_OPTIONS, "weight_type": "QInt8", "activation_type": "QUInt8 (dynamic)"},
        "seconds": round(time.monotonic() - started, 1),
    })
    return target


INT8_OPTIONS: dict = {"per_channel": True, "reduce_range": False, "op_types": ("MatMul", "Attention")}


def ensure_onnx(model_dir: Path, cache_dir: Path, model_name: str, *, quantized: bool = False) -> Path:
    """The ONNX file for this model, exported (and quantised) first when missing or stale (ingest time)."""
    fp32 = onnx_model_path(cache_dir, model_name, quantized=False)
    if not is_current(model_dir, fp32):
        export_onnx(model_dir, fp32)
    if not quantized:
        return fp32
    int8 = onnx_model_path(cache_dir, model_name, quantized=True)
    if not is_current(model_dir, int8):
        quantize_int8(fp32, int8)
    return int8


def _run_once(path: Path, feeds: dict) -> np.ndarray:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def _load_tokenizer(model_dir: Path, max_length: int | None):
    from tokenizers import Tokenizer

    file = Path(model_dir) / "tokenizer.json"
    if not file.is_file():
        file = _transformer_dir(Path(model_dir)) / "tokenizer.json"
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


# --- the embedder (query time: numpy, tokenizers and onnxruntime only) ------------------------------


class OnnxEmbedder:
    """An ``Embedder`` running a mean-pooled sentence-transformers model exported to ONNX.

    Nothing heavy happens before the first ``embed``: constructing it reads no model and imports no
    ``onnxruntime``; ``name``, ``dimension`` and ``max_tokens`` come from the model folder's small JSON
    files and ``count_tokens`` only needs ``tokenizer.json``.
    """

    def __init__(
        self,
        model_dir: Path,
        onnx_path: Path,
        *,
        name: str,
        batch_size: int = 32,
        threads: int | None = None,
        progress: Callable[[int, int], None] | None = None,
        check_source: bool = True,
    ) -> None:
        self.model_dir = Path(model_dir)
        self.onnx_path = Path(onnx_path)
        self._name = name
        self.batch_size = max(1, int(batch_size))
        self.threads = threads
        self.progress = progress
        self.check_source = check_source

    def __repr__(self) -> str:
        return f"OnnxEmbedder({self._name!r}, {str(self.onnx_path)!r})"

    @property
    def name(self) -> str:
        return self._name

    @cached_property
    def _config(self) -> dict:
        config: dict = {}
        transformer = _transformer_dir(self.model_dir)
        for file in (
            transformer / "config.json",
            self.model_dir / "sentence_bert_config.json",
            transformer / "sentence_bert_config.json",
            self.model_dir / "1_Pooling" / "config.json",
        ):
            try:
                config.update(json.loads(file.read_text("utf-8")))
            except (OSError, ValueError):
                continue
        if not config:
            raise ModelNotFound(f"{self.model_dir} is not a sentence-transformers model folder (no config.json)")
        return config

    @property
    def dimension(self) -> int:
        config = self._config
        return int(config.get("word_embedding_dimension") or config["hidden_size"])

    @property
    def max_tokens(self) -> int:
        config = self._config
        if "max_seq_length" in config:
            return int(config["max_seq_length"])
        return int(config.get("max_position_embeddings", 512))

    def _check_pooling(self) -> None:
        pooling = {k: v for k, v in self._config.items() if k.startswith("pooling_mode_") and v}
        if pooling and set(pooling) != {"pooling_mode_mean_tokens"}:
            raise ModelNotFound(
                f"{self._name} pools with {', '.join(sorted(pooling))}; the ONNX backend only does mean pooling: "
                "use the torch backend for this model"
            )

    @cached_property
    def _counter(self):
        return _load_tokenizer(self.model_dir, max_length=None)

    @cached_property
    def _tokenizer(self):
        return _load_tokenizer(self.model_dir, max_length=self.max_tokens)

    def count_tokens(self, text: str) -> int:
        """Word pieces including the special tokens the model adds, without truncation."""
        return len(self._counter.encode(text).ids)

    @cached_property
    def _session(self):
        if not self.onnx_path.is_file():
            raise ModelNotFound(self._missing_message())
        if self.check_source:
            recorded = read_sidecar(self.onnx_path).get("source_fingerprint")
            if recorded is not None and recorded != source_fingerprint(self.model_dir):
                raise ModelNotFound(
                    f"{self.onnx_path} was exported from another model than {self.model_dir}: "
                    f"delete it and create it again ({self._how_to_create()})"
                )
        self._check_pooling()
        try:
            import onnxruntime as ort
        except ImportError as e:
            raise ModelNotFound("the ONNX backend needs onnxruntime: pip install onnxruntime") from e
        options = ort.SessionOptions()
        options.log_severity_level = 3
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.inter_op_num_threads = 1
        if self.threads:
            options.intra_op_num_threads = int(self.threads)
        try:
            session = ort.InferenceSession(str(self.onnx_path), options, providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime raises its own Fail / InvalidProtobuf / RuntimeException
            raise ModelNotFound(
                f"cannot load the ONNX model {self.onnx_path} ({type(e).__name__}: {str(e)[:200]}): delete it and "
                f"create it again ({self._how_to_create()})"
            ) from e
        return session

    def _how_to_create(self) -> str:
        cache_dir = self.onnx_path.parent.parent
        int8 = " --int8" if self.onnx_path.name == INT8_FILE else ""
        model = f" --model {self.model_dir}" if _is_custom_model(self.model_dir) else ""
        return f"`python -m rag.embedding.onnx --cache-dir {cache_dir}{model}{int8}`, which needs torch, once"

    def _missing_message(self) -> str:
        return (
            f"the ONNX embedding model {self.onnx_path} does not exist: `paperchat ingest` exports it, or create "
            f"it with {self._how_to_create()} (or use the torch backend: PAPERCHAT_EMBEDDING_BACKEND=torch)"
        )

    @cached_property
    def _io(self) -> tuple[list[tuple[str, type]], str, bool]:
        """(input name, numpy integer type) pairs, the output to read, and whether it is already pooled."""
        inputs = [(i.name, np.int32 if "int32" in i.type else np.int64) for i in self._session.get_inputs()]
        outputs = {o.name: o for o in self._session.get_outputs()}
        if "sentence_embedding" in outputs:
            return inputs, "sentence_embedding", True
        name = "token_embeddings" if "token_embeddings" in outputs else next(iter(outputs))
        pooled = len(outputs[name].shape) == 2
        return inputs, name, pooled

    def load(self) -> None:
        """Create the session now (it is otherwise created by the first ``embed``)."""
        self._session  # noqa: B018

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text, in the order given."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        total = len(texts)
        out = np.zeros((total, self.dimension), dtype=np.float32)
        if not total:
            return out
        session = self._session
        inputs, output, pooled = self._io
        encodings = self._tokenizer.encode_batch([str(t) for t in texts])
        # Batches of similar length waste little on padding; results do not depend on the batching.
        order = sorted(range(total), key=lambda i: -len(encodings[i].ids))
        done = 0
        for start in range(0, total, self.batch_size):
            rows = order[start : start + self.batch_size]
            width = max(len(encodings[i].ids) for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                n = len(encodings[i].ids)
                ids[r, :n] = encodings[i].ids
                mask[r, :n] = 1
            arrays = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            feeds = {name: arrays[name].astype(kind, copy=False) for name, kind in inputs}
            result = session.run([output], feeds)[0]
            vectors = result if pooled else mean_pool(result, mask)
            out[rows] = vectors
            done += len(rows)
            if self.progress is not None:
                self.progress(done, total)
        return l2_normalise(out)


def mean_pool(token_embeddings: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    """sentence-transformers' mean pooling: the mean of the token vectors where the mask is 1."""
    mask = attention_mask.astype(np.float32)[:, :, None]
    summed = (token_embeddings.astype(np.float32) * mask).sum(axis=1)
    return summed / np.clip(mask.sum(axis=1), 1e-9, None)


def l2_normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length, as ``torch.nn.functional.normalize`` (eps 1e-12) does."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


def _is_custom_model(model_dir: Path) -> bool:
    try:
        from rag.embedding.models import bundled_model_dir

        return Path(model_dir).resolve() != bundled_model_dir().resolve()
    except ModelNotFound:
        return True


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m rag.embedding.onnx``: export (and quantise) the embedding model into the cache."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m rag.embedding.onnx", description=main.__doc__)
    parser.add_argument("--cache-dir", type=Path, default=None, help="default: <PAPERCHAT_DATA_DIR>/models")
    parser.add_argument("--model", default=None, help="model folder (default: PAPERCHAT_EMBEDDING_MODEL or bundled)")
    parser.add_argument("--int8", action="store_true", help="also write the int8 model")
    parser.add_argument("--force", action="store_true", help="export again even if the files are current")
    args = parser.parse_args(argv)

    from rag.embedding.models import ModelRef
    from rag.errors import PaperchatError

    try:
        cache_dir = args.cache_dir
        configured = args.model
        if cache_dir is None or configured is None:
            from rag.settings import load_settings

            settings = load_settings()
            cache_dir = cache_dir or settings.data_dir / "models"
            configured = configured or settings.embedding_model
        ref = ModelRef.resolve(configured)
        if ref.path is None:
            raise ModelNotFound(f"{ref.name} is not a local model folder: the ONNX backend needs one")
        if args.force:
            export_onnx(ref.path, onnx_model_path(cache_dir, ref.name, quantized=False))
            if args.int8:
                quantize_int8(onnx_model_path(cache_dir, ref.name, False), onnx_model_path(cache_dir, ref.name, True))
        path = ensure_onnx(ref.path, cache_dir, ref.name, quantized=False)
        print(path)
        if args.int8:
            print(ensure_onnx(ref.path, cache_dir, ref.name, quantized=True))
    except PaperchatError as e:
        print(f"paperchat: error: {e}", file=sys.stderr)
        return e.exit_code
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
