"""`reach` and the adapters with only some extras installed: one line naming the pip install."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from reach_adapters.extras import EXTRAS
from tests.gateway.conftest import PYTHON, ROOT, write


def test_the_cli_imports_no_command_to_parse() -> None:
    # `reach --help` and `--version` import the parser only: no router, no pydantic, no extra.
    probe = (
        "import sys; import reach_adapters.cli; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'pydantic', 'mcp', 'httpx', 'starlette', 'langchain_core', 'yaml', 'middleware'} "
        "or m.startswith(('reach_adapters.router', 'reach_adapters.config', 'reach_adapters.gateway'))))"
    )
    done = subprocess.run(
        [PYTHON, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=30, check=True
    )
    assert done.stdout.strip() == "[]"


# -- with only the base package installed --------------------------------------------------------

_OFFLINE = (
    "Could not find a version",
    "No matching distribution",
    "Failed to establish",
    "Network is unreachable",
)
_AGENT = "def shout(text: str) -> str:\n    return text.upper()\n"


@pytest.fixture(scope="module")
def base_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with agent-reach and its base dependencies only (no extra), from this checkout."""
    venv = tmp_path_factory.mktemp("base") / "venv"
    subprocess.run([PYTHON, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-input", "--progress-bar", "off"]
    try:
        done = subprocess.run([*pip, str(ROOT)], capture_output=True, text=True, timeout=300, check=False)
    except subprocess.TimeoutExpired:
        pytest.skip("pip did not install the base package within 300 s (no package index reachable?)")
    if done.returncode != 0:
        if any(sign in done.stderr for sign in _OFFLINE):
            pytest.skip(f"pip cannot reach a package index: {done.stderr.strip().splitlines()[-1]}")
        pytest.fail(f"pip install of the base package failed:\n{done.stderr}")
    return venv


def _run_base(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / args[0]), *args[1:]],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.timeout(420)
def test_reach_runs_with_only_the_base_package(base_venv: Path, tmp_path: Path) -> None:
    listing = _run_base(base_venv, "python", "-m", "pip", "list", "--format=freeze", cwd=tmp_path)
    installed = {line.split("==")[0].lower() for line in listing.stdout.splitlines()}
    assert not installed & {"mcp", "httpx", "starlette", "uvicorn", "langchain-core"}

    helped = _run_base(base_venv, "reach", "--help", cwd=tmp_path)
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage: reach")
    version = _run_base(base_venv, "reach", "--version", cwd=tmp_path)
    assert (version.returncode, version.stdout.strip()) == (0, "reach 0.1.0")

    # A serving command says, in one line, which extra to install.
    serve = _run_base(base_venv, "reach", "serve", str(tmp_path), cwd=tmp_path)
    assert serve.returncode == 2
    assert serve.stdout == ""
    assert serve.stderr.strip() == (
        "reach serve: error: this command needs the 'gateway' extra ('mcp' is not installed): "
        "pip install 'agent-reach[gateway]'"
    )
    # The MCP adapter's names load on first use (config files validate against its options without
    # the SDK), so the hint comes when a name is taken, as `from ... import` does.
    for adapter, name in (("mcp", "MCPServerAgent"), ("langchain", "LangChainAgent")):
        statement = f"from reach_adapters.{adapter} import {name}"
        imported = _run_base(base_venv, "python", "-c", statement, cwd=tmp_path)
        assert imported.returncode == 1
        assert (
            imported.stderr.strip().splitlines()[-1].startswith("reach_adapters.extras.MissingExtraError: ")
        )
        assert imported.stderr.strip().endswith(f"pip install 'agent-reach[{adapter}]'")
    caught = _run_base(
        base_venv,
        "python",
        "-c",
        "from reach_adapters import ReachError\ntry:\n    from reach_adapters.mcp import MCPServerAgent\n"
        "except ImportError as exc:\n    print(isinstance(exc, ReachError), exc.name)",
        cwd=tmp_path,
    )
    assert caught.stdout.strip() == "True mcp"


@pytest.mark.timeout(420)
def test_check_and_schema_run_with_only_the_base_package(base_venv: Path, tmp_path: Path) -> None:
    (tmp_path / "shouting.py").write_text(_AGENT, encoding="utf-8")
    config = tmp_path / "config"
    config.mkdir()
    write(config, "util:shout:01.yaml", "kind: function\nagent_id: util:shout:01\nfunction: shouting:shout\n")
    checked = _run_base(base_venv, "reach", "check", str(config), "--json", cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert [agent["agent_id"] for agent in json.loads(checked.stdout)["agents"]] == ["util:shout:01"]
    schema = _run_base(base_venv, "reach", "schema", "agent", cwd=tmp_path)
    assert schema.returncode == 0, schema.stderr
    assert json.loads(schema.stdout)["title"]


def test_the_install_hints_name_the_extras_pyproject_declares() -> None:
    # Each extra's modules come from the distributions pyproject.toml lists for it.
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    distributions = packages_distributions()

    def normal(name: str) -> str:  # PEP 503: prometheus_client is prometheus-client
        return re.sub(r"[-_.]+", "-", name).lower()

    for extra, modules in EXTRAS.items():
        requirements = declared["optional-dependencies"][extra]
        wanted = {normal(re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0]) for req in requirements}
        for module in modules:
            assert {normal(name) for name in distributions[module]} & wanted, (extra, module)
