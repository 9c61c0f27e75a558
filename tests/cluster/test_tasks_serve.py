"""Two `reach serve --registry` processes share async tasks over HTTP: submitted on one node,
read on the other, both answered by whichever node ran it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.gateway.conftest import ReachServer, write
from tests.redis_server import RedisServer

Serve = Callable[..., ReachServer]


def node(serve: Serve, tmp_path: Path, redis: RedisServer, name: str) -> ReachServer:
    directory = tmp_path / name
    directory.mkdir()
    agent_id = f"util:echo:{name}"
    write(
        directory,
        f"{agent_id}.yaml",
        f"kind: function\nagent_id: {agent_id}\nfunction: tests.gateway.agents:echo\n",
    )
    return serve(directory, "--registry", redis.url, "--node-id", name)


def test_a_task_posted_to_one_node_is_read_on_the_other(
    serve: Serve, tmp_path: Path, own_redis: RedisServer
) -> None:
    a, b = node(serve, tmp_path, own_redis, "a"), node(serve, tmp_path, own_redis, "b")
    posted = a.api("POST", "/tasks", json={"capability": "echo", "payload": {"text": "hi"}})
    assert posted.status_code == 202, posted.text
    task_id = posted.json()["task_id"]
    done = b.api("GET", f"/tasks/{task_id}", params={"wait": "20"}).json()
    assert (done["status"], done["result"]["payload"]) == ("ok", {"text": "hi"})
    assert [task["task_id"] for task in a.api("GET", "/tasks").json()] == [task_id]
    assert b.api("GET", "/tasks", params={"status": "dead_letter"}).json() == []
