"""Metrics label values stay bounded however many names callers make up."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest

from reach_adapters import Capability, FunctionAgent, Router
from reach_adapters.observability.metrics import UNKNOWN_CAPABILITY, ReachMetrics

pytestmark = pytest.mark.timeout(30)


def echo(payload: object) -> object:
    return payload


async def test_unknown_capabilities_share_one_label() -> None:
    async with Router() as router:
        metrics = ReachMetrics(router)
        for index in range(50):
            await router.route(f"made-up-{index}", {})
        # Registered after the metrics were made: its name is a label of its own at once.
        router.register(FunctionAgent(echo, agent_id="util:echo:01", capabilities=[Capability(name="echo")]))
        await router.route("echo", {})
        text = generate_latest(metrics.registry).decode()
    series = [line for line in text.splitlines() if line.startswith("reach_reaches_total{")]
    assert len(series) == 2
    assert f'reach_match_failures_total{{capability="{UNKNOWN_CAPABILITY}"}} 50.0' in text
    assert 'capability="echo"' in text
    assert "made-up" not in text
