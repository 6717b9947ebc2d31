"""Recall's model selector: one side query that picks up to five memories from a manifest.

The manifest lists each candidate as ``- [<type>] <absolute path> (<mtime ISO>): <description>``
(absolute paths keep a project and a user memory with the same relative path apart). Lines are
kept while the manifest stays within 25,000 UTF-8 bytes; a line that does not fit is skipped and
the next one is tried. The model's answer is untrusted: anything but a list of at most five
manifest paths is a :class:`SelectorError`, and the caller falls back to the lexical result.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import functools
import unicodedata
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from cairn.abort import Aborted, AbortSignal
from cairn.content import Content
from cairn.llm.side_query import side_query
from cairn.llm.types import Provider
from cairn.memory.document import MemoryDoc

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
    "manifest_line",
    "parse_selection",
    "sanitize_manifest_text",
    "select_memories",
    "selector_user_message",
    "string_list_schema",
]

MAX_RELEVANT_DOCS = 5  # documents per Recall delivery; the selector picks "up to 5"
MAX_MODEL_MANIFEST_BYTES = 25_000  # UTF-8 budget of the selector manifest
MAX_MANIFEST_DESCRIPTION_CHARS = 512  # description characters per manifest line
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

You get the query and a list of memory files. Each line gives the memory's type, its file path, \
when it was saved and a one-line description. Answer with the paths of at most 5 memories that \
will clearly help with this query. Be selective: choose a memory only when you are confident it \
is relevant. An empty list is a good answer when nothing fits. Copy each path exactly as listed. \
A memory marked [possibly stale] was learned from files that have changed since: it may no \
longer hold, so prefer a current memory on the same subject.

When recently used tools are listed, do not choose memories that are only usage reference for \
those tools (API docs, parameter schemas, field mappings, guessed call formats, transcripts of \
failed calls): the live tool definitions are authoritative. Do choose memories that hold durable \
operational context about those tools: where credentials live, who owns a system, escalation \
paths, gotchas, warnings and confirmed workarounds."""

_T = TypeVar("_T")


class SelectorError(Exception):
    """The selector's answer cannot be used (invalid, too long, unknown paths, timeout)."""


@dataclass(frozen=True, slots=True)
class Manifest:
    text: str
    docs: Mapping[str, MemoryDoc]  # absolute path string → document, in manifest order


def sanitize_manifest_text(text: str, limit: int = MAX_MANIFEST_DESCRIPTION_CHARS) -> str:
    """NFKC, control characters to spaces, format characters removed, whitespace collapsed."""
    control, format_, spaces = _manifest_patterns()
    text = unicodedata.normalize("NFKC", text)
    text = control.sub(" ", text)
    text = format_.sub("", text)
    return spaces.sub(" ", text).strip()[:limit].rstrip()


@functools.cache
def _manifest_patterns() -> tuple[regex.Pattern[str], regex.Pattern[str], regex.Pattern[str]]:
    """Control characters, format characters, whitespace runs. Compiled on first use (``regex``
    costs ~15 ms to import, and a turn whose memory store is empty never builds a manifest)."""
    import regex

    return regex.compile(r"\p{Cc}"), regex.compile(r"\p{Cf}"), regex.compile(r"\s+")


def _iso(mtime: float) -> str:
    moment = _dt.datetime.fromtimestamp(mtime, _dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def manifest_line(doc: MemoryDoc) -> str:
    description = sanitize_manifest_text(doc.description)
    staleness, mark = doc.staleness, ""
    if staleness is not None and staleness.state == "stale":
        mark = f" [possibly stale: {', '.join(staleness.files)} changed since]"
    return f"- [{doc.type}] {doc.path} ({_iso(doc.mtime)}){mark}: {description}"


def build_manifest(candidates: Sequence[MemoryDoc]) -> Manifest:
    """Manifest lines in candidate order, skipping lines that would pass the byte budget."""
    lines: list[str] = []
    docs: dict[str, MemoryDoc] = {}
    used = 0
    for doc in candidates:
        key = str(doc.path)
        if key in docs:
            continue
        line = manifest_line(doc)
        cost = len(line.encode("utf-8")) + (1 if lines else 0)  # the joining newline
        if used + cost > MAX_MODEL_MANIFEST_BYTES:
            continue
        lines.append(line)
        docs[key] = doc
        used += cost
    return Manifest("\n".join(lines), docs)


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
