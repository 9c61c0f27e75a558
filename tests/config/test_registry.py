"""``registry:`` in the routing policy file: typed, every bad value named by file, line and field,
shown by `reach check`, and a change to it on hot reload left for the next start."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from reach_adapters.cli.app import main
from reach_adapters.cluster import connection, records
from reach_adapters.cluster import node as cluster_node
from reach_adapters.cluster import tasks as cluster_tasks
from reach_adapters.config import ConfigFileError, load_config
from reach_adapters.config import registry as settings
from reach_adapters.gateway import Gateway
from tests.gateway.conftest import ECHO, write

REGISTRY = (
    "max_retries: 1\n"
    "registry:\n"
    "  url: redis://:s3cret@127.0.0.1:6390/2\n"
    "  node_id: node-7\n"
    "  lease_ttl_s: 3\n"
    "  task_visibility_timeout_s: 2.5\n"
)


@pytest.fixture
def config_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "config"
    directory.mkdir()
    return directory


def problem(directory: Path, policy: str) -> ConfigFileError:
    write(directory, "routing_policy.yaml", policy)
    with pytest.raises(ConfigFileError) as caught:
        load_config(directory)
    return caught.value


def test_the_registry_is_read_with_defaults_for_what_is_not_given(config_dir: Path) -> None:
    write(config_dir, "routing_policy.yaml", REGISTRY)
    config = load_config(config_dir)
    assert config.registry is not None
    assert config.registry.url == "redis://:s3cret@127.0.0.1:6390/2"
    assert config.registry.node_id == "node-7"
    assert config.registry.lease_ttl_s == 3.0
    assert config.registry.prefix == "reach:"
    assert config.registry.task_visibility_timeout_s == 2.5
    assert config.policy.max_retries == 1
    write(config_dir, "routing_policy.yaml", "registry: {url: 'redis://h:1/0'}\n")
    only_url = load_config(config_dir).registry
    assert only_url is not None
    assert (only_url.node_id, only_url.lease_ttl_s, only_url.task_visibility_timeout_s) == (None, 15.0, 30.0)


def test_without_it_there_is_no_registry(config_dir: Path) -> None:
    assert load_config(config_dir).registry is None
    write(config_dir, "routing_policy.yaml", "max_retries: 1\n")
    assert load_config(config_dir).registry is None


@pytest.mark.parametrize(
    ("policy", "field", "line", "says"),
    [
        ("registry:\n  node_id: a\n", "registry.url", 1, "missing; this field is required"),
        ("registry:\n  url: http://h:1\n", "registry.url", 2, "is not a Redis URL"),
        ("registry:\n  url: redis://h:1/0\n  lease_ttl_s: 0.1\n", "registry.lease_ttl_s", 3, "0.5"),
        (
            "registry:\n  url: redis://h:1/0\n  task_visibility_timeout_s: 0.1\n",
            "registry.task_visibility_timeout_s",
            3,
            "0.3",
        ),
        ("registry:\n  url: redis://h:1/0\n  ttl: 3\n", "registry.ttl", 3, "url, node_id, lease_ttl_s"),
        ("registry: redis://h:1/0\n", "registry", 1, "RegistrySettings"),
        ("registry:\n  url: redis://h:1/0\n  prefix: 'a[1]:'\n", "registry.prefix", 3, "no glob characters"),
        ("registry:\n  url: redis://h:1/0\n  prefix: ''\n", "registry.prefix", 3, "not a cluster key prefix"),
    ],
)
def test_a_bad_registry_is_named_by_file_line_and_field(
    config_dir: Path, policy: str, field: str, line: int, says: str
) -> None:
    error = problem(config_dir, policy)
    assert error.file.name == "routing_policy.yaml"
    assert (error.field, error.line) == (field, line)
    assert says in error.problem


def test_the_defaults_are_the_cluster_nodes() -> None:
    # Kept apart so that checking a config does not need redis-py; they must not drift.
    assert settings.DEFAULT_LEASE_TTL_S == cluster_node.DEFAULT_LEASE_TTL_S
    assert settings.MIN_LEASE_TTL_S == cluster_node.MIN_LEASE_TTL_S
    assert settings.REGISTRY_SCHEMES == connection.SCHEMES
    assert settings.DEFAULT_VISIBILITY_TIMEOUT_S == cluster_tasks.DEFAULT_VISIBILITY_TIMEOUT_S
    assert settings.MIN_VISIBILITY_TIMEOUT_S == cluster_tasks.MIN_VISIBILITY_TIMEOUT_S
    assert settings.PREFIX_PATTERN == records.PREFIX_PATTERN


def test_reach_check_shows_it_without_its_password(
    config_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(config_dir, "routing_policy.yaml", REGISTRY)
    assert main(["check", str(config_dir)]) == 0
    out = capsys.readouterr().out
    assert "registry redis://***@127.0.0.1:6390/2 (node node-7, lease 3.0 s, prefix reach:)" in out
    assert "s3cret" not in out
    assert main(["check", str(config_dir), "--json"]) == 0
    assert '"node_id": "node-7"' in capsys.readouterr().out


async def test_a_changed_registry_waits_for_a_restart(
    config_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(config_dir, "util:echo:01.yaml", ECHO)
    write(config_dir, "routing_policy.yaml", REGISTRY)
    async with await Gateway.start(config_dir) as gateway:
        write(config_dir, "routing_policy.yaml", REGISTRY.replace("node-7", "node-8"))
        with caplog.at_level(logging.WARNING, logger="reach_adapters.gateway.gateway"):
            assert await gateway.reload() is True, gateway.last_error
        assert "registry in the policy file changed: it takes effect when reach serve restarts" in caplog.text
        assert gateway.config.registry is not None
        assert gateway.config.registry.node_id == "node-8"
        assert gateway.node is None
        caplog.clear()
        moved = REGISTRY.replace("node-7", "node-8")
        write(config_dir, "routing_policy.yaml", moved.replace("max_retries: 1", "max_retries: 2"))
        assert await gateway.reload() is True
        assert "registry" not in caplog.text
