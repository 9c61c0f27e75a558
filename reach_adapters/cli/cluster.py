"""``reach cluster``: the nodes of a cluster, their leases, and the async task queue, read from
its Redis directly (no node needs to run)."""

from __future__ import annotations

import argparse
import asyncio

from reach_adapters.cli.codes import EXIT_OK
from reach_adapters.cli.errors import UsageError
from reach_adapters.cli.render import render_cluster, render_json
from reach_adapters.cluster.errors import ClusterError
from reach_adapters.cluster.records import checked_keys
from reach_adapters.cluster.survey import survey
from reach_adapters.security import redact_url

__all__ = ["run_cluster"]


def run_cluster(args: argparse.Namespace) -> int:
    try:
        checked_keys(args.prefix)
    except ClusterError as exc:
        # A usage error (exit 2), not a Redis out of reach.
        msg = f"--prefix: {exc}"
        raise UsageError(msg) from None
    try:
        found = asyncio.run(survey(args.registry, prefix=args.prefix, timeout_s=args.timeout))
    except ValueError as exc:
        # survey() raises it for a malformed URL only (redis-py's parser), before connecting.
        msg = f"--registry {redact_url(args.registry)!r}: {exc}; give redis://HOST:PORT/DB"
        raise UsageError(msg) from None
    report = {"registry": redact_url(args.registry), "prefix": args.prefix, **found.to_dict()}
    print(render_json(report) if args.json else render_cluster(report))
    return EXIT_OK
