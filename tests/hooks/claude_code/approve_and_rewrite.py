#!/usr/bin/env python3
"""PreToolUse hook for Bash: this project uses pnpm. An npm command is rewritten to pnpm and
allowed without asking; so is `make check`. Everything else goes through the normal
permission flow."""

import json
import sys

event = json.load(sys.stdin)
tool_input = event["tool_input"]
command = tool_input["command"]
if command.startswith("npm "):
    updated = dict(tool_input, command="pnpm " + command[len("npm ") :])
    decision = {"permissionDecision": "allow", "updatedInput": updated}
elif command == "make check":
    decision = {"permissionDecision": "allow", "permissionDecisionReason": "the checks are safe"}
else:
    sys.exit(0)
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", **decision}}))
