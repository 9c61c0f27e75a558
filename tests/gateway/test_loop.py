"""Two `reach serve` processes pointing at each other: a task going round is refused at once."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.gateway.conftest import ECHO, ReachServer, write
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(120)


def mcp_agent(name: str, url: str) -> str:
    return f"kind: mcp\nname: {name}\nurl: {url}\n"


def test_a_task_going_round_two_gateways_is_refused_as_a_loop(
    serve: Callable[..., ReachServer], tmp_path: Path
) -> None:
    near_dir, far_dir = tmp_path / "near", tmp_path / "far"
    near_dir.mkdir()
    far_dir.mkdir()
    write(near_dir, "util:echo:01.yaml", ECHO)
    near = serve(near_dir)
    write(far_dir, "mcp:near:0.yaml", mcp_agent("near", near.mcp_url))
    far = serve(far_dir)
    # Now near reaches far, which reaches near: each gateway is an agent of the other.
    write(near_dir, "mcp:far:0.yaml", mcp_agent("far", far.mcp_url))
    wait_until(
        lambda: any(a["agent_id"] == "mcp:far:0" for a in near.api("GET", "/catalog").json()),
        timeout=30,
        what="near gateway to pick up mcp:far:0",
    )
    for options in ({"task_id": "round-1", "timeout_ms": 20_000}, {"timeout_ms": 20_000}):
        began = time.monotonic()
        body = {"agent_id": "mcp:far:0", "capability": "echo", "payload": {"x": 1}, "options": options}
        result = near.api("POST", "/send", json=body).json()
        assert time.monotonic() - began < 10.0, "the task waited on itself"
        assert (result["status"], result["error_type"], result["fault"]) == (
            "rejected",
            "LoopDetectedError",
            "caller",
        )
        assert "mcp:far:0 → mcp:near:0" in result["error"]
    # Neither side blames the other for the loop.
    for gateway in (near, far):
        assert gateway.health()["status"] == "ok", gateway.health()
    served = near.api(
        "POST", "/route", json={"capability": "echo", "payload": {"x": 2}, "options": {"namespace": "util"}}
    )
    assert served.json()["payload"] == {"x": 2}
