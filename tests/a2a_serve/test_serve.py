"""`reach serve` subprocesses as A2A agents: with a security.yaml (who may call and see which
skills), and two nodes of a cluster answering for each other's tasks."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import GetExtendedAgentCardRequest, GetTaskRequest, TaskState

from reach_adapters.a2a.router_card import MATCH_SKILL
from tests.a2a_serve.conftest import message, meta_of, request, task_of, text_of
from tests.gateway.conftest import ECHO, SHOUT, ReachServer, write
from tests.redis_server import RedisServer

pytestmark = pytest.mark.timeout(120)

Serve = Callable[..., ReachServer]

TOKENS = {"alice": "alice-token-0123456789", "bob": "bob-token-0123456789"}
SECURITY = """\
principals:
  alice: {token_env: REACH_TEST_ALICE, allow: [echo]}
  bob: {token_env: REACH_TEST_BOB, allow: ["*"]}
"""


def bearer(principal: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[principal]}"}


@asynccontextmanager
async def a2a_client(url: str, headers: dict[str, str] | None = None) -> AsyncIterator[Client]:
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
        try:
            yield client
        finally:
            await client.close()


async def test_principals_call_and_see_only_their_skills(
    serve: Serve, config_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for principal, token in TOKENS.items():
        monkeypatch.setenv(f"REACH_TEST_{principal.upper()}", token)
    write(config_dir, "util:echo:01.yaml", ECHO)
    write(config_dir, "util:shout:01.yaml", SHOUT)
    write(config_dir, "security.yaml", SECURITY)
    server = serve(config_dir)
    async with httpx.AsyncClient(timeout=30) as http:
        public = await http.get(f"{server.url}/.well-known/agent-card.json")
        anonymous = await http.post(
            f"{server.url}/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
        )
    assert public.status_code == 200
    card = public.json()
    assert [skill["id"] for skill in card["skills"]] == [MATCH_SKILL]
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
    assert card["capabilities"]["extendedAgentCard"] is True
    assert anonymous.status_code == 401
    assert anonymous.headers["WWW-Authenticate"].startswith("Bearer")
    async with a2a_client(server.url, bearer("alice")) as alice:
        extended = await alice.get_extended_agent_card(GetExtendedAgentCardRequest())
        assert [skill.id for skill in extended.skills] == ["echo"]
        echoed = await task_of(alice, request(message({"text": "hi"}, skill="echo")))
        refused = await task_of(alice, request(message({"text": "hi"}, skill="shout")))
    assert echoed.status.state == TaskState.TASK_STATE_COMPLETED
    assert refused.status.state == TaskState.TASK_STATE_REJECTED
    meta = meta_of(refused)
    assert (meta["agent-reach/error_type"], meta["agent-reach/fault"]) == ("PermissionDeniedError", "caller")
    assert not refused.artifacts
    async with a2a_client(server.url, bearer("bob")) as bob:
        extended = await bob.get_extended_agent_card(GetExtendedAgentCardRequest())
        assert sorted(skill.id for skill in extended.skills) == ["echo", "shout"]
        # Tasks are their creator's: bob does not find alice's.
        with pytest.raises(Exception, match=r"not found|TaskNotFound"):
            await bob.get_task(GetTaskRequest(id=echoed.id))
        shouted = await task_of(bob, request(message("hi", skill="shout")))
    assert text_of(shouted) == "HI"


def node(
    serve: Serve, tmp_path: Path, redis: RedisServer, name: str, agent_id: str, agent: str
) -> ReachServer:
    directory = tmp_path / name
    directory.mkdir()
    write(directory, f"{agent_id}.yaml", agent)
    return serve(directory, "--registry", redis.url, "--node-id", name)


async def test_a_task_created_on_one_node_is_answered_by_another(
    serve: Serve, tmp_path: Path, own_redis: RedisServer
) -> None:
    first = node(serve, tmp_path, own_redis, "a", "util:echo:01", ECHO)
    second = node(serve, tmp_path, own_redis, "b", "util:shout:01", SHOUT)
    async with a2a_client(first.url) as client:
        done = await task_of(client, request(message({"text": f"hi {uuid.uuid4().hex}"}, skill="echo")))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    async with a2a_client(second.url) as client:
        read = await client.get_task(GetTaskRequest(id=done.id))
    assert read.status.state == TaskState.TASK_STATE_COMPLETED
    assert read.artifacts == done.artifacts
    assert meta_of(read)["agent-reach/agent_id"] == "util:echo:01"
