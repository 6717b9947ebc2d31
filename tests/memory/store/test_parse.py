"""Reading one memory file: the format, its tolerances, and every reason to skip a file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.memory.document import MEMORY_TYPES, MemoryDoc
from cairn.memory.store.parse import (
    MAX_DESCRIPTION_CHARS,
    MAX_MEMORY_FILE_BYTES,
    MAX_TITLE_CHARS,
    ParseSkip,
    parse_memory_file,
    parse_memory_text,
    render_memory_file,
)

VALID = """---
name: Prefers uv over pip
description: The user installs Python packages with uv, never pip
type: user
---

Use `uv pip install`.

Why: they pin everything with uv.lock.
"""


def write(root: Path, relative: str, content: str | bytes) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def parse_text(text: str) -> MemoryDoc | ParseSkip:
    return parse_memory_text(
        text, path=Path("/m/user/x.md"), relative_path="user/x.md", scope="user", mtime=1.0, size=1
    )


def doc_of(text: str) -> MemoryDoc:
    parsed = parse_text(text)
    assert isinstance(parsed, MemoryDoc), parsed
    return parsed


def skip_of(text: str) -> ParseSkip:
    parsed = parse_text(text)
    assert isinstance(parsed, ParseSkip), parsed
    return parsed


def test_a_memory_file_reads_into_a_document(tmp_path: Path) -> None:
    path = write(tmp_path, "user/uv.md", VALID)
    doc = parse_memory_file(path, tmp_path, "user")
    assert isinstance(doc, MemoryDoc)
    assert (doc.title, doc.type, doc.scope, doc.relative_path) == (
        "Prefers uv over pip", "user", "user", "user/uv.md",
    )  # fmt: skip
    assert doc.description == "The user installs Python packages with uv, never pip"
    assert doc.body == "Use `uv pip install`.\n\nWhy: they pin everything with uv.lock."
    assert doc.size == path.stat().st_size
    assert doc.mtime == path.stat().st_mtime


def test_crlf_line_endings_read_like_lf() -> None:
    assert doc_of(VALID.replace("\n", "\r\n")) == doc_of(VALID)


def test_a_byte_order_mark_is_ignored() -> None:
    assert doc_of("\ufeff" + VALID) == doc_of(VALID)


def test_unquoted_hash_in_free_text_is_kept_not_read_as_a_comment() -> None:
    doc = doc_of("---\nname: Use C# #tools\ndescription: a #1 rule\ntype: feedback\n---\nbody")
    assert (doc.title, doc.description) == ("Use C# #tools", "a #1 rule")


def test_hash_comment_after_the_type_is_still_a_comment() -> None:
    assert doc_of("---\nname: n\ntype: project # the default\n---\n").type == "project"


def test_front_matter_yaml_rejects_is_read_line_by_line() -> None:
    """Regression: `description: Note: colon` is invalid YAML but common in hand-written files."""
    doc = doc_of("---\nname: Title: with colon\ndescription: Note: colon\ntype: user\n---\nb")
    assert (doc.title, doc.description, doc.type) == ("Title: with colon", "Note: colon", "user")


def test_numbers_and_yes_no_words_keep_their_written_text() -> None:
    doc = doc_of("---\nname: 1.10\ndescription: no\ntype: user\n---\n")
    assert (doc.title, doc.description) == ("1.10", "no")


def test_title_falls_back_to_title_key_then_to_the_type() -> None:
    assert doc_of("---\ntitle: Old key\ntype: user\n---\n").title == "Old key"
    assert doc_of("---\ntype: reference\n---\n").title == "reference"


def test_type_is_matched_without_case_or_spaces() -> None:
    assert doc_of("---\ntype: ' Feedback '\n---\n").type == "feedback"


def test_the_empty_placeholder_body_reads_as_empty() -> None:
    assert doc_of("---\ntype: user\n---\n\n_No entries yet._\n").body == ""


def test_missing_front_matter_is_skipped_as_invalid() -> None:
    assert skip_of("# Just notes\n\nno front matter").reason == "invalid_front_matter"


def test_front_matter_that_is_not_a_mapping_is_skipped_as_invalid() -> None:
    assert skip_of("---\n- a\n- b\n---\nbody").reason == "invalid_front_matter"


def test_broken_yaml_without_a_type_line_is_skipped_as_invalid() -> None:
    assert skip_of("---\nname: [unclosed\n---\nbody").reason == "invalid_front_matter"


def test_unknown_type_is_skipped_with_the_type_named() -> None:
    skip = skip_of("---\nname: n\ntype: memo\n---\nbody")
    assert skip.reason == "unknown_type"
    assert "'memo'" in skip.message


def test_missing_type_is_skipped_as_unknown_type() -> None:
    assert skip_of("---\nname: n\n---\nbody").reason == "unknown_type"


def test_a_list_valued_type_is_named_as_a_list_not_as_missing() -> None:
    """Regression (#18): `type: [user, project]` was reported as "no 'type' in front matter"."""
    skip = skip_of("---\nname: n\ntype: [user, project]\n---\nbody")
    assert skip.reason == "unknown_type"
    assert "no 'type'" not in skip.message
    assert "'type' must be one value, not a list" in skip.message


def test_a_very_long_title_and_description_are_cut_when_read() -> None:
    doc = doc_of(f"---\nname: {'T' * 200_000}\ndescription: {'d ' * 5_000}\ntype: user\n---\nb")
    assert len(doc.title) == MAX_TITLE_CHARS and doc.title.endswith("…")
    assert len(doc.description) <= MAX_DESCRIPTION_CHARS and doc.description.endswith("…")


@pytest.mark.timeout(10)
def test_a_fifo_named_like_a_memory_is_skipped_unopened(tmp_path: Path) -> None:
    fifo = tmp_path / "user" / "pipe.md"
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    skip = parse_memory_file(fifo, tmp_path, "user")
    assert isinstance(skip, ParseSkip) and skip.reason == "not_regular"
    assert skip.message.endswith("skipped (not a regular file: a FIFO)")


def test_a_file_name_that_is_not_utf8_is_skipped_with_a_printable_warning(tmp_path: Path) -> None:
    folder = tmp_path / "user"
    folder.mkdir()
    path = Path(os.fsdecode(os.fsencode(folder) + b"/caf\xe9.md"))
    path.write_text(VALID)
    skip = parse_memory_file(path, tmp_path, "user")
    assert isinstance(skip, ParseSkip) and skip.reason == "invalid_name"
    assert "caf\\xe9.md: skipped (the file name is not valid UTF-8)" in skip.message
    skip.message.encode("utf-8")  # printable as it is


def test_file_over_one_mebibyte_is_skipped_unread(tmp_path: Path) -> None:
    path = write(tmp_path, "user/big.md", VALID + "x" * MAX_MEMORY_FILE_BYTES)
    skip = parse_memory_file(path, tmp_path, "user")
    assert isinstance(skip, ParseSkip) and skip.reason == "too_large"


def test_file_with_nul_bytes_is_skipped_as_binary(tmp_path: Path) -> None:
    path = write(tmp_path, "user/blob.md", b"---\ntype: user\n---\n\x00\x01\x02")
    skip = parse_memory_file(path, tmp_path, "user")
    assert isinstance(skip, ParseSkip) and skip.reason == "binary"


def test_file_that_is_not_utf8_is_skipped_as_binary(tmp_path: Path) -> None:
    path = write(tmp_path, "user/latin1.md", "---\ntype: user\n---\ncafé".encode("latin-1"))
    skip = parse_memory_file(path, tmp_path, "user")
    assert isinstance(skip, ParseSkip) and skip.reason == "binary"


def test_symlink_leading_out_of_the_root_is_skipped(tmp_path: Path) -> None:
    outside = write(tmp_path, "elsewhere/secret.md", VALID)
    root = tmp_path / "root"
    link = root / "user" / "link.md"
    link.parent.mkdir(parents=True)
    link.symlink_to(outside)
    skip = parse_memory_file(link, root, "user")
    assert isinstance(skip, ParseSkip) and skip.reason == "symlink_outside_root"


def test_symlink_inside_the_root_is_read(tmp_path: Path) -> None:
    target = write(tmp_path, "user/real.md", VALID)
    link = tmp_path / "user" / "alias.md"
    link.symlink_to(target)
    doc = parse_memory_file(link, tmp_path, "user")
    assert isinstance(doc, MemoryDoc) and doc.relative_path == "user/alias.md"


def test_dangling_symlink_is_skipped_as_unreadable(tmp_path: Path) -> None:
    link = tmp_path / "user" / "dangling.md"
    link.parent.mkdir(parents=True)
    link.symlink_to(tmp_path / "user" / "missing.md")
    skip = parse_memory_file(link, tmp_path, "user")
    assert isinstance(skip, ParseSkip) and skip.reason == "unreadable"


def test_a_folder_named_like_a_memory_is_skipped_as_not_a_regular_file(tmp_path: Path) -> None:
    folder = tmp_path / "user" / "odd.md"
    folder.mkdir(parents=True)
    skip = parse_memory_file(folder, tmp_path, "user")
    assert isinstance(skip, ParseSkip) and skip.reason == "not_regular"
    assert skip.detail == "not a regular file: a folder"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_file_without_read_permission_is_skipped_as_unreadable(tmp_path: Path) -> None:
    path = write(tmp_path, "user/locked.md", VALID)
    path.chmod(0)
    skip = parse_memory_file(path, tmp_path, "user")
    assert isinstance(skip, ParseSkip) and skip.reason == "unreadable"


def test_skip_message_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "user/x.md", "plain")
    skip = parse_memory_file(path, tmp_path, "user")
    assert isinstance(skip, ParseSkip)
    assert skip.message.startswith(f"{path}: skipped (")


def test_rendered_file_has_one_line_per_field_and_a_blank_line_before_the_body() -> None:
    text = render_memory_file("Uv", "Installs with uv", "user", "Body line\n")
    assert text == "---\nname: Uv\ndescription: Installs with uv\ntype: user\n---\n\nBody line\n"


def test_render_rejects_an_unknown_type() -> None:
    with pytest.raises(ValueError, match="memory type must be one of"):
        render_memory_file("n", "d", "memo", "b")  # type: ignore[arg-type]


_single_line = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), max_size=60
).map(lambda text: " ".join(text.split()))


@given(name=_single_line, description=_single_line, memory_type=st.sampled_from(MEMORY_TYPES),
       body=st.text(max_size=200))  # fmt: skip
def test_rendered_files_parse_back_to_the_same_fields(
    name: str, description: str, memory_type: str, body: str
) -> None:
    doc = doc_of(render_memory_file(name, description, memory_type, body))  # type: ignore[arg-type]
    assert doc.title == (name or memory_type)
    assert doc.description == description
    assert doc.type == memory_type
    normalized = body.replace("\r\n", "\n").replace("\r", "\n").strip()
    assert doc.body == ("" if normalized == "_No entries yet._" else normalized)


@settings(max_examples=200)
@given(st.binary(max_size=400))
def test_any_bytes_parse_to_a_document_or_a_skip(data: bytes) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        path = root / "user" / "any.md"
        path.parent.mkdir()
        path.write_bytes(data)
        assert isinstance(parse_memory_file(path, root, "user"), MemoryDoc | ParseSkip)


@given(st.text(max_size=300))
def test_any_text_parses_to_a_document_or_a_skip(text: str) -> None:
    assert isinstance(parse_text(text), MemoryDoc | ParseSkip)
    assert isinstance(parse_text("---\n" + text), MemoryDoc | ParseSkip)
    assert isinstance(parse_text("---\ntype: user\n" + text + "\n---\n"), MemoryDoc | ParseSkip)


# --- the plain front matter read without YAML (issue #28) ------------------------------------

_TRICKY_VALUES = st.sampled_from([
    "user", "Feedback", " project ", "reference", "memo", "null", "~", "yes", "no", "1.10",
    "2024-01-01", "'quoted'", '"double"', "[a, b]", "[a, [b]]", "{a: 1}", "a: b", "x #c", "|",
    ">", "&anchor", "*alias", "!!str x", "-", "- item", "? q", "%tag", "@at", "`tick`", "a:",
    "plain words, and more", "100 %", "é 漢字", "tab\there", "",
])  # fmt: skip
_VALUES = st.one_of(_TRICKY_VALUES, st.text(alphabet=st.characters(blacklist_characters="\r\n"),
                                            max_size=20))  # fmt: skip
_KEYS = st.sampled_from(["name", "title", "description", "type", "provenance", "evidence",
                         "category", "other", "type2", "<<"])  # fmt: skip
_LINES = st.one_of(
    st.tuples(_KEYS, _VALUES).map(lambda kv: f"{kv[0]}: {kv[1]}"),
    _KEYS.map(lambda key: f"{key}:"),
    _VALUES.map(lambda value: f"  {value}"),
    _VALUES.map(lambda value: f"  - path: {value}"),
    st.sampled_from(["# a comment", "", "...", "---x", "key:value"]),
)


@settings(max_examples=400)
@given(st.lists(_LINES, max_size=8))
def test_plain_front_matter_read_without_yaml_reads_as_yaml_does(lines: list[str]) -> None:
    """The fast path must never disagree with YAML (and its key-lines fallback) on the fields a
    memory reads; where it cannot be sure it steps aside."""
    from cairn.memory.store import parse

    front_matter = "\n".join(lines)
    simple = parse._simple_fields(front_matter)
    if simple is None:
        return
    by_yaml = parse._load_yaml(front_matter)
    if by_yaml is None:
        by_yaml = parse._load_key_lines(front_matter)

    def reading(fields: dict[str, object]) -> tuple[object, ...]:
        fields = parse._prefer_raw_text(fields, front_matter)
        return (
            parse._memory_type(fields.get("type")),
            parse._scalar(fields.get("name")) or parse._scalar(fields.get("title")),
            (parse._scalar(fields.get("description")) or "").strip(),
        )

    assert reading(simple) == reading(by_yaml)  # type: ignore[arg-type]


# --- the first scan's reader: fewer system calls, the same reading (issue #28) ---------------

_ODD_FILES = st.sampled_from([
    VALID.encode(), VALID.replace("\n", "\r\n").encode(), b"\xef\xbb\xbf" + VALID.encode(),
    b"", b"---\n---\n", b"no front matter", VALID.encode() + b"\x00", b"\xff\xfe" + VALID.encode(),
    VALID.replace("type: user", "type: memo").encode(), VALID.replace("name:", "name: 'q").encode(),
    b"---\ntype: user\n---\n" + "é 漢字".encode() * 50,
])  # fmt: skip


def _reading(parsed: MemoryDoc | ParseSkip) -> tuple[str, ...] | None:
    if isinstance(parsed, ParseSkip):
        return None
    return (parsed.type, parsed.title, parsed.description, parsed.body)


@settings(max_examples=200)
@given(st.one_of(_ODD_FILES, st.binary(max_size=400), st.text(max_size=300).map(str.encode)))
def test_the_first_scans_reader_reads_as_the_general_one_or_steps_aside(data: bytes) -> None:
    """``plain_memory_fields`` either gives exactly what ``parse_memory_file`` reads, or None
    (a skip, or anything unusual), and the general reader then decides."""
    import tempfile

    from cairn.memory.store.parse import plain_memory_fields

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        path = write(root, "project/odd.md", data)
        fast = plain_memory_fields(str(path), os.lstat(path))
        general = _reading(parse_memory_file(path, root, "project"))
        assert fast is None or fast == general
        if general is not None and b"\x00" not in data:
            assert fast == general  # a valid memory is never sent the slow way


def test_the_first_scans_reader_steps_aside_for_what_is_not_a_plain_file(tmp_path: Path) -> None:
    from cairn.memory.store.parse import plain_memory_fields

    path = write(tmp_path, "project/m.md", VALID)
    info = os.lstat(path)
    os.mkfifo(tmp_path / "fifo.md")
    assert plain_memory_fields(str(tmp_path / "fifo.md"), os.lstat(tmp_path / "fifo.md")) is None
    path.write_text(VALID + "grown since its stat\n")
    assert plain_memory_fields(str(path), info) is None
    (tmp_path / "link.md").symlink_to(path)
    assert plain_memory_fields(str(tmp_path / "link.md"), os.lstat(path)) is None
