"""Recall: the memories relevant to a prompt, found fast and delivered once.

- :mod:`~cairn.memory.recall.lifecycle`: one session's Recall handle (begin, consume, finish);
- :mod:`~cairn.memory.recall.query`: Recall for one query (fast result, then the selector);
- :mod:`~cairn.memory.recall.candidates`, :mod:`~cairn.memory.recall.selector`: what the model
  selector sees and how its answer is checked;
- :mod:`~cairn.memory.recall.noise`: the recent-tool noise filter;
- :mod:`~cairn.memory.recall.render`: the ``## Relevant memory`` text part.
"""
