"""Memory you can trust: where a memory came from, whether it still holds, how it changed.

- :mod:`~cairn.memory.trust.evidence`: the workspace files a memory is about, read without
  leaving the workspace, hashed as git does;
- :mod:`~cairn.memory.trust.provenance`: the ``provenance`` front-matter key every memory
  writer stamps (who, session, turn, when, evidence, the verifying command);
- :mod:`~cairn.memory.trust.staleness`: Recall's cheap check of that evidence (stat, hash only
  on change, cached per session).
"""
