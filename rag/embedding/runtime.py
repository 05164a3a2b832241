"""Which embedding runtime serves an index, and that embedder built from settings.

``auto`` follows the model the index records (an index is always queried with the vectors it was built
with) and, for a new index, picks the fastest runtime whose quality was measured. The ONNX export is made
on first use, once. ``rag.components`` calls this; nothing else builds an embedder from settings.
"""

from __future__ import annotations

from rag.embedding.models import BUNDLED_MODEL_NAME, Embedder, ModelRef, SentenceTransformerEmbedder
from rag.errors import ModelNotFound
from rag.settings import Settings
from rag.text import say


def choose_embedding_runtime(configured: str, ref: ModelRef, indexed_model: str | None) -> str:
    """``auto`` resolved to an embedding runtime: follow the index; for a new index the fastest one whose
    quality was measured.

    int8 is chosen only for the bundled model, whose quality it keeps (bench/results/report.md); for another
    model the fp32 export gives exactly its vectors, so nothing about its quality changes.
    """
    from rag.embedding.onnx_files import INT8_SUFFIX, mean_pooled

    if configured != "auto":
        return configured
    if ref.path is None or not mean_pooled(ref.path):
        return "torch"
    if indexed_model == ref.name + INT8_SUFFIX:
        return "onnx-int8"
    if indexed_model == ref.name:
        return "onnx"  # built by torch or fp32 ONNX: the same vectors either way
    return "onnx-int8" if ref.name == BUNDLED_MODEL_NAME else "onnx"


def build_embedder(settings: Settings, indexed_model: str | None = None, *, warn=say) -> Embedder:
    """The embedder the settings ask for, with its ONNX export made first when missing (torch, once).

    ``indexed_model`` is the model name the index records (``None`` for a new index): ``auto`` follows
    it so that an index is always queried with the vectors it was built with.
    """
    from rag.embedding.onnx import ensure_onnx
    from rag.embedding.onnx_embedder import OnnxEmbedder
    from rag.embedding.onnx_files import INT8_SUFFIX, is_current, onnx_model_path

    ref = ModelRef.resolve(settings.embedding_model)
    runtime = choose_embedding_runtime(settings.embedding_backend, ref, indexed_model)
    batch_size = settings.embedding_batch_size
    if runtime == "torch":
        return SentenceTransformerEmbedder(settings.embedding_model, batch_size=batch_size)
    if ref.path is None:
        raise ModelNotFound(
            f"PAPERCHAT_EMBEDDING_BACKEND={runtime} needs the model as a local folder, and {ref.name} is not one: "
            "set PAPERCHAT_EMBEDDING_MODEL to its folder or use PAPERCHAT_EMBEDDING_BACKEND=torch"
        )
    quantized = runtime == "onnx-int8"
    cache = settings.model_cache_path
    path = onnx_model_path(cache, ref.name, quantized)
    if not is_current(ref.path, path):
        try:
            warn(f"exporting {ref.name} to ONNX{' (int8)' if quantized else ''} in {path.parent}, once (about 20 s)")
            ensure_onnx(ref.path, cache, ref.name, quantized=quantized)
        except (ModelNotFound, OSError) as e:
            reason = str(e) if isinstance(e, ModelNotFound) else f"{e.strerror or e}: {getattr(e, 'filename', '')}"
            # auto may fall back to torch wherever that gives the vectors the index holds (or a new index).
            if settings.embedding_backend == "auto" and (indexed_model is None or not quantized):
                warn(f"the ONNX export failed ({reason}); using the slower torch backend")
                return SentenceTransformerEmbedder(settings.embedding_model, batch_size=batch_size)
            raise ModelNotFound(
                f"cannot create the ONNX embedding model in {path.parent} ({reason}): set PAPERCHAT_MODEL_CACHE_DIR "
                "to a writable folder, or rebuild the index with PAPERCHAT_EMBEDDING_BACKEND=torch "
                "(`paperchat ingest --rebuild`)"
            ) from e
    name = ref.name + (INT8_SUFFIX if quantized else "")
    return OnnxEmbedder(ref.path, path, name=name, batch_size=batch_size, check_source=False)
