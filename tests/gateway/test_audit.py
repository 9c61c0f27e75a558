"""`reach serve --audit-log`: one JSON line per routed call, with no payload."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from reach_adapters import Capability, FunctionAgent, Router
from reach_adapters.gateway.audit import AuditLog
from tests.gateway.conftest import ECHO, ReachServer, run_reach, write

pytestmark = pytest.mark.timeout(120)

SECRET = "payload-text-that-must-not-be-logged"


def test_every_routed_call_is_one_json_line_without_payload(
    config_dir: Path, tmp_path: Path, serve: Callable[..., ReachServer]
) -> None:
    write(config_dir, "util:echo:01.yaml", ECHO)
    audit = tmp_path / "audit.jsonl"
    server = serve(config_dir, "--audit-log", str(audit))
    ok = server.api("POST", "/route", json={"capability": "echo", "payload": {"text": SECRET}}).json()
    missed = server.api("POST", "/route", json={"capability": "nobody", "payload": {"text": SECRET}}).json()
    sent = server.api("POST", "/send", json={"agent_id": "util:echo:01", "payload": SECRET}).json()
    assert server.terminate() == 0  # closing writes what is queued
    lines = [json.loads(line) for line in audit.read_text(encoding="utf-8").splitlines()]
    assert [line["task_id"] for line in lines] == [ok["task_id"], missed["task_id"], sent["task_id"]]
    first, second, third = lines
    assert set(first) == {
        "time", "principal", "capability", "agent_id", "status", "fault", "task_id", "trace_id", "mode",
        "duration_ms",
    }  # fmt: skip
    assert first["principal"] is None
    assert (first["capability"], first["agent_id"], first["status"], first["fault"]) == (
        "echo", "util:echo:01", "ok", None,
    )  # fmt: skip
    assert first["time"].endswith("Z")
    assert first["duration_ms"] >= 0
    assert (second["capability"], second["status"], second["fault"]) == ("nobody", "no_candidate", "router")
    assert (third["agent_id"], third["mode"]) == ("util:echo:01", "directed")
    assert SECRET not in audit.read_text(encoding="utf-8")


def test_dash_writes_to_stderr(config_dir: Path, serve: Callable[..., ReachServer]) -> None:
    write(config_dir, "util:echo:01.yaml", ECHO)
    server = serve(config_dir, "--audit-log", "-")
    task_id = server.api("POST", "/route", json={"capability": "echo", "payload": "hi"}).json()["task_id"]
    assert server.terminate() == 0
    audited = [
        json.loads(line)
        for line in server.log.read_text(encoding="utf-8").splitlines()
        if '"principal"' in line
    ]
    assert [line["task_id"] for line in audited] == [task_id]


def test_an_unwritable_audit_log_stops_serve_before_it_starts(config_dir: Path, tmp_path: Path) -> None:
    write(config_dir, "util:echo:01.yaml", ECHO)
    refused = run_reach(
        "serve", str(config_dir), "--port", "0", "--audit-log", str(tmp_path / "no" / "a.jsonl")
    )
    assert refused.returncode != 0
    assert "--audit-log" in refused.stderr
    assert "cannot open it" in refused.stderr


async def test_closing_with_a_full_queue_writes_what_it_can_and_stops(tmp_path: Path) -> None:
    # A writer that falls behind fills the queue; closing must still stop it, not raise.
    target = tmp_path / "audit.jsonl"
    audit = AuditLog(str(target), queue_size=2)
    write_line = audit._writer.emit

    def slow(record: logging.LogRecord) -> None:
        time.sleep(0.05)
        write_line(record)

    audit._writer.emit = slow  # type: ignore[method-assign]
    async with Router() as router:
        router.register(FunctionAgent(echo, agent_id="util:echo:01", capabilities=[Capability(name="echo")]))
        audit.attach(router)
        for _ in range(10):
            await router.route("echo", {"text": "hi"})
    audit.close()
    written = target.read_text(encoding="utf-8").splitlines()
    assert audit.dropped > 0
    assert len(written) == 10 - audit.dropped
    assert {json.loads(line)["capability"] for line in written} == {"echo"}


async def echo(text: str) -> str:
    return text
