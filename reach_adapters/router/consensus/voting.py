"""How a consensus decides among its answers: by majority of equal answers, by a judge's pick or
scores, or by a function of the caller's."""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import JsonValue

__all__ = [
    "LocalVote",
    "Normaliser",
    "Verdict",
    "Vote",
    "VoteFunction",
    "canonical",
    "judge_input",
    "judge_verdict",
    "majority",
]


@dataclass(frozen=True, slots=True)
class Vote:
    """One agent's answer, as a vote function sees it: `index` is its place among the answers."""

    index: int
    agent_id: str
    payload: JsonValue


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a vote decided: the `payload` that is the consensus, the agent ids that `agreed` with
    it, and (from a judge's scores) each agent's score, which its rating takes."""

    payload: JsonValue
    agreed: Sequence[str]
    scores: dict[str, float] = field(default_factory=dict)


Normaliser = Callable[[Any], Any]
VoteFunction = Callable[[list[Vote]], "Verdict | Awaitable[Verdict | None] | None"]


@dataclass(frozen=True, slots=True)
class LocalVote:
    """The Python parts of one consensus call, which never travel in its message: the run of
    its dispatch carries them (`Run.local`), so no other call, nested or not, can see them."""

    vote: VoteFunction | None
    normalise: Normaliser | None


def canonical(value: Any) -> str:
    """The answer as canonical JSON: equal data, equal text, whatever the key order."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def majority(votes: list[Vote], normalise: Normaliser | None) -> Verdict | None:
    """The answer most agents gave (equal canonical JSON after `normalise`); None on a tie for
    the most, where nothing is decided. The decision is the first such answer as it was given."""
    groups: dict[str, list[Vote]] = {}
    for vote in votes:
        value = vote.payload if normalise is None else normalise(vote.payload)
        groups.setdefault(canonical(value), []).append(vote)
    if not groups:
        return None
    sizes = sorted((len(group) for group in groups.values()), reverse=True)
    if len(sizes) > 1 and sizes[0] == sizes[1]:
        return None
    best = max(groups.values(), key=len)
    return Verdict(best[0].payload, [vote.agent_id for vote in best])


def judge_input(capability: str, task: JsonValue, votes: list[Vote]) -> dict[str, JsonValue]:
    """What the judge capability is given: the task and the answers, each with its index."""
    answers: list[JsonValue] = [
        {"index": vote.index, "agent_id": vote.agent_id, "payload": vote.payload} for vote in votes
    ]
    return {"capability": capability, "task": task, "answers": answers}


_OUTPUTS = (
    "an answer's index (a whole number), {'pick': index or agent_id}, or {'scores': [one number "
    "from 0 to 1 per answer, in the order given]}"
)


def judge_verdict(output: JsonValue, votes: list[Vote]) -> Verdict | str:
    """The verdict a judge's `output` gives, or what is wrong with it."""
    pick: JsonValue = output
    if isinstance(output, dict):
        if "scores" in output:
            return _scored(output["scores"], votes)
        pick = output.get("pick")
    chosen = _picked(pick, votes)
    if chosen is None:
        shown = json.dumps(output)[:200]
        return (
            f"the judge answered {shown}, which picks none of the {len(votes)} answers; expected {_OUTPUTS}"
        )
    return Verdict(chosen.payload, _alike(chosen, votes))


def _picked(pick: JsonValue, votes: list[Vote]) -> Vote | None:
    if isinstance(pick, str):
        return next((vote for vote in votes if vote.agent_id == pick), None)
    if isinstance(pick, float) and pick.is_integer():
        pick = int(pick)
    if isinstance(pick, int) and not isinstance(pick, bool):
        return next((vote for vote in votes if vote.index == pick), None)
    return None


def _scored(scores: JsonValue, votes: list[Vote]) -> Verdict | str:
    if not isinstance(scores, list) or len(scores) != len(votes) or not all(_unit(score) for score in scores):
        shown = json.dumps(scores)[:200]
        return f"the judge's scores {shown} are not {len(votes)} numbers from 0 to 1, one per answer in order"
    numbers = [float(score) for score in scores]  # type: ignore[arg-type]
    best = max(range(len(votes)), key=lambda i: numbers[i])
    chosen = votes[best]
    return Verdict(
        chosen.payload, _alike(chosen, votes), {v.agent_id: numbers[i] for i, v in enumerate(votes)}
    )


def _alike(chosen: Vote, votes: list[Vote]) -> list[str]:
    """The judge's choice and every answer equal to it: all of them agree with the decision."""
    same = canonical(chosen.payload)
    return [chosen.agent_id, *(v.agent_id for v in votes if v is not chosen and canonical(v.payload) == same)]


def _unit(value: JsonValue) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0.0 <= value <= 1.0
    )
