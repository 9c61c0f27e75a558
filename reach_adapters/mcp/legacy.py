"""Deprecated: the server configs `MCPServerAgent.start` and `connect_all` took before `connect`
accepted the SDK's own server types. Kept so existing programs run, with a warning."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import httpx2
from mcp import StdioServerParameters
from mcp.server import Server
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, ConfigDict, Field

from reach_adapters.mcp.options import MCPOptions
from reach_adapters.mcp.spec import ServerParameters, ServerSpec, server_spec

__all__ = ["HttpTarget", "InProcessTarget", "MCPServerConfig", "StdioTarget"]


class _Target(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)


class StdioTarget(_Target):
    """Deprecated: pass `mcp.StdioServerParameters` to `MCPServerAgent.connect`."""

    kind: Literal["stdio"] = "stdio"
    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] | None = None
    cwd: Path | None = None


class HttpTarget(_Target):
    """Deprecated: pass the URL to `MCPServerAgent.connect`, with ``headers=`` and ``auth=``."""

    kind: Literal["streamable-http"] = "streamable-http"
    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    auth: httpx2.Auth | None = None
    timeout_s: float = Field(30.0, gt=0)
    sse_read_timeout_s: float = Field(300.0, gt=0)


class InProcessTarget(_Target):
    """Deprecated: pass the server object to `MCPServerAgent.connect`."""

    kind: Literal["in-process"] = "in-process"
    server: MCPServer[Any] | Server[Any]


ServerTarget = Annotated[StdioTarget | HttpTarget | InProcessTarget, Field(discriminator="kind")]


class MCPServerConfig(MCPOptions):
    """Deprecated: ``MCPServerAgent.connect(name, server, options=MCPOptions(...))``."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str
    target: ServerTarget

    @property
    def agent_id(self) -> str:
        return f"mcp:{self.name}:{self.instance}"

    def spec(self) -> ServerSpec:
        """The checked spec `connect` would make of the same settings."""
        options = self.model_dump(include=set(MCPOptions.model_fields), exclude_unset=True)
        target = self.target
        server: ServerParameters
        headers = auth = None
        if isinstance(target, StdioTarget):
            server = StdioServerParameters(
                command=target.command, args=target.args, env=target.env, cwd=target.cwd
            )
        elif isinstance(target, HttpTarget):
            server, headers, auth = target.url, target.headers, target.auth
            options |= {"http_timeout_s": target.timeout_s, "sse_read_timeout_s": target.sse_read_timeout_s}
        else:
            server = target.server
        return server_spec(
            self.name, server, command=None, args=(), headers=headers, auth=auth, options=options
        )
