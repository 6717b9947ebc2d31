"""Any file names and contents in a memory folder: memory reads them or warns, never breaks.

The property behind several #18 findings (a file name that is not UTF-8, a newline in a name, a
huge title, a list-valued type): whatever a memory folder holds, the store refreshes, the
``MEMORY.md`` index is one valid line per memory, and everything cairn builds from memory for a
prompt, a warning or the audit trail is text that can be encoded as UTF-8.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn.memory.forget.selection import list_forget_candidates
from cairn.memory.recall.render import render_relevant_memory
from cairn.memory.store.history import HistoryEntry, append_history, read_history
from cairn.memory.store.index_file import MAX_INDEX_LINES

from .memory_helpers import NOW, make_manager, project_root

_NAME_BYTES = st.binary(min_size=1, max_size=24).filter(
    lambda raw: b"/" not in raw and b"\x00" not in raw and raw not in (b".", b"..")
)
_FIELD = st.text(max_size=60)
_TYPE = st.one_of(
    st.sampled_from(["user", "feedback", "project", "reference"]),
    st.sampled_from(["[user, project]", "{a: b}", "", "memo", "~", "1.5"]),
)


@st.composite
def _content(draw: st.DrawFn) -> bytes:
    if draw(st.booleans()):
        return draw(st.binary(max_size=300))
    name, description, body = draw(_FIELD), draw(_FIELD), draw(st.text(max_size=200))
    text = f"---\nname: {name}\ndescription: {description}\ntype: {draw(_TYPE)}\n---\n\n{body}"
    return text.encode("utf-8", "surrogatepass")


_FILES = st.lists(
    st.tuples(
        st.sampled_from([b"", b"user/", b"feedback/"]), _NAME_BYTES, st.booleans(), _content()
    ),
    max_size=8,
)


def _plant(root: Path, files: list[tuple[bytes, bytes, bool, bytes]]) -> None:
    for folder, name, markdown, content in files:
        parent = os.fsencode(root) + b"/" + folder
        os.makedirs(parent, exist_ok=True)
        path = parent + name + (b".md" if markdown else b"")
        if os.path.isdir(path):
            continue
        with open(path, "wb") as handle:
            handle.write(content)


def _utf8(text: str) -> str:
    text.encode("utf-8")  # raises for lone surrogates (a name that is not UTF-8)
    return text


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files=_FILES)
def test_any_memory_folder_reads_into_valid_text(
    files: list[tuple[bytes, bytes, bool, bytes]],
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        manager = make_manager(Path(folder), now=NOW)
        root = project_root(manager)
        root.mkdir(parents=True)
        _plant(root, files)

        report = manager.reindex()
        docs = manager.docs()

        for warning in report.warnings:
            _utf8(warning)
        for doc in docs:
            _utf8(doc.relative_path)
            _utf8(doc.title)
        index = (root / "MEMORY.md").read_bytes().decode("utf-8")
        lines = index.splitlines()
        project_docs = [doc for doc in docs if doc.scope == "project"]
        assert len(lines) == min(len(project_docs), MAX_INDEX_LINES)
        assert all(line.startswith(("- [", "> WARNING")) for line in lines)
        _utf8(manager.system_prompt_section())
        _utf8(render_relevant_memory(docs, now=NOW))
        for candidate in list_forget_candidates(docs):
            _utf8(candidate.id)
        append_history(
            root, HistoryEntry(NOW, "extract", "project", [d.relative_path for d in docs])
        )
        entries, problems = read_history([("project", root)])
        assert problems == [] and len(entries) == 1
