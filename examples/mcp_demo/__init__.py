"""MCP demo: the project's own MCP server and mcp-server-time behind one router, then served over MCP."""
