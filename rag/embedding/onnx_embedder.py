"""Sentence embeddings through ONNX Runtime at query time: numpy, tokenizers and onnxruntime only.

Importing sentence-transformers costs seconds (torch, transformers, scikit-learn) while a question needs
one forward pass of a 22M-parameter model. ``OnnxEmbedder`` runs the same model with ``onnxruntime`` and
the model's own ``tokenizer.json`` (``tokenizers``), so a search imports neither torch nor transformers.

It reproduces sentence-transformers exactly for the models it accepts (mean pooling, like
all-MiniLM-L6-v2; see ``1_Pooling/config.json``): word pieces truncated to ``max_seq_length`` (special
tokens included), mean of the token vectors over the attention mask, L2 normalisation. The fp32 export
gives the torch model's vectors, so it keeps the model's name and an index built by either backend is
searched by both; the int8 model is another model (``<name>-int8``). The files it reads are made by
rag.embedding.onnx (laid out by rag.embedding.onnx_files).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from functools import cached_property
from pathlib import Path

import numpy as np

from rag.embedding.batching import length_batches
from rag.embedding.onnx_files import INT8_FILE, load_tokenizer, read_sidecar, source_fingerprint, transformer_dir
from rag.errors import ModelNotFound
from rag.token_spans import splits_at_whitespace, token_starts


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
        transformer = transformer_dir(self.model_dir)
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
        return load_tokenizer(self.model_dir, max_length=None)

    @cached_property
    def _tokenizer(self):
        return load_tokenizer(self.model_dir, max_length=self.max_tokens)

    def count_tokens(self, text: str) -> int:
        """Word pieces including the special tokens the model adds, without truncation."""
        return len(self._counter.encode(text).ids)

    @cached_property
    def _spans_exact(self) -> bool:
        return splits_at_whitespace(self._counter)

    def token_starts(self, text: str) -> tuple[list[int], int] | None:
        """Where the word pieces of ``text`` start and how many special tokens are added, or None where the
        tokenizer does not split at whitespace (rag.token_spans)."""
        return token_starts(self._counter, text) if self._spans_exact else None

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
        # One thread per physical core: hyperthread siblings share a core's vector units and slow each other.
        options.intra_op_num_threads = int(self.threads or physical_cores())
        # Idle threads sleep instead of spinning for more work: spinning takes the cores an ingest's chunking
        # and store writes need, and any other process's. With another job on a 2-core machine, the bundled
        # corpus embedded in 3.6 s instead of 4.2 and a question in 4.6 ms instead of 6.1 (bench/results/report.md).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
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
        int8 = " --int8" if self.quantized else ""
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

    @property
    def quantized(self) -> bool:
        """The int8 model (dynamic quantisation), whose vectors depend on the batch a text is embedded in."""
        return self.onnx_path.name == INT8_FILE

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
        # Batches of similar length waste little on padding. The int8 model embeds each text alone: its dynamic
        # quantisation scales a whole batch's activations together, so a text's vector would depend on the texts
        # batched with it (cosine down to 0.993), and the same question or abstract would be embedded differently
        # alone, in a batch or in another corpus. Alone is also no slower there: nothing is padded.
        order = sorted(range(total), key=lambda i: -len(encodings[i].ids))
        batch_size = 1 if self.quantized else self.batch_size
        done = 0
        for start, end in length_batches([len(encodings[i].ids) for i in order], batch_size):
            rows = order[start:end]
            width = len(encodings[rows[0]].ids)
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


def physical_cores(cpuinfo: str | None = None) -> int:
    """Physical cores this process may run on (hyperthread siblings counted once); at least 1.

    ``cpuinfo``: the text of /proc/cpuinfo (read when None); where it says nothing usable, every CPU
    the process may use counts."""
    try:
        allowed = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        allowed = set(range(os.cpu_count() or 1))
    try:
        text = cpuinfo if cpuinfo is not None else Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    cores, cpu, fields = set(), None, {}
    for line in [*text.splitlines(), ""]:
        key, _, value = (part.strip() for part in line.partition(":"))
        if not key:  # a blank line ends one processor's block
            if cpu is not None and cpu in allowed and "core id" in fields:
                cores.add((fields.get("physical id", "0"), fields["core id"]))
            cpu, fields = None, {}
        elif key == "processor" and value.isdigit():
            cpu = int(value)
        else:
            fields[key] = value
    return max(1, len(cores) if cores else len(allowed))


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
