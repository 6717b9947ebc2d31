#!/usr/bin/env bash
# SessionStart hook: give Claude the project's conventions as additional context.
cat << 'JSON'
{
  "hookSpecificOutput": {
    "hookEventName": "SessionStart",
    "additionalContext": "Project convention: every shell script starts with set -euo pipefail."
  }
}
JSON
