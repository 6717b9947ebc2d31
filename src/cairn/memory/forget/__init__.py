"""Forget: remove the memories a request names, into a trash folder they can be restored from.

- :mod:`~cairn.memory.forget.selection`: which entries a request names (model, else substring);
- :mod:`~cairn.memory.forget.trash`: moving them to the trash, and restoring the last forget.
"""
