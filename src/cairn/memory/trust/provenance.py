"""Provenance: where a memory came from, kept in its front matter.

Every memory a memory agent (Extract, Dream) or the session's own agent (``/remember``, or a
memory it saves itself) writes gets a ``provenance`` key, one extra front-matter key that Qwen
Code and Claude Code ignore (they read ``name``, ``description`` and ``type``)::

    ---
    name: Tests run with make check
    description: The test suite runs with `make check`, not pytest directly
    type: project
    provenance:
      by: extract                    # extract | remember | agent | dream
      session: 3f2a9c1e-5b7d-4c1e-9d0a-1b2c3d4e5f60
      turn: 4                        # the user's prompt number in that session
      at: 2026-03-02T10:41:07Z
      evidence:                      # the workspace files the fact is about
        - path: Makefile
          git: 3b18e512dba79e4c8300dd08aeb37f8e728b8dad   # or sha256: (untracked files)
          size: 1284
          check: 6b0c2d1f9e4a
      verified_by: make check        # optional: the command that confirmed it
    ---

A writer declares evidence with a top-level ``evidence:`` list of workspace paths (and
``verified_by:``); :func:`stamp` hashes those files now and moves both into the ``provenance``
block. Entries already in the block are kept as recorded, so a rewrite that keeps a fact keeps
the hashes from when it was learned (and its staleness); a rewrite that drops the block keeps the
previous version's evidence. Each entry's ``check`` is a checksum of the entry itself: an entry
edited by hand (a wrong hash) no longer matches it and counts as *cannot verify*, never as
"changed". Evidence is recorded for project memories only (user memory is not tied to one
workspace).
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any, Literal, TypeAlias

from cairn.fsutil import read_regular_bytes
from cairn.memory.trust.evidence import (
    Evidence,
    HashKind,
    Unverifiable,
    read_state,
    tracked_paths,
    workspace_relative,
)
from cairn.values import Value

__all__ = [
    "MAX_EVIDENCE_ENTRIES",
    "PROVENANCE_KEY",
    "Author",
    "Provenance",
    "Stamped",
    "TaskStatusRefused",
    "Writer",
    "entry_check",
    "parse_provenance",
    "read_provenance",
    "stamp",
    "without_provenance",
]

PROVENANCE_KEY = "provenance"
MAX_EVIDENCE_ENTRIES = 16  # evidence files recorded per memory
MAX_VERIFIED_BY_CHARS = 300
_MAX_FRONT_MATTER_BYTES = 64 * 1024  # of a memory file, read to find its provenance
_CACHE_SIZE = 20_000  # memories whose provenance a process remembers (by path, mtime, size)

Writer: TypeAlias = Literal["extract", "remember", "agent", "dream"]
_FRONT_MATTER = re.compile(r"\A(\ufeff?---[ \t]*\r?\n)(.*?)(\r?\n---[ \t]*(?:\r?\n|\Z))", re.DOTALL)
_TOP_KEY = re.compile(r"^(?P<key>[A-Za-z_][\w-]*)[ \t]*:")
_DECLARED_KEYS = ("evidence", "verified_by")
_HEX = {"git": re.compile(r"[0-9a-f]{40}"), "sha256": re.compile(r"[0-9a-f]{64}")}
_HEX_LETTER = r"[a-df]"  # a digest with one of these is never read as a number
_PLAIN = r"[A-Za-z0-9_./@+-][A-Za-z0-9_./@+-]*"
_TASK_STATUS = (
    r"\b(?:all\s+)?tests?\s+(?:now\s+|all\s+)?(?:pass(?:es|ed|ing)?|(?:are|is)\s+(?:green|passing))\b"
    r"|\b(?:build|ci|pipeline|deploy(?:ment)?)\s+(?:is\s+|now\s+)?(?:green|passing|fixed|done)\b"
    r"|\b(?:is|are|was|were|has\s+been|have\s+been)\s+(?:now\s+)?"
    r"(?:done|complete|completed|finished|merged|fixed|resolved|deployed)\b"
    r"|\b(?:done|finished|completed|merged)\s*[.!]?\s*$"
)


@functools.cache
def _writing(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """A pattern only a write uses, compiled then: Recall's reads import this module before a
    turn's first request (issue #32), and ``_TASK_STATUS`` alone is a costly compile."""
    return re.compile(pattern, flags)


class TaskStatusRefused(ValueError):
    """A project memory stating task status (tests pass, the migration is done) without
    evidence that would show it stale."""


class Provenance(Value):
    """A memory's ``provenance`` block as read."""

    by: str = ""
    session: str = ""
    turn: int | None = None
    at: float | None = None  # seconds since the epoch
    evidence: tuple[Evidence, ...] = ()
    verified_by: str = ""
    problems: tuple[str, ...] = ()  # entries that cannot be verified as written, and why

    @property
    def date(self) -> str:
        if self.at is None:
            return "an unknown date"
        return _dt.datetime.fromtimestamp(self.at, _dt.UTC).strftime("%Y-%m-%d")


class Author(Value):
    """Who is writing memory now: what :func:`stamp` records."""

    by: Writer
    session_id: str = ""
    turn: int | None = None
    workspace: Path | None = None  # evidence paths are relative to it (None: none recorded)
    project_memory: Path | None = None  # the project memory root (evidence only in there)
    clock: Callable[[], float] = field(default=lambda: _dt.datetime.now(_dt.UTC).timestamp())
    why: str = ""  # why it writes, for the version log ("from the conversation: …")
    versions_at_write: bool = True  # False: the run records versions when it ends (Dream)


class Stamped(Value):
    content: str
    notes: tuple[str, ...] = ()  # for the writer: evidence that was not recorded, and why


def entry_check(entry: Evidence) -> str:
    """The checksum of one evidence entry (a hand edit of the entry no longer matches it)."""
    text = f"{entry.path}\0{entry.kind}\0{entry.digest}\0{entry.size}"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


# --- reading ---------------------------------------------------------------------------------


def _split(text: str) -> tuple[str, str, str, str] | None:
    """(opening line, front matter, closing line, body) of a memory file's text."""
    match = _FRONT_MATTER.match(text)
    if match is None:
        return None
    return match[1], match[2], match[3], text[match.end() :]


def _load(front_matter: str) -> dict[Any, Any]:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        data = yaml.load(front_matter, Loader=loader)  # noqa: S506 - a safe loader
    except (yaml.YAMLError, ValueError, TypeError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def _time(value: Any) -> float | None:
    if isinstance(value, _dt.datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=_dt.UTC)
        return moment.timestamp()
    if isinstance(value, str):
        try:
            moment = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return (moment if moment.tzinfo else moment.replace(tzinfo=_dt.UTC)).timestamp()
    return None


def _entry(value: Any, number: int) -> Evidence | str:
    """One evidence entry, or why it cannot be verified as written."""
    if not isinstance(value, Mapping) or not isinstance(value.get("path"), str):
        return f"evidence entry {number} has no path"
    path = value["path"]
    kinds = [kind for kind in ("git", "sha256") if kind in value]
    if len(kinds) != 1:
        return f"{path}: no recorded hash"
    kind: HashKind = "git" if kinds[0] == "git" else "sha256"
    digest = str(value[kind]).strip().lower()
    size = value.get("size")
    if not _HEX[kind].fullmatch(digest) or not (size is None or isinstance(size, int)):
        return f"{path}: the recorded hash is malformed"
    entry = Evidence(path, kind, digest, size if isinstance(size, int) else None)
    if value.get("check") != entry_check(entry):
        return f"{path}: the entry was edited by hand"
    return entry


def parse_provenance(fields: Mapping[Any, Any]) -> Provenance | None:
    """The ``provenance`` block of parsed front matter (None when there is none)."""
    block = fields.get(PROVENANCE_KEY)
    if not isinstance(block, Mapping):
        return None
    entries: list[Evidence] = []
    problems: list[str] = []
    raw = block.get("evidence") or []
    for number, item in enumerate(raw if isinstance(raw, list) else [raw], start=1):
        found = _entry(item, number)
        (entries.append if isinstance(found, Evidence) else problems.append)(found)  # type: ignore[arg-type]
    turn = block.get("turn")
    return Provenance(
        by=str(block.get("by") or ""),
        session=str(block.get("session") or ""),
        turn=turn if isinstance(turn, int) and not isinstance(turn, bool) else None,
        at=_time(block.get("at")),
        evidence=tuple(entries),
        verified_by=str(block.get("verified_by") or ""),
        problems=tuple(problems),
    )


_BLOCK_LINE = re.compile(
    r"(?P<indent> {2}| {4}- | {6})(?P<key>[a-z_0-9]+):[ \t]*(?P<value>.*?)[ \t]*"
)


def _value(text: str) -> Any:
    if text.startswith('"'):
        return json.loads(text)
    if text.isdigit():
        return int(text)
    return text


def _written_block(front_matter: str) -> dict[str, Any] | None:
    """The ``provenance`` block as cairn writes it, read without YAML (about 20 times faster:
    Recall reads it for every memory it checks), or None when it is written any other way."""
    lines = front_matter.splitlines()
    try:
        start = lines.index(f"{PROVENANCE_KEY}:")
    except ValueError:
        return None
    block: dict[str, Any] = {}
    evidence: list[dict[str, Any]] = []
    for line in lines[start + 1 :]:
        if not line.startswith(" "):
            top = _TOP_KEY.match(line)
            if top is None or top["key"] == PROVENANCE_KEY:
                return None  # not a plain key after the block: let YAML decide
            break
        match = _BLOCK_LINE.fullmatch(line)
        if match is None:
            return None
        indent, key, raw = match["indent"], match["key"], match["value"]
        if "#" in raw and not raw.startswith('"'):
            return None  # perhaps a comment: YAML reads it as one
        try:
            value = _value(raw)
        except ValueError:
            return None
        if indent == "  " and key == "evidence" and raw == "":
            block["evidence"] = evidence
        elif indent == "  " and raw:
            block[key] = value
        elif indent == "    - ":
            evidence.append({key: value})
        elif indent == "      " and evidence and raw:
            evidence[-1][key] = value
        else:
            return None
    return {PROVENANCE_KEY: block}


def provenance_of_text(text: str) -> Provenance | None:
    """The provenance of a memory file's text (None without a block)."""
    split = _split(text)
    if split is None or PROVENANCE_KEY not in split[1]:
        return None
    fields = _written_block(split[1].replace("\r\n", "\n"))
    return parse_provenance(fields if fields is not None else _load(split[1]))


_cache: OrderedDict[str, tuple[float, int, Provenance | None]] = OrderedDict()
_cache_lock = threading.Lock()


def read_provenance(path: Path, *, mtime: float, size: int) -> Provenance | None:
    """The provenance of the memory file at ``path`` whose stat was ``(mtime, size)``: read once
    per process and version of the file (None when it has none or cannot be read)."""
    key = str(path)
    with _cache_lock:
        found = _cache.get(key)
        if found is not None and found[0] == mtime and found[1] == size:
            _cache.move_to_end(key)
            return found[2]
    try:
        head = read_regular_bytes(path, limit=_MAX_FRONT_MATTER_BYTES)
        provenance = provenance_of_text(head.decode("utf-8", "replace"))
    except OSError:
        provenance = None
    with _cache_lock:
        _cache[key] = (mtime, size, provenance)
        if len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return provenance


# --- writing ---------------------------------------------------------------------------------


def _declared(value: Any) -> list[str]:
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    found: list[str] = []
    for item in items:
        if isinstance(item, Mapping):
            item = item.get("path")
        if isinstance(item, str) and item.strip():
            found.append(item.strip())
    return found


def _without_keys(front_matter: str, keys: Sequence[str]) -> list[str]:
    """The front matter's lines without the top-level ``keys`` (and their nested lines)."""
    kept: list[str] = []
    dropping = False
    for line in front_matter.splitlines():
        match = _TOP_KEY.match(line)
        if match is not None:
            dropping = match["key"] in keys
        elif line[:1] not in (" ", "\t", "-") and line.strip():
            dropping = False
        if not dropping:
            kept.append(line)
    return kept


def _scalar(text: str) -> str:
    """``text`` as a YAML value: plain when YAML reads it back as this very string (never a
    number, a date, ``true`` or ``null``), else JSON-quoted (a YAML double-quoted string)."""
    if _writing(_PLAIN).fullmatch(text):
        import yaml

        try:
            if yaml.safe_load(text) == text:
                return text
        except yaml.YAMLError:
            pass
    return json.dumps(text, ensure_ascii=False)


def _hex(digest: str) -> str:
    """A hex digest as YAML keeps it a string: quoted when it has no letter (all digits)."""
    return digest if _writing(_HEX_LETTER).search(digest) else json.dumps(digest)


def _iso(moment: float) -> str:
    return _dt.datetime.fromtimestamp(moment, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _block(author: Author, evidence: Sequence[Evidence], verified_by: str) -> list[str]:
    lines = [f"{PROVENANCE_KEY}:", f"  by: {author.by}"]
    if author.session_id:
        lines.append(f"  session: {_scalar(author.session_id)}")
    if author.turn is not None:
        lines.append(f"  turn: {author.turn}")
    lines.append(f"  at: {_iso(author.clock())}")
    if evidence:
        lines.append("  evidence:")
        for entry in evidence:
            lines.append(f"    - path: {_scalar(entry.path)}")
            lines.append(f"      {entry.kind}: {_hex(entry.digest)}")
            if entry.size is not None:
                lines.append(f"      size: {entry.size}")
            lines.append(f"      check: {_hex(entry_check(entry))}")
    if verified_by:
        lines.append(f"  verified_by: {_scalar(verified_by)}")
    return lines


def _in_project_memory(path: Path, author: Author) -> bool:
    root = author.project_memory
    if root is None:
        return False
    resolved, real_root = path.resolve(), root.resolve()
    return resolved == real_root or real_root in resolved.parents


def _record(author: Author, declared: Sequence[str], notes: list[str]) -> dict[str, Evidence]:
    """Evidence entries for the ``declared`` workspace paths, hashed now."""
    workspace = author.workspace
    assert workspace is not None
    relatives: list[str] = []
    for raw in declared:
        try:
            relatives.append(workspace_relative(raw, workspace))
        except Unverifiable as reason:
            notes.append(f"{raw} was not recorded as evidence: {reason}")
    tracked = tracked_paths(workspace, relatives)
    found: dict[str, Evidence] = {}
    for relative in dict.fromkeys(relatives):
        try:
            state = read_state(workspace, relative)
        except FileNotFoundError:
            notes.append(f"{relative} was not recorded as evidence: no such file in the workspace")
            continue
        except Unverifiable as reason:
            notes.append(f"{relative} was not recorded as evidence: {reason}")
            continue
        except OSError as error:
            notes.append(f"{relative} was not recorded as evidence: {error.strerror or error}")
            continue
        kind: HashKind = "git" if relative in tracked else "sha256"
        found[relative] = Evidence(relative, kind, state.digest(kind), state.size)
    return found


def _task_status(fields: Mapping[Any, Any], body: str) -> str | None:
    """The phrase stating task status in a project memory's description or fact line."""
    from cairn.memory.store.entries import parse_entries

    entries = parse_entries(body)
    summary = entries[0].summary if entries else ""
    for text in (str(fields.get("description") or ""), summary, str(fields.get("name") or "")):
        match = _writing(_TASK_STATUS, re.IGNORECASE | re.MULTILINE).search(text)
        if match is not None:
            return match[0].strip()
    return None


def without_provenance(text: str) -> str:
    """A memory file's text without its ``provenance`` block (what a writer wrote, and what a
    version diff compares: the block changes on every write)."""
    split = _split(text)
    if split is None or PROVENANCE_KEY not in split[1]:
        return text
    opening, front_matter, closing, body = split
    newline = "\r\n" if "\r\n" in opening else "\n"
    kept = _without_keys(front_matter, (PROVENANCE_KEY,))
    return opening + newline.join(kept) + closing + body


def stamp(content: str, *, previous: str | None, author: Author, path: Path) -> Stamped:
    """``content`` (a complete memory file) with its ``provenance`` block written by
    ``author`` (see the module docstring). Raises :class:`TaskStatusRefused` for a project
    memory stating task status without evidence."""
    split = _split(content)
    if split is None:
        return Stamped(content)
    opening, front_matter, closing, body = split
    fields = _load(front_matter)
    newline = "\r\n" if "\r\n" in opening else "\n"
    notes: list[str] = []
    if not fields and front_matter.strip():
        notes.append("the front matter is not valid YAML, so no evidence could be read from it")
    current = parse_provenance(fields)
    before = provenance_of_text(previous) if previous else None
    kept = current if current is not None else before
    evidence = {entry.path: entry for entry in (kept.evidence if kept else ())}
    if current is not None and current.problems:
        # The writer garbled entries cairn recorded: keep the recorded ones for those paths.
        recorded = {e.path: e for e in (before.evidence if before else ())}
        evidence = {**recorded, **evidence}
        notes.extend(f"{problem}; not kept" for problem in current.problems)
    declared = _declared(fields.get("evidence"))
    project = _in_project_memory(path, author)
    if declared and not project:
        notes.append("evidence is recorded for project memories only; the paths were dropped")
    elif declared and author.workspace is None:
        notes.append("there is no workspace to record evidence from; the paths were dropped")
    elif declared:
        evidence.update(_record(author, declared, notes))
    if len(evidence) > MAX_EVIDENCE_ENTRIES:
        notes.append(f"only the first {MAX_EVIDENCE_ENTRIES} evidence files were recorded")
        evidence = dict(list(evidence.items())[:MAX_EVIDENCE_ENTRIES])
    verified = fields.get("verified_by")
    verified_by = str(verified) if isinstance(verified, str | int | float) else ""
    verified_by = verified_by or (kept.verified_by if kept else "")
    verified_by = " ".join(verified_by.split())[:MAX_VERIFIED_BY_CHARS]
    verified_by = verified_by.encode("utf-8", "replace").decode("utf-8")
    if project and str(fields.get("type", "")).strip().lower() == "project" and not evidence:
        status = _task_status(fields, body)
        if status is not None:
            raise TaskStatusRefused(
                f"{status!r} is task status, true only until the next change: do not save it "
                "as a memory. If it will matter later, list the workspace files whose change "
                "would make it stale under `evidence:`."
            )
    lines = _without_keys(front_matter, (PROVENANCE_KEY, *_DECLARED_KEYS))
    lines += _block(author, list(evidence.values()), verified_by)
    stamped = opening + newline.join(lines) + closing + body
    return Stamped(stamped, tuple(notes))
