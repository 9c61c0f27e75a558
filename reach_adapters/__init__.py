"""Agent Reach: find agents, deliver tasks to the right one, survive when one fails."""

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from middleware import Fault
    from reach_adapters.errors import (
        AgentCallError,
        DuplicateAgentError,
        IdempotencyConflictError,
        InputRequiredError,
        InvalidDeclarationError,
        InvalidFeedbackError,
        InvalidMessageError,
        InvalidPolicyError,
        LoopDetectedError,
        NoCandidateError,
        NoConsensusError,
        PayloadValidationError,
        PermissionDeniedError,
        QuotaExceededError,
        ReachError,
        ReachTimeoutError,
        RouterClosedError,
        SyncCallError,
        TaskAlreadyRatedError,
        TaskFinishedError,
        TaskQueueFullError,
        UnknownAgentError,
        UnknownTaskError,
        raise_for_status,
    )
    from reach_adapters.router.agent import Agent, FunctionAgent
    from reach_adapters.router.breaker import BreakerState
    from reach_adapters.router.capability import Capability, Trigger
    from reach_adapters.router.catalog import AgentInfo
    from reach_adapters.router.chains import Chain, Step
    from reach_adapters.router.consensus import Feedback, Verdict, Vote
    from reach_adapters.router.decisions import DecisionRecord
    from reach_adapters.router.handle import AgentHandle
    from reach_adapters.router.identity import AgentId, parse_agent_id
    from reach_adapters.router.observe import Access
    from reach_adapters.router.options import CallOptions
    from reach_adapters.router.outcomes import AgentBusyError, TaskError
    from reach_adapters.router.policy import BreakerSettings, RatingPolicy, RoutingPolicy, ScoringWeights
    from reach_adapters.router.router import Router
    from reach_adapters.router.state import AgentState
    from reach_adapters.router.tasks import (
        MemoryTaskStore,
        TaskRecord,
        TaskStatus,
        TaskStore,
        sign_callback,
        verify_callback,
    )

# Where each public name lives. They are imported on first use: `reach --version` and the adapters'
# missing-extra messages then cost no more than the modules they need.
_EXPORTS = {
    "Access": "reach_adapters.router.observe",
    "Agent": "reach_adapters.router.agent",
    "AgentBusyError": "reach_adapters.router.outcomes",
    "AgentCallError": "reach_adapters.errors",
    "AgentHandle": "reach_adapters.router.handle",
    "AgentId": "reach_adapters.router.identity",
    "AgentInfo": "reach_adapters.router.catalog",
    "AgentState": "reach_adapters.router.state",
    "BreakerSettings": "reach_adapters.router.policy",
    "BreakerState": "reach_adapters.router.breaker",
    "CallOptions": "reach_adapters.router.options",
    "Capability": "reach_adapters.router.capability",
    "DecisionRecord": "reach_adapters.router.decisions",
    "DuplicateAgentError": "reach_adapters.errors",
    "Fault": "middleware",
    "FunctionAgent": "reach_adapters.router.agent",
    "IdempotencyConflictError": "reach_adapters.errors",
    "InputRequiredError": "reach_adapters.errors",
    "InvalidDeclarationError": "reach_adapters.errors",
    "InvalidMessageError": "reach_adapters.errors",
    "InvalidPolicyError": "reach_adapters.errors",
    "LoopDetectedError": "reach_adapters.errors",
    "NoCandidateError": "reach_adapters.errors",
    "PayloadValidationError": "reach_adapters.errors",
    "PermissionDeniedError": "reach_adapters.errors",
    "QuotaExceededError": "reach_adapters.errors",
    "ReachError": "reach_adapters.errors",
    "ReachTimeoutError": "reach_adapters.errors",
    "Router": "reach_adapters.router.router",
    "RouterClosedError": "reach_adapters.errors",
    "RoutingPolicy": "reach_adapters.router.policy",
    "ScoringWeights": "reach_adapters.router.policy",
    "SyncCallError": "reach_adapters.errors",
    "TaskFinishedError": "reach_adapters.errors",
    "TaskQueueFullError": "reach_adapters.errors",
    "TaskError": "reach_adapters.router.outcomes",
    "TaskRecord": "reach_adapters.router.tasks",
    "TaskStatus": "reach_adapters.router.tasks",
    "TaskStore": "reach_adapters.router.tasks",
    "MemoryTaskStore": "reach_adapters.router.tasks",
    "sign_callback": "reach_adapters.router.tasks",
    "verify_callback": "reach_adapters.router.tasks",
    "Trigger": "reach_adapters.router.capability",
    "UnknownAgentError": "reach_adapters.errors",
    "UnknownTaskError": "reach_adapters.errors",
    "parse_agent_id": "reach_adapters.router.identity",
    "raise_for_status": "reach_adapters.errors",
    "Chain": "reach_adapters.router.chains",
    "Step": "reach_adapters.router.chains",
    "Feedback": "reach_adapters.router.consensus",
    "InvalidFeedbackError": "reach_adapters.errors",
    "NoConsensusError": "reach_adapters.errors",
    "RatingPolicy": "reach_adapters.router.policy",
    "TaskAlreadyRatedError": "reach_adapters.errors",
    "Verdict": "reach_adapters.router.consensus",
    "Vote": "reach_adapters.router.consensus",
}

__all__ = [
    "Access",
    "Agent",
    "AgentBusyError",
    "AgentCallError",
    "AgentHandle",
    "AgentId",
    "AgentInfo",
    "AgentState",
    "BreakerSettings",
    "BreakerState",
    "CallOptions",
    "Capability",
    "Chain",
    "DecisionRecord",
    "DuplicateAgentError",
    "Fault",
    "Feedback",
    "FunctionAgent",
    "IdempotencyConflictError",
    "InputRequiredError",
    "InvalidDeclarationError",
    "InvalidFeedbackError",
    "InvalidMessageError",
    "InvalidPolicyError",
    "LoopDetectedError",
    "MemoryTaskStore",
    "NoCandidateError",
    "NoConsensusError",
    "PayloadValidationError",
    "PermissionDeniedError",
    "QuotaExceededError",
    "RatingPolicy",
    "ReachError",
    "ReachTimeoutError",
    "Router",
    "RouterClosedError",
    "RoutingPolicy",
    "ScoringWeights",
    "Step",
    "SyncCallError",
    "TaskAlreadyRatedError",
    "TaskError",
    "TaskFinishedError",
    "TaskQueueFullError",
    "TaskRecord",
    "TaskStatus",
    "TaskStore",
    "Trigger",
    "UnknownAgentError",
    "UnknownTaskError",
    "Verdict",
    "Vote",
    "parse_agent_id",
    "raise_for_status",
    "sign_callback",
    "verify_callback",
]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        msg = f"module 'reach_adapters' has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
