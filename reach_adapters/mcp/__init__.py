"""MCP adapter: MCP servers' tools as routable capabilities, and the router served over MCP.

Names load on first use, so `reach_adapters.mcp.options` (what config files validate against)
is importable without the MCP SDK, and a missing ``mcp`` extra is reported in one line.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from reach_adapters.extras import require_extra

if TYPE_CHECKING:
    from reach_adapters.mcp.agent import ConnectReport, MCPServerAgent
    from reach_adapters.mcp.converter import META_PREFIX, MCPConverter, content_to_json
    from reach_adapters.mcp.errors import (
        MCPConnectionError,
        MCPOfflineError,
        MCPProtocolError,
        MCPTimeoutError,
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
    "MCPTimeoutError",
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
    "MCPTimeoutError": "errors",
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


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    try:
        value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    except ModuleNotFoundError:
        # A missing extra is one line naming the install; any other missing module is a bug.
        require_extra("mcp", __name__)
        raise
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
