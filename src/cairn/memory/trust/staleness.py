"""Staleness: is a memory's evidence still what it was when the fact was learned?

Recall asks :class:`EvidenceCheck` about each memory before it is delivered (and about the
selector's candidates, so the selector sees the mark). The check is cheap: the memory's
provenance is read once per version of its file
(:func:`~cairn.memory.trust.provenance.read_provenance`), each evidence file is ``lstat``-ed (a
size other than the recorded one is a change, read no further), and hashed only when its stat
differs from the last time this session looked (a file modified in the last two seconds is
hashed again next time: file times tick coarsely). The result is one of:

- fresh (``None``): every evidence file holds what it held when the fact was learned, or the
  memory has no evidence;
- *stale*: a file changed, or is gone (deleted or moved): the memory is delivered marked
  "possibly stale" with the date and the file, never as plain fact;
- *unverifiable*: the evidence cannot be checked (outside the workspace, through a symlink, not
  a regular file, over 8 MiB, an entry edited by hand, the workspace gone): said once, in the
  memory's delivery and in the debug log, and never an error.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

from cairn.debug_log import get_logger
from cairn.memory.document import MemoryDoc, Staleness
from cairn.memory.trust.evidence import (
    Evidence,
    FileState,
    HashKind,
    Unverifiable,
    lstat_inside,
    read_state,
    regular_size,
    stat_key,
)
from cairn.memory.trust.provenance import Provenance, provenance_of_text, read_provenance
from cairn.values import Value, replace

__all__ = ["RACY_NS", "EvidenceCheck", "stale_note"]

RACY_NS = 2_000_000_000  # a file modified this recently is hashed again at the next check
_log = get_logger("MEMORY_RECALL")

_Found = FileState | str | None  # the file now, why it cannot be read, or None: gone
_RESIZED = "<its size changed>"  # a _Found that needs no reading: the file changed


class _Known(Value, frozen=False):
    key: tuple[int, int, int, int, int] | None
    found: _Found
    trusted: bool  # the stat key may stand for the content next time


def _join(paths: Sequence[str]) -> str:
    return paths[0] if len(paths) == 1 else ", ".join(paths[:-1]) + " and " + paths[-1]


def stale_note(provenance: Provenance, changed: Sequence[str], gone: Sequence[str]) -> str:
    """ "learned on <date> from <files>, which have changed since" (and/or gone)."""
    learned = f"learned on {provenance.date}"
    if changed and gone:
        return (
            f"{learned} from {_join(changed)} (changed since) and {_join(gone)} "
            "(deleted or moved since)"
        )
    files = list(changed or gone)
    verb = "has" if len(files) == 1 else "have"
    what = "changed since" if changed else "been deleted or moved since"
    return f"{learned} from {_join(files)}, which {verb} {what}"


class EvidenceCheck:
    """One session's evidence checks (see the module docstring). Thread-safe: Recall marks the
    selector's candidates in a worker thread while the next turn's fast phase may run."""

    def __init__(self, workspace: Path | None) -> None:
        self.workspace = workspace
        self._files: dict[tuple[str, HashKind], _Known] = {}
        self._said: set[str] = set()  # memories whose "cannot verify" was logged
        self._lock = threading.Lock()
        self.checked = 0  # memories checked (for the benchmark)
        self.hashed = 0  # files read and hashed

    def mark_texts(self, found: Sequence[tuple[MemoryDoc, str]]) -> list[MemoryDoc]:
        """:meth:`mark` for memories read from elsewhere than their file (the database, while
        the local mirror warms up), each with its text: the provenance is read from that."""
        marked: list[MemoryDoc] = []
        for doc, text in found:
            state = self.staleness(doc, text=text)
            marked.append(doc if state == doc.staleness else replace(doc, staleness=state))
        return marked

    def staleness(self, doc: MemoryDoc, *, text: str | None = None) -> Staleness | None:
        """Whether ``doc`` may be stale (see the module docstring); never raises. ``text``: the
        memory's text, when its file is not where it is read from."""
        try:
            if text is None:
                provenance = read_provenance(doc.path, mtime=doc.mtime, size=doc.size)
            else:
                provenance = provenance_of_text(text)
            if provenance is None or not (provenance.evidence or provenance.problems):
                return None
            self.checked += 1
            found = self._judge(doc, provenance)
        except Exception as error:  # a check must never fail a turn: say it cannot be verified
            _log.warning(f"{doc.path}: evidence check failed: {error!r}")
            found = Staleness("unverifiable", f"its evidence could not be checked ({error})")
        if found is not None and found.state == "unverifiable" and str(doc.path) not in self._said:
            self._said.add(str(doc.path))
            _log.warning(f"{doc.relative_path}: cannot verify its evidence: {found.note}")
        return found

    def mark(self, docs: Sequence[MemoryDoc]) -> list[MemoryDoc]:
        """``docs`` with their staleness set (the same objects where there is nothing to say)."""
        marked: list[MemoryDoc] = []
        for doc in docs:
            found = self.staleness(doc)
            marked.append(doc if found == doc.staleness else replace(doc, staleness=found))
        return marked

    def _judge(self, doc: MemoryDoc, provenance: Provenance) -> Staleness | None:
        workspace = self.workspace
        if doc.scope != "project":
            reason = "user memory is not tied to one workspace"
            return Staleness("unverifiable", f"its evidence cannot be verified: {reason}")
        if workspace is None:
            return Staleness("unverifiable", "its evidence cannot be verified: no workspace")
        changed: list[str] = []
        gone: list[str] = []
        problems = list(provenance.problems)
        for entry in provenance.evidence:
            found = self._file(workspace, entry)
            if found is None:
                gone.append(entry.path)
            elif found is _RESIZED:
                changed.append(entry.path)
            elif isinstance(found, str):
                problems.append(found)
            elif not entry.matches(found):
                changed.append(entry.path)
        if changed or gone:
            note = stale_note(provenance, changed, gone)
            return Staleness("stale", note, (*changed, *gone))
        if problems:
            files = tuple(e.path for e in provenance.evidence)
            return Staleness(
                "unverifiable", "its evidence cannot be verified: " + "; ".join(problems), files
            )
        return None

    def _file(self, workspace: Path, entry: Evidence) -> _Found:
        relative, kind = entry.path, entry.kind
        info = lstat_inside(workspace, relative)
        size = regular_size(info) if info is not None else None
        if size is not None and entry.size is not None and size != entry.size:
            return _RESIZED  # changed: no need to read it (a large file above all)
        key = stat_key(workspace, relative) if info is not None else None
        with self._lock:
            known = self._files.get((relative, kind))
        if known is not None and known.trusted and known.key == key:
            return known.found
        if key is None and not workspace.is_dir():
            found: _Found = f"the workspace {workspace} is gone"
        else:
            found = self._read(workspace, relative, kind)
        trusted = key is not None and time.time_ns() - key[3] > RACY_NS
        with self._lock:
            self._files[(relative, kind)] = _Known(key, found, trusted)
        return found

    def _read(self, workspace: Path, relative: str, kind: HashKind) -> _Found:
        self.hashed += 1
        try:
            return read_state(workspace, relative, kinds=(kind,))
        except FileNotFoundError:
            return None
        except Unverifiable as reason:
            return str(reason)
        except OSError as error:
            return f"{relative} cannot be read ({error.strerror or error})"
