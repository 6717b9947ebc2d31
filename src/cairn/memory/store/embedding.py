"""The local embedding model behind Recall's semantic candidates (issue #26).

WordLlama's ``l2_supercat`` model at 256 dimensions: static embeddings, so a text's vector is the
mean of its tokens' vectors (Llama 2's 32,000-token BPE vocabulary, 16 MB of float16 weights),
scaled to unit length; the cosine similarity of two texts is then a dot product. Quality, size
and speed against the alternatives are in benchmarks/README.md.

The weights and the tokenizer ship inside the ``wordllama`` wheel (``pip install
'cairn-agent[semantic]'``). They are read from its package folder without importing the package
(whose own loader reaches for a model hub when a file is missing, and costs ~0.6 s to import):
nothing is ever downloaded. ``numpy`` and ``tokenizers`` are imported here, and this module only
on the refined and background paths, never while a session starts or in the fast phase.

If the model cannot be loaded (the extra is not installed, a file is missing or damaged),
:func:`load_model` logs one warning per process and returns ``None``: Recall then offers the
selector lexical and recent candidates only.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import mmap
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.debug_log import get_logger

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "MAX_EMBED_CHARS",
    "MAX_EMBED_TOKENS",
    "MODEL_NAME",
    "EmbeddingModel",
    "EmbeddingUnavailable",
    "load_model",
    "model_loaded",
]

MODEL_NAME = "wordllama-l2_supercat-256"
MAX_EMBED_CHARS = 4_000  # characters of a text that are embedded (a 200,000-character title ...)
MAX_EMBED_TOKENS = 512  # ... and tokens of those: a mean over more adds little but cost
_PACKAGE = "wordllama"
_WEIGHTS = ("weights", "l2_supercat_256.safetensors")
_TOKENIZER = ("tokenizers", "l2_supercat_tokenizer_config.json")
_TENSOR = "embedding.weight"
_DIMENSIONS = 256
_log = get_logger("MEMORY")


class EmbeddingUnavailable(Exception):
    """The embedding model cannot be loaded (not installed, a file missing or damaged)."""


class EmbeddingModel:
    """A loaded static embedding model: ``embed`` is thread-safe and never touches the network."""

    def __init__(self, model_id: str, weights: np.ndarray, tokenizer: Any) -> None:
        self.model_id = model_id  # vectors made under another id are rebuilt
        self.dim = int(weights.shape[1])
        self._weights = weights  # (vocabulary, dim) float16, memory-mapped
        self._tokenizer = tokenizer

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One unit-length float32 row per text (a zero row for a text with no token)."""
        import numpy as np

        rows = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return rows
        clipped = [text[:MAX_EMBED_CHARS] for text in texts]
        encodings = self._tokenizer.encode_batch(clipped, add_special_tokens=False)
        vocabulary = self._weights.shape[0]
        for row, encoding in enumerate(encodings):
            ids = np.asarray(encoding.ids[:MAX_EMBED_TOKENS], dtype=np.int64)
            ids = ids[(ids >= 0) & (ids < vocabulary)]
            if not ids.size:
                continue
            mean = self._weights[ids].astype(np.float32).mean(axis=0)
            norm = float(np.linalg.norm(mean))
            if norm > 0:
                rows[row] = mean / norm
        return rows


_lock = threading.Lock()
_state: dict[str, EmbeddingModel | None] = {}


def load_model() -> EmbeddingModel | None:
    """The process's embedding model, loaded on first call; ``None`` (after one warning) when it
    cannot be loaded. Blocks for the load (~0.3 s): call it in a worker thread."""
    with _lock:
        if "model" not in _state:
            try:
                _state["model"] = _load()
            except EmbeddingUnavailable as error:
                _log.warning(f"semantic recall candidates are off: {error}")
                _state["model"] = None
        return _state["model"]


def model_loaded() -> bool:
    """True once this process has loaded the model (so embedding more costs milliseconds)."""
    return _state.get("model") is not None


def _package_folder() -> Path:
    """The installed ``wordllama`` package's folder, found without importing the package."""
    try:
        spec = importlib.util.find_spec(_PACKAGE)
    except (ImportError, ValueError) as error:
        raise EmbeddingUnavailable(f"{_PACKAGE} cannot be found ({error})") from error
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingUnavailable(
            f"{_PACKAGE} is not installed (pip install 'cairn-agent[semantic]')"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def _load() -> EmbeddingModel:
    folder = _package_folder()
    try:
        import numpy  # noqa: F401 - fail here, with the reason, when it is missing
        import tokenizers
    except ImportError as error:
        raise EmbeddingUnavailable(f"a library of the model is missing: {error}") from error
    weights_path = folder.joinpath(*_WEIGHTS)
    tokenizer_path = folder.joinpath(*_TOKENIZER)
    weights = _read_weights(weights_path)
    try:
        tokenizer = tokenizers.Tokenizer.from_file(str(tokenizer_path))
    except Exception as error:  # missing or not a tokenizer file
        raise EmbeddingUnavailable(f"{tokenizer_path}: {error}") from error
    tokenizer.no_padding()
    tokenizer.no_truncation()
    try:
        version = importlib.metadata.version(_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    model_id = f"{MODEL_NAME}/{_PACKAGE}-{version}/{weights.nbytes}"
    return EmbeddingModel(model_id, weights, tokenizer)


def _read_weights(path: Path) -> np.ndarray:
    """The embedding matrix of a safetensors file, memory-mapped (header: 8-byte little-endian
    length, then JSON naming each tensor's dtype, shape and byte range after the header)."""
    import numpy as np

    try:
        with path.open("rb") as handle:
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as error:
        raise EmbeddingUnavailable(f"{path}: {error}") from error
    try:
        size = int.from_bytes(mapped[:8], "little")
        header = json.loads(mapped[8 : 8 + size])
        tensor = header[_TENSOR]
        rows, dim = tensor["shape"]
        start, end = tensor["data_offsets"]
        if tensor["dtype"] != "F16" or dim != _DIMENSIONS or end - start != rows * dim * 2:
            raise ValueError(f"unexpected tensor {tensor}")
        offset = 8 + size + start
        if offset + rows * dim * 2 > len(mapped):
            raise ValueError("the file is shorter than its header says")
        return np.frombuffer(mapped, dtype=np.float16, count=rows * dim, offset=offset).reshape(
            rows, dim
        )
    except (ValueError, KeyError, TypeError) as error:
        raise EmbeddingUnavailable(f"{path} is damaged ({error})") from error
