"""How an A2A agent's skills are offered and its calls made: typed options, free of the SDK.

Config files validate against these models, so this module imports neither the A2A SDK nor
anything that does: checking a directory must not need the ``a2a`` extra loaded.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from reach_adapters.router import ReconnectPolicy

__all__ = ["A2AOptions", "ReconnectPolicy"]


class A2AOptions(BaseModel):
    """How one A2A agent's skills become capabilities, and how its calls are made.

    The same fields, with the same defaults, are the tuning keys of a ``kind: a2a`` config file.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    instance: str = Field("0", description="Tells replicas of one agent apart: 'a2a:<name>:<instance>'.")
    timeout_ms: int = Field(
        30_000, gt=0, le=86_400_000, description="Per-call timeout of every skill, long tasks included."
    )
    max_concurrency: int = Field(16, ge=1, le=1_000_000)
    weight: float = Field(50.0, ge=0, le=1_000_000)
    connect_timeout_s: float = Field(
        10.0,
        gt=0,
        le=3600,
        description="Fetching the agent card; also the longest a call waits to connect or for a pooled "
        "connection (at most half its time, so a replica that cannot be reached leaves time for another).",
    )
    http_timeout_s: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="Timeout of HTTP requests made outside a call (a call's own requests get its "
        "capability's remaining time instead).",
    )
    max_connections: int | None = Field(
        None,
        ge=1,
        le=1_000_000,
        description="HTTP connections to the agent at once (a streamed task holds one); default "
        "max_concurrency, and at least 100. A call that finds none free in time is not sent, and "
        "may go elsewhere.",
    )
    cancel_timeout_s: float = Field(
        5.0, gt=0, le=3600, description="How long a CancelTask sent for an abandoned call may take."
    )
    poll_interval_s: float = Field(
        0.5,
        gt=0,
        le=3600,
        description="Between GetTask calls while a task of an agent without streaming is still working.",
    )
    return_immediately: bool = Field(
        False,
        description=(
            "Ask the agent to answer the send at once and follow the task (subscribe or poll): an "
            "agent without streaming can then be told to cancel at any time, at the cost of a round trip."
        ),
    )
    threads: int = Field(
        1024, ge=1, le=1_000_000, description="Conversations (thread_id -> contextId) kept, newest first."
    )
    hop_tokens: bool = Field(
        False,
        description=(
            "The agent is another reach serve that trusts this one's agents: each call carries a "
            "hop token signed with security.yaml's hop_tokens secret (docs/security.md)."
        ),
    )
    reprobe: ReconnectPolicy = Field(
        default_factory=ReconnectPolicy,
        description="How the card of an agent found dead is fetched again until it answers.",
    )
