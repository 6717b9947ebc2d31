"""``@path`` mentions: the files a prompt names are read and attached to what the model gets.

The prompt text stays what the user typed; the file contents follow it as a second part, in the
reference system's "Content from referenced files" block. A mention that cannot be attached (no
such file, a folder, a binary or outside the workspace) is left as text, with a warning.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from cairn.content import Part, Text
from cairn.tools.base import FileSystem, ToolError, resolve_in_roots

__all__ = [
    "MAX_MENTION_BYTES",
    "MentionResult",
    "find_mentions",
    "resolve_mentions",
]

MAX_MENTION_BYTES = 256 * 1024  # a mentioned file larger than this is cut (with a note)
MAX_MENTIONED_FILES = 20  # files attached from one prompt
_MENTION = re.compile(r"(?:^|(?<=\s))@((?:\\ |[^\s])+)")
_TRAILING_PUNCTUATION = ",.;:!?)]}'\""
BLOCK_START = "--- Content from referenced files ---"
BLOCK_END = "--- End of content ---"


@dataclass
class MentionResult:
    parts: list[Part] | None  # None: nothing attached, send the text as it is
    attached: list[str] = field(default_factory=list)  # the mentions as typed, e.g. "src/a.py"
    warnings: list[str] = field(default_factory=list)


def find_mentions(text: str) -> list[str]:
    """The paths of ``@path`` tokens (``\\ `` is an escaped space), in order, without repeats."""
    found: list[str] = []
    for match in _MENTION.finditer(text):
        raw = match.group(1).replace("\\ ", " ").rstrip(_TRAILING_PUNCTUATION)
        if raw and raw not in found:
            found.append(raw)
    return found


async def resolve_mentions(text: str, cwd: Path, fs: FileSystem) -> MentionResult:
    """Read the mentioned files inside ``cwd`` and build the prompt's parts."""
    result = MentionResult(parts=None)
    blocks: list[str] = []
    for raw in find_mentions(text)[:MAX_MENTIONED_FILES]:
        content = await _read_mention(raw, cwd, fs, result.warnings)
        if content is None:
            continue
        result.attached.append(raw)
        blocks.append(f"Content from @{raw}:\n{content}")
    if blocks:
        body = "\n\n".join(blocks)
        result.parts = [Text(text), Text(f"\n{BLOCK_START}\n{body}\n{BLOCK_END}")]
    return result


async def _read_mention(raw: str, cwd: Path, fs: FileSystem, warnings: list[str]) -> str | None:
    try:
        path = resolve_in_roots(raw, cwd, [cwd])
    except ToolError:
        warnings.append(f"@{raw} is outside the workspace; it was not attached.")
        return None
    if not path.exists():
        return None  # not a path at all (an @handle, a decorator): left as text, silently
    if path.is_dir():
        warnings.append(f"@{raw} is a folder; mention the files in it to attach them.")
        return None
    try:
        size = path.stat().st_size
        if size > MAX_MENTION_BYTES:
            data = path.read_bytes()[:MAX_MENTION_BYTES]
            text = data.decode("utf-8", errors="ignore")
            warnings.append(
                f"@{raw} is {size} bytes; only the first {MAX_MENTION_BYTES} were attached."
            )
            return text + f"\n[... cut at {MAX_MENTION_BYTES} bytes ...]"
        text = await fs.read_text(path)
    except UnicodeDecodeError:
        warnings.append(f"@{raw} is not a text file; it was not attached.")
        return None
    except OSError as exc:
        warnings.append(f"@{raw} cannot be read ({exc.strerror or exc}); it was not attached.")
        return None
    if "\x00" in text[:8192]:
        warnings.append(f"@{raw} is not a text file; it was not attached.")
        return None
    return text
