"""MCP servers of different names serving a tool of the same name and schemas: `reach serve` says
they will be taken for replicas (two filesystem servers on different folders, say)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from reach_adapters.gateway import Gateway
from tests.gateway.conftest import PROBE_SERVER, write

pytestmark = pytest.mark.timeout(60)

NAMESAKE = "kind: mcp\nname: {name}\ncommand: python\nargs: [{server}]\n{extra}"


def probe(name: str, extra: str = "") -> str:
    return NAMESAKE.format(name=name, server=PROBE_SERVER, extra=extra)


async def test_servers_of_two_names_sharing_tools_are_named_in_a_warning(
    config_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(config_dir, "mcp:docs:0.yaml", probe("docs"))
    with caplog.at_level(logging.WARNING, logger="reach_adapters.gateway.namesakes"):
        async with await Gateway.start(config_dir) as gateway:
            assert not caplog.records
            write(config_dir, "mcp:code:0.yaml", probe("code"))
            assert await gateway.reload()
    said = [record.getMessage() for record in caplog.records]
    assert any(
        line.startswith("MCP servers code, docs all serve 'say', with the same schemas") for line in said
    )
    assert all("give each a prefix" in line for line in said)


async def test_replicas_of_one_server_and_prefixed_servers_draw_no_warning(
    config_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(config_dir, "mcp:docs:0.yaml", probe("docs"))
    write(config_dir, "mcp:docs:1.yaml", probe("docs", 'instance: "1"\n'))
    write(config_dir, "mcp:code:0.yaml", probe("code", "prefix: code_\n"))
    with caplog.at_level(logging.WARNING, logger="reach_adapters.gateway.namesakes"):
        async with await Gateway.start(config_dir) as gateway:
            assert "code_say" in gateway.router.declarations()
    assert not caplog.records
