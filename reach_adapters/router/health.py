"""Active health probes for agents that can be probed."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from reach_adapters.router.policy import RoutingPolicy
from reach_adapters.router.registry import Registry
from reach_adapters.router.state import AgentRuntime, AgentState, StateSource

__all__ = ["HealthMonitor"]

logger = logging.getLogger(__name__)


class HealthMonitor:
    """Probes every agent with ``async probe() -> bool`` on an interval.

    One failure makes an agent SUSPICIOUS, `probe_failures` in a row take it OFFLINE until a probe
    succeeds. Agents without `probe` are judged by their call results (the circuit breaker).
    """

    def __init__(
        self,
        registry: Registry,
        policy: RoutingPolicy,
        set_state: Callable[[AgentRuntime, AgentState, str, StateSource], None],
    ) -> None:
        self._registry = registry
        self._policy = policy
        self._set_state = set_state
        self._task: asyncio.Task[None] | None = None

    def reconfigure(self, policy: RoutingPolicy) -> None:
        """The next probe round uses the new interval, timeout and failure count."""
        self._policy = policy

    @property
    def running(self) -> bool:
        task = self._task
        # Probing on a loop that no longer runs (a setup `run_until_complete`) probes nothing.
        return task is not None and not task.done() and task.get_loop().is_running()

    def start(self) -> None:
        """Start probing on the running loop; a no-op when already running."""
        if not self.running:
            _stop(self._task)
            self._task = asyncio.get_running_loop().create_task(self._run(), name="agent-reach-health")

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done() and task.get_loop() is asyncio.get_running_loop():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        else:
            _stop(task)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._policy.probe_interval_s)
            await self.probe_all()

    async def probe_all(self) -> None:
        runtimes = [rt for rt in self._registry if callable(getattr(rt.agent, "probe", None))]
        if runtimes:
            await asyncio.gather(*(self._probe(runtime) for runtime in runtimes))

    async def _probe(self, runtime: AgentRuntime) -> None:
        try:
            async with asyncio.timeout(self._policy.probe_timeout_s):
                healthy = bool(await runtime.agent.probe())  # type: ignore[attr-defined]
        except Exception as exc:  # noqa: BLE001 - a probe that raises is a failed probe
            logger.debug("probe of %s raised %r", runtime.agent_id, exc)
            healthy = False
        if runtime.state is AgentState.DRAINING:
            return
        if healthy:
            runtime.probe_failures = 0
            probed_out = runtime.state_source is StateSource.PROBE
            if runtime.state is AgentState.SUSPICIOUS or (runtime.state is AgentState.OFFLINE and probed_out):
                self._set_state(runtime, AgentState.ONLINE, "health probe succeeded", StateSource.PROBE)
            return
        runtime.probe_failures += 1
        if runtime.probe_failures >= self._policy.probe_failures:
            # An agent its adapter is reconnecting says so itself, and says when it is back.
            if runtime.state is not AgentState.OFFLINE and runtime.state is not AgentState.RECONNECTING:
                self._set_state(runtime, AgentState.OFFLINE, "health probe failed", StateSource.PROBE)
        elif runtime.state is AgentState.ONLINE:
            self._set_state(runtime, AgentState.SUSPICIOUS, "health probe failed once", StateSource.PROBE)


def _stop(task: asyncio.Task[None] | None) -> None:
    """Cancel probing that runs, or waits, on another loop than this one (which cannot await it):
    through that loop while it runs (in another thread), at once while it is stopped."""
    if task is None or task.done():
        return
    loop = task.get_loop()
    if loop.is_running():
        loop.call_soon_threadsafe(task.cancel)
    elif not loop.is_closed():
        task.cancel()
