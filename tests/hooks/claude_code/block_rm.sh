#!/usr/bin/env bash
# PreToolUse hook for Bash: deny destructive rm with a JSON permission decision (needs jq).
command=$(jq -r '.tool_input.command')
if [[ "$command" == *"rm -rf"* ]]; then
  jq -n '{
    hookSpecificOutput: {
      hookEventName: "PreToolUse",
      permissionDecision: "deny",
      permissionDecisionReason: "Destructive command blocked by hook"
    }
  }'
else
  exit 0
fi
