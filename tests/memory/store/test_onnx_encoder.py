"""Recall's faster encoder: the int8 graph on onnxruntime, built in memory from the installed
model's weights, against cairn's numpy encoder; the numpy fallback without onnxruntime
(issue #26)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cairn.memory.paths import MemoryRoots
from cairn.memory.recall.semantic import compute_vectors, nearest_diverse
from cairn.memory.store.embedding import EmbeddingModel, build_model
from cairn.memory.store.memory_store import MemoryStore
from cairn.memory.store.onnx_encoder import _varint
from cairn.memory.store.parse import render_memory_file

TEXTS = [
    "how should I indent this golang source?",
    "Prefers tabs over spaces in Go files",
    "Team lunch on Fridays",
    "where do user photos live?",
    "Uploaded pictures are kept in an S3 bucket behind CloudFront",
    "Release 136 shipped the billing fix\nInvoices were rounded twice; fixed in round.py",
    "日本語のテキストも埋め込める",
    "x",
    "word " * 300,
]


@pytest.fixture(scope="module")
def engines() -> tuple[EmbeddingModel, EmbeddingModel]:
    fast, slow = build_model(), build_model(faster=False)
    assert (fast.engine, slow.engine) == ("onnxruntime-int8", "numpy")
    assert fast.model_id == slow.model_id  # one id: saved vectors serve both
    return fast, slow


def test_the_int8_engine_agrees_with_the_numpy_encoder(
    engines: tuple[EmbeddingModel, EmbeddingModel],
) -> None:
    """The int8 weights move each vector by a cosine of at most 0.015 (0.994 on average over
    the paraphrase set's queries, benchmarks/README.md), and the issue's pair keeps its score."""
    fast, slow = engines
    ours, reference = fast.embed(TEXTS), slow.embed(TEXTS)
    agreement = (ours * reference).sum(axis=1)
    assert agreement.min() >= 0.985, agreement
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    query, near, far = fast.embed(TEXTS[:3])
    assert float(query @ near) == pytest.approx(0.435, abs=0.02)
    assert float(query @ far) == pytest.approx(0.066, abs=0.02)
    assert not fast.embed([""]).any()  # no word piece: a zero row, as on numpy


def write(root: Path, relative: str, name: str, description: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_memory_file(name, description, "project", "body"), "utf-8")


def test_vectors_saved_by_the_numpy_encoder_serve_the_int8_engine(
    tmp_path: Path, engines: tuple[EmbeddingModel, EmbeddingModel]
) -> None:
    """A memory embedded before onnxruntime was installed keeps its vectors (nothing is
    recomputed) and the int8 engine's queries find them."""
    fast, slow = engines
    roots = MemoryRoots(
        project=tmp_path / "p" / "memory", user=tmp_path / "u", state_dir=tmp_path / "p"
    )
    assert roots.project is not None
    write(roots.project, "tabs.md", "Tabs in Go files", "Prefers tabs over spaces in Go files")
    write(roots.project, "lunch.md", "Lunch", "Team lunch on Fridays")
    write(roots.project, "photos.md", "Photos", "Uploaded pictures are kept in an S3 bucket")
    store = MemoryStore(roots, watch=False)
    store.refresh()
    store.load_vectors(slow)
    store.apply_vectors(jobs := store.vector_jobs(), slow.embed([job.text for job in jobs]))
    store.save_vectors()
    store.close()

    later = MemoryStore(roots, watch=False)
    later.refresh()
    later.load_vectors(fast)
    assert later.vector_jobs() == []
    vector = fast.embed_query("how should I indent this golang source?")
    found = list(nearest_diverse(later, vector, limit=3))
    assert found[0].title == "Tabs in Go files"
    assert compute_vectors(later) == 0
    later.close()


def test_without_onnxruntime_the_numpy_encoder_runs_after_one_warning(tmp_path: Path) -> None:
    probe = (
        "import sys\n"
        "sys.modules['onnxruntime'] = None  # import onnxruntime raises ImportError\n"
        "from cairn import debug_log\n"
        "debug_log.set_process_session('probe')\n"
        "from cairn.memory.store.embedding import load_model\n"
        "first, second = load_model(), load_model()\n"
        "assert first is second and first is not None\n"
        "print(first.engine, round(float(first.embed_query('tabs in go') @ "
        "first.embed_query('tabs in go')), 3))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        env={"CAIRN_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"},
    )
    assert done.stdout.split() == ["numpy", "1.0"]
    text = (tmp_path / "home" / "debug" / "probe.txt").read_text("utf-8")
    assert text.count("semantic recall uses the slower numpy encoder") == 1
    assert "onnxruntime is not installed" in text


def test_negative_integers_are_ten_byte_varints() -> None:
    """Attributes such as ``axis=-1`` are int64s: protobuf writes them in two's complement."""
    assert _varint(1) == b"\x01"
    assert _varint(300) == b"\xac\x02"
    assert _varint(-1) == b"\xff" * 9 + b"\x01"
