"""``reach serve CONFIG_DIR``: the router from a config directory, served over MCP and HTTP.

Order matters for "nothing half-started": the config is validated first (nothing runs yet), then
the port is bound (still nothing runs), then the agents are built (all or none), then serving
begins and the ready line is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import socket
import sys
from typing import TYPE_CHECKING, NoReturn, TextIO

from reach_adapters.cli.codes import EXIT_OK
from reach_adapters.cli.progress import progress
from reach_adapters.cli.safety import LIMIT_FLAGS
from reach_adapters.config import ConfigError, load_config
from reach_adapters.config.registry import RegistrySettings
from reach_adapters.extras import require_extra
from reach_adapters.gateway import (
    Gateway,
    GatewayEndpoint,
    GatewayError,
    ServerLimits,
    listen,
    serve_http,
    unprotected_exposure,
)
from reach_adapters.gateway.audit import AuditLog
from reach_adapters.mcp import serve_mcp

if TYPE_CHECKING:
    from reach_adapters.cluster import ClusterNode

__all__ = ["READY_PREFIX", "run_serve"]

# The line tests, the demo and scripts wait for; its format is documented in docs/cli.md.
READY_PREFIX = "reach ready:"
# Middle-generation passes before a full one (CPython's default is 10): see `_settle_heap`.
_FULL_PASS_EVERY = 100


def run_serve(args: argparse.Namespace) -> int:
    return asyncio.run(_serve(args))


async def _serve(args: argparse.Namespace) -> int:
    # From here on a signal asks for a clean stop, also while the agents are still being built.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        return await _serve_until(args, stop)
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)


async def _serve_until(args: argparse.Namespace, stop: asyncio.Event) -> int:
    limits = _limits(args)
    # Opened first, so an unwritable path fails before anything starts; closed last, after every call.
    audit = None if args.audit_log is None else AuditLog(args.audit_log)
    try:
        return await _run(args, stop, limits, audit)
    finally:
        if audit is not None:
            audit.close()


async def _run(
    args: argparse.Namespace, stop: asyncio.Event, limits: ServerLimits, audit: AuditLog | None
) -> int:
    config = load_config(args.config_dir, allow_insecure=args.allow_insecure_config)
    stdio = args.transport == "stdio"
    port, flag = (args.api_port, "--api-port") if stdio else (args.port, "--port")
    sock = None if port is None else _listen(args.host, port, flag)
    if sock is not None:
        # Refused before any agent starts; --insecure: something in front authenticates.
        exposed = unprotected_exposure(sock, secured=config.security is not None or args.insecure)
        if exposed is not None:
            sock.close()
            raise ConfigError(exposed)
    try:
        starting = f"reach serve: starting {len(config.agents)} agent(s) from {config.directory}"
        async with progress(starting, quiet=args.log_json):
            gateway = await Gateway.from_config(
                config, drain_timeout_s=args.drain_timeout, allow_insecure_config=args.allow_insecure_config
            )
    except BaseException:
        if sock is not None:
            sock.close()
        raise
    if audit is not None:
        audit.attach(gateway.router)
    if stop.is_set():
        # Stopped while the agents were being built: close them, never announce readiness.
        if sock is not None:
            sock.close()
        await gateway.aclose()
        return EXIT_OK
    try:
        node = await _join(args, gateway)
    except BaseException:
        if sock is not None:
            sock.close()
        await gateway.aclose()
        raise
    loop = asyncio.get_running_loop()
    endpoint: GatewayEndpoint | None = None
    waits: set[asyncio.Task[object]] = {loop.create_task(stop.wait(), name="reach stop")}
    stdio_task: asyncio.Task[None] | None = None
    try:
        if sock is not None:
            endpoint = await serve_http(
                gateway,
                sock,
                name=args.name,
                shutdown_timeout_s=args.shutdown_timeout,
                limits=limits,
                insecure=args.insecure,
                a2a=args.a2a,
                public_url=args.public_url,
                a2a_private_push=args.a2a_private_push,
                consensus_tool=args.consensus_tool,
                instructions=args.instructions,
                upstream_instructions=args.upstream_instructions,
            )
            waits.add(loop.create_task(endpoint.wait_closed(), name="reach http"))
        if stdio:
            stdio_task = loop.create_task(
                serve_mcp(
                    gateway.router,
                    transport="stdio",
                    name=args.name,
                    consensus_tool=args.consensus_tool,
                    instructions=args.instructions,
                    upstream_instructions=args.upstream_instructions,
                )
            )
            waits.add(stdio_task)
        if args.reload:
            gateway.watch(args.reload_interval)
        _settle_heap(gateway)
        _ready(endpoint, stdio, sys.stderr if stdio else sys.stdout)
        done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()
    finally:
        for task in waits:
            task.cancel()
        # A cancelled stdio server still waits for the SDK's stdin read in a worker thread, which
        # nothing interrupts: it is left behind, and the process leaves without it below.
        await asyncio.wait(waits - {stdio_task} if stdio_task is not None else waits)
        # Calls waiting for an agent that may never come end now, answered, before the server
        # stops waiting for its connections.
        await gateway.router.close_deferred()
        if endpoint is not None:
            await endpoint.aclose()
        if node is not None:
            # Before the agents close: the other nodes drop this node's agents at once.
            await node.aclose()
        await gateway.aclose()
    if stdio_task is not None and not stdio_task.done():
        _leave(EXIT_OK)
    return EXIT_OK


async def _join(args: argparse.Namespace, gateway: Gateway) -> ClusterNode | None:
    """With ``--registry``, or ``registry:`` in the policy file: make this process a node of that
    cluster (its id is in the log). Each flag given wins over the file's field."""
    settings = gateway.config.registry
    url = args.registry or (settings.url if settings is not None else None)
    if url is None:
        return None
    require_extra("cluster", "reach serve --registry")
    from reach_adapters.cluster import ClusterNode

    file = settings if settings is not None else RegistrySettings.model_construct(url=url)
    gateway.node = await ClusterNode.join(
        gateway.router,
        url,
        node_id=args.node_id or file.node_id,
        lease_ttl_s=args.lease_ttl or file.lease_ttl_s,
        prefix=file.prefix,
        task_visibility_timeout_s=file.task_visibility_timeout_s,
    )
    # Principals' quotas hold for the cluster as a whole, not per node.
    gateway.share_quotas(url, file.prefix)
    return gateway.node


def _limits(args: argparse.Namespace) -> ServerLimits:
    given = {dest: value for dest, _, _ in LIMIT_FLAGS.values() if (value := getattr(args, dest)) is not None}
    try:
        return ServerLimits(**given)
    except GatewayError as exc:
        parser: argparse.ArgumentParser = args.parser
        parser.error(str(exc))


def _leave(code: int) -> NoReturn:
    """Exit at once: everything is closed, only a thread blocked on stdin would hold the exit."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _listen(host: str, port: int, flag: str) -> socket.socket:
    try:
        socket.getaddrinfo(host, port)
    except socket.gaierror as exc:
        msg = f"--host {host}: cannot resolve it ({exc.strerror}); give an IP address such as 127.0.0.1"
        raise GatewayError(msg) from None
    try:
        return listen(host, port)
    except GatewayError as exc:
        msg = f"{flag} {port}: {exc}"
        raise GatewayError(msg) from None


def _settle_heap(gateway: Gateway) -> None:
    """Tune the garbage collector for a long-running server, once the process is built.

    Under load a node's full collections were its longest pauses: each scanned every object the
    process holds (0.1-0.4 s on a busy 2-core machine), and the decision log (10,000 records,
    replaced every few seconds at 1,000+ calls/s) started one every 1-2 s, so they set the
    cluster's async p99. What the process built to start (modules, agents, schemas) is frozen: no
    pass scans it again. A config reload retires agents built at start, so the first one applied
    unfreezes it all again, for them to be freed. And a full pass is considered after 100 passes of
    the middle generation instead of 10, so under load the pauses come several times more rarely
    (CPython also waits until the long-lived objects grew by a quarter)."""
    gc.collect()
    gc.freeze()
    gateway.on_reload(gc.unfreeze)
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, _FULL_PASS_EVERY)


def _ready(endpoint: GatewayEndpoint | None, stdio: bool, stream: TextIO) -> None:
    parts = [f"url={endpoint.url}"] if endpoint is not None else []
    parts.append("mcp=stdio" if stdio or endpoint is None else f"mcp={endpoint.mcp_url}")
    if endpoint is not None:
        parts.append(f"api={endpoint.api_url}")
        if endpoint.a2a_url is not None:
            parts.append(f"a2a={endpoint.a2a_url}")
    print(READY_PREFIX, " ".join(parts), file=stream, flush=True)
