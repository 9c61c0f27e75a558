"""Two nodes (two routers in one process) sharing a registry in a real redis-server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import redis.asyncio as redis

from reach_adapters import FunctionAgent, Router
from reach_adapters.cluster import ClusterError, ClusterNode, Keys
from reach_adapters.router import AgentState, ResultStatus
from tests.waiting import eventually

Join = Callable[..., Awaitable[ClusterNode]]
TTL = 1.2  # short leases keep the tests quick; every wait below is bounded polling


def echo(text: str) -> str:
    """Say it back."""
    return text


def agent(agent_id: str) -> FunctionAgent:
    return FunctionAgent(echo, agent_id=agent_id)


def states(router: Router) -> dict[str, AgentState]:
    return {info.agent_id: info.state for info in router.catalog()}


def nodes_of(router: Router) -> dict[str, str | None]:
    return {info.agent_id: info.node for info in router.catalog()}


@pytest.fixture
async def routers() -> AsyncIterator[tuple[Router, Router]]:
    one, two = Router(), Router()
    one.register(agent("util:echo:one"))
    two.register(agent("util:echo:two"))
    try:
        yield one, two
    finally:
        await one.aclose()
        await two.aclose()


@pytest.fixture
def join(redis_url: str, prefix: str) -> Join:
    async def joined(router: Router, node_id: str, ttl: float = TTL) -> ClusterNode:
        return await ClusterNode.join(router, redis_url, node_id=node_id, lease_ttl_s=ttl, prefix=prefix)

    return joined


async def test_two_nodes_list_each_others_agents_with_their_node(
    routers: tuple[Router, Router], join: Join
) -> None:
    one, two = routers
    node1 = await join(one, "n1")
    node2 = await join(two, "n2")
    try:
        # node 2 read the catalog when it joined; node 1 hears of node 2 by pub/sub or resync.
        assert nodes_of(two) == {"util:echo:two": None, "util:echo:one": "n1"}
        await eventually(lambda: "util:echo:two" in one, timeout=10, what="node 2's agent listed on node 1")
        assert nodes_of(one)["util:echo:two"] == "n2"
        assert states(one)["util:echo:two"] is AgentState.ONLINE
        remote = next(info for info in one.catalog() if info.agent_id == "util:echo:two")
        assert [cap.name for cap in remote.capabilities] == ["echo"]
    finally:
        await node1.aclose()
        await node2.aclose()


async def test_two_nodes_hosting_one_agent_id_keep_their_own_leases(
    routers: tuple[Router, Router], join: Join, redis_url: str, prefix: str
) -> None:
    one, two = routers
    one.register(agent("util:echo:same"))
    two.register(agent("util:echo:same"))
    three = Router()
    node1 = await join(one, "n1")
    node2 = await join(two, "n2")
    node3 = await join(three, "n3")
    client = redis.Redis.from_url(redis_url)
    keys = Keys(prefix)
    try:
        # One lease per (node, agent): neither node's renewal overwrites the other's.
        both = (keys.lease("n1", "util:echo:same"), keys.lease("n2", "util:echo:same"))
        assert await client.exists(*both) == 2
        assert nodes_of(three)["util:echo:same"] in {"n1", "n2"}
        first = nodes_of(three)["util:echo:same"]
        leaving, staying = (node1, "n2") if first == "n1" else (node2, "n1")
        await leaving.aclose()
        # The leaving node deleted its own lease only; the other node's takes its place.
        await eventually(
            lambda: nodes_of(three).get("util:echo:same") == staying, timeout=10, what="the other host listed"
        )
        assert await client.exists(keys.lease(staying, "util:echo:same")) == 1
        served = await three.send("util:echo:same", {"text": "hi"})
        assert (served.status, served.payload) == (ResultStatus.OK, "hi")
        # Each host still serves its own agent under that id.
        assert (await one.send("util:echo:same", {"text": "1"})).payload == "1"
        assert (await two.send("util:echo:same", {"text": "2"})).payload == "2"
    finally:
        await client.aclose()
        for node in (node1, node2, node3):
            await node.aclose()
        await three.aclose()


async def test_closing_the_router_makes_its_node_leave(routers: tuple[Router, Router], join: Join) -> None:
    one, two = routers
    node1 = await join(one, "n1")
    node2 = await join(two, "n2", ttl=60.0)
    try:
        assert "util:echo:one" in two
        await one.aclose()
        # Long before a 60 s lease could end: the node left with its router.
        await eventually(lambda: "util:echo:one" not in two, timeout=10, what="node 1's agent unlisted")
        assert node1.stats.lease_renewals >= 1
        await node1.aclose()  # closing it again does nothing
    finally:
        await node2.aclose()


async def test_an_agent_deregistered_on_one_node_disappears_on_the_other(
    routers: tuple[Router, Router], join: Join
) -> None:
    one, two = routers
    one.register(agent("util:echo:extra"))
    node1 = await join(one, "n1")
    node2 = await join(two, "n2")
    try:
        assert "util:echo:extra" in two
        await one.deregister("util:echo:extra")
        await eventually(lambda: "util:echo:extra" not in two, timeout=10, what="agent unlisted on node 2")
        assert "util:echo:one" in two
        one.register(agent("util:echo:late"))
        await eventually(lambda: "util:echo:late" in two, timeout=10, what="a new agent listed on node 2")
    finally:
        await node1.aclose()
        await node2.aclose()


async def test_a_node_leaving_cleanly_takes_its_agents_off_the_others(
    routers: tuple[Router, Router], join: Join
) -> None:
    one, two = routers
    node1 = await join(one, "n1")
    node2 = await join(two, "n2", ttl=60.0)
    try:
        assert "util:echo:one" in two
        await node1.aclose()
        # Long before a 60 s lease could end: the leases were deleted and announced.
        await eventually(lambda: "util:echo:one" not in two, timeout=10, what="node 1's agent unlisted")
        assert "util:echo:one" in one
        assert "util:echo:two" not in one
    finally:
        await node2.aclose()


async def test_a_silent_node_goes_suspicious_then_offline_and_comes_back_with_its_ids(
    routers: tuple[Router, Router], join: Join
) -> None:
    one, two = routers
    node1 = await join(one, "n1")
    node2 = await join(two, "n2")
    try:
        assert states(two)["util:echo:one"] is AgentState.ONLINE
        await node1.aclose(deregister=False)  # stops renewing, leaves its leases to expire
        await eventually(
            lambda: states(two).get("util:echo:one") is AgentState.SUSPICIOUS,
            timeout=10,
            what="node 1's agent SUSPICIOUS on node 2",
        )
        reason = next(info.state_reason for info in two.catalog() if info.agent_id == "util:echo:one")
        assert "not renewed" in reason
        await eventually(lambda: "util:echo:one" not in two, timeout=10, what="node 1's agent removed")
        node1 = await join(one, "n1")
        await eventually(
            lambda: states(two).get("util:echo:one") is AgentState.ONLINE,
            timeout=10,
            what="node 1's agent back on node 2",
        )
    finally:
        await node1.aclose()
        await node2.aclose()


async def test_leases_are_one_key_each_with_the_ttl(
    routers: tuple[Router, Router], join: Join, redis_url: str, prefix: str
) -> None:
    one, _ = routers
    node1 = await join(one, "n1", ttl=30.0)
    client = redis.Redis.from_url(redis_url)
    try:
        key = Keys(prefix).lease("n1", "util:echo:one")
        assert 20_000 < await client.pttl(key) <= 30_000
        assert [k async for k in client.scan_iter(match=Keys(prefix).leases)] == [key.encode()]
    finally:
        await client.aclose()
        await node1.aclose()


async def test_joining_an_unreachable_registry_says_so(router: Router) -> None:
    from tests.redis_server import free_port

    with pytest.raises(ClusterError, match="cannot reach the cluster registry"):
        await ClusterNode.join(router, f"redis://127.0.0.1:{free_port()}/0", lease_ttl_s=1.2)
    with pytest.raises(ClusterError, match="expected redis://"):
        await ClusterNode.join(router, "http://127.0.0.1:1/0")


async def test_a_node_id_is_held_by_one_live_process(join: Join) -> None:
    first, second = Router(), Router()
    first.register(agent("util:echo:first"))
    node = await join(first, "n1")
    try:
        # A second process under the same id would serve the same inbox: every call twice.
        with pytest.raises(ClusterError, match="node id 'n1' is held by another live process"):
            await join(second, "n1")
        await node.aclose()
        # Left cleanly: the id is free at once.
        node = await join(second, "n1")
    finally:
        await node.aclose()
        await first.aclose()
        await second.aclose()
