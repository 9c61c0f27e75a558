"""MCP adapter: MCP servers' tools as routable capabilities, and the router served over MCP.

Names load on first use, so `reach_adapters.mcp.options` (what config files validate against)
is importable without the MCP SDK, and a missing ``mcp`` extra is reported in one line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reach_adapters.extras import lazy_names

if TYPE_CHECKING:
    from reach_adapters.mcp.agent import ConnectReport, MCPServerAgent
    from reach_adapters.mcp.converter import META_PREFIX, MCPConverter, content_to_json
    from reach_adapters.mcp.errors import (
        MCPConnectionError,
        MCPOfflineError,
        MCPProtocolError,
        MCPSessionExpiredError,
        MCPTimeoutError,
        MCPUnavailableError,
    )
    from reach_adapters.mcp.legacy import HttpTarget, InProcessTarget, MCPServerConfig, StdioTarget
    from reach_adapters.mcp.options import MCPOptions, ReconnectPolicy
    from reach_adapters.mcp.serve import MCPEndpoint, serve_mcp, start_mcp_server
    from reach_adapters.mcp.server import RouterMCPServer, request_principal
    from reach_adapters.mcp.spec import ServerParameters

__all__ = [
    "META_PREFIX",
    "ConnectReport",
    "HttpTarget",
    "InProcessTarget",
    "MCPConnectionError",
    "MCPConverter",
    "MCPEndpoint",
    "MCPOfflineError",
    "MCPOptions",
    "MCPProtocolError",
    "MCPServerAgent",
    "MCPServerConfig",
    "MCPSessionExpiredError",
    "MCPTimeoutError",
    "MCPUnavailableError",
    "ReconnectPolicy",
    "RouterMCPServer",
    "ServerParameters",
    "StdioTarget",
    "content_to_json",
    "request_principal",
    "serve_mcp",
    "start_mcp_server",
]

_MODULES = {
    "ConnectReport": "agent",
    "MCPServerAgent": "agent",
    "META_PREFIX": "converter",
    "MCPConverter": "converter",
    "content_to_json": "converter",
    "request_principal": "server",
    "MCPConnectionError": "errors",
    "MCPOfflineError": "errors",
    "MCPProtocolError": "errors",
    "MCPSessionExpiredError": "errors",
    "MCPTimeoutError": "errors",
    "MCPUnavailableError": "errors",
    "HttpTarget": "legacy",
    "InProcessTarget": "legacy",
    "MCPServerConfig": "legacy",
    "StdioTarget": "legacy",
    "MCPOptions": "options",
    "ReconnectPolicy": "options",
    "MCPEndpoint": "serve",
    "serve_mcp": "serve",
    "start_mcp_server": "serve",
    "RouterMCPServer": "server",
    "ServerParameters": "spec",
}


__getattr__, __dir__ = lazy_names(globals(), "mcp", _MODULES)
