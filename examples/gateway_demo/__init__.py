"""`reach serve` on examples/config, called over MCP and over the HTTP API.

Runs offline: ``python -m examples.gateway_demo`` (``make demo``). Needs ``make install``: the
gateway extra, LangChain and LangGraph (the config's LangChain agents) and ``mcp-server-time``.
"""
