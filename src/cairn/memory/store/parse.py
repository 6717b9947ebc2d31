"""Reading and writing one memory file (YAML front matter + Markdown body).

:func:`parse_memory_file` never raises: a file that is not a usable memory comes back as a
:class:`ParseSkip` whose ``message`` is the one warning to show for it.
"""

from __future__ import annotations

import functools
import json
import os
import re
import stat
from datetime import date, datetime
from pathlib import Path
from typing import Any, Literal, TypeAlias

from cairn.fsutil import NotRegularFile, file_kind, read_regular_bytes
from cairn.memory.document import MEMORY_TYPES, MemoryDoc, MemoryScope, MemoryType
from cairn.memory.store.entries import (
    EMPTY_BODY_PLACEHOLDER,
    MemoryEntry,
    merge_entry,
    parse_entries,
    render_entries,
)
from cairn.values import Value

__all__ = [
    "EMPTY_BODY_PLACEHOLDER",
    "MAX_DESCRIPTION_CHARS",
    "MAX_MEMORY_FILE_BYTES",
    "MAX_TITLE_CHARS",
    "MemoryEntry",
    "MemoryFields",
    "ParseSkip",
    "SkipReason",
    "display_path",
    "memory_fields",
    "memory_file_problem",
    "merge_entry",
    "parse_entries",
    "parse_memory_file",
    "parse_memory_text",
    "plain_memory_fields",
    "render_entries",
    "render_memory_file",
    "valid_name",
]

MAX_MEMORY_FILE_BYTES = 1024 * 1024  # larger files are skipped, never read whole
MAX_TITLE_CHARS = 200  # a longer title is cut when read (the file keeps it)
MAX_DESCRIPTION_CHARS = 1_000  # a longer description is cut when read (the file keeps it)
_BINARY_SNIFF_BYTES = 8192  # a NUL byte in this prefix marks a binary file

SkipReason: TypeAlias = Literal[
    "invalid_front_matter",
    "unknown_type",
    "too_large",
    "binary",
    "symlink_outside_root",
    "not_regular",
    "invalid_name",
    "unreadable",
]

# Patterns as text, compiled on first use (:func:`_compiled`): a start-up whose saved index is
# current parses no file, and compiling them cost ~3 M instructions before the first request.
_FRONT_MATTER = r"(?s)\A---[ \t]*\n(?:(.*?)\n)?---[ \t]*(?:\n(.*))?\Z"
_KEY_LINE = r"^(?P<key>[A-Za-z_][\w-]*):[ \t]+(?P<value>.*?)[ \t]*$"
_FIXED_VOCABULARY_KEYS = frozenset({"type", "category"})  # their ` #` stays a YAML comment
_FREE_TEXT_KEYS = ("name", "title", "description")
_YAML_INDICATORS = tuple("\"'|>[{&*!%@`")
_SPACES = r"\s+"


@functools.cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


class ParseSkip(Value):
    """A file under a memory root that is not read as a memory, and why."""

    path: Path
    reason: SkipReason
    detail: str

    @property
    def message(self) -> str:
        return f"{display_path(self.path)}: skipped ({self.detail})"


def display_path(path: Path | str) -> str:
    """``path`` as printable text: bytes that are not UTF-8 shown as ``\\xe9`` escapes."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def valid_name(path: Path | str) -> bool:
    """Whether ``path`` is valid UTF-8 (a name that is not cannot be written to a prompt)."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _quote_hash_values(front_matter: str) -> str:
    """Quote free-text values holding `` #`` so YAML keeps them instead of reading a comment."""
    lines = front_matter.split("\n")
    key_line = _compiled(_KEY_LINE)
    for i, line in enumerate(lines):
        match = key_line.match(line)
        if match is None or match["key"] in _FIXED_VOCABULARY_KEYS:
            continue
        value = match["value"]
        if value.startswith(_YAML_INDICATORS) or (" #" not in value and "\t#" not in value):
            continue
        lines[i] = f"{match['key']}: {json.dumps(value, ensure_ascii=False)}"
    return "\n".join(lines)


def _load_yaml(front_matter: str) -> dict[Any, Any] | None:
    import yaml  # deferred: only files that changed since the last scan are parsed

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        data = yaml.load(_quote_hash_values(front_matter), Loader=loader)  # noqa: S506 - safe loader
    except (yaml.YAMLError, ValueError, TypeError, RecursionError):
        return None
    if data is None:
        return {}
    return data if isinstance(data, dict) else None


_READ_KEYS = frozenset({"name", "title", "description", "type"})  # what a memory reads
_TOP_KEY_LINE = r"^(?P<key>[A-Za-z_][\w-]*):(?:[ ]+(?P<value>.*?))?[ ]*$"
_PLAIN_UNSAFE_START = tuple("\"'|>[]{}&*!%@`-?:,#")  # what may make a value YAML, not text
_FLOW_OK = r"^\[[^\[\]{}\"'#]*\]$"  # a one-line flow list: `evidence: [a, b]`


def _plain(value: str) -> bool:
    """Whether YAML reads ``value`` (on one line, after ``key: ``) as exactly this text."""
    return not (
        value.startswith(_PLAIN_UNSAFE_START)
        or ": " in value
        or " #" in value
        or "\t" in value
        or value.endswith(":")
    )


def _simple_fields(front_matter: str) -> dict[str, str] | None:
    """The fields a memory reads, without YAML, when the front matter is the plain shape cairn
    and most tools write (``key: text`` lines, nested blocks only under keys not read); None
    when YAML is needed to be sure. Never disagrees with the YAML reading (a test checks)."""
    fields: dict[str, str] = {}
    seen: set[str] = set()
    nested = False  # inside the indented block of a key that is not read
    top_key_line = _compiled(_TOP_KEY_LINE)
    for line in front_matter.split("\n"):
        if not line.strip():
            continue
        if line[0] in " \t":
            if not nested:
                return None
            continue
        match = top_key_line.match(line)
        if match is None or match["key"] in seen:
            return None
        key, value = match["key"], match["value"] or ""
        seen.add(key)
        if key not in _READ_KEYS:
            nested = True
            if value[:1] in ("[", "{") and not _compiled(_FLOW_OK).match(value):
                return None  # a flow collection may go on over the next lines
            if value[:1] in ("'", '"', "|", ">", "&", "*", "!"):
                return None  # quoted, block or tagged: may span lines or change the document
            continue
        nested = False
        if not value or not _plain(value):
            return None
        fields[key] = value
    memory_type = fields.get("type", "").strip().lower()
    if memory_type not in MEMORY_TYPES:
        return None  # YAML's reading names the problem (null, a list, ...)
    return fields


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _load_key_lines(front_matter: str) -> dict[str, str]:
    """Plain ``key: value`` lines: how front matter YAML rejects (``a: b: c``) is still read."""
    fields: dict[str, str] = {}
    key_line = _compiled(_KEY_LINE)
    for line in front_matter.split("\n"):
        match = key_line.match(line)
        if match is not None and match["key"] not in fields:
            fields[match["key"]] = _unquote(match["value"])
    return fields


def _prefer_raw_text(fields: dict[Any, Any], front_matter: str) -> dict[Any, Any]:
    """YAML reads ``name: 1.10`` as 1.1 and ``name: no`` as False: keep the text as written."""
    if all(isinstance(fields.get(key, ""), str) for key in _FREE_TEXT_KEYS):
        return fields
    raw = _load_key_lines(front_matter)
    fixed = dict(fields)
    for key in _FREE_TEXT_KEYS:
        if key in raw and not isinstance(fields.get(key, ""), str):
            fixed[key] = raw[key]
    return fixed


def _scalar(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None if value is None else str(value).lower()
    if isinstance(value, str | int | float):
        return str(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    return None


def _capped(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _type_problem(fields: dict[Any, Any]) -> str:
    if "type" not in fields or fields["type"] is None:
        return "no 'type' in front matter"
    value = fields["type"]
    if isinstance(value, list | tuple):
        return "'type' must be one value, not a list"
    if isinstance(value, dict):
        return "'type' must be one value, not a mapping"
    return f"unknown type {_scalar(value)!r}"


def _memory_type(value: Any) -> MemoryType | None:
    text = _scalar(value)
    if text is None:
        return None
    lowered = text.strip().lower()
    for memory_type in MEMORY_TYPES:
        if lowered == memory_type:
            return memory_type
    return None


MemoryFields: TypeAlias = tuple[MemoryType, str, str, str]  # type, title, description, body


def memory_fields(text: str) -> MemoryFields | tuple[SkipReason, str]:
    """The type, title, description and body of a memory file's text (CRLF or LF), or the
    reason and detail of why it is not a memory."""
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    match = _compiled(_FRONT_MATTER).match(text)
    if match is None:
        return "invalid_front_matter", "no '---' front matter block"
    front_matter, body = match[1] or "", match[2] or ""
    fields = _simple_fields(front_matter) or _load_yaml(front_matter)
    if fields is None:
        fields = _load_key_lines(front_matter)
        if "type" not in fields:
            return "invalid_front_matter", "front matter is not valid YAML"
    fields = _prefer_raw_text(fields, front_matter)
    memory_type = _memory_type(fields.get("type"))
    if memory_type is None:
        return "unknown_type", f"{_type_problem(fields)}; expected one of {', '.join(MEMORY_TYPES)}"
    title = _scalar(fields.get("name")) or _scalar(fields.get("title")) or memory_type
    description = (_scalar(fields.get("description")) or "").strip()
    body = body.strip()
    return (
        memory_type,
        _capped(title.strip(), MAX_TITLE_CHARS) or memory_type,
        _capped(description, MAX_DESCRIPTION_CHARS),
        "" if body == EMPTY_BODY_PLACEHOLDER else body,
    )


def parse_memory_text(
    text: str,
    *,
    path: Path,
    relative_path: str,
    scope: MemoryScope,
    mtime: float,
    size: int,
) -> MemoryDoc | ParseSkip:
    """A memory from the text of a file (CRLF or LF), or why it is not one."""
    fields = memory_fields(text)
    if len(fields) == 2:
        return ParseSkip(path, *fields)
    memory_type, title, description, body = fields
    return MemoryDoc(
        path=path,
        relative_path=relative_path,
        scope=scope,
        type=memory_type,
        title=title,
        description=description,
        body=body,
        mtime=mtime,
        size=size,
    )


def memory_file_problem(text: str) -> str | None:
    """Why ``text`` is not a complete memory file (front matter with a `name`, a `description`
    and a known `type`), or None when it is one. What a memory write is checked against."""
    parsed = parse_memory_text(
        text, path=Path("memory.md"), relative_path="memory.md", scope="project", mtime=0, size=0
    )
    if isinstance(parsed, ParseSkip):
        return parsed.detail
    match = _compiled(_FRONT_MATTER).match(text.removeprefix("\ufeff").replace("\r\n", "\n"))
    fields = _load_yaml(match[1] or "") if match is not None else None
    if fields is None:
        fields = _load_key_lines(match[1] or "") if match is not None else {}
    missing = [key for key in ("name", "description") if not _scalar(fields.get(key))]
    if missing:
        return f"the front matter has no {' and no '.join(repr(key) for key in missing)}"
    return None


def _outside_root(path: Path, root: Path) -> bool:
    if not path.is_symlink():
        return False  # folders are the walker's job: it never follows a symlinked folder
    real_root = os.path.realpath(root)
    real_path = os.path.realpath(path)
    return os.path.commonpath((real_root, real_path)) != real_root


def _relative_path(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return Path(os.path.relpath(path, root)).as_posix()


def _read_checked(
    path: Path, root: Path, known: os.stat_result | None
) -> ParseSkip | tuple[bytes, os.stat_result]:
    if not valid_name(path):
        return ParseSkip(path, "invalid_name", "the file name is not valid UTF-8")
    try:
        if _outside_root(path, root):
            return ParseSkip(path, "symlink_outside_root", "symlink leading out of the memory root")
        info = known if known is not None and not stat.S_ISLNK(known.st_mode) else os.stat(path)
        if not stat.S_ISREG(info.st_mode):  # a FIFO would block, a device never end
            return ParseSkip(path, "not_regular", f"not a regular file: {file_kind(info.st_mode)}")
        if info.st_size > MAX_MEMORY_FILE_BYTES:
            return ParseSkip(path, "too_large", f"{info.st_size} bytes, over the 1 MiB limit")
        return read_regular_bytes(path, limit=MAX_MEMORY_FILE_BYTES + 1), info
    except NotRegularFile as error:  # swapped in after the stat
        return ParseSkip(path, "not_regular", f"not a regular file: {error.kind}")
    except OSError as error:
        return ParseSkip(path, "unreadable", f"unreadable: {error.strerror or error}")
    except ValueError as error:  # e.g. a NUL character in the path
        return ParseSkip(path, "unreadable", f"unreadable: {error}")


def parse_memory_file(
    path: Path, root: Path, scope: MemoryScope, *, info: os.stat_result | None = None
) -> MemoryDoc | ParseSkip:
    """Read one memory file under ``root``. Never raises.

    ``info`` (its stat, symlinks followed) saves a system call when the caller has it.
    """
    read = _read_checked(path, root, info)
    if isinstance(read, ParseSkip):
        return read
    data, info = read
    if len(data) > MAX_MEMORY_FILE_BYTES:
        return ParseSkip(path, "too_large", "over the 1 MiB limit")
    if b"\x00" in data[:_BINARY_SNIFF_BYTES]:
        return ParseSkip(path, "binary", "binary file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return ParseSkip(path, "binary", "binary file (not UTF-8 text)")
    return parse_memory_text(
        text,
        path=path,
        relative_path=_relative_path(path, root),
        scope=scope,
        mtime=info.st_mtime,
        size=info.st_size,
    )


_PLAIN_OPEN_FLAGS = (
    os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
)  # fmt: skip


def plain_memory_fields(path: str, info: os.stat_result) -> MemoryFields | None:
    """What :func:`parse_memory_file` reads from ``path``, a file that is no symlink and whose
    ``lstat`` is ``info``, with the fewest system calls (open, fstat, read, close), or None when
    the file is anything but a plain valid memory: :func:`parse_memory_file` then decides and
    words the warning. The first scan of a large memory reads every file through here."""
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_MEMORY_FILE_BYTES:
        return None
    try:
        fd = os.open(path, _PLAIN_OPEN_FLAGS)
    except (OSError, ValueError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, info.st_size + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) != info.st_size or b"\x00" in data[:_BINARY_SNIFF_BYTES]:
        return None  # changed since its stat, or binary
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    fields = memory_fields(text)
    return fields if len(fields) == 4 and valid_name(path) else None


def _yaml_scalar_line(key: str, value: str) -> str:
    import yaml

    dumped = yaml.safe_dump({key: value}, allow_unicode=True, width=1 << 30, sort_keys=False)
    return dumped.rstrip("\n").removesuffix("\n...")


def render_memory_file(name: str, description: str, type: MemoryType, body: str) -> str:
    """The text of a memory file: front matter (one line per field), a blank line, the body."""
    if type not in MEMORY_TYPES:
        raise ValueError(f"memory type must be one of {', '.join(MEMORY_TYPES)}, not {type!r}")
    lines = [
        "---",
        _yaml_scalar_line("name", _compiled(_SPACES).sub(" ", name).strip()),
        _yaml_scalar_line("description", _compiled(_SPACES).sub(" ", description).strip()),
        f"type: {type}",
        "---",
        "",
        body.strip(),
    ]
    return "\n".join(lines) + "\n"
