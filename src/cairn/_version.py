"""cairn's version, in a module of its own so that low layers never import the package root."""

__version__ = "0.1.0"
