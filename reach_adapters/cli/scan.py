"""``reach scan -- COMMAND...`` (or ``--url``, ``--a2a``): an MCP server's tools or an A2A agent's
skills, printed as an agent file ready to save."""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from mcp import StdioServerParameters

from reach_adapters.cli.codes import EXIT_OK
from reach_adapters.cli.errors import UsageError
from reach_adapters.cli.progress import progress
from reach_adapters.cli.render import render_json
from reach_adapters.config import file_stems
from reach_adapters.config.loader import missing_program
from reach_adapters.config.models import AGENT_KINDS
from reach_adapters.mcp import MCPOptions, MCPServerAgent
from reach_adapters.router import Capability, agent_id_part, parse_agent_id
from reach_adapters.security import is_secret_name, redact_headers

__all__ = ["default_name", "run_scan"]

# Per-tool fields written out: what the server told about each tool, as knobs to edit.
_PER_TOOL = ("description", "read_only", "idempotent")
# Per-skill fields: what the card tells about each skill, and the flags it cannot say.
_PER_SKILL = ("description", "keywords", "examples", "read_only", "idempotent")
_SCHEMAS = ("input_schema", "output_schema")
_NAME_PREFIXES = ("mcp-server-", "mcp_server_", "server-", "server_", "mcp-", "mcp_")
_ENV_UNSAFE = re.compile(r"[^A-Za-z0-9_]+")


def run_scan(args: argparse.Namespace) -> int:
    data = asyncio.run(_scan_a2a(args) if args.a2a else _scan(args))
    stem = file_stems(AGENT_KINDS[data["kind"]].model_validate(data).agent_id)[0]
    suffix = ".json" if args.json else ".yaml"
    if args.json:
        print(render_json(data))
    else:
        print(f"# {stem}{suffix}: written by `reach scan`; save it in a config directory under this name.")
        print(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100), end="")
    print(f"reach scan: save this as {stem}{suffix} in your config directory", file=sys.stderr)
    return EXIT_OK


async def _scan(args: argparse.Namespace) -> dict[str, Any]:
    command: list[str] = args.command
    problem = missing_program(command[0]) if command else None
    if problem is not None:
        raise UsageError(problem)
    name = args.name or default_name(command, args.url)
    # A script's file name ("index" of node path/to/index.js) says little: the server's own name
    # is better, once connected.
    named_by_server = not args.name and bool(command) and _script(command) is not None
    server = (
        StdioServerParameters(command=command[0], args=command[1:], env=args.env or None, cwd=args.cwd)
        if command
        else args.url
    )
    options = MCPOptions(instance=args.instance, prefix=args.prefix, connect_timeout_s=args.timeout)
    async with progress(f"reach scan: connecting to {' '.join(command) or args.url}", quiet=args.log_json):
        agent = await MCPServerAgent.connect(name, server, headers=args.header or None, options=options)
    try:
        data = _agent_file(agent, command, args)
        if named_by_server and agent.server_name:
            data["name"] = clean_name(agent.server_name)
    finally:
        await agent.aclose()
    return data


async def _scan_a2a(args: argparse.Namespace) -> dict[str, Any]:
    from reach_adapters.a2a import A2AAgent, A2AOptions

    options = A2AOptions(instance=args.instance, connect_timeout_s=args.timeout)
    async with progress(f"reach scan: reading the agent card of {args.a2a}", quiet=args.log_json):
        agent = await A2AAgent.connect(args.a2a, args.name, headers=args.header or None, options=options)
    try:
        data: dict[str, Any] = {
            "kind": "a2a",
            "name": parse_agent_id(agent.agent_id).type,
            "instance": args.instance,
            "url": args.a2a,
        }
        _credentials(data, args.header)
        config = agent.options
        data |= {
            "timeout_ms": config.timeout_ms,
            "max_concurrency": config.max_concurrency,
            "weight": config.weight,
        }
        fields = _PER_SKILL + (_SCHEMAS if args.schemas else ())
        data["overrides"] = {cap.name: _declaration(cap, fields) for cap in agent.capabilities}
    finally:
        await agent.aclose()
    return data


def _agent_file(agent: MCPServerAgent, command: Sequence[str], args: argparse.Namespace) -> dict[str, Any]:
    """The agent file for a connected server, as plain data."""
    config = agent.options
    data: dict[str, Any] = {
        "kind": "mcp",
        "name": parse_agent_id(agent.agent_id).type,
        "instance": config.instance,
    }
    if config.prefix:
        data["prefix"] = config.prefix
    if command:
        data["command"] = command[0]
        if command[1:]:
            data["args"] = list(command[1:])
        _environment(data, dict(args.env))
        if args.cwd:
            data["cwd"] = str(Path(args.cwd).resolve())
    else:
        data["url"] = args.url
        _credentials(data, args.header)
    data |= {
        "timeout_ms": config.timeout_ms,
        "max_concurrency": config.max_concurrency,
        "weight": config.weight,
    }
    fields = _PER_TOOL + (_SCHEMAS if args.schemas else ())
    data["overrides"] = {
        cap.name.removeprefix(config.prefix): _declaration(cap, fields) for cap in agent.capabilities
    }
    return data


def _environment(data: dict[str, Any], env: Mapping[str, str]) -> None:
    """The ``--env`` values as the agent file keeps them: a secret's name in ``pass_env`` (read
    from reach's own environment when it serves), never its value; the others as given."""
    secret = sorted(name for name in env if is_secret_name(name))
    plain = {name: value for name, value in env.items() if name not in secret}
    if plain:
        data["env"] = plain
    if secret:
        data["pass_env"] = secret
        print(
            f"reach scan: {', '.join(secret)} is passed from reach's own environment (pass_env), its "
            "value not written; export it there before serving the file",
            file=sys.stderr,
        )


def _credentials(data: dict[str, Any], headers: Mapping[str, str] | None) -> None:
    """The ``--header`` values as the agent file keeps them: a bearer token as the environment
    variable to read it from (``bearer_token_env``), other secret-named headers masked. A file
    that is printed, saved and shared must not carry the credentials it was scanned with."""
    kept: dict[str, str] = {}
    for name, value in (headers or {}).items():
        if name.lower() == "authorization" and value[:7].lower() == "bearer ":
            env = f"{_ENV_UNSAFE.sub('_', data['name']).upper()}_TOKEN"
            data["bearer_token_env"] = env
            print(f"reach scan: the bearer token is read from ${env}; export it there", file=sys.stderr)
        else:
            kept[name] = value
    if kept:
        data["headers"] = redact_headers(kept)
        masked = sorted(name for name, value in data["headers"].items() if value != kept[name])
        if masked:
            print(
                f"reach scan: the values of {', '.join(masked)} are masked (***): write them into the file "
                "before serving it",
                file=sys.stderr,
            )


def _declaration(capability: Capability, fields: tuple[str, ...]) -> dict[str, Any]:
    dumped = capability.model_dump(include=set(fields), exclude_none=True)
    return {field: dumped[field] for field in fields if field in dumped}


# Programs that run the server named by their first argument: name the server after that.
_LAUNCHERS = re.compile(r"^(python[0-9.]*|pypy[0-9.]*|node|deno|bun|npx|uvx?|pipx)$")


def default_name(command: Sequence[str], url: str | None) -> str:
    """A server name from what starts it: the module after ``-m``, else the script an interpreter
    runs, else the program (or the URL's host), without an ``mcp-server-`` prefix, in the
    characters an agent id allows."""
    if command:
        if "-m" in command[:-1]:
            source = command[command.index("-m") + 1]
        else:
            launched = _launched(command)
            source = Path(launched).stem if launched else Path(command[0]).stem
        source = source.rsplit(".", 1)[-1]
    else:
        source = re.sub(r"^https?://", "", url or "").split("/")[0].split(":")[0]
    return clean_name(source)


def clean_name(source: str) -> str:
    """`source` without an ``mcp-server-`` (or ``mcp-``) prefix, in the characters an agent id allows."""
    for prefix in _NAME_PREFIXES:
        if source.startswith(prefix):
            source = source.removeprefix(prefix)
            break
    return agent_id_part(source, "server")


def _launched(command: Sequence[str]) -> str | None:
    """What a launcher in `command` runs (a script, a package), else None."""
    if _LAUNCHERS.match(Path(command[0]).stem) is None:
        return None
    return next((arg for arg in command[1:] if not arg.startswith("-")), None)


def _script(command: Sequence[str]) -> str | None:
    """The script file an interpreter in `command` runs (``node path/to/index.js``), else None."""
    launched = _launched(command)
    return launched if launched and Path(launched).suffix else None
