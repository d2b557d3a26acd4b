"""The package's version: one definition, read by the bridge's handshake, the CLI and the wheel build."""

__version__ = "0.1.0"
