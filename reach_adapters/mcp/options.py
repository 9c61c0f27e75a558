"""How an MCP server's tools are offered and its session kept: typed options, free of the SDK.

Config files validate against these models, so this module imports neither the MCP SDK nor
anything that does: checking a directory must not need the ``mcp`` extra loaded.
"""

from __future__ import annotations

import sys

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["PYTHON", "MCPOptions", "ReconnectPolicy", "resolve_command"]

# The command that names the interpreter running Agent Reach, in Python and in config files alike.
PYTHON = "python"


def resolve_command(command: str) -> str:
    """The program to start: ``python`` is the interpreter running Agent Reach, so a server
    installed in the same environment is found whatever PATH says; any other name is unchanged."""
    return sys.executable if command == PYTHON else command


class ReconnectPolicy(BaseModel):
    """How a lost server is reconnected in the background: exponential backoff with jitter."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    initial_delay_s: float = Field(0.2, gt=0, le=3600, description="The first wait after a loss.")
    max_delay_s: float = Field(30.0, gt=0, le=3600, description="No wait is longer than this.")
    multiplier: float = Field(2.0, ge=1, le=10, description="Each wait is this many times the last.")
    jitter_s: float = Field(
        0.2,
        ge=0,
        le=60,
        description="Up to this many seconds added to each wait, so replicas that died together "
        "do not reconnect in lockstep.",
    )


class MCPOptions(BaseModel):
    """How one server's tools become capabilities, and how its session is kept.

    The same fields, with the same defaults, are the tuning keys of an ``kind: mcp`` config file.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    instance: str = Field("0", description="Tells replicas of one server apart: 'mcp:<name>:<instance>'.")
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
    http_timeout_s: float = Field(
        30.0, gt=0, le=3600, description="URL servers: connect, write and pool timeout."
    )
    sse_read_timeout_s: float = Field(
        300.0, gt=0, le=86_400, description="URL servers: read timeout of long-lived event streams."
    )
