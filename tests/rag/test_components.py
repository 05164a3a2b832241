"""The composition root: which embedder the settings and the index choose (and what happens when the ONNX
export cannot be made), parts given instead of built, the answer writer and its notice, session pipelines."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rag.components import HOW_TO_GENERATE, Components, SessionSettings
from rag.embedding.models import BUNDLED_MODEL_NAME, ModelRef, SentenceTransformerEmbedder, bundled_model_dir
from rag.embedding.onnx import ensure_onnx
from rag.embedding.onnx_embedder import OnnxEmbedder
from rag.embedding.onnx_files import INT8_SUFFIX, mean_pooled
from rag.embedding.runtime import build_embedder, choose_embedding_runtime
from rag.errors import ModelNotFound

PROJECT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bundled() -> ModelRef:
    return ModelRef.resolve(None)


@pytest.fixture(scope="module")
def model_cache(tmp_path_factory, bundled) -> Path:
    """fp32 and int8 exports of the bundled model, made once for the module."""
    cache = tmp_path_factory.mktemp("model-cache")
    ensure_onnx(bundled.path, cache, bundled.name, quantized=True)
    return cache


def _copy_model(tmp_path: Path, pooling: dict | None = None, extra_module: dict | None = None) -> Path:
    """A small copy of the bundled model's JSON files (no weights): enough to decide a backend."""
    source, target = bundled_model_dir(), tmp_path / "custom-model"
    target.mkdir()
    for name in ("config.json", "modules.json", "sentence_bert_config.json", "tokenizer.json"):
        shutil.copy(source / name, target / name)
    (target / "1_Pooling").mkdir()
    config = json.loads((source / "1_Pooling" / "config.json").read_text())
    (target / "1_Pooling" / "config.json").write_text(json.dumps({**config, **(pooling or {})}))
    if extra_module:
        modules = json.loads((target / "modules.json").read_text())
        (target / "modules.json").write_text(json.dumps([*modules, extra_module]))
    return target


# --- choosing ---------------------------------------------------------------------------------------


def test_auto_follows_what_the_index_was_built_with(bundled):
    assert choose_embedding_runtime("auto", bundled, BUNDLED_MODEL_NAME + INT8_SUFFIX) == "onnx-int8"
    # An index built by torch holds the fp32 vectors, which the fp32 export reproduces.
    assert choose_embedding_runtime("auto", bundled, BUNDLED_MODEL_NAME) == "onnx"


def test_auto_builds_a_new_index_of_the_bundled_model_with_int8(bundled):
    assert choose_embedding_runtime("auto", bundled, None) == "onnx-int8"


def test_auto_keeps_other_models_at_full_precision(tmp_path):
    ref = ModelRef.resolve(str(_copy_model(tmp_path)))
    assert choose_embedding_runtime("auto", ref, None) == "onnx"


@pytest.mark.parametrize(
    ("pooling", "extra_module"),
    [
        ({"pooling_mode_mean_tokens": False, "pooling_mode_cls_token": True}, None),
        (None, {"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"}),
    ],
    ids=["cls-pooling", "dense-layer"],
)
def test_auto_keeps_models_onnx_cannot_reproduce_on_torch(tmp_path, pooling, extra_module):
    folder = _copy_model(tmp_path, pooling, extra_module)
    assert not mean_pooled(folder)
    assert choose_embedding_runtime("auto", ModelRef.resolve(str(folder)), None) == "torch"


def test_a_model_known_only_by_name_stays_on_torch():
    assert choose_embedding_runtime("auto", ModelRef("org/some-model", None), None) == "torch"


@pytest.mark.parametrize("configured", ["torch", "onnx", "onnx-int8"])
def test_an_explicit_backend_is_taken_as_given(bundled, configured):
    assert choose_embedding_runtime(configured, bundled, BUNDLED_MODEL_NAME) == configured


# --- building -----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_build_uses_the_existing_exports_without_exporting_again(settings_factory, model_cache, real_embedder):
    messages: list[str] = []
    settings = settings_factory(model_cache_dir=model_cache)
    int8 = build_embedder(settings, None, warn=messages.append)
    fp32 = build_embedder(settings, BUNDLED_MODEL_NAME, warn=messages.append)
    assert messages == []
    assert isinstance(int8, OnnxEmbedder) and int8.name == BUNDLED_MODEL_NAME + INT8_SUFFIX
    assert isinstance(fp32, OnnxEmbedder) and fp32.name == BUNDLED_MODEL_NAME
    texts = ["state space models for client selection", "what did the MA-RAG authors evaluate on?"]
    # fp32 ONNX gives the torch model's vectors (an index built by either is searched by both).
    assert np.allclose(fp32.embed(texts), real_embedder.embed(texts), atol=1e-4)
    assert float(np.min(np.sum(int8.embed(texts) * fp32.embed(texts), axis=1))) > 0.98


def test_torch_backend_builds_the_sentence_transformers_embedder(settings_factory, tmp_path):
    embedder = build_embedder(settings_factory(embedding_backend="torch", model_cache_dir=tmp_path / "unused"), None)
    assert isinstance(embedder, SentenceTransformerEmbedder)
    assert not (tmp_path / "unused").exists()


def test_auto_falls_back_to_torch_when_the_export_cannot_be_written(settings_factory, tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    messages: list[str] = []
    embedder = build_embedder(settings_factory(model_cache_dir=blocker / "models"), None, warn=messages.append)
    assert isinstance(embedder, SentenceTransformerEmbedder)
    assert "using the slower torch backend" in messages[-1]


def test_an_explicit_onnx_backend_that_cannot_export_says_what_to_do(settings_factory, tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    settings = settings_factory(embedding_backend="onnx", model_cache_dir=blocker / "models")
    with pytest.raises(ModelNotFound, match="PAPERCHAT_MODEL_CACHE_DIR") as caught:
        build_embedder(settings, None, warn=lambda _m: None)
    assert "PAPERCHAT_EMBEDDING_BACKEND=torch" in str(caught.value)


def test_an_int8_index_never_falls_back_to_other_vectors(settings_factory, tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    settings = settings_factory(model_cache_dir=blocker / "models")
    with pytest.raises(ModelNotFound, match="cannot create the ONNX embedding model"):
        build_embedder(settings, BUNDLED_MODEL_NAME + INT8_SUFFIX, warn=lambda _m: None)


def test_onnx_needs_a_model_folder(settings_factory):
    settings = settings_factory(embedding_backend="onnx", embedding_model="org/only-a-name")
    with pytest.raises(ModelNotFound, match="local folder"):
        build_embedder(settings, None)


class UntouchableStore:
    """A store that fails the test when anything is asked of it."""

    def __getattr__(self, name):
        raise AssertionError(f"the store was used: {name}")


def test_components_read_the_index_model_only_for_auto(settings_factory, tmp_path):
    components = Components(settings_factory(embedding_backend="torch"), store=UntouchableStore())
    assert components._indexed_model() is None  # an explicit runtime never opens the store to decide


def test_given_parts_are_used_instead_of_built(settings_factory, fake_embedder):
    store = UntouchableStore()
    components = Components(settings_factory(), embedder=fake_embedder, store=store)
    assert components.embedder is fake_embedder and components.store is store


class ScriptedChatModel:
    label = "scripted"
    closed = False

    def stream(self, messages, *, max_tokens=None, temperature=None):
        yield from ()

    def close(self):
        self.closed = True


def test_a_given_chat_model_writes_the_answers_and_stays_open(settings_factory, fake_embedder):
    model = ScriptedChatModel()
    components = Components(settings_factory(llm="auto"), embedder=fake_embedder, chat_model=model)
    assert components.answer_writer() == "endpoint" and components.chat_model is model
    assert components.pipeline.chat_model is model and components.notice() == ""
    components.close()
    assert not model.closed  # the caller gave it: the caller closes it


def test_the_notice_is_asked_for_not_a_side_effect(settings_factory, fake_embedder, monkeypatch):
    import rag.llm.embedded_model

    monkeypatch.setattr(rag.llm.embedded_model, "embedded_server_installed", lambda: False)
    components = Components(settings_factory(llm="auto"), embedder=fake_embedder)
    assert components.built_chat_model is None
    assert components.notice() == HOW_TO_GENERATE  # before any chat model was built
    assert components.chat_model is None and components.notice() == HOW_TO_GENERATE
    assert Components(settings_factory(llm="extractive")).notice() == ""


def test_session_pipelines_are_cached_per_distinct_settings(settings_factory, fake_embedder):
    components = Components(settings_factory(llm="extractive"), embedder=fake_embedder)
    extractive = components.pipeline_for(SessionSettings(extractive=True))
    assert components.pipeline_for(SessionSettings(extractive=True)) is extractive
    assert components.pipeline_for(SessionSettings()) is components.pipeline  # the server's own settings
    first = components.pipeline_for(SessionSettings(base_url="http://127.0.0.1:9/v1", model="m"))
    assert components.pipeline_for(SessionSettings(base_url="http://127.0.0.1:9/v1", model="m")) is first
    other = components.pipeline_for(SessionSettings(base_url="http://127.0.0.1:9/v1", model="m", api_key="k"))
    assert other is not first and other.chat_model.model == "m"
    components.close()


# --- the whole path ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_ingest_then_search_runs_int8_and_never_imports_torch(tmp_path, model_cache):
    env_code = f"""
import json, os, sys
os.environ.update(PAPERCHAT_DATA_DIR={str(tmp_path / 'index')!r}, PAPERCHAT_MODEL_CACHE_DIR={str(model_cache)!r})
from ui.cli.main import main
code = main(sys.argv[1:])
heavy = sorted(m for m in ("torch", "sentence_transformers", "transformers") if m in sys.modules)
print(json.dumps({{"code": code, "heavy": heavy}}))
"""

    def run(*args: str) -> dict:
        done = subprocess.run([sys.executable, "-c", env_code, *args], capture_output=True, text=True, cwd=PROJECT,
                              timeout=600)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1]) | {"stdout": done.stdout}

    ingest = run("ingest")
    assert ingest["code"] == 0 and "76 added" in ingest["stdout"]
    stats = run("stats", "--json")
    assert json.loads(stats["stdout"].splitlines()[0])["embedding_model"] == BUNDLED_MODEL_NAME + INT8_SUFFIX
    search = run("search", "state space models for choosing clients in federated learning", "--json")
    assert search["code"] == 0 and search["heavy"] == []
    hits = json.loads(search["stdout"].splitlines()[0])["hits"]
    assert hits[0]["title"] == "FedSSM"


def test_an_unknown_collection_is_an_error_that_lists_the_existing_ones(settings_factory, fake_embedder, tmp_path):
    from rag.errors import ConfigError

    corpus = tmp_path / "mine.txt"
    corpus.write_text("My papers\n\nA first abstract about graph neural networks for molecules.\n", "utf-8")
    mine = Components(settings_factory(collection="mypapers"), embedder=fake_embedder)
    mine.ingest_files([corpus])
    typo = Components(settings_factory(collection="mypaper"), embedder=fake_embedder)
    with pytest.raises(ConfigError) as raised:
        typo.ensure_index()
    message = str(raised.value)
    assert "'mypaper'" in message and "existing: mypapers" in message and "PAPERCHAT_COLLECTION" in message
    assert typo.store.counts() == (0, 0) and not typo.store.exists()  # nothing was indexed under the typo
    assert mine.store.counts()[0] == 1  # and what was stored is untouched
    # A collection given its own corpus folder is built from it, as asked.
    Components(settings_factory(collection="other", corpus_dir=tmp_path), embedder=fake_embedder).ensure_index()
