"""Async tasks over HTTP and the CLI, against a real `reach serve` subprocess (issue 15, item 4):
202 with a task id at once, polling, waiting, cancelling, a full queue, principals kept apart,
and signed callbacks retried until the receiver takes them."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from middleware import ReachMessage
from reach_adapters import verify_callback
from reach_adapters.gateway.callbacks import MAX_DELIVERIES, CallbackSender
from reach_adapters.router.tasks import TaskRecord
from reach_adapters.security.spec import CallbackSpec
from tests.gateway.conftest import ECHO, ReachServer, run_reach, write
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(120)

Serve = Callable[..., ReachServer]

HOLD = "kind: function\nagent_id: util:hold:01\nfunction: tests.gateway.agents:hold\n"
SECRET = "callback-secret-0123456789abcdef0123456789"
TOKENS = {"alice": "alice-token-0123456789", "bob": "bob-token-0123456789", "ops": "ops-token-0123456789"}
SECURITY = """\
principals:
  alice: {token_env: REACH_TEST_ALICE, allow: ["*"]}
  bob: {token_env: REACH_TEST_BOB, allow: ["*"]}
  ops: {token_env: REACH_TEST_OPS, allow: ["*"], role: admin}
callbacks: {backoff_s: 0.1}
"""


def bearer(principal: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[principal]}"}


def submit(server: ReachServer, capability: str, payload: Any, **body: Any) -> httpx.Response:
    headers = body.pop("headers", None)
    return server.api(
        "POST", "/tasks", headers=headers, json={"capability": capability, "payload": payload, **body}
    )


@pytest.fixture
def served(serve: Serve, config_dir: Path) -> ReachServer:
    write(config_dir, "util:echo:01.yaml", ECHO)
    write(config_dir, "util:hold:01.yaml", HOLD)
    return serve(config_dir)


def test_submit_answers_202_and_the_task_is_polled_waited_for_and_cancelled(
    served: ReachServer, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    held = submit(served, "hold", {"release": str(release)})
    assert held.status_code == 202
    task_id = held.json()["task_id"]
    assert held.json()["status"] == "queued"
    assert held.headers["location"] == f"/api/tasks/{task_id}"
    assert served.api("GET", f"/tasks/{task_id}?wait=0.2").json()["status"] == "running"
    cancelled = served.api("DELETE", f"/tasks/{task_id}")
    assert cancelled.status_code == 200
    assert cancelled.json()["status"] == "cancelled"
    assert cancelled.json()["result"]["fault"] == "caller"
    assert served.api("DELETE", f"/tasks/{task_id}").status_code == 409
    echoed = submit(served, "echo", {"text": "hi"}).json()
    done = served.api("GET", f"/tasks/{echoed['task_id']}?wait=20").json()
    assert (done["status"], done["result"]["payload"], done["capability"]) == ("ok", {"text": "hi"}, "echo")
    # The decision record of the routed call is there too.
    assert served.api("GET", f"/explain/{echoed['task_id']}").json()["chosen"] == "util:echo:01"
    listed = served.api("GET", "/tasks?status=ok").json()
    assert [task["task_id"] for task in listed] == [echoed["task_id"]]
    assert served.api("GET", "/tasks/nope").status_code == 404
    assert served.api("DELETE", "/tasks/nope").status_code == 404
    assert served.api("GET", "/tasks?status=done").status_code == 400
    assert served.api("GET", f"/tasks/{task_id}?wait=forever").status_code == 400
    assert submit(served, "echo", {}, options={"principal": "ops"}).status_code == 400
    # Without a signing secret in the server's environment, a callback is refused up front.
    unsigned = submit(served, "echo", {}, callback_url="http://127.0.0.1:9/hook")
    assert unsigned.status_code == 400
    assert "REACH_CALLBACK_SECRET" in unsigned.json()["error"]


def test_a_full_queue_answers_503_with_retry_after(serve: Serve, config_dir: Path, tmp_path: Path) -> None:
    write(config_dir, "util:hold:01.yaml", HOLD)
    write(config_dir, "routing_policy.yaml", "task_workers: 1\ntask_queue_size: 0\n")
    server = serve(config_dir)
    release = tmp_path / "release"
    first = submit(server, "hold", {"release": str(release)})
    assert first.status_code == 202
    refused = submit(server, "hold", {"release": str(release)})
    metrics = httpx.get(f"{server.url}/metrics", timeout=30).text
    assert 'reach_tasks{state="running"} 1.0' in metrics
    assert 'reach_tasks{state="queued"} 0.0' in metrics
    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["error_type"] == "TaskQueueFullError"
    release.touch()
    done = server.api("GET", f"/tasks/{first.json()['task_id']}?wait=20").json()
    assert done["status"] == "ok"
    assert submit(server, "hold", {"release": str(release)}).status_code == 202


def test_principals_see_and_cancel_only_their_own_tasks(
    serve: Serve, config_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for principal, token in TOKENS.items():
        monkeypatch.setenv(f"REACH_TEST_{principal.upper()}", token)
    write(config_dir, "util:hold:01.yaml", HOLD)
    write(config_dir, "security.yaml", SECURITY)
    server = serve(config_dir)
    assert submit(server, "hold", {"release": "x"}).status_code == 401
    task_id = submit(server, "hold", {"release": str(tmp_path / "r")}, headers=bearer("alice")).json()[
        "task_id"
    ]
    for method in ("GET", "DELETE"):
        assert server.api(method, f"/tasks/{task_id}", headers=bearer("bob")).status_code == 404
    assert server.api("GET", "/tasks", headers=bearer("bob")).json() == []
    assert server.api("GET", f"/tasks/{task_id}", headers=bearer("ops")).status_code == 200
    assert [task["task_id"] for task in server.api("GET", "/tasks", headers=bearer("alice")).json()] == [
        task_id
    ]
    assert server.api("GET", f"/explain/{task_id}", headers=bearer("bob")).status_code == 404
    # The CLI calls as the principal its --token names.
    as_alice = run_reach("task", task_id, "--url", server.url, "--token", TOKENS["alice"])
    assert (as_alice.returncode, as_alice.stdout.split(":")[0]) == (0, f"task {task_id}")
    as_bob = run_reach("task", task_id, "--url", server.url, "--token", TOKENS["bob"])
    assert as_bob.returncode == 1
    assert "no async task" in as_bob.stderr
    cancelled = server.api("DELETE", f"/tasks/{task_id}", headers=bearer("alice"))
    assert cancelled.json()["status"] == "cancelled"


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[str, list[tuple[bytes, str]], asyncio.Event]]:
    """A callback receiver on 127.0.0.1 that answers 500 to the first delivery, then 200."""
    received: list[tuple[bytes, str]] = []
    accepted = asyncio.Event()

    async def hook(request: Request) -> JSONResponse:
        received.append((await request.body(), request.headers.get("reach-signature", "")))
        if len(received) == 1:
            return JSONResponse({"error": "not yet"}, 500)
        accepted.set()
        return JSONResponse({})

    app = Starlette(routes=[Route("/hook", hook, methods=["POST"])])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/hook", received, accepted
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 10)
        sock.close()


async def test_a_signed_callback_is_retried_until_the_receiver_takes_it(
    serve: Serve,
    config_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    receiver: tuple[str, list[tuple[bytes, str]], asyncio.Event],
) -> None:
    url, received, accepted = receiver
    for principal, token in TOKENS.items():
        monkeypatch.setenv(f"REACH_TEST_{principal.upper()}", token)
    monkeypatch.setenv("REACH_CALLBACK_SECRET", SECRET)
    write(config_dir, "util:echo:01.yaml", ECHO)
    write(config_dir, "security.yaml", SECURITY)
    server = serve(config_dir)
    async with httpx.AsyncClient(base_url=server.api_url, headers=bearer("alice"), timeout=30) as client:
        answer = await client.post(
            "/tasks", json={"capability": "echo", "payload": {"n": 7}, "callback_url": url}
        )
        assert answer.status_code == 202
        await asyncio.wait_for(accepted.wait(), 30)
    assert len(received) == 2
    for body, signature in received:
        assert verify_callback(SECRET.encode(), body, signature)
        assert not verify_callback(b"another-secret-0123456789abcdef0123", body, signature)
        task = json.loads(body)
        assert (task["task_id"], task["status"], task["result"]["payload"]) == (
            answer.json()["task_id"],
            "ok",
            {"n": 7},
        )


def test_reach_submit_and_reach_task(served: ReachServer, tmp_path: Path) -> None:
    submitted = run_reach("submit", "echo", '{"text": "hi"}', "--url", served.url)
    assert submitted.returncode == 0, submitted.stderr
    task_id = submitted.stdout.strip()
    waited = run_reach("task", task_id, "--wait", "--timeout", "20", "--url", served.url, "--json")
    assert waited.returncode == 0, waited.stderr
    assert json.loads(waited.stdout)["result"]["payload"] == {"text": "hi"}
    release = tmp_path / "release"
    held = run_reach(
        "submit", "hold", "-", "--url", served.url, "--json", stdin=json.dumps({"release": str(release)})
    )
    held_id = json.loads(held.stdout)["task_id"]
    shown = run_reach("task", held_id, "--url", served.url)
    assert shown.returncode == 0, shown.stderr
    assert held_id in shown.stdout
    assert "running" in shown.stdout or "queued" in shown.stdout
    # Not finished within the wait: exit 1, and the task as it stands.
    unfinished = run_reach("task", held_id, "--wait", "--timeout", "0.5", "--url", served.url)
    assert unfinished.returncode == 1
    cancelled = run_reach("task", held_id, "--cancel", "--url", served.url, "--json")
    assert json.loads(cancelled.stdout)["status"] == "cancelled"
    unknown = run_reach("task", "nope", "--url", served.url)
    assert unknown.returncode == 1
    assert "no async task 'nope'" in unknown.stderr


def test_a_task_id_with_url_characters_names_its_task(served: ReachServer) -> None:
    for task_id in ("a/b", "q?x=1", "h#1"):
        accepted = submit(served, "echo", {"n": 1}, options={"task_id": task_id})
        assert accepted.status_code == 202, accepted.text
        location = accepted.headers["location"]
        polled = httpx.get(f"{served.url}{location}", params={"wait": "10"}, timeout=30)
        assert (polled.status_code, polled.json()["task_id"]) == (200, task_id), location


async def test_callbacks_are_delivered_a_bounded_number_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many tasks finishing against a slow receiver: at most MAX_DELIVERIES connections at once."""
    monkeypatch.setenv("REACH_CALLBACK_SECRET", SECRET)
    held = asyncio.Event()
    now = 0
    most = 0

    async def hook(request: Request) -> JSONResponse:
        nonlocal now, most
        now += 1
        most = max(most, now)
        await held.wait()
        now -= 1
        return JSONResponse({})

    app = Starlette(routes=[Route("/hook", hook, methods=["POST"])])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/hook"
    sender = CallbackSender(CallbackSpec)
    records = [
        TaskRecord(task_id=f"t-{i}", message=ReachMessage(), principal=None, callback_url=url)
        for i in range(MAX_DELIVERIES + 16)
    ]
    try:
        deliveries = [asyncio.create_task(sender(record)) for record in records]
        await eventually(lambda: now == MAX_DELIVERIES, what="the first deliveries at the receiver")
        # The rest wait for a turn however long the receiver takes.
        await asyncio.sleep(0.2)
        assert most == MAX_DELIVERIES
        held.set()
        await asyncio.wait_for(asyncio.gather(*deliveries), 30)
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 10)
        sock.close()
    assert most == MAX_DELIVERIES
