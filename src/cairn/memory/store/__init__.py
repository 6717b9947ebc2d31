"""Where memories are kept and how they are read fast.

- :mod:`~cairn.memory.store.parse`, :mod:`~cairn.memory.store.entries`: the memory file format;
- :mod:`~cairn.memory.store.scan`, :mod:`~cairn.memory.store.watch`: finding files and changes;
- :mod:`~cairn.memory.store.tokenizer`, :mod:`~cairn.memory.store.scorer`,
  :mod:`~cairn.memory.store.lexical_index`: the fast phase's ranking;
- :mod:`~cairn.memory.store.records`, :mod:`~cairn.memory.store.cache`,
  :mod:`~cairn.memory.store.journal`, :mod:`~cairn.memory.store.bulk`: the parse cache and
  its saved form (a snapshot plus a journal; a first scan in worker processes);
- :mod:`~cairn.memory.store.shard`: one root's records, index and saved index, kept current;
- :mod:`~cairn.memory.store.memory_store`: :class:`MemoryStore`, the roots ranked together;
- :mod:`~cairn.memory.store.index_file`: the generated ``MEMORY.md``;
- :mod:`~cairn.memory.store.locks`, :mod:`~cairn.memory.store.history`: cross-process locks
  and the audit trail.
"""
