"""The API's answers are compact UTF-8 JSON, whatever JSON the payload holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from reach_adapters.gateway import Gateway
from tests.gateway.conftest import ECHO, write
from tests.gateway.test_api_guards import api_client

pytestmark = pytest.mark.timeout(30)


async def test_any_json_payload_comes_back_as_sent(config_dir: Path) -> None:
    write(config_dir, "util:echo:01.yaml", ECHO)
    plain = {"text": "héllo ✓", "n": [1, 2.5, None, True], "nested": {"deep": {"deeper": []}}}
    # Past 64 bits: what the fast encoder refuses is answered all the same.
    odd = {"big": 2**70, "text": "é"}
    async with await Gateway.start(config_dir) as gateway, api_client(gateway) as client:
        for payload in (plain, odd):
            answer = await client.post("/api/route", json={"capability": "echo", "payload": payload})
            assert answer.status_code == 200, answer.text
            assert answer.headers["content-type"] == "application/json"
            assert answer.json()["payload"] == payload
        task = await client.post("/api/tasks", json={"capability": "echo", "payload": plain})
        assert task.status_code == 202
        done = await client.get(f"/api/tasks/{task.json()['task_id']}?wait=5")
        assert done.json()["result"]["payload"] == plain
    # Written as UTF-8, not escaped.
    assert "héllo ✓".encode() in done.content
