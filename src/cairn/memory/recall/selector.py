"""Recall's model selector: one side query that picks up to five memories from a manifest.

The manifest lists each candidate on one line,
``- [<type>] <scope>:<relative path> (<saved on, YYYY-MM-DD>) <name>: <description>``, adding
`` | <start of the body>`` when the description is thin (under 60 characters), so the model reads
what a memory says and not only what its file is called. The ``scope:path`` key (as
``cairn memory show`` takes it) keeps a project and a user memory with the same relative path
apart in a few bytes. The manifest stays within 25,000 UTF-8 bytes with up to 200 lines: each
line's text (name, description, body) is cut to the longest length at which all of them fit,
so long texts give way before any candidate does; only when even 40-byte texts would not fit are
the last candidates left out. The model's answer is untrusted: anything but a list of at most
five manifest keys is a :class:`SelectorError`, and the caller falls back to the lexical result.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import functools
import re
import unicodedata
from collections.abc import Awaitable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from cairn.abort import Aborted, AbortSignal
from cairn.content import Content
from cairn.llm.side_query import side_query
from cairn.llm.types import Provider
from cairn.memory.document import MemoryDoc
from cairn.memory.recall.candidates import MAX_RELEVANT_DOCS
from cairn.values import Value

if TYPE_CHECKING:
    import regex

__all__ = [
    "MAX_MODEL_MANIFEST_BYTES",
    "MAX_RELEVANT_DOCS",
    "SELECTOR_PURPOSE",
    "SELECTOR_SCHEMA",
    "SELECTOR_TIMEOUT_SECONDS",
    "Manifest",
    "SelectorError",
    "bounded",
    "build_manifest",
    "manifest_key",
    "manifest_line",
    "manifest_text",
    "parse_selection",
    "sanitize_manifest_text",
    "select_memories",
    "selector_user_message",
    "string_list_schema",
]

MAX_MODEL_MANIFEST_BYTES = 25_000  # UTF-8 budget of the selector manifest
MAX_MANIFEST_DESCRIPTION_CHARS = 512  # description characters per manifest line
MAX_MANIFEST_NAME_CHARS = 120  # name characters per manifest line
MANIFEST_BODY_CHARS = 240  # body characters shown when the description is thin ...
THIN_DESCRIPTION_CHARS = 60  # ... that is, shorter than this
MIN_MANIFEST_TEXT_BYTES = 40  # a line's text is never cut shorter; candidates go first
MAX_MANIFEST_LINES = 200  # candidates a manifest lists at most
MAX_STALE_FILES_CHARS = 200  # characters of the changed files a possibly-stale mark names
SELECTOR_TIMEOUT_SECONDS = 30.0  # safety ceiling; the turn never waits for the selector
SELECTOR_PURPOSE = "recall-selector"


def string_list_schema(key: str) -> dict[str, Any]:
    """The JSON schema of a selector's answer: an object holding one list of strings."""
    return {
        "type": "object",
        "properties": {key: {"type": "array", "items": {"type": "string"}}},
        "required": [key],
        "additionalProperties": False,
    }


SELECTOR_SCHEMA = string_list_schema("selected_memories")

SELECTOR_SYSTEM_PROMPT = """\
You decide which saved memories will help a coding assistant with the user's query.

You get the query and a list of memories. Each line gives the memory's type, its key \
(scope:path), the day it was saved, its name and description, and for some the start of its \
text. The list was gathered for this query by word and by meaning, so it holds memories that \
do not repeat the query's words: judge by what they mean. Answer with the keys of at most 5 \
memories that will clearly help with this query. Be selective: choose a memory only when you \
are confident it is relevant. An empty list is a good answer when nothing fits. Copy each key \
exactly as listed. A memory marked [possibly stale] was learned from files that have changed \
since: it may no longer hold, so prefer a current memory on the same subject.

When recently used tools are listed, do not choose memories that are only usage reference for \
those tools (API docs, parameter schemas, field mappings, guessed call formats, transcripts of \
failed calls): the live tool definitions are authoritative. Do choose memories that hold durable \
operational context about those tools: where credentials live, who owns a system, escalation \
paths, gotchas, warnings and confirmed workarounds."""

_T = TypeVar("_T")


class SelectorError(Exception):
    """The selector's answer cannot be used (invalid, too long, unknown paths, timeout)."""


class Manifest(Value):
    text: str
    docs: Mapping[str, MemoryDoc]  # manifest key (scope:path) → document, in manifest order


def sanitize_manifest_text(text: str, limit: int = MAX_MANIFEST_DESCRIPTION_CHARS) -> str:
    """NFKC, control characters to spaces, format characters removed, whitespace collapsed.

    Only the start of ``text`` is read (a 1 MiB body costs what its first kilobytes cost)."""
    text = text[: 4 * limit + 256]
    if text.isascii():  # the usual case: no format characters, no NFKC change
        if not text.isprintable():
            text = _ASCII_CONTROLS.sub(" ", text)
        return " ".join(text.split())[:limit].rstrip()
    control, format_, spaces = _manifest_patterns()
    text = unicodedata.normalize("NFKC", text)
    text = control.sub(" ", text)
    text = format_.sub("", text)
    return spaces.sub(" ", text).strip()[:limit].rstrip()


_ASCII_CONTROLS = re.compile(r"[\x00-\x1f\x7f]")


@functools.cache
def _manifest_patterns() -> tuple[regex.Pattern[str], regex.Pattern[str], regex.Pattern[str]]:
    """Control characters, format characters, whitespace runs. Compiled on first use (``regex``
    costs ~15 ms to import, and a turn whose memory store is empty never builds a manifest)."""
    import regex

    return regex.compile(r"\p{Cc}"), regex.compile(r"\p{Cf}"), regex.compile(r"\s+")


def _day(mtime: float) -> str:
    try:
        return _dt.datetime.fromtimestamp(mtime, _dt.UTC).date().isoformat()
    except (OverflowError, OSError, ValueError):  # a file dated in year 30,000
        return "unknown"


def manifest_key(doc: MemoryDoc) -> str:
    """How the manifest names ``doc``, and how the selector answers with it."""
    return f"{doc.scope}:{doc.relative_path}"


def manifest_text(doc: MemoryDoc) -> str:
    """Name and description, plus the start of the body when the description is thin."""
    name = sanitize_manifest_text(doc.title, MAX_MANIFEST_NAME_CHARS)
    description = sanitize_manifest_text(doc.description)
    text = f"{name}: {description}" if description else name
    if len(description) < THIN_DESCRIPTION_CHARS:
        body = sanitize_manifest_text(doc.body, MANIFEST_BODY_CHARS)
        if body:
            text = f"{text} | {body}"
    return text


def _stale_mark(doc: MemoryDoc) -> str:
    """`` [possibly stale: <files> changed since]`` for a memory whose evidence changed."""
    staleness = doc.staleness
    if staleness is None or staleness.state != "stale":
        return ""
    files = sanitize_manifest_text(", ".join(staleness.files), MAX_STALE_FILES_CHARS)
    return f" [possibly stale: {files} changed since]"


def _head(doc: MemoryDoc) -> str:
    key = sanitize_manifest_text(manifest_key(doc), 1_000)
    return f"- [{doc.type}] {key} ({_day(doc.mtime)}){_stale_mark(doc)} "


def _cut(text: str, limit: int) -> str:
    """``text`` within ``limit`` UTF-8 bytes, an ellipsis marking a cut."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[: max(limit - 3, 0)].decode("utf-8", "ignore").rstrip() + "…"


def _text_cap(sizes: Sequence[int], room: int) -> int:
    """The largest per-line cap c with sum(min(size, c)) <= room (water-filling)."""
    low, high = 0, max(sizes, default=0)
    while low < high:
        middle = (low + high + 1) // 2
        if sum(min(size, middle) for size in sizes) <= room:
            low = middle
        else:
            high = middle - 1
    return low


def manifest_line(doc: MemoryDoc, text_bytes: int | None = None) -> str:
    text = manifest_text(doc)
    return _head(doc) + (text if text_bytes is None else _cut(text, text_bytes))


def build_manifest(candidates: Sequence[MemoryDoc]) -> Manifest:
    """Manifest lines in candidate order within the byte budget (see the module docstring)."""
    chosen: dict[str, MemoryDoc] = {}
    for doc in candidates:
        chosen.setdefault(manifest_key(doc), doc)
    docs = list(chosen.values())[:MAX_MANIFEST_LINES]
    heads = [_head(doc) for doc in docs]
    costs = [len(head.encode("utf-8")) + 1 for head in heads]  # + the joining newline
    while docs and sum(costs) - 1 + MIN_MANIFEST_TEXT_BYTES * len(docs) > MAX_MODEL_MANIFEST_BYTES:
        docs.pop()
        heads.pop()
        costs.pop()
    texts = [manifest_text(doc) for doc in docs]
    sizes = [len(text.encode("utf-8")) for text in texts]
    cap = _text_cap(sizes, MAX_MODEL_MANIFEST_BYTES - (sum(costs) - 1))
    lines = [head + _cut(text, cap) for head, text in zip(heads, texts, strict=True)]
    return Manifest("\n".join(lines), {manifest_key(doc): doc for doc in docs})


def selector_user_message(query: str, manifest: Manifest, recent_tools: Sequence[str]) -> str:
    message = f"Query: {query.strip()}\n\nAvailable memories:\n{manifest.text}"
    tools = [name.strip() for name in recent_tools if name.strip()]
    if tools:
        message += f"\n\nRecently used tools: {', '.join(tools)}"
    return message


def parse_selection(data: Any, manifest: Manifest, limit: int) -> list[MemoryDoc]:
    """The documents named by a selector answer, or :class:`SelectorError` if it is invalid."""
    if not isinstance(data, Mapping):
        raise SelectorError("the selector's answer is not a JSON object")
    chosen = data.get("selected_memories")
    if not isinstance(chosen, list):
        raise SelectorError("`selected_memories` is missing or not a list")
    if len(chosen) > limit:
        raise SelectorError(f"the selector chose {len(chosen)} memories; at most {limit} allowed")
    docs: list[MemoryDoc] = []
    for entry in chosen:
        if not isinstance(entry, str) or entry not in manifest.docs:
            raise SelectorError("the selector named a memory that is not in the manifest")
        doc = manifest.docs[entry]
        if doc not in docs:
            docs.append(doc)
    return docs


async def select_memories(
    provider: Provider,
    query: str,
    candidates: Sequence[MemoryDoc],
    *,
    recent_tools: Sequence[str] = (),
    abort: AbortSignal | None = None,
    limit: int = MAX_RELEVANT_DOCS,
    timeout: float = SELECTOR_TIMEOUT_SECONDS,
    session_id: str | None = None,
) -> list[MemoryDoc]:
    """Ask the fast model which candidates help with ``query``.

    Returns ``[]`` without a request when no candidate fits the manifest. Raises
    :class:`cairn.abort.Aborted` when ``abort`` fires and :class:`SelectorError` on any other
    failure (provider error, timeout, invalid answer).
    """
    manifest = build_manifest(candidates)
    if not manifest.docs:
        return []
    request = side_query(
        provider,
        purpose=SELECTOR_PURPOSE,
        system=SELECTOR_SYSTEM_PROMPT,
        messages=[Content.user(selector_user_message(query, manifest, recent_tools))],
        json_schema=SELECTOR_SCHEMA,
        session_id=session_id,
    )
    try:
        result = await bounded(request, abort=abort, timeout=timeout)
    except (Aborted, asyncio.CancelledError):
        raise
    except TimeoutError as exc:
        raise SelectorError(f"the selector did not answer within {timeout:g} s") from exc
    except Exception as exc:
        raise SelectorError(f"the selector request failed: {exc}") from exc
    return parse_selection(result.data, manifest, limit)


async def bounded(awaitable: Awaitable[_T], *, abort: AbortSignal | None, timeout: float) -> _T:
    """Await ``awaitable`` for at most ``timeout`` seconds, stopping early when ``abort`` fires.

    Raises :class:`TimeoutError` on the timeout and :class:`cairn.abort.Aborted` on the abort;
    in both cases the work is cancelled.
    """
    task = asyncio.ensure_future(awaitable)

    def stop(_reason: str | None) -> None:
        task.cancel()

    remove = abort.add_listener(stop) if abort else None
    try:
        async with asyncio.timeout(timeout):
            return await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if abort is not None and abort.aborted and not (current and current.cancelling()):
            raise Aborted(abort.reason) from None
        raise
    finally:
        if remove is not None:
            remove()
        if not task.done():
            task.cancel()
