#!/usr/bin/env bash
# UserPromptSubmit hook: what it prints is added as context for Claude.
cat > /dev/null
echo "Release freeze until Friday: no dependency upgrades."
