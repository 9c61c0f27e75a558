"""Live state the router keeps per agent and per (agent, capability) slot."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from reach_adapters.router.agent import Agent, close_agent
from reach_adapters.router.breaker import Breaker
from reach_adapters.router.capability import Capability
from reach_adapters.router.identity import AgentId
from reach_adapters.router.portal import running_loop
from reach_adapters.router.schemas import (
    CompiledSchema,
    first_error,
    json_kind,
    refused_type,
    refused_whole,
    text_of_task,
)

__all__ = ["UNUSABLE_STATES", "AgentRuntime", "AgentState", "Slot", "StateSource", "Waitlist", "wake"]

logger = logging.getLogger(__name__)

# Smoothing of the moving averages: recent calls matter most, one outlier does not swing routing.
_LATENCY_ALPHA = 0.2
_SUCCESS_ALPHA = 0.2


class AgentState(StrEnum):
    ONLINE = "online"
    BUSY = "busy"
    DRAINING = "draining"
    OFFLINE = "offline"
    SUSPICIOUS = "suspicious"
    # Offline, but its adapter is bringing it back: calls may wait for it within their deadline.
    RECONNECTING = "reconnecting"


class StateSource(StrEnum):
    """Who set an agent's state, so that only they lift it: an agent its health probe took
    OFFLINE comes back when a probe succeeds; one its adapter reported OFFLINE waits for the
    adapter to say it is back."""

    ROUTER = "router"
    AGENT = "agent"
    PROBE = "probe"


# States in which an agent takes no calls: never candidates, not counted as usable.
UNUSABLE_STATES = frozenset({AgentState.OFFLINE, AgentState.DRAINING, AgentState.RECONNECTING})

# What each state contributes to the health score; DRAINING and OFFLINE are never candidates.
_STATE_HEALTH = {
    AgentState.ONLINE: 1.0,
    AgentState.BUSY: 0.5,
    AgentState.SUSPICIOUS: 0.3,
    AgentState.DRAINING: 0.0,
    AgentState.OFFLINE: 0.0,
    AgentState.RECONNECTING: 0.0,
}


@dataclass(slots=True, eq=False)
class AgentRuntime:
    """One registered agent: its identity, state, breaker and call statistics."""

    agent: Agent
    agent_id: str
    ident: AgentId
    breaker: Breaker
    state: AgentState = AgentState.ONLINE
    state_reason: str = ""
    state_source: StateSource = StateSource.ROUTER
    in_flight: int = 0
    # Calls past their deadline whose work still runs (a sync function's thread): in `in_flight` too.
    stuck: int = 0
    calls: int = 0
    failures: int = 0
    avg_ms: float = 0.0
    success_rate: float = 1.0
    probe_failures: int = 0
    slots: list[Slot] = field(default_factory=list)
    # Who waits for the agent to have nothing in flight (a drain, a deferred close); made on demand.
    idle: Waitlist | None = None
    # Hosted by another node of a cluster (an agent with a ``hosted_on`` node): a call costs a hop.
    remote: bool = field(init=False, default=False)
    # It streams (``astream``): only then can a call's `stream_mode` or `subgraphs` shape its
    # chunks; an agent that does not answers once (see `selection.exclusion`).
    streams: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        self.remote = getattr(self.agent, "hosted_on", None) is not None
        self.streams = getattr(self.agent, "astream", None) is not None

    @property
    def health(self) -> float:
        return _STATE_HEALTH[self.state] * self.success_rate

    @property
    def usual_ms(self) -> float | None:
        """How long its successful calls take, of whichever capability (a moving average), None
        before the first one: what the catalog shows, and a capability's figure before its first
        success (`Slot.usual_ms`)."""
        return self.avg_ms if self.calls > self.failures else None

    def record(self, success: bool, elapsed_ms: float) -> bool:
        """Count one outcome; return True when it opened the agent's circuit. `Slot.record`
        calls it, and moves the capability's own average.

        Only successes move the average latency: a hung agent's timeouts must not make its
        usual latency look like the timeout.
        """
        self.calls += 1
        if success:
            first = self.calls - self.failures == 1
            self.avg_ms = elapsed_ms if first else self.avg_ms + _LATENCY_ALPHA * (elapsed_ms - self.avg_ms)
        else:
            self.failures += 1
        self.success_rate += _SUCCESS_ALPHA * ((1.0 if success else 0.0) - self.success_rate)
        return self.breaker.record(success, time.monotonic())

    def set_state(self, state: AgentState, reason: str, source: StateSource) -> bool:
        """Move to `state`, said by `source`; whether that changed the agent's usability.

        A DRAINING agent is leaving: only going OFFLINE may still be reported. One back from
        being down is probed by its next call, rather than serve out a quarantine it earned
        while down, and callers waiting for it look again.
        """
        if self.state is AgentState.DRAINING and state is not AgentState.OFFLINE:
            return False
        was_usable = self.state not in UNUSABLE_STATES
        if self.state is not state:
            logger.info("agent %s: %s -> %s (%s)", self.agent_id, self.state, state, reason)
        self.state, self.state_reason, self.state_source = state, reason, source
        if was_usable is not (state in UNUSABLE_STATES):
            return False
        if not was_usable:
            self.breaker.recovered()
            for slot in self.slots:
                slot.waitlist.wake_all()
        return True

    async def close_when_idle(self) -> None:
        """Close the agent once its calls are done, or their longest timeout has passed."""
        limit_s = max((slot.capability.timeout_ms for slot in self.slots), default=30_000) / 1000.0
        await self.until_idle(limit_s)
        await close_agent(self.agent)

    async def until_idle(self, timeout: float) -> bool:
        """Wait until no call is in flight on the agent, for at most `timeout` seconds; whether
        it is idle then."""
        end = time.monotonic() + timeout
        while self.in_flight:
            remaining = end - time.monotonic()
            if remaining <= 0:
                return False
            if self.idle is None:
                self.idle = Waitlist()
            try:
                await self.idle.wait(remaining)
            except TimeoutError:
                return False
        return True


class Waitlist:
    """Callers waiting for capacity on one capability, woken one at a time as calls finish."""

    __slots__ = ("_waiters",)

    def __init__(self) -> None:
        self._waiters: deque[asyncio.Future[None]] = deque()

    def __len__(self) -> int:
        return len(self._waiters)

    async def wait(self, timeout: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        try:
            async with asyncio.timeout(timeout):
                await future
        except BaseException:
            if future.done() and not future.cancelled():
                # Woken but leaving anyway: hand the freed capacity to the next caller.
                self.wake_one()
            raise
        finally:
            if not future.done() or future.cancelled():
                # Not woken (a timeout or a cancel, which cancels the future): it must not stay
                # behind in the line, where nothing would ever take it out.
                future.cancel()
                with contextlib.suppress(ValueError):
                    self._waiters.remove(future)

    def wake_all(self) -> None:
        """Everyone looks again: an agent came back, which may change more than one slot's room."""
        while self._waiters:
            self.wake_one()

    def wake_one(self) -> None:
        while self._waiters:
            if wake(self._waiters.popleft()):
                return


def wake(future: asyncio.Future[None]) -> bool:
    """Wake the caller waiting on `future`, from any thread; False when no one waits on it."""
    if future.done():
        return False
    loop = future.get_loop()
    if loop.is_closed():
        return False
    if running_loop() is loop:
        # Resolved now, so a waiter cancelled before it runs still passes the wake on.
        future.set_result(None)
    else:
        loop.call_soon_threadsafe(_resolve, future)
    return True


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


@dataclass(slots=True, eq=False)
class Slot:
    """One capability of one agent: the unit that selection ranks and limits.

    The validators, and the agent's `adapt_payload` if it has one, are looked up once here so
    each delivery reads a plain attribute.
    """

    runtime: AgentRuntime
    capability: Capability
    waitlist: Waitlist
    input_validator: CompiledSchema | None = None
    output_validator: CompiledSchema | None = None
    object_input: bool = False
    # Declared to take exactly any JSON object (`Capability.object_only`): checked by type alone.
    object_only: bool = False
    # Whether admission checks payloads at all (a validator, or object_only): one test per call.
    checks_input: bool = False
    adapt: Callable[[str, Any], Any] | None = None
    # The agent's own name for the capability, when the router serves it under another one.
    own_name: str | None = None
    in_flight: int = 0
    swrr_current: float = 0.0
    # How long its successful calls take (a moving average), None before the first one: an MCP
    # server's 2 ms echo and 2 s report are not judged by one figure.
    avg_ms: float | None = None

    def __post_init__(self) -> None:
        cap = self.capability
        self.input_validator = cap.input_validator if cap.checks_input else None
        self.output_validator = cap.output_validator
        self.object_input = cap.input_schema.get("type") == "object"
        self.object_only = cap.object_only
        self.checks_input = self.input_validator is not None or self.object_only
        adapt = getattr(self.runtime.agent, "adapt_payload", None)
        self.adapt = adapt if callable(adapt) else None

    @property
    def agent_id(self) -> str:
        return self.runtime.agent_id

    @property
    def usual_ms(self) -> float | None:
        """How long the agent's successful calls of this capability take; before the first one,
        of any of its capabilities (`AgentRuntime.usual_ms`); None before any."""
        avg = self.avg_ms
        return self.runtime.usual_ms if avg is None else avg

    def record(self, success: bool, elapsed_ms: float) -> bool:
        """Count one outcome in this capability's latency and the agent's statistics; return
        True when it opened the agent's circuit (`AgentRuntime.record`)."""
        if success:
            avg = self.avg_ms
            self.avg_ms = elapsed_ms if avg is None else avg + _LATENCY_ALPHA * (elapsed_ms - avg)
        return self.runtime.record(success, elapsed_ms)

    def adapted(self, payload: Any) -> Any:
        """`payload` as the slot's agent reads it (`Agent.adapt_payload`: a plain text for a chat
        agent), asked under the agent's own name for the capability."""
        if self.adapt is None:
            return payload
        return self.adapt(self.own_name or self.capability.name, payload)

    def fits(self, payload: object) -> bool:
        """Whether `payload` fits this slot's input schema as it is. No payload means no
        arguments for a capability that takes an object."""
        if payload is None and self.object_input:
            payload = {}
        if self.object_only:
            return isinstance(payload, dict)
        validator = self.input_validator
        return validator is None or validator.is_valid(payload)

    def input_problem(self, payload: object) -> str | None:
        """What is wrong with `payload` for this slot's input schema, or None when it fits."""
        if self.fits(payload):
            return None
        if payload is None and self.object_input:
            payload = {}
        validator = self.input_validator
        problem: str | None
        if self.object_only or validator is None:
            problem = f"it takes a JSON object, got {json_kind(payload)}"
        else:
            problem = first_error(validator, payload)
            text = text_of_task(payload)
            if text is not None and refused_whole(validator, payload) and not refused_type(validator, text):
                # A text task (A2A text) for a schema of text that refuses its text: why it does.
                problem = first_error(validator, text) or problem
        name = self.capability.name
        return f"payload does not match the input schema of {name!r} at {self.agent_id}: {problem}"

    def text_read(self, payload: object) -> str | None:
        """The text of a text task's ``{"text": ...}`` (an A2A message of text parts) when the
        input schema takes that text: asked only of a payload the schema refused, so an object
        the schema takes as it is stays one."""
        text = text_of_task(payload)
        validator = self.input_validator
        if text is None or validator is None or self.object_only or not validator.is_valid(text):
            return None
        return text

    def refuses(self, payload: object) -> str | None:
        """What is wrong with `payload` for this slot (`input_problem`), None when it fits as it
        is or as a text task's text (`text_read`)."""
        if self.fits(payload) or self.text_read(payload) is not None:
            return None
        return self.input_problem(payload)

    def saturation(self) -> str | None:
        """Why the slot takes no more calls now (it is at max_concurrency), or None."""
        limit = self.capability.max_concurrency
        if self.in_flight >= limit:
            return f"saturated: {self.in_flight} in flight, max_concurrency {limit}"
        return None
