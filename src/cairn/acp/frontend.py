"""The session's user is the ACP client: approvals, questions and the editor's files.

- :class:`AcpFrontend` asks for approvals with ``session/request_permission`` and asks
  ``ask_user_question`` questions with an elicitation form when the client supports forms,
  else with one permission request per question whose options are the choices.
- :class:`AcpFileSystem` reads and writes through ``fs/read_text_file`` and
  ``fs/write_text_file`` when the client offers them, so the editor's unsaved buffers win; a
  request the editor refuses is the tool's error (never read around the editor).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from acp.exceptions import RequestError
from acp.interfaces import Client
from acp.schema import (
    AcceptElicitationResponse,
    AllowedOutcome,
    ClientCapabilities,
    ContentToolCallContent,
    ElicitationFormSessionMode,
    ElicitationMultiSelectPropertySchema,
    ElicitationSchema,
    ElicitationStringPropertySchema,
    EnumOption,
    PermissionOption,
    PermissionOptionKind,
    TextContentBlock,
    TitledMultiSelectItems,
    ToolCallUpdate,
)

from cairn.acp.requests import OutgoingRequests, withdrawable
from cairn.acp.updates import tool_call_model
from cairn.debug_log import get_logger
from cairn.session.updates import permission_options, permission_tool_call
from cairn.tools.base import FileSystem, LocalFileSystem, Question
from cairn.vocabulary.interaction import PermissionOutcome, PermissionRequest
from cairn.vocabulary.permissions import outcome_of_option

__all__ = ["AcpFileSystem", "AcpFrontend", "client_error"]

_CHOICE_PREFIX = "choice-"  # option ids of a question asked as a permission request
_CHOICE_KINDS: tuple[PermissionOptionKind, ...] = (
    "allow_once",
    "allow_always",
    "reject_once",
    "reject_always",
)

_log = get_logger("ACP")
_T = TypeVar("_T")


class AcpFrontend:
    """One session's :class:`~cairn.vocabulary.interaction.Frontend` over an ACP connection."""

    interactive = True

    def __init__(
        self,
        client: Client,
        session_id: str,
        capabilities: ClientCapabilities,
        *,
        question_call_id: Callable[[], str | None] = lambda: None,
        on_disconnect: Callable[[], object] = lambda: None,
        requests: OutgoingRequests | None = None,
    ) -> None:
        self._requests = requests  # withdraws a request its cancelled turn left open
        self._client = client
        self._session_id = session_id
        self._capabilities = capabilities
        self._question_call_id = question_call_id
        self._on_disconnect = on_disconnect

    async def request_permission(self, request: PermissionRequest) -> PermissionOutcome:
        tool_call = tool_call_model(permission_tool_call(request))
        options = [PermissionOption.model_validate(o) for o in permission_options(request)]
        chosen = await self._ask_permission(tool_call, options)
        if chosen is None:
            return "cancelled"
        return outcome_of_option(chosen) or "reject"

    async def ask_user(self, questions: Sequence[Question]) -> list[str] | None:
        if self._supports_forms():
            return await self._ask_with_form(questions)
        answers: list[str] = []
        for question in questions:
            answer = await self._ask_with_permission(question)
            if answer is None:
                return None
            answers.append(answer)
        return answers

    # ----- questions -----

    def _supports_forms(self) -> bool:
        elicitation = self._capabilities.elicitation
        return elicitation is not None and elicitation.form is not None

    async def _ask_with_form(self, questions: Sequence[Question]) -> list[str] | None:
        keys = [f"q{index}" for index in range(len(questions))]
        schema = ElicitationSchema(
            type="object",
            properties={key: _property(q) for key, q in zip(keys, questions, strict=True)},
            required=keys,
        )
        mode = ElicitationFormSessionMode(
            session_id=self._session_id,
            tool_call_id=self._question_call_id(),
            requested_schema=schema,
        )
        message = questions[0].question if len(questions) == 1 else "Please answer these questions."
        response = await self._answer("elicitation", self._client.create_elicitation(message, mode))
        if not isinstance(response, AcceptElicitationResponse) or response.content is None:
            return None
        return [_answer_text(response.content.get(key)) for key in keys]

    async def _ask_with_permission(self, question: Question) -> str | None:
        call_id = self._question_call_id() or "ask_user_question"
        choices = _described(question)
        tool_call = ToolCallUpdate(
            tool_call_id=call_id,
            title=question.question,
            kind="other",
            status="pending",
            content=[_choices_content(question.question, choices)],
        )
        # A kind of its own per choice (there are at most four), so a client can give each
        # choice its own key; the descriptions go with the options and into the call's text.
        options = [
            PermissionOption(
                option_id=f"{_CHOICE_PREFIX}{i}",
                name=label,
                kind=_CHOICE_KINDS[i % len(_CHOICE_KINDS)],
                field_meta={"cairn": {"description": description}} if description else None,
            )
            for i, (label, description) in enumerate(choices)
        ]
        chosen = await self._ask_permission(tool_call, options)
        if chosen is None or not chosen.startswith(_CHOICE_PREFIX):
            return None
        index = chosen.removeprefix(_CHOICE_PREFIX)
        if not index.isdigit() or int(index) >= len(question.options):
            return None
        return question.options[int(index)]

    async def _ask_permission(
        self, tool_call: ToolCallUpdate, options: list[PermissionOption]
    ) -> str | None:
        """The chosen option id; ``None`` when the client cancelled or cannot answer."""
        response = await self._answer(
            "session/request_permission",
            self._client.request_permission(
                session_id=self._session_id, tool_call=tool_call, options=options
            ),
        )
        if response is None:
            return None
        outcome = response.outcome
        return outcome.option_id if isinstance(outcome, AllowedOutcome) else None

    async def _answer(self, method: str, request: Awaitable[_T]) -> _T | None:
        """The client's answer to a question; ``None`` when it could not answer (when it is
        gone, the turn is cancelled)."""
        try:
            return await withdrawable(self._requests, request)
        except ConnectionError:
            await self._client_gone()
            return None
        except RequestError as exc:
            _log.warning(f"{method} failed: {exc}")
            return None

    async def _client_gone(self) -> None:
        """Nobody is left to answer: cancel the turn, so the question stays unanswered.

        An answer of "no user" would be recorded and the question lost; cancelled, it is asked
        again when the session is loaded next time.
        """
        _log.info("the client went away while asked; cancelling the turn")
        self._on_disconnect()
        await asyncio.sleep(0)  # the turn's cancellation is delivered here


def _property(question: Question) -> Any:
    choices = [
        EnumOption(const=label, title=label, description=description or None)
        for label, description in _described(question)
    ]
    title = question.header or question.question
    if question.multi_select:
        return ElicitationMultiSelectPropertySchema(
            type="array",
            title=title,
            description=question.question,
            items=TitledMultiSelectItems(any_of=choices),
            min_items=1,
        )
    return ElicitationStringPropertySchema(
        type="string", title=title, description=question.question, one_of=choices
    )


def _described(question: Question) -> list[tuple[str, str]]:
    descriptions = list(question.option_descriptions)
    return [
        (label, descriptions[i] if i < len(descriptions) else "")
        for i, label in enumerate(question.options)
    ]


def _choices_content(question: str, choices: list[tuple[str, str]]) -> ContentToolCallContent:
    """The question and its choices with their descriptions, as the call's text."""
    lines = [question, ""]
    lines += [f"- **{label}**" + (f": {text}" if text else "") for label, text in choices]
    return ContentToolCallContent(
        type="content", content=TextContentBlock(type="text", text="\n".join(lines))
    )


def _answer_text(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return "" if value is None else str(value)


@dataclass(eq=False)
class AcpFileSystem:
    """Text files through the client when it offers ``fs/*``; the local disk otherwise."""

    client: Client
    session_id: str
    _: KW_ONLY
    read: bool  # the client offers fs/read_text_file
    write: bool  # ... and fs/write_text_file
    local: FileSystem = field(default_factory=LocalFileSystem)

    async def read_text(self, path: Path) -> str:
        if not self.read:  # the editor offers no reads: the disk is the truth
            return await self.local.read_text(path)
        try:
            response = await self.client.read_text_file(
                session_id=self.session_id, path=str(path)
            )
        except (RequestError, ConnectionError) as exc:
            # A refusal, not a reason to read around the editor: the model gets its words.
            raise OSError(f"the editor refused to read it: {client_error(exc)}") from None
        return response.content

    async def write_text(self, path: Path, content: str) -> None:
        if not self.write:
            await self.local.write_text(path, content)
            return
        try:
            await self.client.write_text_file(
                session_id=self.session_id, path=str(path), content=content
            )
        except (RequestError, ConnectionError) as exc:
            raise OSError(f"the editor did not write {path}: {client_error(exc)}") from exc


def client_error(exc: Exception) -> str:
    """A client's error in words: its message and, when it gave them, its details."""
    if isinstance(exc, RequestError):
        data = exc.data
        details = data.get("details") if isinstance(data, dict) else None
        return f"{exc}" + (f" ({details})" if isinstance(details, str) and details else "")
    return str(exc) or type(exc).__name__
