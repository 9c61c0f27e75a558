"""``reach catalog``, ``reach call`` and ``reach explain``: against a server, or a config directory."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from reach_adapters.cli.codes import EXIT_FAILED, EXIT_OK
from reach_adapters.cli.progress import progress
from reach_adapters.cli.remote import Remote
from reach_adapters.cli.render import render_catalog, render_decision, render_json, render_result
from reach_adapters.gateway import Gateway
from reach_adapters.gateway.views import catalog_view
from reach_adapters.router.planning import NAME_ONE

__all__ = ["local_run", "print_outcome", "remote_for", "run_call", "run_catalog", "run_explain"]

T = TypeVar("T")


def run_catalog(args: argparse.Namespace) -> int:
    agents = remote_for(args).get("/catalog") if args.url else local_run(args, _catalog)
    print(render_json(agents) if args.json else render_catalog(agents))
    return EXIT_OK


def run_call(args: argparse.Namespace) -> int:
    # An agent id has ':' in it; a capability name never does (as in the reach_agent tool).
    directed = ":" in args.target
    if args.url:
        remote = remote_for(args)
        body = {"payload": args.payload, "options": args.options}
        if directed:
            body.update(agent_id=args.target, capability=args.capability)
        else:
            body["capability"] = args.target
        result = remote.post("/send" if directed else "/route", body)
        decision = remote.get(f"/explain/{result['task_id']}") if args.explain else None
    else:

        async def call(gateway: Gateway) -> tuple[dict[str, Any], dict[str, Any]]:
            router = gateway.router
            if directed:
                outcome = await router.send(
                    args.target, args.payload, capability=args.capability, **args.options
                )
            else:
                outcome = await router.route(args.target, args.payload, **args.options)
            return outcome.model_dump(mode="json"), router.explain(outcome.task_id).to_dict()

        result, record = local_run(args, call)
        decision = record if args.explain else None
    if directed:
        _in_cli_words(result)
    return print_outcome(args, result, decision)


def _in_cli_words(result: dict[str, Any]) -> None:
    """The router names a directed call's capability as the Python API takes it; here it is a flag."""
    error = result.get("error")
    if isinstance(error, str) and NAME_ONE in error:
        result["error"] = error.replace(NAME_ONE, "(--capability NAME)")


def print_outcome(
    args: argparse.Namespace,
    result: dict[str, Any],
    decision: dict[str, Any] | None,
    details: Callable[[dict[str, Any]], str | None] | None = None,
) -> int:
    """Print a call's result (``--json``: as JSON), what `details` adds, and with ``--explain``
    its decision record; the exit code says whether it ended ok."""
    if args.json:
        print(render_json({"result": result, "decision": decision} if args.explain else result))
    else:
        options = getattr(args, "options", None) or {}
        configurable = options.get("configurable")
        thread = configurable.get("thread_id") if isinstance(configurable, dict) else None
        print(render_result(result, local=args.config is not None, thread=thread))
        more = None if details is None else details(result)
        if more:
            print(more)
        if decision is not None:
            print(render_decision(decision))
    return EXIT_OK if result["status"] == "ok" else EXIT_FAILED


def run_explain(args: argparse.Namespace) -> int:
    params = {"why_not": args.why_not} if args.why_not else None
    record = remote_for(args).get(f"/explain/{args.task_id}", params)
    print(render_json(record) if args.json else render_decision(record))
    return EXIT_OK


async def _catalog(gateway: Gateway) -> list[dict[str, Any]]:
    return catalog_view(gateway.router.catalog())


def remote_for(args: argparse.Namespace) -> Remote:
    return Remote(args.url, timeout_s=args.timeout, token=args.token)


def local_run(args: argparse.Namespace, work: Callable[[Gateway], Awaitable[T]]) -> T:
    """Start the agents of the ``--config`` directory, do `work`, close them all again."""

    async def run() -> T:
        async with progress(f"{args.parser.prog}: starting the agents of {args.config}", quiet=args.log_json):
            gateway = await Gateway.start(args.config, allow_insecure_config=args.allow_insecure_config)
        async with gateway:
            return await work(gateway)

    return asyncio.run(run())
