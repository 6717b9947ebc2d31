"""The scripted-server fixtures come from the `cairn` pytest plugin (cairn.testing.fixtures),
registered by the package entry point, as they are for users who install cairn.

Hypothesis runs without its per-example deadline: speed is measured in benchmarks, never
asserted in tests, and a loaded machine made deadline-bound property tests fail at random.
"""

from hypothesis import settings

settings.register_profile("cairn", deadline=None)
settings.load_profile("cairn")
