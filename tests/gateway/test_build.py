"""Agents built from config files go through `MCPServerAgent.connect`, with its meaning of 'python'."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from reach_adapters.gateway import Gateway
from tests.gateway.conftest import write
from tests.mcp_adapter.conftest import SERVERS

pytestmark = pytest.mark.timeout(60)


async def test_python_in_a_config_file_is_the_interpreter_running_reach(
    config_dir: Path, tmp_path: Path
) -> None:
    # A PATH without any python: only the interpreter running reach can start the server.
    where = SERVERS / "where.py"
    text = f"kind: mcp\nname: where\ncommand: python\nargs: [{where}]\nenv:\n  PATH: {tmp_path}\ncwd: .\n"
    write(config_dir, "mcp:where:0.yaml", text)
    async with await Gateway.start(config_dir) as gateway:
        result = await gateway.router.route("where", {"variable": "PATH"})
    assert result.ok, result.error
    assert result.payload == {"python": sys.executable, "cwd": str(config_dir), "value": str(tmp_path)}
