"""The background work on memory: Extract and Dream, their agents, gates and state files.

- :mod:`~cairn.memory.background.scheduler`: when Extract and Dream run on one memory space;
- :mod:`~cairn.memory.background.tasks`: task records and what the tasks work on;
- :mod:`~cairn.memory.background.agent_tools`: the memory agents' guarded tool set;
- :mod:`~cairn.memory.background.extract`: one extraction after a turn;
- :mod:`~cairn.memory.background.dream`: consolidation (gates, operations manifest, run);
- :mod:`~cairn.memory.background.cursor`, :mod:`~cairn.memory.background.meta`,
  :mod:`~cairn.memory.background.state_files`: ``extract-cursor.json`` and ``meta.json``;
- :mod:`~cairn.memory.background.pressure`: the memory-pressure gate.
"""
