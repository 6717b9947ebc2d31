"""cairn: a terminal AI coding agent with managed long-term memory."""

__version__ = "0.1.0"
