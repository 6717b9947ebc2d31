"""Tools: the protocol, the built-in tools, their registry, permission rules and approval.

The scheduler (``cairn.tools.scheduler``) is not imported here: it depends on the session's
event types, and importing ``cairn.tools`` must stay cheap. The public names are loaded on first
use, so importing one submodule (``cairn.tools.base``) does not load every tool and the shell
parser.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cairn._lazy import lazy_exports

if TYPE_CHECKING:
    from cairn.tools.ask_user_question import AskUserQuestionTool
    from cairn.tools.base import (
        ConfirmationKind,
        FileDiff,
        FileSystem,
        LocalFileSystem,
        Location,
        PathOutsideWorkspace,
        Question,
        TodoItem,
        Tool,
        ToolContext,
        ToolError,
        ToolKind,
        ToolResult,
        UserInteraction,
    )
    from cairn.tools.edit import EditTool
    from cairn.tools.glob import GlobTool
    from cairn.tools.grep import GrepTool
    from cairn.tools.list_directory import ListDirectoryTool
    from cairn.tools.permissions import (
        ApprovalDecision,
        PermissionRule,
        PermissionRules,
        RuleDecision,
        RuleMatch,
        decide_approval,
    )
    from cairn.tools.read_file import ReadFileTool
    from cairn.tools.registry import ToolRegistry, default_registry
    from cairn.tools.shell import ShellTool
    from cairn.tools.shell_parse import describe_command
    from cairn.tools.shell_readonly import ShellScope, is_read_only_command
    from cairn.tools.todo_write import TodoWriteTool
    from cairn.tools.write_file import WriteFileTool

__all__ = [
    "ApprovalDecision",
    "AskUserQuestionTool",
    "ConfirmationKind",
    "EditTool",
    "FileDiff",
    "FileSystem",
    "GlobTool",
    "GrepTool",
    "ListDirectoryTool",
    "LocalFileSystem",
    "Location",
    "PathOutsideWorkspace",
    "PermissionRule",
    "PermissionRules",
    "Question",
    "ReadFileTool",
    "RuleDecision",
    "RuleMatch",
    "ShellScope",
    "ShellTool",
    "TodoItem",
    "TodoWriteTool",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolKind",
    "ToolRegistry",
    "ToolResult",
    "UserInteraction",
    "WriteFileTool",
    "decide_approval",
    "default_registry",
    "describe_command",
    "is_read_only_command",
]


__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "AskUserQuestionTool": "ask_user_question",
        "ConfirmationKind": "base",
        "FileDiff": "base",
        "FileSystem": "base",
        "LocalFileSystem": "base",
        "Location": "base",
        "PathOutsideWorkspace": "base",
        "Question": "base",
        "TodoItem": "base",
        "Tool": "base",
        "ToolContext": "base",
        "ToolError": "base",
        "ToolKind": "base",
        "ToolResult": "base",
        "UserInteraction": "base",
        "EditTool": "edit",
        "GlobTool": "glob",
        "GrepTool": "grep",
        "ListDirectoryTool": "list_directory",
        "ApprovalDecision": "permissions",
        "PermissionRule": "permissions",
        "PermissionRules": "permissions",
        "RuleDecision": "permissions",
        "RuleMatch": "permissions",
        "decide_approval": "permissions",
        "ReadFileTool": "read_file",
        "ToolRegistry": "registry",
        "default_registry": "registry",
        "ShellTool": "shell",
        "describe_command": "shell_parse",
        "ShellScope": "shell_readonly",
        "is_read_only_command": "shell_readonly",
        "TodoWriteTool": "todo_write",
        "WriteFileTool": "write_file",
    },
    __all__,
)
