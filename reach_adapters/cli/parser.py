"""The ``reach`` command's arguments.

Command handlers are imported when their command runs, not here: ``reach --help`` and ``--version``
then cost a few milliseconds, and work with only the base package installed (the serving commands
need the ``gateway`` extra, checked before their handler is imported).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any, NoReturn

from reach_adapters.cli.argtypes import (
    add_call_options,
    call_options,
    pair,
    payload,
    positive,
)
from reach_adapters.cli.chains_parser import add_chain_commands
from reach_adapters.cli.codes import EXIT_USAGE
from reach_adapters.cli.consensus_parser import add_consensus_commands
from reach_adapters.cli.safety import add_config_safety
from reach_adapters.cli.serve_parser import add_serve_command
from reach_adapters.cli.tasks_parser import add_query, add_task_commands, add_token
from reach_adapters.version import package_version

__all__ = ["build_parser"]

_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line naming the flag, and where the help is."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}; see '{self.prog} --help'\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="reach",
        description="Agent Reach: one router for LangChain agents and MCP servers, run from config files.",
    )
    parser.add_argument("--version", action="version", version=f"reach {package_version()}")
    commands = parser.add_subparsers(metavar="COMMAND", required=True)
    logs = _Parser(add_help=False)
    logs.add_argument(
        "--log-level", type=str.upper, choices=_LEVELS, help="log level (serve: INFO, else WARNING)"
    )
    logs.add_argument("--log-json", action="store_true", help="log one JSON object per line on stderr")
    app_dir = _Parser(add_help=False)
    app_dir.add_argument(
        "--app-dir",
        default=".",
        metavar="DIR",
        help="where import paths in agent files resolve from (default: .)",
    )
    add_serve_command(commands, _command, [logs, app_dir])
    _catalog(commands, [logs, app_dir])
    _call(commands, [logs, app_dir])
    _explain(commands, [logs])
    add_task_commands(commands, _command, [logs])
    add_chain_commands(commands, _command, [logs])
    add_consensus_commands(commands, _command, [logs, app_dir], _target, [logs])
    _scan(commands, [logs])
    _cluster(commands, [logs])
    _check(commands, [logs, app_dir])
    _schema(commands, [logs])
    return parser


def _command(
    commands: Any, name: str, parents: list[argparse.ArgumentParser], summary: str, description: str
) -> argparse.ArgumentParser:
    sub: argparse.ArgumentParser = commands.add_parser(
        name, parents=parents, help=summary, description=description
    )
    sub.set_defaults(parser=sub, extra=None, default_level="WARNING")
    return sub


def _target(sub: argparse.ArgumentParser) -> None:
    where = sub.add_mutually_exclusive_group()
    where.add_argument(
        "--url", default=os.environ.get("REACH_URL"), help="a running `reach serve` (default: $REACH_URL)"
    )
    where.add_argument("--config", type=Path, metavar="DIR", help="start the agents of this config directory")
    sub.add_argument("--timeout", type=positive, default=60.0, metavar="S", help="HTTP timeout with --url")
    add_token(sub)
    add_config_safety(sub)
    sub.add_argument("--json", action="store_true", help="print JSON instead of text")
    sub.set_defaults(needs_target=True)


def _catalog(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    sub = _command(
        commands,
        "catalog",
        parents,
        "list the agents, their state and capabilities",
        "List every agent with its state, breaker, load and capabilities.",
    )
    _target(sub)
    sub.set_defaults(run=_run_catalog, extra="gateway")


def _run_catalog(args: argparse.Namespace) -> int:
    from reach_adapters.cli.query import run_catalog

    return run_catalog(args)


def _call(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    sub = _command(
        commands,
        "call",
        parents,
        "route one task and print the result",
        "Route PAYLOAD to the best agent declaring CAPABILITY, or, when the target has ':' in it, send "
        "it to that agent id (--capability names which of its capabilities, if it has several). "
        "Exits 1 when the result is not ok.",
    )
    sub.add_argument("target", metavar="CAPABILITY", help="a capability name, or an agent id")
    sub.add_argument(
        "payload",
        type=payload,
        nargs="?",
        default={},
        metavar="PAYLOAD",
        help="JSON ('-' reads stdin; default {})",
    )
    add_call_options(sub, "timeout_ms, priority, namespace, fallback")
    sub.add_argument(
        "--capability", metavar="NAME", help="with an agent id: the capability to call, if it has several"
    )
    sub.add_argument("--explain", action="store_true", help="print the decision record too")
    _target(sub)
    sub.set_defaults(run=_with_options, extra="gateway")


def _with_options(args: argparse.Namespace) -> int:
    from reach_adapters.cli.errors import UsageError
    from reach_adapters.cli.query import run_call

    options = call_options(args, "the capability or agent id and the payload")
    if args.capability is not None and ":" not in args.target:
        msg = (
            f"--capability goes with an agent id; {args.target!r} is a capability name, "
            "which reaches the best agent for it already"
        )
        raise UsageError(msg)
    args.options = options
    return run_call(args)


def _explain(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    sub = _command(
        commands,
        "explain",
        parents,
        "show why a task went where it went",
        "Print the decision record of a recent task of a running server: candidates and scores, "
        "exclusions, attempts, the choice. Records live in the server that routed the task, so "
        "this needs --url; `reach call --explain` shows the record of a call made from a config dir.",
    )
    sub.add_argument("task_id", metavar="TASK_ID")
    sub.add_argument("--why-not", metavar="AGENT_ID", help="also say why the task did not go to this agent")
    add_query(sub)
    sub.set_defaults(run=_explain_remote, extra="gateway")


def _explain_remote(args: argparse.Namespace) -> int:
    if not args.url:
        args.parser.error("give --url of a running `reach serve` (or set REACH_URL)")
    from reach_adapters.cli.query import run_explain

    return run_explain(args)


def _scan(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    sub = _command(
        commands,
        "scan",
        parents,
        "print an MCP server's tools or an A2A agent's skills as an agent file",
        "Connect to an MCP server (reach scan [options] -- COMMAND ARGS..., or --url URL) or an A2A "
        "agent (--a2a URL) and print the agent file it makes: its tools' or skills' capability "
        "declarations, ready to save in a config directory.",
    )
    sub.add_argument("command", nargs="*", metavar="COMMAND", help="the server's command line, after --")
    sub.add_argument("--url", help="a streamable HTTP server instead of a command")
    sub.add_argument("--a2a", metavar="URL", help="an A2A agent's base URL (its card is read from it)")
    sub.add_argument("--name", help="agent type (default: from the command or URL)")
    sub.add_argument("--instance", default="0", help="agent instance (default: 0)")
    sub.add_argument("--prefix", default="", help="prepended to each tool name")
    sub.add_argument("--env", type=pair, action="append", default=[], metavar="KEY=VALUE")
    sub.add_argument("--cwd", help="working directory of the command")
    sub.add_argument("--header", type=pair, action="append", default=[], metavar="KEY=VALUE")
    sub.add_argument("--timeout", type=positive, default=10.0, metavar="S", help="connect timeout")
    sub.add_argument("--schemas", action="store_true", help="include each tool's input and output schema")
    sub.add_argument("--json", action="store_true", help="print JSON instead of YAML")
    sub.set_defaults(run=_scan_checked, extra="gateway")


def _scan_checked(args: argparse.Namespace) -> int:
    if [bool(args.command), bool(args.url), bool(args.a2a)].count(True) != 1:
        args.parser.error(
            "give the server's command after -- (reach scan -- python -m my_server), or --url, or --a2a"
        )
    from reach_adapters.cli.scan import run_scan

    args.env = dict(args.env)
    args.header = dict(args.header)
    return run_scan(args)


def _cluster(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    sub = _command(
        commands,
        "cluster",
        parents,
        "show the nodes of a cluster, their leases and task queue",
        "Read a cluster's Redis directly (no node needs to run): every node with its agents, their "
        "states and how long ago its leases were renewed, and the async task queue with its dead letters.",
    )
    sub.add_argument(
        "--registry",
        required=True,
        metavar="URL",
        help="the cluster's Redis, as given to reach serve --registry (redis://HOST:PORT/DB)",
    )
    sub.add_argument("--prefix", default="reach:", help="the cluster's key prefix (default: %(default)s)")
    sub.add_argument(
        "--timeout", type=positive, default=5.0, metavar="S", help="Redis connect and read timeout"
    )
    sub.add_argument("--json", action="store_true", help="print JSON instead of text")
    sub.set_defaults(run=_run_cluster, extra="cluster")


def _run_cluster(args: argparse.Namespace) -> int:
    from reach_adapters.cli.cluster import run_cluster

    return run_cluster(args)


def _check(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    sub = _command(
        commands,
        "check",
        parents,
        "validate a config directory",
        "Validate CONFIG_DIR without starting anything: every file, import path and server command. "
        "Exits 3 with file, line and field when something is wrong.",
    )
    sub.add_argument("config_dir", type=Path, metavar="CONFIG_DIR")
    sub.add_argument("--json", action="store_true", help="print JSON instead of text")
    add_config_safety(sub)
    sub.set_defaults(run=_run_check)


def _run_check(args: argparse.Namespace) -> int:
    from reach_adapters.cli.check import run_check

    return run_check(args)


def _schema(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    sub = _command(
        commands,
        "schema",
        parents,
        "print the JSON Schema of config files",
        "Print the JSON Schema of the routing policy file, of agent files or of security.yaml, for "
        "editors and CI; --write regenerates the copies shipped in the package.",
    )
    sub.add_argument("kind", nargs="?", choices=("policy", "agent", "security"), help="which file kind")
    sub.add_argument("--write", action="store_true", help="rewrite the schema files shipped in the package")
    sub.set_defaults(run=_schema_checked)


def _schema_checked(args: argparse.Namespace) -> int:
    if bool(args.kind) == args.write:
        args.parser.error("give a kind to print (policy, agent or security), or --write to regenerate all")
    from reach_adapters.cli.schema import run_schema

    return run_schema(args)
