"""Loading config directories: YAML and JSON, and every bad input named by file, line and field."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from reach_adapters import ReachError, RoutingPolicy
from reach_adapters.config import (
    ConfigError,
    ConfigFileError,
    FunctionAgentFile,
    LangChainAgentFile,
    MCPAgentFile,
    load_config,
    resolve_command,
)
from reach_adapters.mcp.options import MCPOptions
from tests.gateway import agents

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "config"

ECHO = "kind: function\nagent_id: util:echo:01\nfunction: tests.gateway.agents:echo\n"


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


def problem(directory: Path) -> ConfigFileError:
    with pytest.raises(ConfigFileError) as caught:
        load_config(directory)
    assert isinstance(caught.value, ReachError)
    return caught.value


def test_the_example_config_loads() -> None:
    config = load_config(EXAMPLE)
    assert config.policy.default_agent == "util:fallback:01"
    assert config.policy.breaker.quarantine_s == 15.0
    assert set(config.agents) == {
        "mcp:text:a",
        "mcp:text:b",
        "mcp:time:0",
        "orders:lookup:01",
        "support:refund:01",
        "support:summary:01",
        "util:fallback:01",
    }
    lookup = config.agents["orders:lookup:01"]
    assert lookup.file.suffix == ".json"
    assert isinstance(lookup.model, LangChainAgentFile)
    text = config.agents["mcp:text:a"].model
    assert isinstance(text, MCPAgentFile)
    assert text.env == {"REPLICA": "a"}
    assert text.options().max_concurrency == 8


def test_yaml_and_json_describe_the_same_agent(tmp_path: Path) -> None:
    yaml_dir, json_dir = tmp_path / "y", tmp_path / "j"
    yaml_dir.mkdir()
    json_dir.mkdir()
    write(
        yaml_dir,
        "util:echo:01.yml",
        ECHO + "overrides:\n  echo:\n    weight: 70\n    keywords: [say]\n",
    )
    body = {
        "$schema": "agent.schema.json",
        "kind": "function",
        "agent_id": "util:echo:01",
        "function": "tests.gateway.agents:echo",
        "overrides": {"echo": {"weight": 70, "keywords": ["say"]}},
    }
    write(json_dir, "util:echo:01.json", json.dumps(body, indent="\t"))
    from_yaml = load_config(yaml_dir).agents["util:echo:01"]
    from_json = load_config(json_dir).agents["util:echo:01"]
    assert from_yaml.same_as(from_json)
    assert isinstance(from_yaml.model, FunctionAgentFile)
    assert from_yaml.target is agents.echo


def test_policy_fields_map_onto_the_routing_policy(tmp_path: Path) -> None:
    write(
        tmp_path,
        "routing_policy.json",
        '{"strategy": "least_wait", "weights": {"load": 0.5}, "max_retries": 1}',
    )
    policy = load_config(tmp_path).policy
    assert policy == RoutingPolicy(strategy="least_wait", weights={"load": 0.5}, max_retries=1)


def test_an_empty_directory_is_a_valid_config_with_the_default_policy(tmp_path: Path) -> None:
    write(tmp_path, "README.md", "not config")
    write(tmp_path, ".util:echo:01.yaml.swp", "editor noise")
    config = load_config(tmp_path)
    assert config.agents == {}
    assert config.policy == RoutingPolicy()


def test_file_names_may_spell_colons_as_double_underscores(tmp_path: Path) -> None:
    write(tmp_path, "util__echo__01.yaml", ECHO)
    assert list(load_config(tmp_path).agents) == ["util:echo:01"]


def test_python_is_the_interpreter_running_reach() -> None:
    assert resolve_command("python") == sys.executable
    assert resolve_command("python3") == "python3"


@pytest.mark.parametrize(
    ("text", "line", "field", "words"),
    [
        (ECHO + "colour: red\n", 4, "colour", "unknown key; the keys allowed here are: agent_id"),
        (ECHO + "overrides:\n  echo:\n    timeout_ms: 0\n", 6, "overrides.echo.timeout_ms", "greater than 0"),
        (ECHO + "overrides:\n  echo:\n    name: other\n", 6, "overrides.echo.name", "unknown key"),
        (ECHO + "capabilities:\n  - name: echo\n    weight: heavy\n", 6, "capabilities.0.weight", "number"),
        (
            ECHO + "capabilities:\n  - name: a\n  - name: a\n",
            6,
            "capabilities.1.name",
            "declared twice",
        ),
        (
            ECHO + "overrides:\n  echo:\n    input_schema: {type: nonsense}\n",
            6,
            "overrides.echo.input_schema",
            "not a valid JSON Schema",
        ),
        (
            "agent_id: util:echo:01\n",
            1,
            "kind",
            "missing; give the agent's kind: one of langchain, mcp, function",
        ),
        ("kind: robot\nagent_id: util:echo:01\n", 1, "kind", "unknown kind 'robot'"),
        ("kind: function\nagent_id: util:echo:01\n", 1, "function", "missing"),
        (
            "kind: function\nagent_id: util-echo\nfunction: json:dumps\n",
            2,
            "agent_id",
            "namespace:type:instance",
        ),
    ],
)
def test_invalid_fields_are_named_with_their_line(
    tmp_path: Path, text: str, line: int, field: str, words: str
) -> None:
    path = write(tmp_path, "util:echo:01.yaml", text)
    error = problem(tmp_path)
    assert (error.file, error.line, error.field) == (path, line, field)
    assert words in error.problem
    assert str(error).startswith(f"{path}:{line}: field '{field}': ")


@pytest.mark.parametrize(
    ("target", "words"),
    [
        ("tests.gateway.nowhere:echo", "cannot import module 'tests.gateway.nowhere'"),
        ("tests.gateway.agents:nothing", "has no attribute 'nothing'"),
        ("tests.gateway.agents:NOT_CALLABLE", "is a int, not a callable"),
        ("no_colon_here", "String should match pattern"),
    ],
)
def test_bad_import_paths_are_named(tmp_path: Path, target: str, words: str) -> None:
    write(tmp_path, "util:echo:01.yaml", f"kind: function\nagent_id: util:echo:01\nfunction: {target}\n")
    error = problem(tmp_path)
    assert (error.line, error.field) == (3, "function")
    assert words in error.problem


@pytest.mark.parametrize(
    ("target", "words"),
    [
        (
            "tests.gateway.agents:needs_arguments",
            "factory 'tests.gateway.agents:needs_arguments' needs arguments (model)",
        ),
        ("tests.gateway.agents:NOT_CALLABLE", "not a Runnable or a factory"),
    ],
)
def test_langchain_files_need_a_runnable_or_a_factory(tmp_path: Path, target: str, words: str) -> None:
    write(tmp_path, "util:rev:01.yaml", f"kind: langchain\nagent_id: util:rev:01\nrunnable: {target}\n")
    error = problem(tmp_path)
    assert error.field == "runnable"
    assert words in error.problem


def test_langchain_files_take_a_runnable_or_a_factory(tmp_path: Path) -> None:
    write(
        tmp_path,
        "util:rev:01.yaml",
        "kind: langchain\nagent_id: util:rev:01\nrunnable: tests.gateway.agents:reverser\n",
    )
    write(
        tmp_path,
        "util:rev:02.yaml",
        "kind: langchain\nagent_id: util:rev:02\nrunnable: tests.gateway.agents:reverser_factory\n",
    )
    specs = load_config(tmp_path).agents
    assert specs["util:rev:01"].target is agents.reverser
    assert specs["util:rev:02"].target is agents.reverser_factory


@pytest.mark.parametrize(
    ("text", "line", "field", "words"),
    [
        (
            "kind: mcp\nname: t\ncommand: no-such-program-here\n",
            3,
            "command",
            "'no-such-program-here' is not found",
        ),
        ("kind: mcp\nname: t\ncommand: python\ncwd: missing/dir\n", 4, "cwd", "does not exist"),
        ("kind: mcp\nname: t\n", 1, None, "give exactly one of 'command'"),
        (
            "kind: mcp\nname: t\ncommand: python\nurl: http://x/mcp\n",
            1,
            None,
            "give exactly one of 'command'",
        ),
        ("kind: mcp\nname: t\nurl: ftp://x/mcp\n", 1, None, "http:// or https://"),
        ("kind: mcp\nname: t\nurl: http://x/mcp\nargs: [-v]\n", 1, None, "apply to 'command' servers"),
        ("kind: mcp\nname: t\ncommand: python\ntimeout_ms: -5\n", 4, "timeout_ms", "greater than 0"),
        (
            "kind: mcp\nname: t\ncommand: python\nreconnect:\n  jitter_s: 200\n",
            5,
            "reconnect.jitter_s",
            "less than",
        ),
    ],
)
def test_mcp_files_are_checked_before_anything_starts(
    tmp_path: Path, text: str, line: int, field: str | None, words: str
) -> None:
    write(tmp_path, "mcp:t:0.yaml", text)
    error = problem(tmp_path)
    assert (error.line, error.field) == (line, field)
    assert words in error.problem


def test_mcp_instances_may_be_numbers(tmp_path: Path) -> None:
    write(tmp_path, "mcp:t:1.yaml", "kind: mcp\nname: t\ninstance: 1\ncommand: python\n")
    assert list(load_config(tmp_path).agents) == ["mcp:t:1"]


def test_an_unquoted_protocol_version_is_the_version_not_a_date(tmp_path: Path) -> None:
    # YAML reads 2025-11-25 as a date; docs/mcp.md writes it unquoted.
    write(tmp_path, "mcp:t:0.yaml", "kind: mcp\nname: t\ncommand: python\nprotocol: 2025-11-25\n")
    model = load_config(tmp_path).agents["mcp:t:0"].model
    assert isinstance(model, MCPAgentFile)
    assert model.options().protocol == "2025-11-25"


def test_a_file_named_after_another_agent_is_rejected(tmp_path: Path) -> None:
    write(tmp_path, "util:echo:02.yaml", ECHO)
    error = problem(tmp_path)
    assert (error.line, error.field) == (2, "agent_id")
    assert "rename the file to 'util:echo:01.yaml' (or 'util__echo__01.yaml')" in error.problem


def test_one_agent_in_two_files_is_rejected(tmp_path: Path) -> None:
    write(tmp_path, "util:echo:01.yaml", ECHO)
    write(
        tmp_path,
        "util__echo__01.json",
        json.dumps({"kind": "function", "agent_id": "util:echo:01", "function": "json:dumps"}),
    )
    error = problem(tmp_path)
    assert "also declared in" in error.problem


def test_two_policy_files_are_rejected(tmp_path: Path) -> None:
    write(tmp_path, "routing_policy.yaml", "max_retries: 1\n")
    write(tmp_path, "routing_policy.json", "{}")
    with pytest.raises(ConfigError, match="both hold the routing policy; keep one"):
        load_config(tmp_path)


@pytest.mark.parametrize(
    ("text", "line", "field", "words"),
    [
        ("strategy: fastest\n", 1, "strategy", "'weighted', 'least_wait' or 'rating'"),
        ("breaker:\n  window_s: 60\n  min_calls: 0\n", 3, "breaker.min_calls", "greater than or equal to 1"),
        ("weights:\n  load: 0.2\n  speed: 1\n", 3, "weights.speed", "keys allowed here are: weight, health"),
        ("max_retries: 9\n", 1, "max_retries", "less than or equal to 3"),
        ("default_agent: util:ghost:01\n", 1, "default_agent", "names agent 'util:ghost:01', which no file"),
        ("- strategy\n", 1, None, "must hold a mapping of keys to values, not a list"),
        ("", 1, None, "is empty"),
        ("strategy: weighted\nstrategy: rating\n", 2, None, "key 'strategy' is given twice"),
        ("weights: [1, 2\nmax_retries: 1\n", 2, None, "invalid YAML"),
    ],
)
def test_policy_problems_are_named_with_their_line(
    tmp_path: Path, text: str, line: int, field: str | None, words: str
) -> None:
    path = write(tmp_path, "routing_policy.yaml", text)
    error = problem(tmp_path)
    assert (error.file, error.line, error.field) == (path, line, field)
    assert words in error.problem


def test_json_errors_carry_lines_too(tmp_path: Path) -> None:
    write(tmp_path, "routing_policy.json", '{\n  "breaker": {\n    "window_s": 0\n  }\n}\n')
    error = problem(tmp_path)
    assert (error.line, error.field) == (3, "breaker.window_s")
    write(tmp_path, "routing_policy.json", '{\n  "max_retries": 1,\n}\n')
    error = problem(tmp_path)
    assert error.line == 3
    assert "invalid JSON" in error.problem


def test_a_key_given_twice_in_json_is_an_error(tmp_path: Path) -> None:
    write(tmp_path, "routing_policy.json", '{\n  "max_retries": 1,\n  "max_retries": 2\n}\n')
    error = problem(tmp_path)
    assert error.line == 3
    assert "key 'max_retries' is given twice" in error.problem


def test_a_missing_directory_says_so(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist; create it"):
        load_config(tmp_path / "nowhere")
    write(tmp_path, "file.yaml", ECHO)
    with pytest.raises(ConfigError, match="is a file, not a config directory"):
        load_config(tmp_path / "file.yaml")


def test_validating_a_directory_does_not_import_the_mcp_sdk(tmp_path: Path) -> None:
    write(tmp_path, "util:echo:01.yaml", ECHO)
    write(tmp_path, "mcp:t:0.yaml", "kind: mcp\nname: t\ncommand: python\nreconnect:\n  max_delay_s: 5\n")
    script = (
        "import sys\n"
        "from reach_adapters.config import load_config\n"
        f"config = load_config({str(tmp_path)!r})\n"
        "print(sorted(config.agents))\n"
        "loaded = [m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', 'reach_adapters.mcp.a'))]\n"
        "print(sorted(loaded))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["['mcp:t:0', 'util:echo:01']", "[]"]


@pytest.mark.parametrize(
    ("text", "line", "field", "words"),
    [
        ("reconnect:\n  initial_delay_s: 0\n", 5, "reconnect.initial_delay_s", "greater than 0"),
        ("http_timeout_s: fast\n", 4, "http_timeout_s", "a valid number"),
        ("relay_requests: maybe\n", 4, "relay_requests", "a valid boolean"),
        ("reconnect:\n  jiter_s: 0.1\n", 5, "reconnect.jiter_s", "unknown key; the keys allowed here are"),
    ],
)
def test_mcp_options_in_files_are_reach_errors_naming_the_field(
    tmp_path: Path, text: str, line: int, field: str, words: str
) -> None:
    write(tmp_path, "mcp:t:0.yaml", f"kind: mcp\nname: t\ncommand: python\n{text}")
    error = problem(tmp_path)
    assert error.field == field
    assert words in error.problem
    assert str(error).startswith(f"{tmp_path / 'mcp:t:0.yaml'}:{line}: field '{field}': ")


def test_the_earlier_reconnect_jitter_share_still_loads(tmp_path: Path) -> None:
    # `jitter` was a share of the first wait; files written for it keep working, in seconds now.
    write(tmp_path, "mcp:t:0.yaml", "kind: mcp\nname: t\ncommand: python\nreconnect:\n  jitter: 0.5\n")
    with pytest.warns(DeprecationWarning, match="jitter_s"):
        model = load_config(tmp_path).agents["mcp:t:0"].model
    assert isinstance(model, MCPAgentFile)
    assert model.reconnect.jitter_s == pytest.approx(0.5 * model.reconnect.initial_delay_s)


def test_mcp_files_give_the_adapters_options() -> None:
    text = load_config(EXAMPLE).agents["mcp:text:a"].model
    assert isinstance(text, MCPAgentFile)
    assert text.options() == MCPOptions(instance="a", max_concurrency=8, reconnect=text.reconnect)
