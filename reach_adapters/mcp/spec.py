"""Which server an agent speaks to, in the SDK's own terms, and the checks `connect` makes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx2
from mcp import StdioServerParameters
from mcp.server import Server
from mcp.server.mcpserver import MCPServer

from reach_adapters.errors import InvalidDeclarationError
from reach_adapters.mcp.options import MCPOptions, agent_id_problem, url_problem
from reach_adapters.router import checked_options
from reach_adapters.security import redact_args, redact_url

__all__ = ["HttpServer", "ServerParameters", "ServerSpec", "Target", "moved_keywords", "server_spec"]

# What `MCPServerAgent.connect` takes, as the SDK's `mcp.Client` does: a stdio command, the URL of
# a streamable HTTP endpoint, or a server object living in this process.
ServerParameters = StdioServerParameters | str | MCPServer[Any] | Server[Any]


@dataclass(frozen=True, slots=True)
class HttpServer:
    """A streamable HTTP endpoint and what every request to it carries."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    auth: httpx2.Auth | None = None


Target = StdioServerParameters | HttpServer | MCPServer[Any] | Server[Any]


@dataclass(frozen=True, slots=True)
class ServerSpec:
    """One server to connect, checked: its agent type, where it is, and the options."""

    name: str
    target: Target
    options: MCPOptions

    @property
    def agent_id(self) -> str:
        return f"mcp:{self.name}:{self.options.instance}"

    def describe(self) -> str:
        """Where the server is, for messages: its command line, URL, or object name, with secrets
        (a ``--api-key`` value, URL user-info, a ``token=`` parameter) masked."""
        target = self.target
        if isinstance(target, StdioServerParameters):
            return " ".join(redact_args([target.command, *target.args]))
        if isinstance(target, HttpServer):
            return redact_url(target.url)
        return f"in-process server {target.name!r}"


def server_spec(
    name: str,
    server: ServerParameters | None,
    *,
    command: str | None,
    args: Sequence[str],
    headers: Mapping[str, str] | None,
    auth: httpx2.Auth | None,
    options: MCPOptions | Mapping[str, Any] | None,
) -> ServerSpec:
    """Check `connect`'s arguments; every problem is an `InvalidDeclarationError` naming it."""
    if not isinstance(name, str):
        msg = (
            f"MCPServerAgent.connect takes the agent's name first, got {type(name).__name__}; "
            "give the server second: connect('time', StdioServerParameters(...))"
        )
        raise InvalidDeclarationError(msg)
    where = f"MCP server {name!r}"
    if isinstance(args, str):
        # A string is a sequence of one-letter arguments: never what was meant.
        msg = f"{where}: args= takes a list of arguments, got the string {args!r}: args={args.split()!r}"
        raise InvalidDeclarationError(msg)
    if command is not None:
        if server is not None:
            msg = f"{where}: give the server or command=, not both"
            raise InvalidDeclarationError(msg)
        server = StdioServerParameters(command=command, args=list(args))
    elif args:
        msg = f"{where}: args= goes with command=; for StdioServerParameters give them there"
        raise InvalidDeclarationError(msg)
    if server is None:
        msg = (
            f"{where}: give the server: StdioServerParameters(...) or command= (stdio), a URL "
            "(streamable HTTP), or an MCPServer object (in-process)"
        )
        raise InvalidDeclarationError(msg)
    spec = ServerSpec(
        name, _target(where, server, headers, auth), checked_options(MCPOptions, options, where)
    )
    problem = agent_id_problem(spec.agent_id)
    if problem is not None:
        msg = f"{where}: {problem}"
        raise InvalidDeclarationError(msg)
    return spec


def moved_keywords(name: object, moved: Mapping[str, object]) -> None:
    """Say where the keyword arguments `connect` no longer takes went (docs/mcp.md)."""
    if not moved:
        return
    where = f"MCP server {name!r}"
    keyword = min(moved)
    if keyword in MCPOptions.model_fields:
        fix = f"it moved into the options: options=MCPOptions({keyword}=...)"
    elif keyword in ("env", "cwd"):
        fix = f"give StdioServerParameters(command=..., args=..., {keyword}=...) as the server"
    elif keyword == "url":
        fix = "give the URL itself as the server: connect(name, 'http://...')"
    else:
        fix = "connect takes name, server, command=, args=, headers=, auth= and options= (an MCPOptions)"
    msg = f"{where}: connect() takes no {keyword}= keyword; {fix}"
    raise InvalidDeclarationError(msg)


def _target(
    where: str, server: ServerParameters, headers: Mapping[str, str] | None, auth: httpx2.Auth | None
) -> Target:
    if isinstance(server, str):
        problem = url_problem(server)
        if problem is not None:
            msg = f"{where}: {problem}"
            raise InvalidDeclarationError(msg)
        return HttpServer(server, dict(headers or {}), auth)
    if headers is not None or auth is not None:
        msg = f"{where}: headers= and auth= apply to a URL server, not to {type(server).__name__}"
        raise InvalidDeclarationError(msg)
    if isinstance(server, StdioServerParameters):
        if not server.command:
            msg = f"{where}: the command is empty; give the program that starts the server"
            raise InvalidDeclarationError(msg)
        return server
    if isinstance(server, MCPServer | Server):
        return server
    msg = (
        f"{where}: cannot connect to a {type(server).__name__}; give StdioServerParameters, a URL "
        "string or an MCPServer object"
    )
    raise InvalidDeclarationError(msg)
