"""Bringing back a remote agent that was lost: the policy, and the loop that follows it.

An MCP server is reconnected and an A2A agent's card fetched again the same way, so adapters share
one policy (what their config files validate against: no SDK is imported here) and one loop.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["ReconnectPolicy", "reconnect_until"]


class ReconnectPolicy(BaseModel):
    """How a lost agent is brought back in the background: exponential backoff with jitter."""

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
        "are not tried again in lockstep.",
    )

    @model_validator(mode="before")
    @classmethod
    def _jitter_share(cls, data: Any) -> Any:
        """Earlier versions took ``jitter``, a share of the first wait: still read, as seconds."""
        if isinstance(data, dict) and "jitter" in data and "jitter_s" not in data:
            warnings.warn(
                "reconnect 'jitter' (a share of the delay) is deprecated; use 'jitter_s' (seconds)",
                DeprecationWarning,
                stacklevel=2,
            )
            data = dict(data)
            share = data.pop("jitter")
            if isinstance(share, int | float) and not isinstance(share, bool):
                data["jitter_s"] = share * data.get(
                    "initial_delay_s", cls.model_fields["initial_delay_s"].default
                )
            else:
                data["jitter_s"] = share
        return data


async def reconnect_until(attempt: Callable[[], Awaitable[bool]], policy: ReconnectPolicy) -> None:
    """Call `attempt` until it answers True (the agent is back, or no longer needs bringing back).

    The first wait is `policy.initial_delay_s`, so an agent that dies as soon as it is up is not
    tried again in a tight loop; the waits after failed attempts grow by `multiplier` from there,
    plus up to `jitter_s`, each at most `max_delay_s`. An exception `attempt` raises ends the loop;
    cancel the task running it to stop it.
    """
    # The extras whose adapters reconnect bring tenacity; the core's own install does not need it.
    from tenacity import AsyncRetrying, retry_if_result, wait_exponential_jitter

    await asyncio.sleep(policy.initial_delay_s)
    retrying = AsyncRetrying(
        wait=wait_exponential_jitter(
            multiplier=policy.initial_delay_s * policy.multiplier,
            max=policy.max_delay_s,
            exp_base=policy.multiplier,
            jitter=policy.jitter_s,
        ),
        retry=retry_if_result(lambda back: not back),
    )
    await retrying(attempt)
