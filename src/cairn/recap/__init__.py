"""Session recap: a 1–2 sentence "where were we" summary, and the away-recap gates."""

from cairn.recap.dialog import (
    filter_to_dialog,
    recent_dialog,
    startup_context_length,
    take_recent_dialog,
)
from cairn.recap.service import extract_recap, generate_session_recap

__all__ = [
    "extract_recap",
    "filter_to_dialog",
    "generate_session_recap",
    "recent_dialog",
    "startup_context_length",
    "take_recent_dialog",
]
