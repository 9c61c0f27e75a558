"""Human-readable output of the CLI: tables, results and decision records, from their JSON forms.

Remote (HTTP API) and local (config directory) commands both hand their JSON here, so the two
look the same.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from reach_adapters.router.outcomes import UNKNOWN_OUTCOME

__all__ = [
    "render_catalog",
    "render_check",
    "render_cluster",
    "render_decision",
    "render_json",
    "render_result",
    "table",
    "vote_side",
]

_NO_LOCAL_RESUME = (
    "but not with --config: each command starts its agents anew, and a thread in an in-memory "
    "checkpointer ends with it; ask a running `reach serve CONFIG_DIR` with --url, or give the graph "
    "a persistent checkpointer"
)


def render_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned columns, two spaces apart, headers in capitals."""
    cells = [[h.upper() for h in headers], *[[str(cell) for cell in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(line.rstrip() for line in lines)


def render_catalog(agents: Sequence[Mapping[str, Any]]) -> str:
    if not agents:
        return "no agents registered"
    rows = [
        (
            info["agent_id"],
            info["state"],
            info["breaker"],
            info["in_flight"],
            info["calls"],
            ", ".join(_rated(cap["name"], info.get("ratings") or {}) for cap in info["capabilities"]),
            info.get("problem") or "",
        )
        for info in agents
    ]
    head = ["agent", "state", "breaker", "in flight", "calls", "capabilities", "problem"]
    if any(info.get("node") for info in agents):
        # A node of a cluster: say where each agent runs.
        return table(
            [*head, "node"], [(*row, info.get("node") or "") for row, info in zip(rows, agents, strict=True)]
        )
    return table(head, rows)


def _rated(capability: str, ratings: Mapping[str, float]) -> str:
    """The capability, with its rating from feedback when that moved it."""
    rating = ratings.get(capability, 1.0)
    return capability if rating >= 1.0 else f"{capability} (rated {rating:.2f})"


def render_cluster(report: Mapping[str, Any]) -> str:
    """`reach cluster`: a line per node, a line per agent, then the async task queue if any."""
    nodes = report["nodes"]
    where = f"{report['registry']} (prefix {report['prefix']})"
    if not nodes:
        lines = [f"no nodes in the cluster at {where}"]
    else:
        agents = [(agent, node["node"]) for node in nodes for agent in node["agents"]]
        lines = [f"cluster at {where}: {len(nodes)} node(s), {len(agents)} agent(s)", ""]
        rows = [
            (
                node["node"],
                len(node["agents"]),
                ", ".join(f"{state} {count}" for state, count in node["states"].items()),
                _seconds(node["lease_left_ms"]),
                f"{_seconds(node['renewed_ms_ago'])} ago",
            )
            for node in nodes
        ]
        lines += [table(["node", "agents", "states", "lease left", "renewed"], rows), ""]
        listed = [(a["agent_id"], node, a["state"], _seconds(a["lease_left_ms"])) for a, node in agents]
        lines.append(table(["agent", "node", "state", "lease left"], listed))
    if report["malformed_leases"]:
        lines.append(f"{report['malformed_leases']} lease key(s) under the prefix hold no lease record")
    queue = report["task_queue"]
    if queue is not None:
        lag = "" if queue["lag"] is None else f", lag {queue['lag']}"
        lines += [
            "",
            f"task queue: {queue['length']} entries, {queue['pending']} delivered and not acked{lag}, "
            f"{queue['consumers']} consumers; {queue['dead_letters']} dead letters",
        ]
    return "\n".join(lines)


def _seconds(ms: int) -> str:
    return f"{ms / 1000:.1f} s"


def render_result(result: Mapping[str, Any], *, local: bool = False, thread: object = None) -> str:
    """A call's result; `local`: its agents were started for this command alone (``--config``),
    so the thread of an agent that asks for input is not kept for the answer; `thread`: the
    thread the call named, which an answer names again."""
    timings = result.get("timings") or {}
    path = result.get("served_by")
    served = "not served" if path in (None, "none") else f"served by {path}"
    head = (
        f"{result['status']}: {result.get('capability') or '-'} -> {result.get('agent_id') or 'no agent'} "
        f"({served}, {result.get('attempts', 0)} attempt(s), {timings.get('total_ms', 0.0):.1f} ms)"
    )
    lines = [head, f"task {result['task_id']}  trace {result.get('trace_id') or '-'}"]
    asked = _interrupt_ids(result)
    if result["status"] in ("ok", "input_required"):
        # An agent asking for input says what it needs in the payload.
        payload = result.get("payload")
        label = "payload" if result["status"] == "ok" else "asks"
        if len(asked) > 1 and isinstance(payload, list) and len(payload) == len(asked):
            # Several questions are answered by id: each shown under the id its answer is keyed by.
            lines.append(f"{label}:")
            for interrupt_id, question in zip(asked, payload, strict=True):
                lines.append(f"  {interrupt_id}: {json.dumps(question, ensure_ascii=False)}")
        elif isinstance(payload, str):
            lines.append(f"{label}: {payload}")
        else:
            lines.append(f"{label}:")
            lines.extend("  " + line for line in render_json(payload).splitlines())
    if result["status"] == "input_required":
        answer: object = dict.fromkeys(asked, "<answer>") if len(asked) > 1 else "<answer>"
        configurable = {"thread_id": "<thread id>" if thread is None else thread}
        lines.append(
            f"answer on the same thread: {_option('configurable', configurable)} {_option('resume', answer)}"
        )
        if local:
            lines.append(_NO_LOCAL_RESUME)
    elif result["status"] != "ok":
        fault = f" ({result['fault']} fault)" if result.get("fault") else ""
        lines.append(f"error{fault}: {result.get('error_type')}: {result.get('error')}")
        fix = (result.get("extra") or {}).get("fix_options")
        if isinstance(fix, dict) and fix:
            # The error says it as a Python caller writes it; this is how the command takes it.
            lines.append("give it: " + " ".join(_option(key, value) for key, value in fix.items()))
        if result.get("delivered"):
            lines.append(_delivered(result))
    return "\n".join(lines)


def _interrupt_ids(result: Mapping[str, Any]) -> list[str]:
    """The ids of the interrupts an ``input_required`` result waits on (none for other agents)."""
    entries = (result.get("extra") or {}).get("interrupts")
    if not isinstance(entries, list):
        return []
    return [str(entry["id"]) for entry in entries if isinstance(entry, dict) and entry.get("id")]


def _option(key: str, value: object) -> str:
    """One ``--option`` as the shell takes it: text as it is, anything else as JSON."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return f"--option {shlex.quote(f'{key}={text}')}"


def _delivered(result: Mapping[str, Any]) -> str:
    """The delivered line of a failed result: received for sure, or (the router says the outcome
    is unknown: a connection lost, a node gone before it read the call) maybe."""
    if UNKNOWN_OUTCOME in (result.get("error") or ""):
        return "delivered: maybe, outcome unknown (the agent may have received the task and done the work)"
    return "delivered: yes, the agent received the task (it may have done the work)"


def render_decision(record: Mapping[str, Any], indent: str = "") -> str:
    """A decision record: candidates with their scores, exclusions, attempts, the choice."""
    lines = [
        f"decision for task {record['task_id']} (trace {record['trace_id']}): {record['mode']} "
        f"{record.get('capability') or '-'!s} "
        f"with strategy {record['strategy']} -> {record.get('chosen') or 'nobody'} "
        f"via {record['path']} [{record['status']}]"
    ]
    for scored in record.get("candidates", []):
        parts = ", ".join(f"{key}={value:.2f}" for key, value in scored["breakdown"].items())
        lines.append(f"  candidate {scored['agent_id']}: score {scored['score']:.3f} ({parts})")
    for exclusion in record.get("exclusions", []):
        lines.append(f"  excluded  {exclusion['agent_id']}: {exclusion['reason']}")
    for attempt in record.get("attempts", []):
        outcome = attempt["status"]
        if attempt.get("error_type"):
            fault = f"{attempt['fault']} fault, " if attempt.get("fault") else ""
            outcome += f" ({fault}{attempt['error_type']}: {attempt.get('error')})"
        elapsed = f"{attempt['elapsed_ms']:.1f} ms"
        lines.append(f"  attempt   {attempt['agent_id']} via {attempt['path']}: {outcome} in {elapsed}")
    decided = record.get("status") == "ok"
    for vote in record.get("votes", []):
        lines.append(f"  vote      {vote['agent_id']}: {vote['status']}, {vote_side(vote, decided)}")
    if record.get("deferred_ms") is not None:
        lines.append(f"  deferred: waited {record['deferred_ms'] / 1000.0:.1f} s for a capable agent")
    if record.get("note"):
        lines.append(f"  note: {record['note']}")
    # A chain's steps, and what was undone for the task (docs/chains.md).
    lines.extend(f"  step      {step}" for step in record.get("steps", []))
    for undo in record.get("compensations", []):
        lines.append(f"  undo      {undo['task_id']} with {undo['compensate_with']}: {undo['status']}")
    if record.get("why_not"):
        lines.append(f"  why not: {record['why_not']}")
    return "\n".join(indent + line for line in lines)


def render_check(report: Mapping[str, Any]) -> str:
    rows = [(a["agent_id"], a["kind"], a["source"], a["file"]) for a in report["agents"]]
    policy = report["policy"]
    default = policy.get("default_agent") or "none"
    summary = (
        f"{report['config_dir']}: valid; policy {policy['strategy']}, max_retries {policy['max_retries']}, "
        f"default agent {default}; {len(rows)} agent(s); {_security_summary(report['security'])}; "
        f"{_registry_summary(report['registry'])}"
    )
    return summary + ("\n" + table(["agent", "kind", "from", "file"], rows) if rows else "")


def _registry_summary(registry: Mapping[str, Any] | None) -> str:
    if registry is None:
        return "no registry (not a cluster node unless reach serve --registry)"
    node = registry["node_id"] or "HOSTNAME-RANDOM"
    return (
        f"registry {registry['url']} (node {node}, lease {registry['lease_ttl_s']} s, "
        f"prefix {registry['prefix']})"
    )


def _security_summary(security: Mapping[str, Any] | None) -> str:
    if security is None:
        return "no security.yaml (serve on loopback only)"
    parts = [f"{len(security['principals'])} principal(s)"]
    if security["jwt_issuer"] is not None:
        parts.append(f"JWTs from {security['jwt_issuer']}")
    if security["open"]:
        parts.append(f"open: {', '.join(security['open'])}")
    return "security: " + ", ".join(parts)


def vote_side(vote: Mapping[str, Any], decided: bool) -> str:
    """A consensus voter's side: a failed voter gave no vote, and without a decision (a tie, too
    few answers) no answer agreed or dissented with anything."""
    if vote["status"] != "ok":
        return "failed"
    if not decided:
        return "-"
    return "agreed" if vote["agreed"] else "dissented"
