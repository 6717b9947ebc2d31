"""agent: the chat, the one tool loop, compression and the task checkpoint."""

from cairn.agent.task_checkpoint import (
    TASK_CHECKPOINT_PURPOSE,
    CheckpointError,
    TaskCheckpoint,
    UserWords,
    ask_for_checkpoint,
    work_evidence,
)

__all__ = [
    "TASK_CHECKPOINT_PURPOSE",
    "CheckpointError",
    "TaskCheckpoint",
    "UserWords",
    "ask_for_checkpoint",
    "work_evidence",
]
