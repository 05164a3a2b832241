"""Exporting the embedding model to ONNX and quantising it: one-time work at ingest (torch and onnx are
imported here only, and only when a file is missing or stale). ``python -m rag.embedding.onnx`` creates
the files by hand; rag.embedding.onnx_files says where they go, rag.embedding.onnx_embedder runs them.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rag.embedding.onnx_files import (
    SIDECAR_FORMAT,
    is_current,
    load_tokenizer,
    onnx_model_path,
    read_sidecar,
    sidecar_path,
    source_fingerprint,
    tmp_beside,
    transformer_dir,
    write_json_atomic,
)
from rag.errors import ModelNotFound

OPSET = 17


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
    torch, config, model = _load_for_export(model_dir)
    wrapper = _token_embeddings(torch, model).eval()  # a new Module starts in training mode: dropout would be on
    inputs = _sample_inputs(torch, model_dir)
    error = _export_checked(torch, wrapper, inputs, config, model_dir, target, optimize=optimize)
    write_json_atomic(sidecar_path(target), {
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


def _load_for_export(model_dir: Path):
    """torch, and the model's transformers config and model (eager attention, evaluation mode)."""
    try:
        import torch
        from transformers import AutoConfig, AutoModel
    except ImportError as e:
        raise ModelNotFound(f"exporting the embedding model to ONNX needs torch and transformers: {e}") from e
    try:
        import onnx  # noqa: F401  (torch's exporter needs it)
    except ImportError as e:
        raise ModelNotFound("exporting the embedding model to ONNX needs the `onnx` package: pip install onnx") from e

    source = transformer_dir(model_dir)
    if not (source / "config.json").is_file():
        raise ModelNotFound(f"cannot export {model_dir} to ONNX: no config.json in {source}")
    try:
        config = AutoConfig.from_pretrained(str(source), local_files_only=True)
        model = AutoModel.from_pretrained(str(source), local_files_only=True, attn_implementation="eager")
    except Exception as e:  # transformers raises OSError, ValueError, ...
        raise ModelNotFound(f"cannot load {source} to export it to ONNX ({type(e).__name__}: {e})") from e
    model.eval()
    return torch, config, model


def _token_embeddings(torch, model):
    """The model as a Module whose one output is the token vectors (what the ONNX graph returns)."""

    class TokenEmbeddings(torch.nn.Module):
        def __init__(self, inner) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            out = self.inner(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return out.last_hidden_state

    return TokenEmbeddings(model)


def _sample_inputs(torch, model_dir: Path) -> tuple:
    """(input ids, attention mask, token types) of two sentences of different lengths: traced and checked."""
    tokenizer = load_tokenizer(model_dir, max_length=None)
    tokenizer.enable_padding(pad_id=tokenizer.token_to_id("[PAD]") or 0)
    sample = ["A short sentence.", "A longer sentence about state space models for client selection."]
    encodings = tokenizer.encode_batch(sample)
    ids = torch.tensor([e.ids for e in encodings], dtype=torch.long)
    mask = torch.tensor([e.attention_mask for e in encodings], dtype=torch.long)
    return ids, mask, torch.zeros_like(ids)


def _export_checked(torch, wrapper, inputs: tuple, config, model_dir: Path, target: Path, *, optimize: bool) -> float:
    """Export (and optimise) into temporary files, compare with torch, then move the result to ``target``;
    returns the largest difference from torch over the real (unpadded) tokens."""
    ids, mask, types = inputs
    target.parent.mkdir(parents=True, exist_ok=True)
    raw = tmp_beside(target)
    fused = tmp_beside(target)
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
    return error


def quantize_int8(source: Path, target: Path) -> Path:
    """Dynamic int8 quantisation of an fp32 export (ONNX Runtime's ``quantize_dynamic``), written atomically.

    Weights become int8 per output channel, activations uint8 quantised at run time (the U8S8 kernels,
    VNNI where the CPU has it). Only MatMul and the fused Attention are quantised, per channel, with int8
    weights: the other choices cost time or accuracy (measured: bench/results/tuning.md). Needs ``onnx``.
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
    tmp = tmp_beside(target)
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
    write_json_atomic(sidecar_path(target), {
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
