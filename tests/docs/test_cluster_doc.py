"""The cluster's operations docs and files hold together: examples/cluster/docker-compose.yml and
its Dockerfile name services, files, extras, commands and flags that exist, each node's config
directory is valid, and every `reach` command in docs/cluster.md and examples/cluster/README.md
parses with the real parser.

Docker cannot run in this test environment, so the compose file is checked for structure only
(parsed as YAML and cross-checked against the repository), never started; the same three nodes
run as real processes in tests/cluster.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from reach_adapters.cli.parser import build_parser
from reach_adapters.config import load_config

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "examples" / "cluster"
COMPOSE: dict[str, Any] = yaml.safe_load((CLUSTER / "docker-compose.yml").read_text(encoding="utf-8"))
SERVICES: dict[str, Any] = COMPOSE["services"]
NODES = ["node1", "node2", "node3"]
DOCS = {
    "docs/cluster.md": (ROOT / "docs" / "cluster.md").read_text(encoding="utf-8"),
    "examples/cluster/README.md": (CLUSTER / "README.md").read_text(encoding="utf-8"),
}


def shell_lines(text: str) -> list[str]:
    """The lines of the ```sh blocks, one command each."""
    blocks = re.findall(r"^```sh\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def reach_commands(text: str) -> list[list[str]]:
    """Each `reach ...` command of the shell blocks, as arguments after `reach` (a synopsis's
    [optional] brackets dropped; what follows `&` or `#` is not part of it)."""
    commands = []
    for line in shell_lines(text):
        words = shlex.split(line.replace("[", "").replace("]", ""), comments=True)
        words = words[: words.index("&")] if "&" in words else words
        if words[:3] == ["watch", "-n", "0.5"]:
            words = words[3:]
        if words[:1] == ["reach"]:
            commands.append(words[1:])
    return commands


def test_the_compose_file_has_redis_7_with_appendonly_and_three_nodes() -> None:
    assert set(SERVICES) == {"redis", *NODES}
    redis = SERVICES["redis"]
    assert redis["image"].startswith("redis:7")
    command = redis["command"]
    assert command[0] == "redis-server"
    assert command[command.index("--appendonly") + 1] == "yes"
    host_ports = [SERVICES[node]["ports"][0].split(":")[1] for node in NODES]
    assert len(set(host_ports)) == 3


@pytest.mark.parametrize("node", NODES)
def test_each_node_serves_a_valid_config_dir_that_joins_the_compose_redis(node: str) -> None:
    service = SERVICES[node]
    build = service["build"]
    context = (CLUSTER / build["context"]).resolve()
    assert context == ROOT
    assert (context / build["dockerfile"]).is_file()
    assert service["depends_on"]["redis"]["condition"] == "service_healthy"
    command = service["command"]
    assert command[0] == "reach"
    args = build_parser().parse_args(command[1:])
    assert args.run.__name__ == "_run_serve"
    config = load_config(ROOT / args.config_dir)
    assert config.registry is not None
    assert config.registry.node_id == node
    assert config.registry.url.startswith("redis://redis:6379/")
    assert service["ports"][0].endswith(f":{args.port}")


def test_the_dockerfile_copies_what_exists_and_installs_extras_that_exist() -> None:
    dockerfile = (CLUSTER / "Dockerfile").read_text(encoding="utf-8")
    for line in dockerfile.splitlines():
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (ROOT / source).exists(), line
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    installed = re.search(r"'\.\[([\w,]+)\]'", dockerfile)
    assert installed is not None
    assert set(installed[1].split(",")) <= set(extras)


@pytest.mark.parametrize("doc", DOCS)
def test_every_reach_command_in_the_docs_parses(doc: str) -> None:
    commands = reach_commands(DOCS[doc])
    assert {command[0] for command in commands} >= {"catalog", "cluster", "call"}
    parser = build_parser()
    for command in commands:
        try:
            parser.parse_args(command)
        except SystemExit:
            pytest.fail(f"{doc}: `reach {shlex.join(command)}` does not parse")


def test_the_walk_through_serves_the_example_nodes_on_three_ports() -> None:
    parsed = [
        build_parser().parse_args(c) for c in reach_commands(DOCS["docs/cluster.md"]) if c[0] == "serve"
    ]
    serves = [args for args in parsed if str(args.config_dir).startswith("examples/cluster/")]
    assert [str(args.config_dir) for args in serves] == [f"examples/cluster/{node}" for node in NODES]
    assert len({args.port for args in serves}) == 3
    assert all(args.registry.startswith("redis://127.0.0.1:") for args in serves)


def test_the_readmes_docker_commands_name_services_that_exist() -> None:
    named = re.findall(
        r"docker compose -f (\S+) (?:pause|unpause|stop|start|kill) (\w+)", DOCS["examples/cluster/README.md"]
    )
    assert named
    for path, service in named:
        assert (ROOT / path).resolve() == CLUSTER / "docker-compose.yml"
        assert service in SERVICES
