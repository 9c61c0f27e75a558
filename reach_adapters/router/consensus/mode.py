"""Consensus, a mode of the dispatcher like broadcast: the task goes to n distinct agents at once,
then their answers are decided by majority, by a judge capability (itself routed), or by a
function of the caller's.

Fault attribution (DESIGN §6): an answer that dissents is an answer, so it counts as a success for
the breaker and health; it moves only the agent's rating for the capability. A consensus that
ends without enough agreeing answers is nobody's failure unless agents failed on the way.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, cast

from pydantic import JsonValue

from middleware import ConsensusHint, Fault, ReachMessage, ReachResult, ResultStatus
from middleware.fast import amend, build_trusted
from reach_adapters.router.broadcast import fan_out
from reach_adapters.router.consensus.voting import (
    LocalVote,
    Verdict,
    Vote,
    judge_input,
    judge_verdict,
    majority,
)
from reach_adapters.router.decisions import DecisionRecord
from reach_adapters.router.messages import build_message, derived_task_id
from reach_adapters.router.options import CallOptions
from reach_adapters.router.outcomes import FIX_OPTIONS, ErrorKind, error_result
from reach_adapters.router.policy import AgentErrors, RoutingPolicy
from reach_adapters.router.ratings import Ratings
from reach_adapters.router.registry import Registry
from reach_adapters.router.state import Slot

__all__ = ["NO_CONSENSUS", "decide", "missing_judge", "pick_voters"]

# The error type of a consensus that decided nothing; `raise_for_status` raises `NoConsensusError`.
NO_CONSENSUS = "NoConsensusError"

Dispatch = Callable[[ReachMessage], Awaitable[ReachResult]]


def hint_of(message: ReachMessage) -> ConsensusHint:
    return message.routing_hint.consensus or ConsensusHint()


def pick_voters(slots: list[Slot], n: int) -> list[Slot]:
    """`n` distinct agents from the ranked `slots`: one of each agent type (``namespace:type``)
    first, best ranked first, so the answers are as independent as the catalog allows; then
    more replicas of the types already taken."""
    first: list[Slot] = []
    more: list[Slot] = []
    kinds: set[tuple[str, str]] = set()
    agents: set[str] = set()
    for slot in slots:
        runtime = slot.runtime
        if runtime.agent_id in agents:
            continue
        agents.add(runtime.agent_id)
        kind = (runtime.ident.namespace, runtime.ident.type)
        if kind in kinds:
            more.append(slot)
        else:
            kinds.add(kind)
            first.append(slot)
    return [*first, *more][:n]


async def decide(
    voters: list[Slot],
    message: ReachMessage,
    deadline: float,
    record: DecisionRecord,
    policy: RoutingPolicy,
    errors: AgentErrors,
    ratings: Ratings,
    dispatch: Dispatch,
    local: LocalVote | None,
) -> ReachResult:
    """Ask every voter at once, then decide; the result's ``extra["votes"]`` has every vote.
    `local`: the caller's vote function and normaliser, if it gave them."""
    hint = hint_of(message)
    meta = message.meta_info
    if hint.vote == "custom" and (local is None or local.vote is None):
        return _invalid(message, "consensus vote 'custom' needs a Python function: router.consensus(vote=f)")
    if len(voters) < hint.n:
        record.note = f"consensus asked {len(voters)} agent(s): only that many could serve, of n={hint.n}"
    if len(voters) < hint.quorum:
        error = (
            f"only {len(voters)} agent(s) could serve {meta.capability!r}, fewer than the quorum of "
            f"{hint.quorum}: no consensus is possible, so none was asked"
        )
        return _no_consensus(message, error, Fault.ROUTER, [])
    merged = await fan_out(voters, message, deadline, "all", record, errors)
    results = merged.results or []
    votes = [
        Vote(index, result.agent_id or "", result.payload)
        for index, result in enumerate(r for r in results if r.status is ResultStatus.OK)
    ]
    if len(votes) < hint.quorum:
        failed = [r for r in results if r.status is not ResultStatus.OK]
        if failed and not votes and all(r.fault is Fault.CALLER for r in failed):
            # Every voter refused the call itself (an argument none takes): the caller's mistake.
            first = failed[0]
            refused = error_result(
                message,
                first.status,
                first.error_type or ErrorKind.INVALID_MESSAGE,
                first.error or "",
                fault=Fault.CALLER,
            )
            # And how to give the options it left out, when they were what it left out.
            kept: dict[str, JsonValue] = {"votes": _votes(results, None, record, policy)}
            if FIX_OPTIONS in first.extra:
                kept[FIX_OPTIONS] = first.extra[FIX_OPTIONS]
            amend(refused, {"extra": kept})
            return refused
        faults = {r.fault for r in failed}
        # Agents that failed are to blame, then a lack of room, then the caller's mistakes; else
        # no answer was anyone's failure.
        fault = next((f for f in (Fault.AGENT, Fault.ROUTER, Fault.CALLER) if f in faults), Fault.TASK)
        error = f"{len(votes)} of {len(results)} agents answered, fewer than the quorum of {hint.quorum}"
        return _no_consensus(message, error, fault, _votes(results, None, record, policy))
    judged: dict[str, JsonValue] | None = None
    if hint.vote == "judge":
        outcome = await _judge(message, hint, votes, dispatch)
        if isinstance(outcome, ReachResult):
            amend(outcome, {"extra": {**outcome.extra, "votes": _votes(results, None, record, policy)}})
            return outcome
        verdict, judged = outcome
    else:
        decided = await _vote(message, hint, votes, local)
        if isinstance(decided, ReachResult):
            return decided
        agreeing = 0 if decided is None else len(set(decided.agreed) & {vote.agent_id for vote in votes})
        if decided is None or agreeing < hint.quorum:
            if decided is None:
                error = f"no answer had more votes than every other ({len(votes)} answered, {hint.vote})"
            else:
                error = f"at most {agreeing} of {len(votes)} answers agreed ({hint.vote})"
            error += f", fewer than the quorum of {hint.quorum}"
            return _no_consensus(message, error, Fault.TASK, _votes(results, None, record, policy))
        verdict = decided
    _rate(ratings, meta.capability or "", votes, verdict)
    extra: dict[str, JsonValue] = {"votes": _votes(results, verdict, record, policy)}
    if judged is not None:
        extra["judge"] = judged
    values = {"status": ResultStatus.OK, "task_id": meta.task_id, "payload": verdict.payload}
    # The first voter of the decided answer stands for it (`Router.feedback` rates all who agreed).
    return build_trusted(ReachResult, {**values, "agent_id": verdict.agreed[0], "extra": extra})


async def _vote(
    message: ReachMessage, hint: ConsensusHint, votes: list[Vote], local: LocalVote | None
) -> Verdict | ReachResult | None:
    """Majority, or the caller's function; what either raises is the caller's mistake."""
    normalise = None if local is None else local.normalise
    what = "normalise function" if hint.vote == "majority" else "vote function"
    try:
        if hint.vote == "majority":
            return majority(votes, normalise)
        function = None if local is None else local.vote
        assert function is not None  # checked before any agent was asked
        decided: Any = function(list(votes))
        if inspect.isawaitable(decided):
            decided = await decided
    except Exception as exc:  # noqa: BLE001 - the caller's code: its failure becomes the result
        error = f"the consensus {what} raised {type(exc).__name__}: {exc}"
        return error_result(message, ResultStatus.INVALID, type(exc).__name__, error, fault=Fault.CALLER)
    if decided is not None and not isinstance(decided, Verdict):
        error = f"the consensus vote function returned {type(decided).__name__}; return a Verdict, or None"
        return _invalid(message, error)
    if decided is not None:
        if isinstance(decided.agreed, str):
            return _invalid(message, "the vote function's Verdict.agreed is a text; give a list of agent ids")
        voted = [vote.agent_id for vote in votes]
        strangers = sorted({a for a in [*decided.agreed, *decided.scores] if a not in voted})
        if strangers:
            # Refused rather than ignored: a verdict naming others is a bug in the caller's code,
            # and the decision would be credited to an agent that never answered.
            error = (
                f"the consensus vote function's Verdict names {strangers}, which did not vote; its "
                f"agreed (and scores) may name only the voters that answered: {voted}"
            )
            return _invalid(message, error)
    return decided


def missing_judge(message: ReachMessage, registry: Registry) -> ReachResult | None:
    """A consensus's refusal when no agent declares its judge capability: found out before the
    voters work for nothing."""
    judge = hint_of(message).judge
    if judge is None or registry.slots_named(judge):
        return None
    error = (
        f"no agent declares the judge capability {judge!r}, so no voter was asked; "
        "`reach catalog` lists the capabilities that exist"
    )
    return error_result(message, ResultStatus.NO_CANDIDATE, ErrorKind.NO_CANDIDATE, error, fault=Fault.ROUTER)


async def _judge(
    message: ReachMessage, hint: ConsensusHint, votes: list[Vote], dispatch: Dispatch
) -> tuple[Verdict, dict[str, JsonValue]] | ReachResult:
    """Route the answers to the judge capability, a reach of its own, in the same trace."""
    meta = message.meta_info
    judge = hint.judge or ""
    options: dict[str, Any] = {
        "task_id": derived_task_id(meta.task_id, "judge"),
        "trace_id": meta.trace_id,
        "deadline": meta.deadline,
        "priority": meta.priority,
        "depth": meta.depth,
        "lineage": list(meta.lineage),
    }
    # The judge may live outside the voters' namespace: only who calls, and for whom, carry over.
    for key in ("principal", "source"):
        if (value := getattr(meta, key)) is not None:
            options[key] = value
    task = judge_input(meta.capability or "", message.raw_payload, votes)
    request = build_message(task, cast("CallOptions", options), mode="unicast", capability=judge)
    judged = await dispatch(request)
    shown: dict[str, JsonValue] = {
        "capability": judge,
        "task_id": judged.task_id,
        "agent_id": judged.agent_id,
        "payload": judged.payload,
    }
    if judged.status is not ResultStatus.OK:
        error = f"the judge {judge!r} ended {judged.status}: {judged.error_type}: {judged.error}"
        failed = error_result(
            message, ResultStatus.ERROR, judged.error_type or ErrorKind.AGENT_CALL, error, fault=judged.fault
        )
        amend(failed, {"extra": {"judge": shown}})
        return failed
    verdict = judge_verdict(judged.payload, votes)
    if isinstance(verdict, str):
        failed = error_result(
            message,
            ResultStatus.ERROR,
            ErrorKind.AGENT_PROTOCOL,
            verdict,
            fault=Fault.AGENT,
            agent_id=judged.agent_id,
        )
        amend(failed, {"extra": {"judge": shown}})
        return failed
    return verdict, shown


def _rate(ratings: Ratings, capability: str, votes: list[Vote], verdict: Verdict) -> None:
    """Agreeing voters are rated ``agreed``, dissenters ``dissent`` (a judge's scores instead,
    when it gave them); failed voters not at all: their failures count in their health already."""
    policy = ratings.policy
    agreed = set(verdict.agreed)
    for vote in votes:
        score = verdict.scores.get(vote.agent_id)
        if score is None:
            score = policy.agreed if vote.agent_id in agreed else policy.dissent
        ratings.rate(vote.agent_id, capability, score)


def _votes(
    results: list[ReachResult], verdict: Verdict | None, record: DecisionRecord, policy: RoutingPolicy
) -> list[JsonValue]:
    """Every voter's vote for the result, and the same in the decision record: there without
    payloads unless the policy keeps payloads in records."""
    agreed = set() if verdict is None else set(verdict.agreed)
    scores = {} if verdict is None else verdict.scores
    out: list[JsonValue] = []
    kept_votes: list[dict[str, Any]] = []
    for result in results:
        agent_id = result.agent_id or ""
        vote: dict[str, JsonValue] = {
            "agent_id": agent_id,
            "status": result.status.value,
            "payload": result.payload if result.status is ResultStatus.OK else None,
            "agreed": agent_id in agreed,
        }
        if agent_id in scores:
            vote["score"] = scores[agent_id]
        if result.status is not ResultStatus.OK:
            vote["error"] = f"{result.error_type}: {result.error}"
        out.append(vote)
        kept = dict(vote)
        if not policy.record_payloads:
            kept.pop("payload")
        kept_votes.append(kept)
    record.votes = kept_votes
    return out


def _invalid(message: ReachMessage, error: str) -> ReachResult:
    return error_result(message, ResultStatus.INVALID, ErrorKind.INVALID_MESSAGE, error, fault=Fault.CALLER)


def _no_consensus(message: ReachMessage, error: str, fault: Fault, votes: list[JsonValue]) -> ReachResult:
    result = error_result(message, ResultStatus.NO_CONSENSUS, NO_CONSENSUS, error, fault=fault)
    amend(result, {"extra": {"votes": votes}})
    return result
