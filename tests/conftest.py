"""The scripted-server fixtures come from the `cairn` pytest plugin (cairn.testing.fixtures),
registered by the package entry point, as they are for users who install cairn."""
