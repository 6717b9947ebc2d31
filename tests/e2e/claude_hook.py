"""A hook script written to Claude Code's documented hooks contract (not to cairn's code): it
reads the event as JSON on stdin, appends it to $HOOK_LOG, and answers as that contract says.

Usage in settings: ``python3 claude_hook.py`` for every event.
"""

import json
import os
import sys

event = json.load(sys.stdin)
with open(os.environ["HOOK_LOG"], "a", encoding="utf-8") as log:
    log.write(json.dumps(event) + "\n")

name = event["hook_event_name"]


def answer(output: dict) -> None:
    print(json.dumps(output))
    sys.exit(0)


if name == "SessionStart":
    answer(
        {
            "hookSpecificOutput": {
                "hookEventName": "SessionStart",
                "additionalContext": f"SESSION-CONTEXT source={event['source']}",
            }
        }
    )
path = event.get("tool_input", {}).get("file_path", "")
if name == "PreToolUse" and os.path.basename(path) == "draft.txt":
    updated = dict(event["tool_input"], file_path=os.path.join(os.path.dirname(path), "final.txt"))
    answer(
        {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "allow",
                "permissionDecisionReason": "drafts go to final.txt",
                "updatedInput": updated,
            }
        }
    )
if name == "PostToolUse":
    answer(
        {
            "decision": "block",
            "reason": "POST-REASON: run the linter next",
            "hookSpecificOutput": {
                "hookEventName": "PostToolUse",
                "additionalContext": "POST-CONTEXT",
            },
        }
    )
if name == "PostToolUseFailure":
    answer(
        {
            "hookSpecificOutput": {
                "hookEventName": "PostToolUseFailure",
                "additionalContext": "FAILURE-CONTEXT: the file may be elsewhere",
            }
        }
    )
if name == "PreCompact":
    print("not during the release", file=sys.stderr)
    sys.exit(2)
if name == "SubagentStop" and not event["stop_hook_active"]:
    answer({"decision": "block", "reason": "Also count the words."})
sys.exit(0)
