"""MCP demo: the project's own MCP server and mcp-server-time behind one router, then served over MCP.

Runs offline: ``python -m examples.mcp_demo``. Needs ``make install``: the mcp extra and
``mcp-server-time``.
"""
