"""The consensus half of `Router`'s API: ask several agents and decide, and rate served tasks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Unpack

from pydantic import ValidationError

from middleware import ConsensusHint, ReachResult
from reach_adapters.errors import describe_validation_error
from reach_adapters.router.consensus.feedback import Feedback, check_score, give_feedback
from reach_adapters.router.consensus.voting import LocalVote, Normaliser, VoteFunction
from reach_adapters.router.decisions import DecisionRecord
from reach_adapters.router.dispatcher import Dispatcher
from reach_adapters.router.messages import build_message, refused_call, require_name
from reach_adapters.router.options import CallOptions
from reach_adapters.router.portal import Portal
from reach_adapters.router.ratings import Ratings

__all__ = ["ConsensusCalls"]


class ConsensusCalls:
    """Mixed into `Router`, which holds what these methods use: its dispatcher, its portal for
    the sync twins, and `explain`, which keeps a principal to its own tasks."""

    _dispatcher: Dispatcher
    _portal: Portal
    _check_open: Callable[[], None]
    explain: Callable[..., DecisionRecord]

    @property
    def ratings(self) -> Ratings:
        """The ratings learnt from feedback: ``ratings.of(agent_id, capability)``; its ``clock``
        may be replaced (tests)."""
        return self._dispatcher.ratings

    async def consensus(
        self,
        capability: str,
        payload: Any = None,
        *,
        n: int = 3,
        quorum: int = 2,
        vote: Literal["majority", "judge"] | VoteFunction = "majority",
        judge: str | None = None,
        normalise: Normaliser | None = None,
        **options: Unpack[CallOptions],
    ) -> ReachResult:
        """Ask `n` distinct agents declaring `capability` at once (other agent types before more
        replicas of one) and decide among their answers.

        ``vote``: ``"majority"`` (equal answers, compared as canonical JSON of ``normalise(payload)``),
        ``"judge"`` (the capability `judge` is given the task and the answers and picks or scores
        them; it is routed like any call), or a function taking the `Vote` list and returning a
        `Verdict` (or None: no decision). The result's payload is the decision, and
        ``extra["votes"]`` every vote; fewer than `quorum` agreeing answers end ``no_consensus``
        (`NoConsensusError` from ``raise_for_status``). See docs/consensus.md.
        """
        self._check_open()
        require_name(capability, "capability")
        function: VoteFunction | None = None
        if callable(vote):
            function, named = vote, "custom"
        elif vote in ("majority", "judge"):
            named = vote
        else:
            msg = f"vote must be 'majority', 'judge' or a function taking the votes, got {vote!r}"
            raise refused_call(msg)
        if normalise is not None and (not callable(normalise) or named != "majority"):
            msg = "normalise is a function, for vote 'majority' (a vote function normalises as it likes)"
            raise refused_call(msg)
        try:
            hint = ConsensusHint(n=n, quorum=quorum, vote=named, judge=judge)
        except ValidationError as exc:
            msg = f"invalid consensus: {describe_validation_error(exc)}"
            raise refused_call(msg) from None
        message = build_message(payload, options, capability=capability, mode="consensus")
        # Patched on, not given to `build_message`, which would then test for it on every plain
        # route (a benchmarked path) for the sake of this rarer call.
        message = message.model_copy(
            update={"routing_hint": message.routing_hint.model_copy(update={"consensus": hint})}
        )
        local = None if function is None and normalise is None else LocalVote(function, normalise)
        return await self._dispatcher.dispatch(message, local=local)

    def consensus_sync(
        self,
        capability: str,
        payload: Any = None,
        *,
        n: int = 3,
        quorum: int = 2,
        vote: Literal["majority", "judge"] | VoteFunction = "majority",
        judge: str | None = None,
        normalise: Normaliser | None = None,
        **options: Unpack[CallOptions],
    ) -> ReachResult:
        call = self.consensus(
            capability, payload, n=n, quorum=quorum, vote=vote, judge=judge, normalise=normalise, **options
        )
        return self._portal.call(call, method="consensus_sync")

    async def feedback(
        self, task_id: str, score: float, *, reason: str | None = None, principal: str | None = None
    ) -> Feedback:
        """Score a finished task from 0 (bad) to 1 (good): the rating of the agent that served it
        (every agreeing voter, for a consensus) for the task's capability moves towards the score.

        A `principal` may rate only its own tasks. Raises `UnknownTaskError` for a task whose
        decision record is not kept (or not the principal's), `InvalidFeedbackError` for a score
        outside 0..1 or a task no agent served, `TaskAlreadyRatedError` for a second feedback.
        """
        return self.feedback_sync(task_id, score, reason=reason, principal=principal)

    def feedback_sync(
        self, task_id: str, score: float, *, reason: str | None = None, principal: str | None = None
    ) -> Feedback:
        # Nothing to wait for: the work is done here, in whichever thread calls.
        self._check_open()
        checked, why = check_score(score, reason)
        record = self.explain(require_name(task_id, "task_id"), principal=principal)
        registered = self._dispatcher.registry.__contains__
        return give_feedback(record, checked, why, self._dispatcher.ratings, registered)
