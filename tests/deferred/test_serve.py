"""Deferred calls and tasks through a real `reach serve` (issue 17, item 5): ``reach submit
--defer`` and ``reach call --defer`` (``options.defer`` of ``/api/tasks`` and ``/api/route``) wait
for an agent the config does not have yet, ``reach task`` shows the task ``deferred``, and both are
delivered once the agent's file is added to the running server's config."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.gateway.conftest import ECHO, SHOUT, ReachServer, run_reach, write
from tests.waiting import until, wait_until

pytestmark = pytest.mark.timeout(120)

Serve = Callable[..., ReachServer]


def deferred_waiting(server: ReachServer) -> float:
    metrics = httpx.get(f"{server.url}/metrics", timeout=30).text
    found = re.search(r"^reach_deferred_waiting (\S+)$", metrics, re.MULTILINE)
    assert found is not None, metrics
    return float(found.group(1))


async def waiting_is(server: ReachServer, count: int) -> bool:
    return await asyncio.to_thread(deferred_waiting, server) == count


async def test_a_deferred_task_and_call_are_delivered_when_the_agent_is_added(
    serve: Serve, config_dir: Path
) -> None:
    write(config_dir, "util:echo:01.yaml", ECHO)
    server = serve(config_dir)

    submitted = run_reach("submit", "shout", '{"text": "later"}', "--defer", "--url", server.url)
    assert submitted.returncode == 0, submitted.stderr
    task_id = submitted.stdout.strip()
    path = f"/tasks/{task_id}"
    wait_until(lambda: server.api("GET", path).json()["status"] == "deferred", what="the task deferred")
    shown = run_reach("task", task_id, "--url", server.url)
    assert shown.returncode == 0, shown.stderr
    assert f"task {task_id}: deferred (shout)" in shown.stdout

    call = asyncio.create_task(
        asyncio.to_thread(
            run_reach,
            *("call", "shout", '{"text": "now"}', "--defer", "--option", "timeout_ms=50000"),
            *("--json", "--url", server.url),
        )
    )
    await until(lambda: waiting_is(server, 2), what="the call waiting deferred beside the task")
    assert not call.done()

    write(config_dir, "util:shout:01.yaml", SHOUT)
    called = await asyncio.wait_for(call, 60)
    assert called.returncode == 0, called.stderr
    result = json.loads(called.stdout)
    assert result["payload"] == "NOW"
    assert "deferred_ms" in server.api("GET", f"/explain/{result['task_id']}").json()
    done = server.api("GET", f"{path}?wait=20").json()
    assert done["status"] == "ok"
    assert done["result"]["payload"] == "LATER"
    assert deferred_waiting(server) == 0


def test_options_defer_over_http_ends_timeout_when_no_agent_comes(serve: Serve, config_dir: Path) -> None:
    write(config_dir, "util:echo:01.yaml", ECHO)
    server = serve(config_dir)

    body = {"capability": "shout", "payload": {"text": "x"}, "options": {"defer": True, "timeout_ms": 300}}
    result = server.api("POST", "/route", json=body).json()

    assert result["status"] == "timeout"
    assert "waited deferred" in result["error"]
    refused = server.api("POST", "/route", json={**body, "options": {"defer": "maybe"}})
    assert refused.status_code == 400


async def test_a_client_hanging_up_takes_its_deferred_call_out_of_the_queue(
    serve: Serve, config_dir: Path
) -> None:
    write(config_dir, "util:echo:01.yaml", ECHO)
    server = serve(config_dir)
    body = {"capability": "shout", "payload": {"text": "x"}, "options": {"defer": True, "timeout_ms": 60_000}}

    with pytest.raises(httpx.ReadTimeout):
        await asyncio.to_thread(httpx.post, f"{server.api_url}/route", json=body, timeout=1.0)

    # The call left with its client: an agent coming later finds nobody to serve.
    await until(lambda: waiting_is(server, 0), what="the hung-up call out of the deferred queue")
    record = server.api("GET", "/decisions").json()[0]
    assert (record["capability"], record["status"]) == ("shout", "cancelled")


def test_a_server_stopping_answers_the_calls_waiting_deferred(serve: Serve, config_dir: Path) -> None:
    write(config_dir, "util:echo:01.yaml", ECHO)
    server = serve(config_dir)
    body = {"capability": "shout", "payload": {"text": "x"}, "options": {"defer": True, "timeout_ms": 60_000}}
    answers: list[httpx.Response] = []

    def call() -> None:
        answers.append(httpx.post(f"{server.api_url}/route", json=body, timeout=30.0))

    caller = threading.Thread(target=call)
    caller.start()
    wait_until(lambda: deferred_waiting(server) == 1, what="the call waiting deferred")
    assert server.terminate() == 0
    caller.join(30)

    assert [answer.status_code for answer in answers] == [200]
    result = answers[0].json()
    assert (result["status"], result["fault"], result["delivered"]) == ("cancelled", "router", False)
