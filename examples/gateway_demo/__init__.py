"""`reach serve` on examples/config, called over MCP and over the HTTP API.

Runs offline: ``python -m examples.gateway_demo``.
"""
