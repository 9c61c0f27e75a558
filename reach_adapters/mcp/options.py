"""How an MCP server's tools are offered and its session kept: typed options, free of the SDK.

Config files validate against these models, so this module imports neither the MCP SDK nor
anything that does: checking a directory must not need the ``mcp`` extra loaded.
"""

from __future__ import annotations

import sys
from datetime import date
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from reach_adapters.errors import InvalidDeclarationError
from reach_adapters.router import ReconnectPolicy, parse_agent_id
from reach_adapters.security import redact_url

__all__ = ["PYTHON", "MCPOptions", "ReconnectPolicy", "agent_id_problem", "resolve_command", "url_problem"]

# The command that names the interpreter running Agent Reach, in Python and in config files alike.
PYTHON = "python"


def resolve_command(command: str) -> str:
    """The program to start: ``python`` is the interpreter running Agent Reach, so a server
    installed in the same environment is found whatever PATH says; any other name is unchanged."""
    return sys.executable if command == PYTHON else command


def url_problem(url: str) -> str | None:
    """What is wrong with a server URL, if anything: the same rule in Python and in config files."""
    if url.startswith(("http://", "https://")):
        return None
    return f"a URL must start with http:// or https://, got {redact_url(url)!r}"


def agent_id_problem(agent_id: str) -> str | None:
    """Why a server's name and instance do not form a valid agent id, if they do not."""
    try:
        parse_agent_id(agent_id)
    except InvalidDeclarationError as exc:
        return f"its name and instance must form a valid agent id: {exc}"
    return None


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
    protocol: Literal["auto", "2025-11-25"] = Field(
        "auto",
        description=(
            "'auto' negotiates the newest protocol version the server speaks (2026-07-28 with "
            "servers of the MCP SDK 2.x); '2025-11-25' keeps to the initialize handshake, for "
            "servers whose tools ask their client mid-call (ctx.elicit, create_message), which "
            "a 2026-07-28 session cannot carry."
        ),
    )

    task_meta: Literal["auto", "always"] = Field(
        "auto",
        description=(
            "'auto' sends the task (its ids, deadline, lineage and call options, the agent-reach/ "
            "keys of each call's _meta) only to a server that declares it reads them: another "
            "reach router; 'always' sends it to any server, for one that logs the trace id, or a "
            "reach gateway of an earlier version, which reads the task without saying so."
        ),
    )
    hop_tokens: bool = Field(
        False,
        description=(
            "The server is another reach serve that trusts this one's agents: each call carries a "
            "hop token signed with security.yaml's hop_tokens secret (docs/security.md)."
        ),
    )
    http_timeout_s: float = Field(
        30.0, gt=0, le=3600, description="URL servers: connect, write and pool timeout."
    )
    sse_read_timeout_s: float = Field(
        300.0, gt=0, le=86_400, description="URL servers: read timeout of long-lived event streams."
    )

    @field_validator("protocol", mode="before")
    @classmethod
    def _version_written_as_a_date(cls, value: object) -> object:
        """YAML reads an unquoted ``protocol: 2025-11-25`` as a date: it is the version it spells."""
        return value.isoformat() if isinstance(value, date) else value
