"""MCP adapter: MCP servers' tools as routable capabilities, and the router served over MCP."""

# ruff: noqa: E402
# The extra is checked first, so that its absence is one line naming the install, not a traceback.
from reach_adapters.extras import require_extra

require_extra("mcp", "reach_adapters.mcp")

from reach_adapters.mcp.agent import ConnectReport, MCPServerAgent
from reach_adapters.mcp.config import (
    HttpTarget,
    InProcessTarget,
    MCPServerConfig,
    ReconnectPolicy,
    ServerTarget,
    StdioTarget,
)
from reach_adapters.mcp.converter import META_PREFIX, MCPConverter, content_to_json
from reach_adapters.mcp.errors import MCPConnectionError, MCPOfflineError, MCPProtocolError, MCPTimeoutError
from reach_adapters.mcp.serve import MCPEndpoint, serve_mcp, start_mcp_server
from reach_adapters.mcp.server import RouterMCPServer

__all__ = [
    "META_PREFIX",
    "ConnectReport",
    "HttpTarget",
    "InProcessTarget",
    "MCPConnectionError",
    "MCPConverter",
    "MCPEndpoint",
    "MCPOfflineError",
    "MCPProtocolError",
    "MCPServerAgent",
    "MCPServerConfig",
    "MCPTimeoutError",
    "ReconnectPolicy",
    "RouterMCPServer",
    "ServerTarget",
    "StdioTarget",
    "content_to_json",
    "serve_mcp",
    "start_mcp_server",
]
