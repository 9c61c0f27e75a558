"""The configuration shown in docs/security.md is valid as written: every ``security.yaml`` block
puts a guard and an authenticator in force, every agent file block is a valid MCP agent file, and
the Python block enforces what the text says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from reach_adapters import FunctionAgent, Router
from reach_adapters.config import MCPAgentFile
from reach_adapters.langchain import ReachToolkit
from reach_adapters.router import Capability
from reach_adapters.security.guard import SecurityGuard
from reach_adapters.security.spec import SecuritySpec

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
_YAML = re.compile(r"^```yaml\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL)
_PYTHON = re.compile(r"^```python\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL)
ENV = {"REACH_HOP_SECRET": "x" * 40}

pytestmark = pytest.mark.timeout(30)


def yaml_blocks() -> list[dict[str, object]]:
    return [yaml.safe_load(match["body"]) for match in _YAML.finditer(DOC)]


def test_every_security_yaml_in_the_guide_is_valid() -> None:
    files = [block for block in yaml_blocks() if isinstance(block, dict) and "principals" in block]
    assert len(files) >= 5
    for block in files:
        spec = SecuritySpec.model_validate(block)
        SecurityGuard(spec, environ=ENV)
    complete = SecuritySpec.model_validate(files[0])
    assert {"alice", "ops", "researcher", "anonymous"} <= set(complete.principals)
    assert complete.jwt is not None
    assert complete.hop_tokens is not None


def test_the_agent_file_of_the_hop_example_is_valid() -> None:
    agent_files = [block for block in yaml_blocks() if isinstance(block, dict) and block.get("kind") == "mcp"]
    assert agent_files
    for block in agent_files:
        model = MCPAgentFile.model_validate(block)
        assert model.http_headers({"GATEWAY_B_TOKEN": "t"})["Authorization"] == "Bearer t"


async def test_the_python_example_does_what_it_says() -> None:
    code = next(match["body"] for match in _PYTHON.finditer(DOC) if "SecurityGuard" in match["body"])
    assert "guard = SecurityGuard(" in code
    guard_line = next(line for line in code.splitlines() if line.startswith("guard = "))
    namespace: dict[str, object] = {"SecurityGuard": SecurityGuard, "SecuritySpec": SecuritySpec}
    exec(guard_line, namespace)
    router = Router(guard=namespace["guard"])  # type: ignore[arg-type]

    async def echo(payload: object) -> object:
        return payload

    router.register(FunctionAgent(echo, agent_id="pub:echo:01", capabilities=[Capability(name="pub_echo")]))
    router.register(
        FunctionAgent(echo, agent_id="vault:read:01", capabilities=[Capability(name="secret_read")])
    )
    assert (await router.route("pub_echo", {}, principal="alice")).ok
    refused = await router.route("secret_read", {}, principal="alice")
    assert refused.error_type == "PermissionDeniedError"
    names = {tool.name for tool in ReachToolkit(router, principal="alice").get_tools()}
    assert names == {"reach_agent", "pub_echo"}
