"""The ``# auto memory`` section of the system prompt: how and what to save, plus the indexes.

Two variants, as in the reference: a condensed one while every ``MEMORY.md`` index is empty (the
model only needs to know how to start), and the full one once memories exist. Each index is
loaded with at most 200 lines and 25,000 characters; a cut index ends with a warning line.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from cairn.memory.document import MemoryScope
from cairn.values import Value

__all__ = [
    "MAX_PROMPT_INDEX_CHARS",
    "MAX_PROMPT_INDEX_LINES",
    "MEMORY_AGENT_RULES",
    "MemoryTier",
    "build_auto_memory_prompt",
    "truncate_index_for_prompt",
]

MAX_PROMPT_INDEX_LINES = 200  # index lines loaded into the system prompt per root
MAX_PROMPT_INDEX_CHARS = 25_000  # index characters loaded into the system prompt per root
INDEX_FILE_NAME = "MEMORY.md"


class MemoryTier(Value):
    """One memory root as the prompt presents it."""

    scope: MemoryScope
    root: Path
    index: str  # the contents of the root's MEMORY.md ("" when missing)


_TIER_LABELS: dict[MemoryScope, str] = {
    "project": "project memory (this project only)",
    "user": "user memory (shared by all your projects)",
}

_TYPES_FULL = """\
## Types of memory

- **user**: who the user is: role, expertise, preferences, how they like to work. Always saved \
in user memory.
- **feedback**: guidance the user gave about how you should work: corrections, things to avoid, \
approaches they confirmed. Saved in user memory, unless it is a convention of this project only, \
then in project memory. Write the rule, then a `Why:` line and a `How to apply:` line.
- **project**: facts about the work in this project that the code does not show: goals, \
decisions, deadlines, incidents, who is doing what. Always saved in project memory. Write the \
fact, then `Why:` and `How to apply:` lines, and turn relative dates into absolute ones \
("Thursday" → "2025-03-06").
- **reference**: where information lives outside the code: dashboards, tickets, documents, \
channels. Saved in project memory, or in user memory when the resource belongs to the user \
rather than to this project."""

_TYPES_SHORT = """\
Four types: **user** (who the user is; user memory), **feedback** (how the user wants you to \
work; user memory, or project memory for project-only conventions), **project** (goals, \
decisions, deadlines the code does not show; project memory), **reference** (where outside \
information lives; project memory, or user memory for the user's own resources)."""

_DO_NOT_SAVE = """\
## What not to save

Even when asked to, do not save:
- code patterns, architecture or file paths: read them from the code when needed;
- git history or who changed what: `git log` and `git blame` have it;
- debugging recipes or fixes: the fix is in the code and the commit message;
- tool or MCP usage notes: tool names, schemas, field mappings, transcripts of failed calls \
(save only a durable workaround, warning or owner);
- anything already in AGENTS.md or CAIRN.md;
- the state of the current task ("tests pass", "the migration is done"): use a plan or the todo \
list for that; cairn refuses such a project memory unless it lists `evidence:`.
When asked to remember something on this list, say why it is not worth saving, or save only the \
part that will still matter later."""

_DO_NOT_SAVE_SHORT = """\
Do not save code patterns, file paths, git history, debugging recipes, tool usage notes, \
anything already in AGENTS.md or CAIRN.md, or the state of the current task."""

_HOW_TO_SAVE = """\
## How to save a memory

1. Write one Markdown file per memory in the type's folder of the right root, for example \
`<root>/feedback/prefer-uv.md`, starting with front matter:

   ```
   ---
   name: <short title>
   description: <one specific line; it decides when this memory is recalled>
   type: <user | feedback | project | reference>
   ---
   ```

   then the memory itself (for feedback and project: the rule or fact, a `Why:` line and a \
`How to apply:` line).
2. cairn regenerates each root's `MEMORY.md` index from the files, one pointer line per memory \
built from its name and description. Do not edit `MEMORY.md`; only the first 200 lines of an \
index are shown here, so keep descriptions short and specific.
3. When a project memory states a fact about files of this workspace (the test command is in \
`Makefile`, payments live in `src/billing/pay.py`), add `evidence: [Makefile]` to its front \
matter (paths relative to the workspace root), and `verified_by: <command>` when a command \
confirmed it. cairn records each file's content hash under `provenance:` and marks the memory \
possibly stale once a file changes. When you rewrite a memory, keep its `provenance:` block as \
it is; list a file under `evidence:` again only after checking the fact against it now.

Update an existing memory rather than writing a second one on the same subject, and remove a \
memory that turns out to be wrong or outdated. Files under `pinned/` are curated by the user: read \
them, never change them."""

_HOW_TO_SAVE_SHORT = """\
To save: (1) write one file per memory, `<root>/<type>/<name>.md`, with front matter `name`, \
`description` (one specific line) and `type`, then the memory; (2) cairn rebuilds `MEMORY.md` \
from the files, so never edit the index."""

_WHEN_TO_USE = """\
## Using memory

Look at memory when it seems relevant to the request, or when the user asks you to recall or \
check something from earlier work. If the user asks you to ignore memory, do not use it or \
mention it.

Before you act on or recommend something from memory, verify it: a memory is a note of what was \
true when it was written. If it names a file, check that the file exists; if it names a function, \
a flag or a command, search for it. When a memory and what you observe now disagree, trust what \
you observe and update or remove the memory.

Memory is for what will matter in future conversations. Plans and the todo list are for the work \
of this conversation."""


# The same rules, for the memory agents' prompts (Extract, Dream): one text, never two.
MEMORY_AGENT_RULES = "\n\n".join([_TYPES_FULL, _DO_NOT_SAVE, _HOW_TO_SAVE])


def truncate_index_for_prompt(text: str) -> str:
    """``text`` cut to whole lines within 200 lines and 25,000 characters, with a warning if cut."""
    lines = text.rstrip("\n").splitlines()
    kept: list[str] = []
    size = 0
    for line in lines[:MAX_PROMPT_INDEX_LINES]:
        cost = len(line) + (1 if kept else 0)
        if size + cost > MAX_PROMPT_INDEX_CHARS:
            break
        kept.append(line)
        size += cost
    if len(kept) == len(lines):
        return "\n".join(kept)
    warning = (
        f"> WARNING: MEMORY.md has {len(lines)} lines; only the first {len(kept)} were loaded. "
        "Keep index entries short and remove memories that are no longer useful."
    )
    return "\n".join([*kept, warning])


def _is_empty(index: str) -> bool:
    return not any(line.strip() for line in index.splitlines())


def _roots_block(tiers: Sequence[MemoryTier]) -> str:
    lines = [
        "You have a persistent memory made of Markdown files. It lives in these folders:",
        *(f"- {_TIER_LABELS[tier.scope]}: `{tier.root}`" for tier in tiers),
    ]
    return "\n".join(lines)


def _index_blocks(tiers: Sequence[MemoryTier]) -> list[str]:
    blocks = []
    for tier in tiers:
        body = truncate_index_for_prompt(tier.index) if not _is_empty(tier.index) else ""
        blocks.append(f"## {tier.root / INDEX_FILE_NAME}\n\n{body or '(empty)'}")
    return blocks


def build_auto_memory_prompt(tiers: Sequence[MemoryTier]) -> str:
    """The whole ``# auto memory`` section for these roots ("" when there are none)."""
    if not tiers:
        return ""
    if all(_is_empty(tier.index) for tier in tiers):
        parts = [
            "# auto memory",
            _roots_block(tiers),
            _TYPES_SHORT,
            _DO_NOT_SAVE_SHORT,
            _HOW_TO_SAVE_SHORT,
            "Your memory is empty so far: no MEMORY.md index has entries yet.",
        ]
        return "\n\n".join(parts)
    parts = [
        "# auto memory",
        _roots_block(tiers),
        _TYPES_FULL,
        _DO_NOT_SAVE,
        _HOW_TO_SAVE,
        _WHEN_TO_USE,
        *_index_blocks(tiers),
    ]
    return "\n\n".join(parts)
