"""The task checkpoint: where a session's task stands, in one value compression, recap and resume
read (the "task state"; not the file checkpoints of :mod:`cairn.recording.checkpoints`).

A :class:`TaskCheckpoint` holds the objective, the user's instructions, constraints and
corrections **word for word** with the turn each came from, what is done (with evidence: files
changed, commands and their results), what remains, the next step, open questions, what was
learnt, a one-line recap, and the plan (todo list). What needs no model is derived from the
conversation (:func:`work_evidence`: files and commands; the plan; the user's words); the rest is
written by one small side query (:func:`ask_for_checkpoint`, ``X-Cairn-Purpose:
task-checkpoint``) that reads the previous checkpoint and only what happened since.

The model never writes the user's words: it names which of them are lasting instructions (by
number, with an optional quote that must be found in them), and the text is copied from what
the user said. Anything that looks like a secret (a key, a token, a private key) and is not in
what the model was shown is redacted (:func:`scrub_secrets`). A checkpoint is recorded as a
``task_checkpoint`` system record with a digest; a record whose digest does not match (edited by
hand, or damaged) is refused by :meth:`TaskCheckpoint.from_record`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from cairn.agent.reminders import SYSTEM_REMINDER_OPEN
from cairn.content import Content, FunctionCall, FunctionResponse, Image, Text
from cairn.llm.side_query import side_query
from cairn.llm.types import Provider
from cairn.values import Value
from cairn.vocabulary.tool_calls import TodoItem
from cairn.vocabulary.tool_names import ToolName

__all__ = [
    "CHECKPOINT_RECORD_VERSION",
    "TASK_CHECKPOINT_PURPOSE",
    "CheckpointError",
    "DoneStep",
    "Instruction",
    "TaskCheckpoint",
    "UserWords",
    "ask_for_checkpoint",
    "render_user_words",
    "scrub_secrets",
    "work_evidence",
]

TASK_CHECKPOINT_PURPOSE: Final = "task-checkpoint"  # the X-Cairn-Purpose of its side query
CHECKPOINT_RECORD_VERSION: Final = 1
MAX_DELTA_CHARS: Final = 24_000  # of the conversation since the last checkpoint, per query
MAX_ENTRY_CHARS: Final = 2_000  # of one message in that transcript
MAX_TOOL_RESULT_CHARS: Final = 400  # of one tool result in that transcript
MAX_FIELD_CHARS: Final = 600  # of one model-written line (objective, a step, the next step)
MAX_LIST_ITEMS: Final = 12  # remaining steps, open questions, things learnt
MAX_DONE_STEPS: Final = 40  # done steps kept (the oldest are counted, not listed)
MAX_EVIDENCE_ITEMS: Final = 30  # files changed and commands kept
MAX_INSTRUCTION_CHARS: Final = 2_000  # user words kept whole as one instruction (else a quote)
MIN_SECRET_CHARS: Final = 8  # an environment value shorter than this is not treated as secret
_REDACTED = "[redacted]"

CHECKPOINT_PROMPT = """\
You keep the task checkpoint of a session between a user and a coding agent: where the task
stands, so the agent can go on after its history is compressed, and the user can see where they
left off. You get the previous checkpoint (JSON) and what happened since.

Answer with one JSON object:
- "objective": the user's overall goal, in one sentence (update it when the user changed it).
- "instructions": the numbers of the user's messages since the previous checkpoint (the
  "User's words" list) that give a lasting instruction, constraint, preference or correction
  (e.g. "don't touch the tests", "use tabs", "no, the other file"), as {"id": N}; add "quote"
  with the exact sentence from that message when the message is long. Not for plain questions.
- "done": the steps finished since the previous checkpoint, as {"step", "evidence"}; evidence
  names the files changed or the commands run and their results, from the conversation only.
- "remaining": the steps still to do (the whole list now).
- "next_step": the single next concrete step.
- "open_questions": what is undecided or waiting for the user (may be empty).
- "knowledge": facts the work depends on (paths, names, decisions), at most 8.
- "recap": at most 40 words, 1 or 2 plain sentences: the task, then the next step.
Write in the language the user writes in. Never invent results, keys or values."""

_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "objective": {"type": "string"},
        "instructions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"id": {"type": "integer"}, "quote": {"type": "string"}},
                "required": ["id"],
            },
        },
        "done": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"step": {"type": "string"}, "evidence": {"type": "string"}},
                "required": ["step"],
            },
        },
        "remaining": {"type": "array", "items": {"type": "string"}},
        "next_step": {"type": "string"},
        "open_questions": {"type": "array", "items": {"type": "string"}},
        "knowledge": {"type": "array", "items": {"type": "string"}},
        "recap": {"type": "string"},
    },
    "required": ["objective", "next_step", "recap"],
}

# Secret-looking text: private keys, well-known key formats, long opaque tokens with digits
# (re.DOTALL). These patterns are kept as text: ``re`` compiles and caches each on first use,
# after the first turn, not at every start-up.
_KEY_MATERIAL = (
    r"-----BEGIN[A-Z ]*PRIVATE KEY-----.*?(?:-----END[A-Z ]*PRIVATE KEY-----|$)"
    r"|\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}"
    r"|\bAKIA[0-9A-Z]{16}\b"
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"
    r"|\bxox[abprs]-[A-Za-z0-9-]{10,}"
    r"|\b(?=[A-Za-z0-9_+=-]*[0-9])(?=[A-Za-z0-9_+=-]*[A-Za-z])[A-Za-z0-9_+=-]{32,}"
)
_KEYISH_VARIABLE = r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH"  # case aside
_EXIT_CODE = r"Exit code: (-?\d+)"


class CheckpointError(ValueError):
    """A recorded checkpoint that cannot be used (damaged, edited by hand, another version)."""


class UserWords(Value):
    """What the user said once: a prompt, or text typed while a turn ran (``steering``)."""

    id: int  # 1, 2, ... in the order they were said
    turn: int  # the user turn they belong to
    text: str
    steering: bool = False


class Instruction(Value):
    """A lasting instruction, constraint or correction, in the user's words."""

    turn: int
    text: str
    steering: bool = False


class DoneStep(Value):
    step: str
    evidence: str = ""


class TaskCheckpoint(Value):
    """Where the task stands as of user turn ``turn`` (and the user's words up to ``words``)."""

    turn: int
    words: int
    objective: str = ""
    instructions: tuple[Instruction, ...] = ()
    done: tuple[DoneStep, ...] = ()
    earlier_done: int = 0  # done steps no longer listed (beyond MAX_DONE_STEPS)
    remaining: tuple[str, ...] = ()
    next_step: str = ""
    open_questions: tuple[str, ...] = ()
    knowledge: tuple[str, ...] = ()
    recap: str = ""
    files_changed: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    plan: tuple[TodoItem, ...] = ()
    updated_at: str = ""

    # ----- as recorded -----

    def to_record(self) -> dict[str, Any]:
        """The ``systemPayload`` of its ``task_checkpoint`` record (with its digest)."""
        body = self._body()
        return {**body, "digest": _digest(body)}

    def _body(self) -> dict[str, Any]:
        return {
            "version": CHECKPOINT_RECORD_VERSION,
            "turn": self.turn,
            "words": self.words,
            "objective": self.objective,
            "instructions": [
                {"turn": i.turn, "text": i.text, **({"steering": True} if i.steering else {})}
                for i in self.instructions
            ],
            "done": [{"step": d.step, "evidence": d.evidence} for d in self.done],
            "earlierDone": self.earlier_done,
            "remaining": list(self.remaining),
            "nextStep": self.next_step,
            "openQuestions": list(self.open_questions),
            "knowledge": list(self.knowledge),
            "recap": self.recap,
            "filesChanged": list(self.files_changed),
            "commands": list(self.commands),
            "plan": [{"id": t.id, "content": t.content, "status": t.status} for t in self.plan],
            "updatedAt": self.updated_at,
        }

    @classmethod
    def from_record(cls, payload: Mapping[str, Any]) -> TaskCheckpoint:
        """The checkpoint a record holds; :class:`CheckpointError` when it cannot be trusted."""
        if payload.get("version") != CHECKPOINT_RECORD_VERSION:
            raise CheckpointError(f"unknown task checkpoint version {payload.get('version')!r}")
        body = {k: v for k, v in payload.items() if k != "digest"}
        if payload.get("digest") != _digest(body):
            raise CheckpointError("its digest does not match (edited by hand, or damaged)")
        try:
            return cls(
                turn=_int(body["turn"]),
                words=_int(body["words"]),
                objective=_str(body["objective"]),
                instructions=tuple(
                    Instruction(_int(i["turn"]), _str(i["text"]), i.get("steering") is True)
                    for i in body["instructions"]
                ),
                done=tuple(DoneStep(_str(d["step"]), _str(d["evidence"])) for d in body["done"]),
                earlier_done=_int(body["earlierDone"]),
                remaining=_strs(body["remaining"]),
                next_step=_str(body["nextStep"]),
                open_questions=_strs(body["openQuestions"]),
                knowledge=_strs(body["knowledge"]),
                recap=_str(body["recap"]),
                files_changed=_strs(body["filesChanged"]),
                commands=_strs(body["commands"]),
                plan=tuple(
                    TodoItem(_str(t["id"]), _str(t["content"]), t["status"])
                    for t in body["plan"]
                    if t.get("status") in ("pending", "in_progress", "completed", "cancelled")
                ),
                updated_at=_str(body["updatedAt"]),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise CheckpointError(f"it is not a task checkpoint ({exc!r})") from None

    # ----- for the model and for people -----

    def recap_text(self) -> str:
        """The "where were we" line: the model's recap, else the objective and the next step."""
        if self.recap:
            return self.recap
        parts = [self.objective.rstrip(".") + "." if self.objective else ""]
        if self.next_step:
            parts.append(f"Next: {self.next_step}")
        return " ".join(p for p in parts if p)

    def render(
        self,
        *,
        plan: Sequence[TodoItem] | None = None,
        later_words: Sequence[UserWords] = (),
        other_words: Sequence[UserWords] = (),
    ) -> str:
        """The checkpoint as the model reads it. ``plan``: the todo list now (default: the
        recorded one); ``later_words``: what the user said after it was written;
        ``other_words``: earlier words of the user's kept word for word besides the
        instructions."""
        lines = [f'<task_checkpoint turn="{self.turn}">']
        if self.objective:
            lines.append(f"Objective: {self.objective}")
        if self.instructions:
            lines.append(
                "The user's instructions, constraints and corrections, word for word (newest "
                "last; they stay in force unless the user changed them):"
            )
            lines += [_quoted(i.turn, i.text, i.steering) for i in self.instructions]
        if other_words:
            lines.append("More of what the user said, word for word:")
            lines += [_quoted(w.turn, w.text, w.steering) for w in other_words]
        if self.done or self.earlier_done:
            lines.append("Done:")
            if self.earlier_done:
                lines.append(f"- ({self.earlier_done} earlier steps)")
            lines += [f"- {d.step}" + (f" ({d.evidence})" if d.evidence else "") for d in self.done]
        if self.files_changed:
            lines.append(f"Files changed: {', '.join(self.files_changed)}")
        if self.commands:
            lines.append("Commands run (newest last):")
            lines += [f"- {command}" for command in self.commands]
        todo = list(self.plan if plan is None else plan)
        if todo:
            lines.append("Plan (the todo list; finished items stay finished):")
            lines += [f"- [{t.status}] {t.content}" for t in todo]
        _section(lines, "Remaining:", self.remaining)
        if self.next_step:
            lines.append(f"Next step: {self.next_step}")
        _section(lines, "Open questions:", self.open_questions)
        _section(lines, "Learnt:", self.knowledge)
        if later_words:
            lines.append("What the user said since, word for word:")
            lines += [_quoted(w.turn, w.text, w.steering) for w in later_words]
        lines.append("</task_checkpoint>")
        return "\n".join(lines)


def render_user_words(words: Sequence[UserWords]) -> str:
    """The user's words, kept word for word when there is no checkpoint to carry them."""
    if not words:
        return ""
    lines = ["<user_words>", "What the user said, word for word (newest last):"]
    lines += [_quoted(w.turn, w.text, w.steering) for w in words]
    lines.append("</user_words>")
    return "\n".join(lines)


def _quoted(turn: int, text: str, steering: bool) -> str:
    when = f"turn {turn}, while you worked" if steering else f"turn {turn}"
    return f"- [{when}] {text}"


def _section(lines: list[str], title: str, items: Sequence[str]) -> None:
    if items:
        lines.append(title)
        lines += [f"- {item}" for item in items]


# ----- evidence derived from the conversation (no model) -----


def work_evidence(entries: Iterable[Content]) -> tuple[list[str], list[str]]:
    """The files changed and the commands run (with their results) in ``entries``."""
    calls: dict[str, FunctionCall] = {}
    files: list[str] = []
    commands: list[str] = []
    for entry in entries:
        for part in entry.parts:
            if isinstance(part, FunctionCall):
                calls[part.id] = part
            elif isinstance(part, FunctionResponse) and part.id in calls:
                _evidence(calls.pop(part.id), part, files, commands)
    return files, commands


def _evidence(
    call: FunctionCall, response: FunctionResponse, files: list[str], commands: list[str]
) -> None:
    args = call.args
    if call.name in (ToolName.EDIT, ToolName.WRITE_FILE) and not response.is_error:
        path = args.get("file_path") or args.get("path")
        if isinstance(path, str) and path and path not in files:
            files.append(path)
    elif call.name == ToolName.SHELL and isinstance(args.get("command"), str):
        command = _clip(" ".join(str(args["command"]).split()), 200)
        match = re.search(_EXIT_CODE, response.text)
        if response.is_error:
            outcome = (
                "failed: " + _clip(response.text.strip().splitlines()[0], 120)
                if (response.text.strip())
                else "failed"
            )
        else:
            outcome = f"exit {match.group(1)}" if match else "done"
        commands.append(f"`{command}` → {outcome}")


# ----- the side query -----


async def ask_for_checkpoint(
    provider: Provider,
    *,
    previous: TaskCheckpoint | None,
    new_entries: Sequence[Content],
    new_words: Sequence[UserWords],
    turn: int,
    words: int,
    plan: Sequence[TodoItem],
    updated_at: str,
    session_id: str | None = None,
) -> TaskCheckpoint:
    """The checkpoint after ``new_entries`` (the conversation since ``previous``), from one side
    query on the fast model. Raises (:class:`~cairn.llm.errors.ProviderError`,
    :class:`CheckpointError` for an answer that is not a checkpoint); the caller keeps
    ``previous`` then."""
    transcript = _transcript(new_entries)
    files, commands = work_evidence(new_entries)
    question = _question(previous, transcript, new_words, plan)
    result = await side_query(
        provider,
        purpose=TASK_CHECKPOINT_PURPOSE,
        system=CHECKPOINT_PROMPT,
        messages=[Content.user(question)],
        json_schema=_SCHEMA,
        max_attempts=1,
        temperature=0.2,
        session_id=session_id,
    )
    if not isinstance(result.data, dict):
        raise CheckpointError("the model did not answer with a JSON object")
    shown = question + "\n" + CHECKPOINT_PROMPT
    return _merge(
        previous,
        result.data,
        new_words=new_words,
        turn=turn,
        words=words,
        files=files,
        commands=commands,
        plan=plan,
        updated_at=updated_at,
        shown=shown,
    )


def _question(
    previous: TaskCheckpoint | None,
    transcript: str,
    new_words: Sequence[UserWords],
    plan: Sequence[TodoItem],
) -> str:
    earlier = json.dumps(_for_model(previous), ensure_ascii=False) if previous else "none yet"
    said = "\n".join(f"{w.id}. {_clip(w.text, MAX_ENTRY_CHARS)}" for w in new_words) or "(none)"
    todo = "\n".join(f"- [{t.status}] {t.content}" for t in plan) or "(none)"
    return (
        f"Previous checkpoint:\n{earlier}\n\n"
        f"User's words since then (number. text):\n{said}\n\n"
        f"The todo list now:\n{todo}\n\n"
        f"The conversation since then:\n{transcript or '(nothing)'}\n\n"
        "Write the checkpoint now as one JSON object."
    )


def _for_model(checkpoint: TaskCheckpoint) -> dict[str, Any]:
    return {
        "objective": checkpoint.objective,
        "done": [d.step for d in checkpoint.done[-10:]],
        "remaining": list(checkpoint.remaining),
        "next_step": checkpoint.next_step,
        "open_questions": list(checkpoint.open_questions),
        "knowledge": list(checkpoint.knowledge),
    }


def _transcript(entries: Sequence[Content]) -> str:
    """The conversation as short lines, its newest part kept within :data:`MAX_DELTA_CHARS`."""
    lines: list[str] = []
    for entry in entries:
        for part in entry.parts:
            line = _line(entry.role, part)
            if line:
                lines.append(line)
    kept: list[str] = []
    size = 0
    for line in reversed(lines):
        size += len(line) + 1
        if size > MAX_DELTA_CHARS:
            kept.append(f"[... {len(lines) - len(kept)} earlier lines left out]")
            break
        kept.append(line)
    return "\n".join(reversed(kept))


def _line(role: str, part: object) -> str:
    if isinstance(part, Text):
        text = part.text.strip()
        if not text or text.startswith(SYSTEM_REMINDER_OPEN):
            return ""  # recalled memory, reminders: not what was said
        who = "user" if role == "user" else "assistant"
        return f"[{who}] {_clip(text, MAX_ENTRY_CHARS)}"
    if isinstance(part, FunctionCall):
        args = json.dumps(dict(part.args), ensure_ascii=False, default=str)
        return f"[tool call] {part.name} {_clip(args, 300)}"
    if isinstance(part, FunctionResponse):
        kind = "tool error" if part.is_error else "tool result"
        return f"[{kind}] {part.name}: {_clip(part.text.strip(), MAX_TOOL_RESULT_CHARS)}"
    if isinstance(part, Image):
        return "[image]"
    return ""


def _merge(
    previous: TaskCheckpoint | None,
    data: Mapping[str, Any],
    *,
    new_words: Sequence[UserWords],
    turn: int,
    words: int,
    files: Sequence[str],
    commands: Sequence[str],
    plan: Sequence[TodoItem],
    updated_at: str,
    shown: str,
) -> TaskCheckpoint:
    """The new checkpoint: the model's answer checked and cut to size, the user's words copied
    from what they said, the evidence from the conversation."""
    objective = data.get("objective")
    next_step = data.get("next_step")
    if not isinstance(objective, str) or not objective.strip() or not isinstance(next_step, str):
        raise CheckpointError("the answer has no objective or next step")
    known = shown + "\n" + "\n".join(w.text for w in new_words)

    def clean(text: str) -> str:
        return _clip(scrub_secrets(" ".join(text.split()), known), MAX_FIELD_CHARS)

    def texts(key: str) -> tuple[str, ...]:
        raw = data.get(key)
        items = raw if isinstance(raw, list) else []
        return tuple(clean(i) for i in items if isinstance(i, str) and i.strip())[:MAX_LIST_ITEMS]

    before = previous or TaskCheckpoint(turn=0, words=0)
    done = [*before.done, *_done_steps(data.get("done"), clean)]
    earlier = before.earlier_done + max(0, len(done) - MAX_DONE_STEPS)
    recap = data.get("recap")
    return TaskCheckpoint(
        turn=turn,
        words=words,
        objective=clean(objective),
        instructions=(*before.instructions, *_instructions(data.get("instructions"), new_words)),
        done=tuple(done[-MAX_DONE_STEPS:]),
        earlier_done=earlier,
        remaining=texts("remaining"),
        next_step=clean(next_step),
        open_questions=texts("open_questions"),
        knowledge=texts("knowledge"),
        recap=clean(recap) if isinstance(recap, str) else "",
        files_changed=_newest_unique([*before.files_changed, *files]),
        commands=tuple([*before.commands, *commands][-MAX_EVIDENCE_ITEMS:]),
        plan=tuple(plan),
        updated_at=updated_at,
    )


def _done_steps(raw: Any, clean: Any) -> list[DoneStep]:
    steps: list[DoneStep] = []
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, Mapping) and isinstance(item.get("step"), str) and item["step"].strip():
            evidence = item.get("evidence")
            steps.append(
                DoneStep(clean(item["step"]), clean(evidence) if isinstance(evidence, str) else "")
            )
    return steps


def _instructions(raw: Any, new_words: Sequence[UserWords]) -> list[Instruction]:
    """The instructions the model named, copied from the user's words (never from its answer)."""
    by_id = {w.id: w for w in new_words}
    chosen: dict[int, Instruction] = {}
    for item in raw if isinstance(raw, list) else []:
        number = item.get("id") if isinstance(item, Mapping) else item
        if isinstance(number, str) and number.strip().isdigit():
            number = int(number)
        if not isinstance(number, int) or number not in by_id or number in chosen:
            continue
        said = by_id[number]
        quote = item.get("quote") if isinstance(item, Mapping) else None
        text = _found(quote, said.text) if isinstance(quote, str) else None
        if text is None and len(said.text) <= MAX_INSTRUCTION_CHARS:
            text = said.text
        if text:
            chosen[number] = Instruction(said.turn, text, said.steering)
    return [chosen[n] for n in sorted(chosen)]


def _found(quote: str, said: str) -> str | None:
    """``quote`` as it stands in ``said`` (the user's exact characters), or ``None``."""
    quote = quote.strip()
    if not quote:
        return None
    index = said.find(quote)
    if index >= 0:
        return said[index : index + len(quote)]
    words = quote.split()  # the same words, spaced differently
    pattern = r"\s+".join(re.escape(w) for w in words)
    match = re.search(pattern, said) if words else None
    return match.group(0) if match else None


def _newest_unique(items: Sequence[str]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for item in items:
        seen.pop(item, None)
        seen[item] = None
    return tuple(list(seen)[-MAX_EVIDENCE_ITEMS:])


# ----- secrets -----


def scrub_secrets(text: str, known: str) -> str:
    """``text`` with secret-looking strings that are not in ``known`` (what the model was
    shown) replaced by ``[redacted]``, and so are secret environment values not in ``known``."""

    def keep_if_known(match: re.Match[str]) -> str:
        return match.group(0) if match.group(0) in known else _REDACTED

    text = re.sub(_KEY_MATERIAL, keep_if_known, text, flags=re.DOTALL)
    for name, value in os.environ.items():
        secret = (
            len(value) >= MIN_SECRET_CHARS
            and re.search(_KEYISH_VARIABLE, name, re.IGNORECASE) is not None
        )
        if secret and value in text and value not in known:
            text = text.replace(value, _REDACTED)
    return text


# ----- small helpers -----


def _digest(body: Mapping[str, Any]) -> str:
    canonical = json.dumps(body, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise TypeError(f"{value!r} is not a count")
    return value


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{value!r} is not text")
    return value


def _strs(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise TypeError(f"{value!r} is not a list")
    return tuple(_str(item) for item in value)
