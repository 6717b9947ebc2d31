#!/usr/bin/env python3
"""PostToolUse hook for Write and Edit: tell Claude when a file it wrote lacks a final newline."""

import json
import sys

event = json.load(sys.stdin)
if event["tool_name"] not in ("Write", "Edit"):
    sys.exit(0)
path = event["tool_input"]["file_path"]
with open(path, encoding="utf-8") as handle:
    text = handle.read()
if text and not text.endswith("\n"):
    print(
        json.dumps(
            {
                "decision": "block",
                "reason": f"{path} does not end with a newline; add one.",
                "hookSpecificOutput": {
                    "hookEventName": "PostToolUse",
                    "additionalContext": "This project's files end with a newline.",
                },
            }
        )
    )
