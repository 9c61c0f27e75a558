"""`reach serve` with secrets in its MCP agents' files: none reaches a response, the CLI or the log."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.gateway.conftest import ReachServer, run_reach, write
from tests.mcp_adapter.conftest import HttpCalc
from tests.security.conftest import (
    API_KEY,
    BEARER,
    ENV_TOKEN,
    KEYED,
    SECRETS,
    assert_no_secret,
    secret_url,
)
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(120)

RECONNECT = "reconnect: {initial_delay_s: 0.05, max_delay_s: 0.5}\n"


def keyed_file(env: bool) -> str:
    text = f"kind: mcp\nname: keyed\ncommand: python\nargs: [{KEYED}, --api-key, {API_KEY}]\n"
    return text + (f"env: {{API_TOKEN: {ENV_TOKEN}}}\n" if env else "")


def remote_file(url: str) -> str:
    return (
        f"kind: mcp\nname: remote\nurl: '{secret_url(url)}'\nheaders: {{Authorization: 'Bearer {BEARER}'}}\n"
    )


def agent_state(server: ReachServer, agent_id: str) -> str:
    catalog = server.api("GET", "/catalog").json()
    return str(next(info["state"] for info in catalog if info["agent_id"] == agent_id))


def test_no_secret_reaches_a_response_the_cli_or_the_log(
    config_dir: Path, http_calc: HttpCalc, serve: Callable[..., ReachServer]
) -> None:
    write(config_dir, "mcp:keyed:0.yaml", keyed_file(env=True))
    write(config_dir, "mcp:remote:0.yaml", remote_file(http_calc.url) + RECONNECT)
    server = serve(config_dir, "--log-level", "DEBUG")
    shown: list[str] = []

    def read(method: str, path: str, **kwargs: Any) -> Any:
        """The JSON answer, its text kept to be searched for secrets."""
        response = server.api(method, path, **kwargs)
        shown.append(response.text)
        return response.json()

    assert read("POST", "/route", json={"capability": "echo", "payload": {"text": "hi"}})["payload"] == "hi"
    routed = read("POST", "/route", json={"capability": "add", "payload": {"a": 1, "b": 2}})
    assert routed["payload"] == 3
    read("GET", f"/explain/{routed['task_id']}")
    # The HTTP server dies: its agent reconnects, in vain, and says why in the catalog and the log.
    http_calc.kill()
    wait_until(lambda: agent_state(server, "mcp:remote:0") == "reconnecting", what="remote reconnecting")
    failed = read(
        "POST",
        "/route",
        json={"capability": "add", "payload": {"a": 1, "b": 2}, "options": {"timeout_ms": 200}},
    )
    assert failed["status"] != "ok"
    # A server that cannot start (no key in its environment) is refused with its command line.
    write(config_dir, "mcp:broken:0.yaml", keyed_file(env=False).replace("name: keyed", "name: broken"))
    wait_until(lambda: server.health()["reloads_rejected"] >= 1, what="the broken agent refused")
    health = read("GET", "/health")
    assert "--api-key ***" in str(health["last_error"])
    assert "mcp:remote:0" in health["problems"]
    read("GET", "/catalog")
    read("GET", "/decisions")
    for response in shown:
        assert_no_secret(response)
    # The command line, against the server and on the config directory itself.
    remote = run_reach("catalog", "--url", server.url, "--json")
    checked = run_reach("check", str(config_dir))
    assert remote.returncode == 0, remote.stderr
    assert "mcp:remote:0" in [info["agent_id"] for info in json.loads(remote.stdout)]
    assert "--api-key ***" in checked.stdout, checked.stdout + checked.stderr
    assert "http://***@127.0.0.1" in checked.stdout
    for output in (remote.stdout, remote.stderr, checked.stdout, checked.stderr):
        assert_no_secret(output)
    server.stop()
    log = server.log.read_text()
    assert "config change rejected" in log
    assert "reconnect failed" in log
    assert [secret for secret in SECRETS if secret in log] == []


def test_a_server_that_cannot_start_is_reported_without_its_key(config_dir: Path) -> None:
    write(config_dir, "mcp:keyed:0.yaml", keyed_file(env=False))
    failed = run_reach("serve", str(config_dir), "--port", "0")
    assert failed.returncode != 0
    assert "--api-key ***" in failed.stderr, failed.stderr
    assert_no_secret(failed.stdout + failed.stderr)
