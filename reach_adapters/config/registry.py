"""``registry:`` in the routing policy file: the cluster `reach serve` joins without ``--registry``.

Not a `RoutingPolicy` field: the router never reads it, and a running node does not move to
another cluster on a hot reload (see `Gateway`); it is read when `reach serve` starts.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "DEFAULT_LEASE_TTL_S",
    "DEFAULT_VISIBILITY_TIMEOUT_S",
    "MIN_LEASE_TTL_S",
    "MIN_VISIBILITY_TIMEOUT_S",
    "PREFIX_PATTERN",
    "REGISTRY_SCHEMES",
    "RegistrySettings",
]

# The same values as ClusterNode's and ClusterTasks' (reach_adapters.cluster, which needs
# redis-py): the config is checked without the cluster extra; tests/config/test_registry.py keeps
# them equal.
DEFAULT_LEASE_TTL_S = 15.0
MIN_LEASE_TTL_S = 0.5
DEFAULT_VISIBILITY_TIMEOUT_S = 30.0
MIN_VISIBILITY_TIMEOUT_S = 0.3
REGISTRY_SCHEMES = ("redis://", "rediss://", "unix://")
# No character SCAN MATCH reads as a pattern: one cluster's resync must not read another's leases.
PREFIX_PATTERN = r"^[A-Za-z0-9_.:\-]{1,64}$"


class RegistrySettings(BaseModel):
    """The Redis whose cluster this process joins as a node; command-line flags win over each field."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(
        description="The cluster's Redis: redis://HOST:PORT/DB (or rediss://, unix://); --registry wins.",
        examples=["redis://127.0.0.1:6379/0"],
    )
    node_id: str | None = Field(
        None, min_length=1, description="This node's id; --node-id wins (default: HOSTNAME-RANDOM)."
    )
    lease_ttl_s: float = Field(
        DEFAULT_LEASE_TTL_S,
        ge=MIN_LEASE_TTL_S,
        strict=True,
        allow_inf_nan=False,
        description="Seconds a lease of this node's agents lasts, renewed every third of it; "
        "--lease-ttl wins.",
    )
    prefix: str = Field(
        "reach:",
        description="Prefix of the cluster's Redis keys: clusters sharing a database; 1 to 64 letters, "
        "digits, '_', '.', ':', '-'.",
        # For editors; `_prefix` checks it with a message of its own.
        json_schema_extra={"pattern": PREFIX_PATTERN},
    )
    task_visibility_timeout_s: float = Field(
        DEFAULT_VISIBILITY_TIMEOUT_S,
        ge=MIN_VISIBILITY_TIMEOUT_S,
        strict=True,
        allow_inf_nan=False,
        description="Seconds an async task running on a node that went silent waits before another "
        "node takes it over (again if safe to repeat, else as outcome unknown).",
    )

    @field_validator("url")
    @classmethod
    def _scheme(cls, url: str) -> str:
        if not url.startswith(REGISTRY_SCHEMES):
            msg = f"{url!r} is not a Redis URL; give redis://HOST:PORT/DB (or rediss://, unix://)"
            raise ValueError(msg)
        return url

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, prefix: str) -> str:
        if not re.match(PREFIX_PATTERN, prefix):
            msg = (
                f"{prefix!r} is not a cluster key prefix; use 1 to 64 letters, digits, '_', '.', ':', '-' "
                "(no glob characters such as '*', '?', '[' or ']'), e.g. 'reach:' or 'team1:'"
            )
            raise ValueError(msg)
        return prefix
