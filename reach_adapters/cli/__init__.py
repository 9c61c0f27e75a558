"""The ``reach`` command line: serve a config directory, query a running server, scan MCP servers.

``reach --help``, ``check`` and ``schema`` work with the base package; serving, querying and
scanning need the ``gateway`` extra (``pip install 'agent-reach[gateway]'``). See docs/cli.md.
"""

from reach_adapters.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
