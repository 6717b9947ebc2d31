"""Tombstones: what the user asked to forget, so that no agent learns it again on its own.

Forget moves a memory to the trash and leaves a tombstone in its root's ``.forgotten.jsonl``:
what was forgotten (title, the fact's line, where it was), a normalized fingerprint of the
statement, when, and the forget request. Every memory write an agent makes is checked against
the tombstones of both roots (:class:`ForgottenFacts`): a memory stating a forgotten fact again
is refused, so a fact the extraction agent or the session's model still sees in its window of
recent messages, or one consolidation would re-derive, stays forgotten. That is:

- Extract and Dream: the write is refused, the agent told why (:data:`AGENT_REFUSAL`);
- the session's own agent writing memory on its own initiative (``write_file`` or ``edit`` in
  a memory folder, :mod:`cairn.memory.remember`): the write is refused before anything is
  written, the model told to ask the user first (:data:`SESSION_REFUSAL`); a memory it wrote
  past that check (a tool the memory guard did not see) is moved to the trash when the turn
  ends, restorable, the audit trail and the session told why
  (:func:`cairn.memory.forget.trash.trash_forgotten`).

A write is not refused when the memory already stated the fact before it (an edit elsewhere in
a memory the user kept or wrote back by hand). Only the user brings a forgotten fact back:

- a user message that states the fact again lifts its tombstone: for Extract, a message after
  the extraction cursor (one no earlier extraction saw, so one written after the forget); for
  the session's own agent, a message of the session written after the forget (its time is
  later than the tombstone's). The memory may then be saved again, and once it is, the
  tombstone is removed. A message before the forget, still in the model's window, never does;
- ``/remember`` is the user's explicit word: the memories a ``/remember`` turn writes are not
  checked, and lift every tombstone they state (:func:`lift_stated`);
- ``cairn memory restore`` removes the tombstones of the forget it undoes.

How two statements are compared: each is reduced to its *terms* (NFKC, case-folded words minus
common English words, with a light suffix stemmer; CJK runs as character pairs). A memory
states a forgotten fact when its terms (title, description and fact line together), or its fact
line's terms alone, are at least :data:`SAME_FACT_SIMILARITY` similar (Jaccard) to the
tombstone's. A message restates a forgotten fact when it repeats at least
:data:`RESTATED_SHARE` of the terms of the tombstone's title, description or fact line, and is
not a question. The term rules are versioned (:data:`TERMS_VERSION`): tombstones store their
terms, so a later change to the rules never changes what an old tombstone matches.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import itertools
import json
import os
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cairn.debug_log import get_logger
from cairn.fsutil import atomic_write_bytes, read_regular_bytes
from cairn.memory.document import MemoryScope

__all__ = [
    "AGENT_REFUSAL",
    "MAX_TOMBSTONES",
    "RESTATED_SHARE",
    "SAME_FACT_SIMILARITY",
    "SESSION_REFUSAL",
    "TERMS_VERSION",
    "TOMBSTONES_FILE_NAME",
    "ForgottenFacts",
    "Statement",
    "Tombstone",
    "add_tombstones",
    "lift_matching",
    "lift_stated",
    "lifted_detail",
    "message_terms",
    "read_tombstones",
    "remove_tombstones",
    "statement_terms",
    "statements_of",
]

TOMBSTONES_FILE_NAME = ".forgotten.jsonl"  # in each memory root; a dot name: never a memory
TERMS_VERSION = 1  # bump when statement_terms changes (stored terms keep their version)
SAME_FACT_SIMILARITY = 0.5  # Jaccard similarity of terms from which two statements are one fact
RESTATED_SHARE = 0.6  # share of a forgotten statement's terms a message must repeat
MAX_TOMBSTONES = 1_000  # newest tombstones kept per root
MAX_TERMS = 64  # terms stored per statement part
MAX_TOMBSTONE_FILE_BYTES = 4 * 1024 * 1024  # a larger file is not read (treated as empty)
MAX_PROMPT_TOMBSTONES = 50  # tombstones listed in a memory agent's prompt
_MAX_TEXT_CHARS = 300  # title or fact line kept in a tombstone
# What a refused write is told: a memory agent (Extract, Dream), the session's own agent.
AGENT_REFUSAL = (
    "the user asked to forget this on {date} (forgotten memory: {title}). Do not save it "
    "again; it may be saved only when the user states it again in a new message."
)
SESSION_REFUSAL = (
    "the user asked to forget this on {date} ({title}); ask them first. It may be saved once "
    "the user states it again in a message, or asks for it with /remember."
)

_WORD = re.compile(r"\w+", re.UNICODE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing down during each else
    few for from further had has have having he her here hers him his how i if in into is it its
    itself just let lets me more most my no nor not now of off on once only or other our ours
    out over own please same she should so some such than that the their them then there these
    they this those through to too under until up very was we were what when where which while
    who whom why will with would you your yours""".split()  # noqa: SIM905 - a word list
)
_SUFFIXES = ("ations", "ation", "ings", "ing", "edly", "ed", "ly", "s")
_log = get_logger("MEMORY_FORGET")


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith(("ss", "us", "is")):
                return word
            return word[: -len(suffix)]
    return word


def _words(text: str) -> Iterable[str]:
    for word in _WORD.findall(unicodedata.normalize("NFKC", text).casefold()):
        if not _CJK.search(word):
            yield word
            continue
        run = [ch for ch in word if _CJK.match(ch)]
        yield from ("".join(pair) for pair in itertools.pairwise(run))
        rest = _CJK.sub(" ", word).split()
        yield from rest


def statement_terms(text: str) -> frozenset[str]:
    """The terms of ``text`` that tombstones compare (see the module docstring)."""
    terms = {_stem(word) for word in _words(text) if word not in _STOPWORDS and word != "_"}
    return frozenset(sorted(terms)[:MAX_TERMS]) if len(terms) > MAX_TERMS else frozenset(terms)


def message_terms(message: str) -> frozenset[str] | None:
    """The terms of a user message a tombstone compares, or None for a question (which never
    states a fact again)."""
    return None if message.rstrip().endswith("?") else statement_terms(message)


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_TEXT_CHARS else text[: _MAX_TEXT_CHARS - 1] + "…"


@dataclass(frozen=True)
class Statement:
    """The fact one memory (or one entry of a multi-entry memory) states."""

    title: str
    description: str
    summary: str  # the fact line: the body's first plain line

    @property
    def terms(self) -> frozenset[str]:
        return statement_terms(f"{self.title}\n{self.description}\n{self.summary}")

    @property
    def core(self) -> frozenset[str]:
        return statement_terms(self.summary or self.description or self.title)


def statements_of(text: str) -> list[Statement]:
    """The statements of a memory file's text (one per entry; none when it is not a memory)."""
    from cairn.memory.store.entries import parse_entries
    from cairn.memory.store.parse import ParseSkip, parse_memory_text

    doc = parse_memory_text(
        text, path=Path("m.md"), relative_path="m.md", scope="project", mtime=0, size=0
    )
    if isinstance(doc, ParseSkip):
        return []
    entries = parse_entries(doc.body)
    if len(entries) <= 1:
        summary = entries[0].summary if entries else ""
        return [Statement(doc.title, doc.description, summary)]
    return [Statement(doc.title, "", entry.summary) for entry in entries]


@dataclass(frozen=True)
class Tombstone:
    """One forgotten fact."""

    id: str  # "<trash id>:<n>": unique, and names the forget that left it
    forgotten_at: float  # seconds since the epoch
    scope: MemoryScope
    relative_path: str  # where the memory was
    title: str
    description: str
    summary: str
    terms: frozenset[str]  # of title, description and fact line
    core: frozenset[str]  # of the fact line
    query: str = ""  # the forget request, as the user wrote it
    trash_id: str = ""  # the trash folder its memory went to
    session_id: str = ""
    version: int = TERMS_VERSION

    @property
    def fingerprint(self) -> str:
        """A normalized fingerprint of the statement: the hash of its sorted terms."""
        joined = "\n".join(sorted(self.terms))
        return f"v{self.version}:" + hashlib.sha256(joined.encode("utf-8")).hexdigest()[:32]

    @classmethod
    def of(
        cls,
        statement: Statement,
        *,
        id: str,
        forgotten_at: float,
        scope: MemoryScope,
        relative_path: str,
        query: str = "",
        trash_id: str = "",
        session_id: str = "",
    ) -> Tombstone:
        return cls(
            id=id,
            forgotten_at=forgotten_at,
            scope=scope,
            relative_path=relative_path,
            title=_clip(statement.title),
            description=_clip(statement.description),
            summary=_clip(statement.summary),
            terms=statement.terms,
            core=statement.core,
            query=_clip(query),
            trash_id=trash_id,
            session_id=session_id,
        )

    def matches(self, statement: Statement) -> bool:
        """Whether ``statement`` states this forgotten fact again."""
        if self.version != TERMS_VERSION:
            return False  # compared with another rule set's terms: never a false match
        similar = max(_jaccard(self.terms, statement.terms), _jaccard(self.core, statement.core))
        return similar >= SAME_FACT_SIMILARITY

    def restated_by(self, message: str) -> bool:
        """Whether a user message states this forgotten fact again (a question never does)."""
        return self.restated_in([message_terms(message)])

    def restated_in(self, messages: Iterable[frozenset[str] | None]) -> bool:
        """:meth:`restated_by` for messages' :func:`message_terms`, computed once."""
        parts = (self.title, self.description, self.summary)
        wanted = [terms for terms in map(statement_terms, parts) if terms]
        for said in messages:
            if said is None:
                continue
            for terms in wanted:
                covered = len(terms & said)
                if covered >= min(len(terms), 2) and covered >= RESTATED_SHARE * len(terms):
                    return True
        return False

    @property
    def date(self) -> str:
        return _dt.datetime.fromtimestamp(self.forgotten_at, _dt.UTC).strftime("%Y-%m-%d")

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "forgottenAt": _dt.datetime.fromtimestamp(self.forgotten_at, _dt.UTC).isoformat(),
            "scope": self.scope,
            "path": self.relative_path,
            "title": self.title,
            "description": self.description,
            "summary": self.summary,
            "fingerprint": self.fingerprint,
            "terms": sorted(self.terms),
            "core": sorted(self.core),
            "termsVersion": self.version,
        }
        for key, value in (("query", self.query), ("trash", self.trash_id)):
            if value:
                data[key] = value
        if self.session_id:
            data["sessionId"] = self.session_id
        return data

    @classmethod
    def from_json(cls, data: Any) -> Tombstone | None:
        if not isinstance(data, Mapping):
            return None
        try:
            when = _dt.datetime.fromisoformat(str(data["forgottenAt"])).timestamp()
        except (KeyError, ValueError, TypeError):
            return None
        scope, terms, core = data.get("scope"), data.get("terms"), data.get("core")
        texts = [data.get(key, "") for key in ("id", "path", "title", "description", "summary")]
        if scope not in ("project", "user") or not all(isinstance(t, str) for t in texts):
            return None
        if not isinstance(terms, list) or not isinstance(core, list):
            return None
        if not all(isinstance(t, str) for t in (*terms, *core)):
            return None
        version = data.get("termsVersion", TERMS_VERSION)
        return cls(
            id=texts[0],
            forgotten_at=when,
            scope=scope,
            relative_path=texts[1],
            title=texts[2],
            description=texts[3],
            summary=texts[4],
            terms=frozenset(terms),
            core=frozenset(core),
            query=str(data.get("query") or ""),
            trash_id=str(data.get("trash") or ""),
            session_id=str(data.get("sessionId") or ""),
            version=version if isinstance(version, int) else -1,
        )


# --- the file --------------------------------------------------------------------------------


def read_tombstones(root: Path) -> list[Tombstone]:
    """The tombstones of ``root``, oldest first; never raises (a damaged line is skipped)."""
    path = root / TOMBSTONES_FILE_NAME
    try:
        raw = read_regular_bytes(path, limit=MAX_TOMBSTONE_FILE_BYTES + 1)
    except FileNotFoundError:
        return []
    except OSError as error:
        _log.warning(f"{path}: not read ({error.strerror or error}); no fact counts as forgotten")
        return []
    if len(raw) > MAX_TOMBSTONE_FILE_BYTES:
        _log.warning(f"{path}: over {MAX_TOMBSTONE_FILE_BYTES} bytes; not read")
        return []
    found: list[Tombstone] = []
    for number, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            tombstone = Tombstone.from_json(json.loads(line.decode("utf-8")))
        except (UnicodeDecodeError, json.JSONDecodeError):
            tombstone = None
        if tombstone is None:
            _log.warning(f"{path}:{number}: skipped (not a valid tombstone)")
        else:
            found.append(tombstone)
    return found


def _write(root: Path, tombstones: Sequence[Tombstone]) -> None:
    path = root / TOMBSTONES_FILE_NAME
    if not tombstones:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return
    lines = (json.dumps(t.to_json(), ensure_ascii=False) + "\n" for t in tombstones)
    atomic_write_bytes(path, "".join(lines).encode("utf-8", "surrogateescape"))


def add_tombstones(root: Path, new: Sequence[Tombstone]) -> None:
    """Record ``new`` in ``root`` (call with the root lock held); the newest
    :data:`MAX_TOMBSTONES` are kept."""
    if new:
        _write(root, [*read_tombstones(root), *new][-MAX_TOMBSTONES:])


def remove_tombstones(root: Path, ids: Iterable[str]) -> list[Tombstone]:
    """Remove the tombstones with these ids from ``root`` (root lock held); the ones removed."""
    wanted = set(ids)
    current = read_tombstones(root)
    removed = [t for t in current if t.id in wanted]
    if removed:
        _write(root, [t for t in current if t.id not in wanted])
    return removed


# --- what one memory-agent run honours -------------------------------------------------------


@dataclass
class ForgottenFacts:
    """The tombstones of both memory roots, as one memory-agent run (or one memory write of
    the session's own agent) sees them.

    ``active`` tombstones refuse a write that states their fact again; ``lifted`` ones were
    restated by the user in a message this run is the first to see (Extract), or one written
    after their forget (the session's agent), so their fact may be saved again (:attr:`used`
    collects those a write did save, for :meth:`release`).
    """

    active: list[tuple[Path, Tombstone]] = field(default_factory=list)
    lifted: list[tuple[Path, Tombstone]] = field(default_factory=list)
    used: dict[str, Path] = field(default_factory=dict)  # tombstone id -> its root
    refusal_text: str = AGENT_REFUSAL  # what a refused writer is told ({date}, {title})

    @classmethod
    def load(
        cls,
        roots: Iterable[Path],
        *,
        new_messages: Sequence[str] = (),
        said: Sequence[tuple[float, str]] = (),
        refusal_text: str = AGENT_REFUSAL,
    ) -> ForgottenFacts:
        """The tombstones of ``roots``; those a message in ``new_messages`` restates are lifted,
        and so are those a message of ``said`` (``(when, text)`` of what the user wrote)
        restates when it was written after their forget."""
        facts = cls(refusal_text=refusal_text)
        new = [message_terms(text) for text in new_messages]
        heard = [(when, message_terms(text)) for when, text in said]
        for root in roots:
            for tombstone in read_tombstones(root):
                since = [terms for when, terms in heard if when > tombstone.forgotten_at]
                restated = tombstone.restated_in([*new, *since])
                (facts.lifted if restated else facts.active).append((root, tombstone))
        return facts

    def __bool__(self) -> bool:
        return bool(self.active or self.lifted)

    def refused_by(self, content: str, previous: str | None) -> Tombstone | None:
        """The active tombstone whose fact writing ``content`` (over ``previous``) would learn
        again, or None; when None, the lifted tombstones it states are noted for :meth:`release`.

        A statement ``previous`` already made is not learned again (an edit elsewhere in a
        memory the user kept, or wrote back by hand, is not refused).
        """
        statements = statements_of(content)
        before = statements_of(previous) if previous else []
        for _root, tombstone in self.active:
            hit = any(tombstone.matches(s) for s in statements)
            if hit and not any(tombstone.matches(s) for s in before):
                return tombstone
        for root, tombstone in self.lifted:
            if any(tombstone.matches(s) for s in statements):
                self.used.setdefault(tombstone.id, root)
        return None

    def refusal(self, content: str, previous: str | None) -> str | None:
        """Why writing ``content`` (over ``previous``) would learn a forgotten fact, or None
        (:meth:`refused_by`, in :attr:`refusal_text`'s words)."""
        tombstone = self.refused_by(content, previous)
        if tombstone is None:
            return None
        return self.refusal_text.format(date=tombstone.date, title=repr(tombstone.title))

    def release(self) -> list[Tombstone]:
        """Remove the lifted tombstones a write saved again (root locks held); those removed."""
        removed: list[Tombstone] = []
        by_root: dict[Path, list[str]] = {}
        for tombstone_id, root in self.used.items():
            by_root.setdefault(root, []).append(tombstone_id)
        for root, ids in by_root.items():
            try:
                removed += remove_tombstones(root, ids)
            except OSError as error:
                _log.warning(f"{root / TOMBSTONES_FILE_NAME}: not updated ({error})")
        self.used.clear()
        return removed

    def prompt_block(self) -> str:
        """The forgotten facts, for a memory agent's instructions (``""`` when none)."""
        if not self.active:
            return ""
        newest = sorted(self.active, key=lambda item: -item[1].forgotten_at)
        lines = [
            f"- {t.title}: {t.summary or t.description} (forgotten {t.date})"
            for _, t in newest[:MAX_PROMPT_TOMBSTONES]
        ]
        if len(newest) > MAX_PROMPT_TOMBSTONES:
            lines.append(f"- (... {len(newest) - MAX_PROMPT_TOMBSTONES} more)")
        return (
            "## Forgotten at the user's request\n\n"
            "The user asked cairn to forget these facts. Never save them again, not even from "
            "the conversation above (cairn refuses such a write), unless the user states one "
            "again in a new message:\n\n" + "\n".join(lines)
        )


def lift_stated(roots: Sequence[Path], paths: Iterable[Path]) -> str:
    """:func:`lift_matching` for what each file at ``paths`` says (an unreadable one says
    nothing); the audit detail of what was lifted."""
    lifted: list[Tombstone] = []
    for path in paths:
        try:
            text = read_regular_bytes(path, limit=1024 * 1024).decode("utf-8", "replace")
        except OSError:
            continue
        lifted += lift_matching(roots, text)
    return lifted_detail(lifted)


def lifted_detail(lifted: Iterable[Tombstone]) -> str:
    """The audit detail of tombstones a write removed (``""``: none)."""
    return "; ".join(f"stated again after a forget: {t.title}" for t in lifted)


def lift_matching(roots: Iterable[Path], content: str) -> list[Tombstone]:
    """Remove the tombstones ``content`` states again (the user's explicit word: ``/remember``);
    call with the root locks held. The tombstones removed."""
    statements = statements_of(content)
    removed: list[Tombstone] = []
    if not statements:
        return removed
    for root in roots:
        matched = [t.id for t in read_tombstones(root) if any(t.matches(s) for s in statements)]
        if matched:
            removed += remove_tombstones(root, matched)
    return removed
