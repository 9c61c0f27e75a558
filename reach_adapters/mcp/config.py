"""Typed configuration: where an MCP server is, and how its tools are offered to the router."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

import httpx2
from mcp.server import Server
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from reach_adapters.errors import InvalidDeclarationError, describe_validation_error
from reach_adapters.router.identity import parse_agent_id

__all__ = [
    "HttpTarget",
    "InProcessTarget",
    "MCPServerConfig",
    "ReconnectPolicy",
    "ServerTarget",
    "StdioTarget",
]


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            msg = f"invalid {type(self).__name__}: {describe_validation_error(exc)}"
            raise InvalidDeclarationError(msg) from None


class StdioTarget(_Config):
    """Start the server as a subprocess and speak MCP over its stdin and stdout."""

    kind: Literal["stdio"] = "stdio"
    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] | None = Field(None, description="Merged over the SDK's safe default environment.")
    cwd: Path | None = None

    def describe(self) -> str:
        return " ".join([self.command, *self.args])


class HttpTarget(_Config):
    """Speak MCP over streamable HTTP to a running server."""

    kind: Literal["streamable-http"] = "streamable-http"
    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    auth: httpx2.Auth | None = None
    timeout_s: float = Field(30.0, gt=0, description="Connect, write and pool timeout.")
    sse_read_timeout_s: float = Field(300.0, gt=0, description="Read timeout of long-lived event streams.")

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            msg = f"must be an http:// or https:// URL, got {value!r}"
            raise ValueError(msg)
        return value

    def describe(self) -> str:
        return self.url


class InProcessTarget(_Config):
    """Call a server object living in this process, without any transport."""

    kind: Literal["in-process"] = "in-process"
    server: MCPServer[Any] | Server[Any]

    def describe(self) -> str:
        return f"in-process server {self.server.name!r}"


ServerTarget = Annotated[StdioTarget | HttpTarget | InProcessTarget, Field(discriminator="kind")]


class ReconnectPolicy(_Config):
    """How a lost server is reconnected in the background: exponential backoff with jitter."""

    enabled: bool = True
    initial_delay_s: float = Field(0.2, gt=0, le=3600)
    max_delay_s: float = Field(30.0, gt=0, le=3600)
    multiplier: float = Field(2.0, ge=1, le=10)
    jitter: float = Field(0.2, ge=0, le=1, description="Each delay varies by up to this share.")

    def delays(self) -> Iterator[float]:
        delay = self.initial_delay_s
        while True:
            # Jitter keeps replicas that died together from reconnecting in lockstep.
            yield delay * (1 + self.jitter * (2 * random.random() - 1))
            delay = min(delay * self.multiplier, self.max_delay_s)


class MCPServerConfig(_Config):
    """One MCP server to connect, and how its tools become capabilities."""

    name: str = Field(description="The agent type: the agent id is 'mcp:<name>:<instance>'.")
    target: ServerTarget
    instance: str = Field("0", description="Tells replicas of one server apart.")
    prefix: str = Field("", description="Prepended to each tool name, to keep non-replicas apart.")
    timeout_ms: int = Field(30_000, gt=0, le=86_400_000, description="Per-call timeout of every tool.")
    max_concurrency: int = Field(16, ge=1, le=1_000_000)
    weight: float = Field(50.0, ge=0, le=1_000_000)
    connect_timeout_s: float = Field(10.0, gt=0, le=3600, description="Handshake plus tool listing.")
    reconnect: ReconnectPolicy = Field(default_factory=ReconnectPolicy)
    relay_requests: bool = Field(
        True,
        description=(
            "Declare sampling and elicitation to the server and pass its requests to the MCP client "
            "calling through the router; off, the server sees a client without them."
        ),
    )

    def model_post_init(self, context: Any, /) -> None:
        try:
            parse_agent_id(self.agent_id)
        except InvalidDeclarationError as exc:
            msg = f"MCP server {self.name!r}: name and instance must form a valid agent id: {exc}"
            raise InvalidDeclarationError(msg) from None

    @property
    def agent_id(self) -> str:
        return f"mcp:{self.name}:{self.instance}"
