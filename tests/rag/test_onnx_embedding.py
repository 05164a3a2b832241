"""The ONNX Runtime embedder: same vectors as sentence-transformers, lazy, and clear errors.

Tests marked ``slow`` export the bundled model once for the whole module (torch, ~10-20 s) and compare
with the real sentence-transformers model.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from rag.embedding.models import BUNDLED_MODEL_NAME, bundled_model_dir
from rag.embedding.onnx import export_onnx, quantize_int8
from rag.embedding.onnx_embedder import OnnxEmbedder, l2_normalise, mean_pool
from rag.embedding.onnx_files import INT8_SUFFIX, is_current, onnx_model_path, read_sidecar, source_fingerprint
from rag.errors import ModelNotFound

PROJECT = Path(__file__).resolve().parents[2]
HEAVY = ("onnxruntime", "torch", "sentence_transformers", "transformers")

LONG = " ".join(
    f"In experiment {i} the proposed state space model selected clients for federated learning rounds, "
    "reducing communication by a large margin while keeping accuracy on non-IID benchmarks."
    for i in range(12)
)
SENTENCES = [
    "State space models for client selection in federated learning.",
    "What did the MA-RAG authors evaluate on?",
    "",
    "Diffusion models generate images; transformers translate text.",
    "ÜNICODE, accents (é, ñ) and symbols: α-β ≤ 3 × 10⁻⁵.",
    LONG,
]


@pytest.fixture(scope="module")
def model_dir() -> Path:
    return bundled_model_dir()


@pytest.fixture(scope="module")
def onnx_files(tmp_path_factory, model_dir) -> tuple[Path, Path]:
    """One export (and one quantisation) for the whole module."""
    cache = tmp_path_factory.mktemp("models")
    fp32 = export_onnx(model_dir, onnx_model_path(cache, BUNDLED_MODEL_NAME, quantized=False))
    int8 = quantize_int8(fp32, onnx_model_path(cache, BUNDLED_MODEL_NAME, quantized=True))
    return fp32, int8


def _fp32(model_dir: Path, files, **kwargs) -> OnnxEmbedder:
    return OnnxEmbedder(model_dir, files[0], name=BUNDLED_MODEL_NAME, **kwargs)


def _run(code: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=PROJECT, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- files ------------------------------------------------------------------------------------------


def test_onnx_model_path_names_files_by_model_and_precision(tmp_path):
    assert onnx_model_path(tmp_path, "all-MiniLM-L6-v2", False) == tmp_path / "all-MiniLM-L6-v2" / "model.onnx"
    assert onnx_model_path(tmp_path, "all-MiniLM-L6-v2", True) == tmp_path / "all-MiniLM-L6-v2" / "model-int8.onnx"
    assert onnx_model_path(tmp_path, "org/name", False).parent == tmp_path / "org--name"
    with pytest.raises(ValueError):
        onnx_model_path(tmp_path, "..", False)


@pytest.mark.slow
def test_export_writes_a_checked_model_with_its_source_and_no_leftovers(onnx_files, model_dir):
    fp32, int8 = onnx_files
    assert fp32.is_file() and int8.is_file()
    meta = read_sidecar(fp32)
    assert meta["kind"] == "fp32"
    assert meta["max_abs_error_vs_torch"] < 1e-3
    assert meta["source_fingerprint"] == source_fingerprint(model_dir)
    assert read_sidecar(int8)["source_fingerprint"] == meta["source_fingerprint"]
    assert is_current(model_dir, fp32) and is_current(model_dir, int8)
    assert int8.stat().st_size < fp32.stat().st_size
    assert sorted(p.name for p in fp32.parent.iterdir()) == sorted(
        ["model.onnx", "model.onnx.json", "model-int8.onnx", "model-int8.onnx.json"]
    )


# --- vectors ------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_fp32_vectors_match_sentence_transformers(onnx_files, model_dir, real_embedder):
    embedder = _fp32(model_dir, onnx_files)
    assert embedder.count_tokens(LONG) > 256  # truncated by both, at the same place
    expected = real_embedder.embed(SENTENCES)
    got = embedder.embed(SENTENCES)
    assert got.dtype == np.float32 and got.shape == expected.shape == (len(SENTENCES), 384)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cosines = (got * expected).sum(axis=1)
    assert cosines.min() >= 0.9999, cosines
    # Same name and dimension: an index built by either backend is searched by both.
    assert (embedder.name, embedder.dimension, embedder.max_tokens) == (
        real_embedder.name, real_embedder.dimension, real_embedder.max_tokens
    )


@pytest.mark.slow
def test_int8_vectors_are_unit_length_and_close(onnx_files, model_dir):
    # The empty text (only [CLS] [SEP]) is left out: nothing embeds it (empty questions and chunks are
    # rejected earlier) and, averaged over two tokens, its quantisation error is the largest (cosine ~0.976).
    texts = [s for s in SENTENCES if s]
    fp32 = _fp32(model_dir, onnx_files).embed(texts)
    int8_embedder = OnnxEmbedder(model_dir, onnx_files[1], name=BUNDLED_MODEL_NAME + INT8_SUFFIX)
    int8 = int8_embedder.embed(texts)
    assert int8_embedder.name == "all-MiniLM-L6-v2-int8"
    np.testing.assert_allclose(np.linalg.norm(int8, axis=1), 1.0, atol=1e-5)
    assert (int8 * fp32).sum(axis=1).min() >= 0.98


@pytest.mark.slow
def test_results_do_not_depend_on_batching_or_order(onnx_files, model_dir):
    texts = SENTENCES * 3
    whole = _fp32(model_dir, onnx_files, batch_size=32).embed(texts)
    seen: list[tuple[int, int]] = []
    small = _fp32(model_dir, onnx_files, batch_size=2, progress=lambda d, t: seen.append((d, t)))
    pieces = small.embed(texts)
    np.testing.assert_allclose(pieces, whole, atol=1e-5)
    assert seen[-1] == (len(texts), len(texts)) and len(seen) >= 9  # batches of 2 at most
    reversed_ = small.embed(texts[::-1])
    np.testing.assert_allclose(reversed_[::-1], whole, atol=1e-5)
    single = small.embed([SENTENCES[0]])
    np.testing.assert_allclose(single[0], whole[0], atol=1e-5)


def test_empty_input_needs_no_model(model_dir, tmp_path):
    embedder = OnnxEmbedder(model_dir, tmp_path / "missing.onnx", name=BUNDLED_MODEL_NAME)
    out = embedder.embed([])
    assert out.shape == (0, 384) and out.dtype == np.float32


def test_pooling_and_normalisation_follow_sentence_transformers():
    tokens = np.array([[[1.0, 0.0], [3.0, 4.0], [100.0, 100.0]]], dtype=np.float32)
    mask = np.array([[1, 1, 0]])
    np.testing.assert_allclose(mean_pool(tokens, mask), [[2.0, 2.0]])  # padding ignored
    np.testing.assert_allclose(l2_normalise(np.array([[3.0, 4.0], [0.0, 0.0]])), [[0.6, 0.8], [0.0, 0.0]])


# --- laziness ---------------------------------------------------------------------------------------------


def test_constructing_and_counting_tokens_loads_no_runtime(model_dir, tmp_path):
    result = _run(f"""
        import json, sys
        from pathlib import Path
        from rag.embedding.onnx_embedder import OnnxEmbedder
        e = OnnxEmbedder(Path({str(model_dir)!r}), Path({str(tmp_path / 'model.onnx')!r}), name="all-MiniLM-L6-v2")
        facts = [e.name, e.dimension, e.max_tokens, e.count_tokens("hello world")]
        print(json.dumps({{"facts": facts, "loaded": [m for m in {HEAVY!r} if m in sys.modules],
                          "session": "_session" in e.__dict__}}))
    """)
    assert result == {"facts": ["all-MiniLM-L6-v2", 384, 256, 4], "loaded": [], "session": False}


def test_token_counts_match_the_sentence_transformers_embedder(model_dir, tmp_path):
    from rag.embedding.models import SentenceTransformerEmbedder

    onnx = OnnxEmbedder(model_dir, tmp_path / "model.onnx", name=BUNDLED_MODEL_NAME)
    torch_side = SentenceTransformerEmbedder()  # counting only reads tokenizer.json: no torch
    for text in SENTENCES:
        assert onnx.count_tokens(text) == torch_side.count_tokens(text)


@pytest.mark.slow
def test_embedding_imports_onnxruntime_but_never_torch(onnx_files, model_dir):
    result = _run(f"""
        import json, sys
        from pathlib import Path
        from rag.embedding.onnx_embedder import OnnxEmbedder
        e = OnnxEmbedder(Path({str(model_dir)!r}), Path({str(onnx_files[0])!r}), name="all-MiniLM-L6-v2")
        v = e.embed(["a question about papers"])
        print(json.dumps({{"shape": list(v.shape), "loaded": [m for m in {HEAVY!r} if m in sys.modules]}}))
    """)
    assert result == {"shape": [1, 384], "loaded": ["onnxruntime"]}


# --- errors -----------------------------------------------------------------------------------------------


def test_missing_onnx_file_says_how_to_create_it(model_dir, tmp_path):
    path = onnx_model_path(tmp_path / "models", BUNDLED_MODEL_NAME, quantized=True)
    embedder = OnnxEmbedder(model_dir, path, name=BUNDLED_MODEL_NAME + INT8_SUFFIX)
    with pytest.raises(ModelNotFound) as caught:
        embedder.embed(["a question"])
    message = str(caught.value)
    assert str(path) in message and "does not exist" in message
    assert f"python -m rag.embedding.onnx --cache-dir {tmp_path / 'models'} --int8" in message
    assert "paperchat ingest" in message


def test_onnx_file_from_another_model_is_refused(model_dir, tmp_path):
    path = tmp_path / "all-MiniLM-L6-v2" / "model.onnx"
    path.parent.mkdir()
    path.write_bytes(b"not read")
    (path.parent / "model.onnx.json").write_text(json.dumps({"source_fingerprint": "0" * 32}))
    with pytest.raises(ModelNotFound, match="exported from another model"):
        OnnxEmbedder(model_dir, path, name=BUNDLED_MODEL_NAME).embed(["x"])
    assert not is_current(model_dir, path)


def test_damaged_onnx_file_is_a_model_not_found(model_dir, tmp_path):
    path = tmp_path / "model.onnx"
    path.write_bytes(b"\x00garbage" * 10)
    with pytest.raises(ModelNotFound, match="cannot load the ONNX model"):
        OnnxEmbedder(model_dir, path, name=BUNDLED_MODEL_NAME).embed(["x"])


def test_models_that_do_not_mean_pool_are_refused(tmp_path):
    folder = tmp_path / "cls-model"
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"hidden_size": 8}))
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": 8, "pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False})
    )
    onnx = tmp_path / "model.onnx"
    onnx.write_bytes(b"never loaded")
    embedder = OnnxEmbedder(folder, onnx, name="cls-model")
    assert embedder.dimension == 8
    with pytest.raises(ModelNotFound, match="only does mean pooling"):
        embedder.embed(["x"])


def test_model_folder_without_tokenizer_json_is_a_model_not_found(tmp_path):
    folder = tmp_path / "no-tokenizer"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"hidden_size": 8}))
    with pytest.raises(ModelNotFound, match="tokenizer.json"):
        OnnxEmbedder(folder, tmp_path / "model.onnx", name="x").count_tokens("hello")


def test_quantising_a_missing_export_is_a_model_not_found(tmp_path):
    with pytest.raises(ModelNotFound, match="export the model first"):
        quantize_int8(tmp_path / "model.onnx", tmp_path / "model-int8.onnx")


@pytest.mark.slow
def test_int8_vectors_do_not_depend_on_the_texts_batched_with_them(onnx_files, model_dir):
    # Dynamic quantisation scales a batch's activations together: batched with a long abstract, a question's
    # vector moved by up to 0.02 a component. The int8 embedder embeds each text alone.
    int8 = OnnxEmbedder(model_dir, onnx_files[1], name=BUNDLED_MODEL_NAME + INT8_SUFFIX, batch_size=32)
    assert int8.quantized
    long_text = " ".join(SENTENCES * 4)
    alone = np.vstack([int8.embed([text]) for text in SENTENCES])
    batched = int8.embed([long_text, *SENTENCES])[1:]
    np.testing.assert_allclose(batched, alone, atol=1e-6)
