"""The ``reach serve`` command's arguments: what it listens on, how it follows its config
directory, the cluster it joins and what it serves."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from reach_adapters.cli.argtypes import base_url, port, positive, text_file
from reach_adapters.cli.safety import add_audit_log, add_config_safety, add_insecure, add_limits
from reach_adapters.cli.tasks_parser import Command

__all__ = ["add_serve_command"]


def add_serve_command(commands: Any, command: Command, parents: list[argparse.ArgumentParser]) -> None:
    sub = command(
        commands,
        "serve",
        parents,
        "serve a config directory over MCP and HTTP",
        "Start the router from CONFIG_DIR and serve it: MCP (streamable HTTP at /mcp, or stdio) and an "
        "HTTP API (/api/catalog, /api/route, /api/send, /api/consensus, /api/tasks, /api/feedback, "
        "/api/compensate/TASK_ID, /api/explain/TASK_ID, /api/health, /metrics), and, "
        "with the 'a2a' extra, A2A (/.well-known/agent-card.json, /a2a). "
        "Once serving, prints 'reach ready: url=... mcp=... api=...' (on stderr with --transport stdio). "
        "Changes to CONFIG_DIR are applied while it runs; an invalid change is logged and ignored.",
    )
    sub.add_argument("config_dir", type=Path, metavar="CONFIG_DIR")
    sub.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: %(default)s)")
    sub.add_argument(
        "--port",
        type=port,
        default=8000,
        help="port for MCP and the API; 0 picks a free one (default: %(default)s)",
    )
    sub.add_argument(
        "--transport",
        choices=("http", "stdio"),
        default="http",
        help="MCP over streamable HTTP or stdio (default: %(default)s)",
    )
    sub.add_argument(
        "--api-port", type=port, help="with --transport stdio: also serve HTTP on this port (default: none)"
    )
    sub.add_argument(
        "--name", default="agent-reach", help="server name shown to MCP clients (default: %(default)s)"
    )
    told = sub.add_mutually_exclusive_group()
    told.add_argument(
        "--instructions",
        metavar="TEXT",
        help="instructions MCP clients get (hosts put them in the model's context), before those of "
        "the MCP servers served (default: theirs alone)",
    )
    told.add_argument(
        "--instructions-file",
        dest="instructions",
        type=text_file,
        metavar="FILE",
        help="--instructions read from FILE (UTF-8)",
    )
    sub.add_argument(
        "--no-upstream-instructions",
        dest="upstream_instructions",
        action="store_false",
        help="leave out the instructions of the MCP servers served (default: each server's after yours)",
    )
    sub.add_argument(
        "--reload-interval",
        type=positive,
        default=0.5,
        metavar="S",
        help="seconds between looks at CONFIG_DIR (default: %(default)s)",
    )
    sub.add_argument(
        "--no-reload",
        dest="reload",
        action="store_false",
        help="do not follow CONFIG_DIR (default: follow it)",
    )
    sub.add_argument(
        "--drain-timeout",
        type=positive,
        default=30.0,
        metavar="S",
        help="seconds a reload waits for in-flight calls (default: %(default)s)",
    )
    sub.add_argument(
        "--shutdown-timeout",
        type=positive,
        default=3.0,
        metavar="S",
        help="seconds of grace for open connections at stop (default: %(default)s)",
    )
    sub.add_argument(
        "--registry",
        metavar="URL",
        help="join the cluster whose registry is this Redis (redis://HOST:PORT/DB): this process becomes "
        "a node, its agents are leased there and other nodes' agents are listed (default: registry.url "
        "of the policy file, else none)",
    )
    sub.add_argument(
        "--node-id",
        help="this node's id in the cluster (default: registry.node_id of the policy file, else "
        "HOSTNAME-RANDOM)",
    )
    sub.add_argument(
        "--lease-ttl",
        type=positive,
        metavar="S",
        help="in a cluster: seconds a lease of this node's agents lasts, renewed every third of it "
        "(default: registry.lease_ttl_s of the policy file, else 15)",
    )
    sub.add_argument(
        "--no-a2a",
        dest="a2a",
        action="store_false",
        help="do not serve the router as an A2A agent (/.well-known/agent-card.json, /a2a); "
        "default: served when the 'a2a' extra is installed",
    )
    sub.add_argument(
        "--public-url",
        type=base_url,
        metavar="URL",
        help="the base URL clients reach this server at (behind a proxy), named by the A2A agent "
        "card; default: the listening address, or on 0.0.0.0 the URL each request was sent to",
    )
    sub.add_argument(
        "--a2a-private-push",
        action="store_true",
        help="allow A2A push receivers on loopback and private networks (default: public addresses "
        "only, so a caller cannot aim the server at internal services)",
    )
    sub.add_argument(
        "--consensus-tool",
        action="store_true",
        help="offer the router's consensus as an MCP tool too (reach_consensus; each call asks "
        "several agents, so it is off by default)",
    )
    add_config_safety(sub)
    add_insecure(sub)
    add_audit_log(sub)
    add_limits(sub)
    sub.set_defaults(run=_run_serve, extra="gateway", default_level="INFO")


def _run_serve(args: argparse.Namespace) -> int:
    if args.api_port is not None and args.transport != "stdio":
        # Over HTTP, --port serves the API already: a second port given would go unused.
        args.parser.error(
            f"--api-port {args.api_port}: it is for --transport stdio (HTTP beside MCP on stdin/stdout); "
            "with --transport http the API is served on --port"
        )
    from reach_adapters.cli.serve import run_serve

    return run_serve(args)
