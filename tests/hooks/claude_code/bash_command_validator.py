#!/usr/bin/env python3
"""PreToolUse hook for the Bash tool: refuse commands that have a better tool.

Written to Claude Code's hooks contract: the event arrives as JSON on stdin; exit code 2 blocks
the call and stderr tells Claude why; any other tool is left alone.
"""

import json
import re
import sys

RULES = [
    (r"^grep\b(?!.*\|)", "Use 'rg' (ripgrep) instead of 'grep': it is faster"),
    (r"^find\s+\S+\s+-name\b", "Use 'rg --files -g pattern' instead of 'find -name'"),
]

try:
    event = json.load(sys.stdin)
except json.JSONDecodeError as exc:
    print(f"invalid hook input: {exc}", file=sys.stderr)
    sys.exit(1)

if event.get("tool_name") != "Bash":
    sys.exit(0)
command = event.get("tool_input", {}).get("command", "")
problems = [message for pattern, message in RULES if re.search(pattern, command)]
if problems:
    for message in problems:
        print(f"- {message}", file=sys.stderr)
    sys.exit(2)
