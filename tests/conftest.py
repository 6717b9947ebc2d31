pytest_plugins = ["cairn.testing.fixtures"]
