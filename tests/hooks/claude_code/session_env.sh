#!/usr/bin/env bash
# SessionStart hook: persist environment variables for the session's Bash commands.
if [ -n "$CLAUDE_ENV_FILE" ]; then
  echo 'export PROJECT_KIND=library' >> "$CLAUDE_ENV_FILE"
  echo 'export PATH="$PATH:'"$CLAUDE_PROJECT_DIR"'/tools"' >> "$CLAUDE_ENV_FILE"
fi
exit 0
