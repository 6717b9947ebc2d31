#!/usr/bin/env bash
# PostToolUse hook run with "async": true: audit the call in the background.
input=$(cat)
sleep 0.2
echo "$input" | jq -c '{tool: .tool_name, input: .tool_input}' >> "$CLAUDE_PROJECT_DIR/audit.log"
jq -n --arg tool "$(echo "$input" | jq -r .tool_name)" '{
  systemMessage: ("audited " + $tool),
  hookSpecificOutput: {hookEventName: "PostToolUse", additionalContext: ("AUDITED " + $tool)}
}'
