"""``reach consensus`` (against a server, or a config directory) and ``reach feedback``."""

from __future__ import annotations

import argparse
from typing import Any

from pydantic import ValidationError

from middleware import ConsensusHint
from reach_adapters.cli.argtypes import call_options
from reach_adapters.cli.codes import EXIT_OK
from reach_adapters.cli.errors import UsageError
from reach_adapters.cli.query import local_run, print_outcome, remote_for
from reach_adapters.cli.render import render_json, table, vote_side
from reach_adapters.gateway import Gateway

__all__ = ["render_votes", "run_consensus", "run_feedback"]


def run_consensus(args: argparse.Namespace) -> int:
    options = call_options(args, "the capability and the payload")
    how = {"n": args.n, "quorum": args.quorum, "vote": args.vote, "judge": args.judge}
    try:
        # Checked here, not by the server's 400: a usage mistake exits 2 with --url as with --config.
        ConsensusHint(**how)
    except ValidationError as exc:
        raise UsageError(_in_flags(exc)) from None
    if args.url:
        remote = remote_for(args)
        body = {"capability": args.capability, "payload": args.payload, "options": options, **how}
        result = remote.post("/consensus", body)
        decision = remote.get(f"/explain/{result['task_id']}") if args.explain else None
    else:

        async def call(gateway: Gateway) -> tuple[dict[str, Any], dict[str, Any]]:
            router = gateway.router
            outcome = await router.consensus(args.capability, args.payload, **how, **options)
            return outcome.model_dump(mode="json"), router.explain(outcome.task_id).to_dict()

        result, record = local_run(args, call)
        decision = record if args.explain else None
    return print_outcome(args, result, decision, _votes)


# `ConsensusHint`'s rules between its fields, said in the flags' names (by error type).
_JUDGE = "--judge CAPABILITY goes with --vote judge, and --vote judge needs it"
_RULES = {
    "consensus_quorum_above_n": (
        "--quorum {quorum} is above --n {n}: ask at least as many agents as must agree"
    ),
    "consensus_judge_missing": _JUDGE,
    "consensus_judge_unused": _JUDGE,
}


def _in_flags(exc: ValidationError) -> str:
    """What `ConsensusHint` refused, each problem naming the flags rather than its fields."""
    lines = []
    for error in exc.errors(include_url=False):
        rule = _RULES.get(error["type"])
        if rule is not None:
            lines.append(rule.format(**error.get("ctx", {})))
        else:
            flag = " ".join(f"--{part}" for part in error["loc"])
            lines.append(f"{flag} {error['input']}: {error['msg']}")
    return "; ".join(lines)


def _votes(result: dict[str, Any]) -> str | None:
    votes = (result.get("extra") or {}).get("votes") or []
    return render_votes(votes, decided=result["status"] == "ok") if votes else None


def run_feedback(args: argparse.Namespace) -> int:
    body = {"task_id": args.task_id, "score": args.score, "reason": args.reason}
    done = remote_for(args).post("/feedback", body)
    if args.json:
        print(render_json(done))
    else:
        lines = [f"task {done['task_id']} ({done['capability']}) scored {done['score']:g}"]
        lines.extend(
            f"  {change['agent_id']}: rating {change['before']:.3f} -> {change['after']:.3f}"
            for change in done["rated"]
        )
        print("\n".join(lines))
    return EXIT_OK


def render_votes(votes: list[dict[str, Any]], *, decided: bool) -> str:
    rows = [
        (
            vote["agent_id"],
            vote["status"],
            vote_side(vote, decided),
            render_json(vote.get("payload")) if vote["status"] == "ok" else vote.get("error") or "",
        )
        for vote in votes
    ]
    return table(["voter", "status", "vote", "answer"], rows)
