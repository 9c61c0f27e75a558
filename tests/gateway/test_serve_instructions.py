"""`reach serve --instructions` / `--instructions-file`: MCP clients get the operator's
instructions, then those of each MCP server served, over streamable HTTP and stdio."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.gateway.conftest import ECHO, REACH, ROOT, ReachServer, write

pytestmark = pytest.mark.timeout(90)

# The demo's MCP server, whose instructions are "Small text utilities."
TEXT_TOOLS = "kind: mcp\nname: text\ncommand: python\nargs: [-m, examples.mcp_demo.server]\n"
SECTION = '## Instructions of the MCP server "text", for its tools '


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_instructions_file_comes_first_then_each_servers_own(
    config_dir: Path, tmp_path: Path, mode: str
) -> None:
    write(config_dir, "mcp:text:0.yaml", TEXT_TOOLS)
    told = write(tmp_path, "instructions.md", "Answer in French.\nNever guess.")
    server = ReachServer(config_dir, tmp_path / "reach.log", "--instructions-file", str(told))
    try:
        async with Client(server.mcp_url, mode=mode) as client:
            served = client.instructions
    finally:
        server.stop()
    assert served is not None
    own, section = served.split("\n\n", 1)
    assert own == "Answer in French.\nNever guess."
    assert section.startswith(SECTION + "word_count, reverse_words")
    assert section.endswith("\n\nSmall text utilities.")


async def test_instructions_over_stdio(config_dir: Path, tmp_path: Path) -> None:
    write(config_dir, "util:echo:01.yaml", ECHO)
    args = [*REACH[1:], "serve", str(config_dir), "--transport", "stdio", "--no-reload"]
    params = StdioServerParameters(command=REACH[0], args=[*args, "--instructions", "Be brief."], cwd=ROOT)
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            assert client.instructions == "Be brief."


async def test_no_upstream_instructions_leaves_the_servers_out(config_dir: Path, tmp_path: Path) -> None:
    write(config_dir, "mcp:text:0.yaml", TEXT_TOOLS)
    flags = ("--instructions", "Be brief.", "--no-upstream-instructions")
    server = ReachServer(config_dir, tmp_path / "reach.log", *flags)
    try:
        async with Client(server.mcp_url) as client:
            assert client.instructions == "Be brief."
    finally:
        server.stop()
