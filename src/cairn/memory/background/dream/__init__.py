"""Dream: now and then, a background agent consolidates the project memory.

- :mod:`~cairn.memory.background.dream.gates`: whether an automatic Dream may start;
- :mod:`~cairn.memory.background.dream.manifest`: the deletions the dreamer schedules, checked
  as a whole before any is applied;
- :mod:`~cairn.memory.background.dream.run`: one consolidation (lock, agent, apply, record).
"""
